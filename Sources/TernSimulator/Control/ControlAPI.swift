import Foundation
import Hummingbird
import TernAPNs
import TernWeb

extension SimulatorStats: ResponseEncodable {}
extension ScenarioSnapshot: ResponseEncodable {}

/// One page of the arrival log.
struct NotificationPage: ResponseEncodable {
    var items: [RecordedNotification]
    /// Pass as `after` to get the next page; equal to the request's `after` when nothing newer exists.
    var next: UInt64
}

struct TokenList: ResponseEncodable {
    var tokens: [String: SimulatorScenario.TokenState]
}

/// The broadcast channels the simulator keeps, and the latest broadcasts it took.
struct ChannelList: ResponseEncodable {
    var channels: [SimulatedChannel]
}

struct BroadcastList: ResponseEncodable {
    var items: [RecordedBroadcast]
}

/// What the feedback service would list now (reading it here does not clear it).
struct FeedbackList: ResponseEncodable {
    struct Item: Encodable {
        var token: String
        /// Seconds since the epoch, as the service sends it.
        var timestamp: UInt32
    }
    var items: [Item]
}

struct UnregisterRequest: Decodable {
    /// Epoch milliseconds; defaults to now.
    var timestamp: Int64?
    /// `Unregistered` (default) or `ExpiredToken`.
    var reason: String?
}

struct BindRequest: Decodable {
    var topic: String?
    var environment: APNsEnvironment?
}

/// Request context of the control API: answers with sorted keys, so the same state always reads the same.
struct ControlRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage

    init(source: Source) {
        self.coreContext = .init(source: source)
    }

    var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

/// The simulator's HTTP/1.1 JSON control API (documented in the README).
enum ControlAPI {
    static func router(state: SimulatorState) -> Router<ControlRequestContext> {
        let router = Router(context: ControlRequestContext.self)

        router.get("stats") { _, _ in state.stats() }

        router.get("notifications") { request, _ -> NotificationPage in
            let query = request.uri.queryParameters
            let after = try parse(query.get("after"), field: "after", default: UInt64(0))
            let limit = try parse(query.get("limit"), field: "limit", default: 100)
            guard (1...10_000).contains(limit) else { throw ControlAPIError.badRequest(field: "limit", "limit must be 1…10000") }
            var token: String?
            if let text = query.get("token") {
                do {
                    token = try DeviceToken(hex: text, field: "token").hex
                } catch {
                    throw ControlAPIError(decoding: error)
                }
            }
            let items = state.notifications(after: after, limit: limit, token: token)
            return NotificationPage(items: items, next: items.last?.sequence ?? after)
        }
        router.delete("notifications") { _, _ -> HTTPResponse.Status in
            state.clearLog()
            return .noContent
        }

        router.get("tokens") { _, _ in TokenList(tokens: state.tokens()) }
        router.put("tokens/:token") { request, context -> HTTPResponse.Status in
            let token = try pathToken(context)
            let body = try await decode(BindRequest.self, request, context)
            state.bind(token, topic: body.topic, environment: body.environment)
            return .noContent
        }
        router.post("tokens/:token/unregister") { request, context -> HTTPResponse.Status in
            let token = try pathToken(context)
            let body = try await decode(UnregisterRequest.self, request, context, allowEmpty: true) ?? UnregisterRequest()
            let reason = APNsReason(rawValue: body.reason ?? "Unregistered")
            guard reason == .unregistered || reason == .expiredToken else {
                throw ControlAPIError.badRequest(field: "reason", "reason must be Unregistered or ExpiredToken")
            }
            if let timestamp = body.timestamp, timestamp < 0 {
                throw ControlAPIError.badRequest(field: "timestamp", "timestamp is epoch milliseconds, 0 or more")
            }
            state.unregister(token, at: body.timestamp.map { Date(timeIntervalSince1970: TimeInterval($0) / 1000) }, reason: reason)
            return .noContent
        }
        router.delete("tokens/:token") { _, context -> HTTPResponse.Status in
            state.forgetToken(try pathToken(context))
            return .noContent
        }

        router.get("feedback") { _, _ in
            FeedbackList(items: state.pendingFeedback().map { .init(token: DeviceToken.hex($0.token), timestamp: $0.timestamp) })
        }

        router.get("channels") { _, _ in ChannelList(channels: state.channels()) }
        router.get("broadcasts") { _, _ in BroadcastList(items: state.broadcasts()) }

        router.get("scenario") { _, _ in state.scenarios() }
        router.put("scenario/legacy-shutdown") { request, context -> HTTPResponse.Status in
            let shutdown = try await decode(SimulatorScenario.LegacyShutdown.self, request, context)
            try wrap { try state.setLegacyShutdown(shutdown) }
            return .noContent
        }
        router.delete("scenario/legacy-shutdown") { _, _ -> HTTPResponse.Status in
            try wrap { try state.setLegacyShutdown(nil) }
            return .noContent
        }
        router.put("scenario/faults") { request, context -> HTTPResponse.Status in
            let faults = try await decode([SimulatorScenario.Fault].self, request, context)
            try wrap { try state.setFaults(faults) }
            return .noContent
        }
        router.put("scenario/latency") { request, context -> HTTPResponse.Status in
            let latency = try await decode(SimulatorScenario.Latency.self, request, context)
            try wrap { try state.setLatency(latency) }
            return .noContent
        }
        router.put("scenario/goaway") { request, context -> HTTPResponse.Status in
            let event = try await decode(SimulatorScenario.ConnectionEvent.self, request, context)
            try wrap { try state.setGoAway(event) }
            return .noContent
        }
        router.put("scenario/drop") { request, context -> HTTPResponse.Status in
            let event = try await decode(SimulatorScenario.ConnectionEvent.self, request, context)
            try wrap { try state.setDrop(event) }
            return .noContent
        }
        router.delete("scenario/faults") { _, _ -> HTTPResponse.Status in
            try wrap { try state.setFaults([]) }
            return .noContent
        }
        router.delete("scenario/latency") { _, _ -> HTTPResponse.Status in
            try wrap { try state.setLatency(nil) }
            return .noContent
        }
        router.delete("scenario/goaway") { _, _ -> HTTPResponse.Status in
            try wrap { try state.setGoAway(nil) }
            return .noContent
        }
        router.delete("scenario/drop") { _, _ -> HTTPResponse.Status in
            try wrap { try state.setDrop(nil) }
            return .noContent
        }
        router.post("reset") { _, _ -> HTTPResponse.Status in
            state.reset()
            return .noContent
        }
        return router
    }

    private static func pathToken(_ context: ControlRequestContext) throws -> DeviceToken {
        guard let text = context.parameters.get("token") else { throw ControlAPIError.badRequest(field: "token", "missing token") }
        do {
            return try DeviceToken(hex: text, field: "token")
        } catch {
            throw ControlAPIError(decoding: error)
        }
    }

    private static func parse<T: LosslessStringConvertible>(_ text: String?, field: String, default value: T) throws -> T {
        guard let text else { return value }
        guard let parsed = T(text) else { throw ControlAPIError.badRequest(field: field, "'\(text)' is not a valid \(field)") }
        return parsed
    }

    private static func wrap(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            throw ControlAPIError(decoding: error)
        }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: ControlRequestContext) async throws -> T {
        try await JSONBody.decode(type, from: request)
    }

    private static func decode<T: Decodable>(
        _ type: T.Type, _ request: Request, _ context: ControlRequestContext, allowEmpty: Bool
    ) async throws -> T? {
        try await JSONBody.decode(type, from: request, allowEmpty: allowEmpty)
    }
}
