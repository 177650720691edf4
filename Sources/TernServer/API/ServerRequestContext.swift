import Foundation
import Hummingbird
import HummingbirdWebSocket

/// Request context of Tern's API: JSON answers with sorted keys and ISO 8601 dates with milliseconds. The same
/// context serves the WebSocket upgrades of the online channel.
struct ServerRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<ServerRequestContext>

    init(source: Source) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
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
