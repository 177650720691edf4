import Foundation
import Hummingbird
import NIOCore
import TernWeb

/// Request context of Tern's API: JSON answers with sorted keys and ISO 8601 dates with milliseconds.
struct ServerRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection's peer: the client, or a proxy in front of the node. Nil in the router tests, which have no
    /// socket.
    let remoteAddress: SocketAddress?
    /// The client's address, which wrong secrets are counted by: the peer's, or behind a trusted proxy
    /// (`http.trustedProxies`) the address it forwards (``ClientAddressMiddleware``).
    var clientAddress: SocketAddress?

    init(source: Source) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
        self.clientAddress = remoteAddress
    }

    var responseEncoder: JSONEncoder { APIJSON.encoder }
}

enum APIJSON {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(InternetDate.format(date))
        }
        return encoder
    }()
}
