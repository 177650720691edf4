import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

/// Request context of Tern's API: JSON answers with sorted keys and ISO 8601 dates with milliseconds. The same
/// context serves the WebSocket upgrades of the online channel.
struct ServerRequestContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<ServerRequestContext>
    /// The client's address (the console counts failed sign-ins by it); nil in the router tests, which have no socket.
    let remoteAddress: SocketAddress?

    init(source: Source) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.remoteAddress = source.channel.remoteAddress
    }

    var responseEncoder: JSONEncoder { APIJSON.encoder }
}

enum APIJSON {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        }
        return encoder
    }()
}
