import Foundation
import NIOHPACK
import TernAPNs

/// An answer the simulator writes whole: status, headers and body.
struct PlainAnswer {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8] = []
    /// Why it was refused; nil for a success.
    var reason: APNsReason? = nil

    static func rejection(_ reason: APNsReason, requestID: String) -> PlainAnswer {
        PlainAnswer(
            status: reason.status ?? 400, headers: [("content-type", "application/json"), ("apns-request-id", requestID)],
            body: APNsResponse(status: reason.status ?? 400, reason: reason).body, reason: reason)
    }
}

/// Broadcasts (`POST /4/broadcasts/apps/<bundle>`) and the management of channels (`/1/apps/<bundle>/channels`,
/// `/1/apps/<bundle>/all-channels`), spec §7. Apple serves management on hosts of its own; the simulator serves
/// both on its one listener. Requests that are not device notifications come here, so a notification's validation
/// costs nothing more for them.
struct ChannelRequests {
    let validator: RequestValidator
    let state: SimulatorState

    /// Whether a request's path is one of these, not a notification's.
    static func handles(_ headers: HPACKHeaders) -> Bool {
        guard let path = headers.first(name: ":path") else { return false }
        return path.hasPrefix("/1/apps/") || path.hasPrefix("/4/broadcasts/apps/")
    }

    func answer(headers: HPACKHeaders, body: [UInt8], bodyTooLarge: Bool, auth: inout ConnectionAuthentication, ids: inout FastUUIDGenerator) -> PlainAnswer {
        func one(_ name: String) -> String? {
            let values = headers[name]
            return values.count == 1 ? values[0] : nil
        }
        let requestIDHeader = one("apns-request-id")
        let requestID: String
        if let requestIDHeader {
            guard let uuid = try? UUID(apnsID: requestIDHeader) else { return .rejection(.badMessageId, requestID: requestIDHeader) }
            requestID = uuid.apnsString
        } else {
            requestID = ids.next()
        }
        for name in [":method", ":path", "apns-channel-id", "apns-push-type", "apns-priority", "apns-expiration", "apns-topic", "authorization"]
        where headers[name].count > 1 {
            return .rejection(.duplicateHeaders, requestID: requestID)
        }
        let method = one(":method") ?? ""
        let path = one(":path") ?? ""
        let broadcastPrefix = "/4/broadcasts/apps/"
        let isBroadcast = path.hasPrefix(broadcastPrefix)
        let rest = path.dropFirst(isBroadcast ? broadcastPrefix.count : "/1/apps/".count)
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard let bundle = parts.first.map(String.init), APNsBroadcastRules.isValidBundleID(bundle) else {
            return .rejection(.badPath, requestID: requestID)
        }

        // The credentials must name the bundle id in the path.
        switch auth.mode {
        case .token:
            if let reason = auth.checkToken(
                authorization: one("authorization").map { Substring($0) }, bundleID: bundle, verifier: validator.verifier,
                environment: validator.environment, now: validator.clock.now)
            {
                return .rejection(reason, requestID: requestID)
            }
        case .unreadableCertificate:
            return .rejection(.badCertificate, requestID: requestID)
        case .certificate(let identity):
            guard identity.environments.contains(validator.environment) else { return .rejection(.badCertificateEnvironment, requestID: requestID) }
            guard identity.topics.contains(bundle) else { return .rejection(.topicMismatch, requestID: requestID) }
        }

        if isBroadcast {
            guard parts.count == 1 else { return .rejection(.badPath, requestID: requestID) }
            guard method == "POST" else { return .rejection(.methodNotAllowed, requestID: requestID) }
            return broadcast(bundle: bundle, headers: one, body: body, bodyTooLarge: bodyTooLarge, requestID: requestID, ids: &ids)
        }
        guard parts.count == 2 else { return .rejection(.badPath, requestID: requestID) }
        let ok = { (status: Int, extra: [(name: String, value: String)], body: [UInt8]) in
            PlainAnswer(status: status, headers: [("apns-request-id", requestID)] + extra, body: body)
        }
        switch (parts[1], method) {
        case ("all-channels", "GET"):
            let list = JSONValue.object(["channels": .array(state.channels(bundleID: bundle).map { .string($0.id) })])
            return ok(200, [("content-type", "application/json")], (try? list.serialized()) ?? [])
        case ("channels", "POST"):
            guard case .object(let fields)? = try? JSONValue(parsing: Data(body)),
                Set(fields.keys).isSubset(of: ["message-storage-policy", "push-type"]),
                case .string("LiveActivity")? = fields["push-type"],
                case .int(let raw)? = fields["message-storage-policy"], raw == 0 || raw == 1
            else { return .rejection(.badRequestPayload, requestID: requestID) }
            switch state.createChannel(bundleID: bundle, storesMessages: raw == 1) {
            case (.done, let id): return ok(201, [("apns-channel-id", id)], [])
            case (.refused, _): return .rejection(.cannotCreateChannelConfig, requestID: requestID)
            case (.notKept, _): return .rejection(.internalServerError, requestID: requestID)
            }
        case ("channels", "GET"), ("channels", "DELETE"):
            guard let id = one("apns-channel-id") else { return .rejection(.missingChannelId, requestID: requestID) }
            guard APNsBroadcastRules.isValidChannelID(id) else { return .rejection(.badChannelId, requestID: requestID) }
            if method == "DELETE" {
                switch state.deleteChannel(bundleID: bundle, id: id) {
                case .done: return ok(204, [], [])
                case .refused: return .rejection(.channelNotRegistered, requestID: requestID)
                case .notKept: return .rejection(.internalServerError, requestID: requestID)
                }
            }
            guard let channel = state.channel(bundleID: bundle, id: id) else {
                return .rejection(.channelNotRegistered, requestID: requestID)
            }
            let description = JSONValue.object([
                "message-storage-policy": .int(channel.storesMessages ? 1 : 0), "push-type": .string("LiveActivity"),
            ])
            return ok(200, [("content-type", "application/json")], (try? description.serialized()) ?? [])
        case ("channels", _), ("all-channels", _):
            return .rejection(.methodNotAllowed, requestID: requestID)
        default:
            return .rejection(.badPath, requestID: requestID)
        }
    }

    /// A broadcast: the channel's headers and payload checked as spec §7 lists, then recorded.
    private func broadcast(
        bundle: String, headers one: (String) -> String?, body: [UInt8], bodyTooLarge: Bool, requestID: String, ids: inout FastUUIDGenerator
    ) -> PlainAnswer {
        if one("apns-topic") != nil { return .rejection(.topicDisallowed, requestID: requestID) }
        guard let channelID = one("apns-channel-id") else { return .rejection(.missingChannelId, requestID: requestID) }
        guard APNsBroadcastRules.isValidChannelID(channelID) else { return .rejection(.badChannelId, requestID: requestID) }
        guard let pushType = one("apns-push-type") else { return .rejection(.missingPushType, requestID: requestID) }
        guard pushType == APNsPushType.liveactivity.rawValue else { return .rejection(.invalidPushType, requestID: requestID) }
        guard let priorityText = one("apns-priority"), let priority = try? APNsPriority(headerValue: priorityText),
            APNsPushType.liveactivity.allowedPriorities.contains(priority)
        else { return .rejection(.badPriority, requestID: requestID) }
        guard let expirationText = one("apns-expiration"), let expiration = Int64(expirationText), expiration >= 0 else {
            return .rejection(.badExpirationDate, requestID: requestID)
        }
        guard let channel = state.channel(bundleID: bundle, id: channelID) else {
            return .rejection(.channelNotRegistered, requestID: requestID)
        }
        if !channel.storesMessages, expiration != 0 { return .rejection(.badExpirationDate, requestID: requestID) }
        guard !body.isEmpty || bodyTooLarge else { return .rejection(.payloadEmpty, requestID: requestID) }
        guard !bodyTooLarge, body.count <= APNsBroadcastRules.maximumPayloadSize else { return .rejection(.payloadTooLarge, requestID: requestID) }
        // A broadcast updates or ends an activity; it cannot start one.
        guard case .object(let aps)? = (try? JSONValue(parsing: Data(body)))?["aps"],
            case .string(let event)? = aps["event"], event == "update" || event == "end"
        else { return .rejection(.badRequestPayload, requestID: requestID) }
        let uniqueID = ids.next()
        state.recordBroadcast(RecordedBroadcast(
            bundleID: bundle, channelID: channelID, priority: priority.rawValue, expiration: expiration, requestID: requestID,
            uniqueID: uniqueID, payload: String(decoding: body, as: UTF8.self),
            receivedAt: Int64((state.clock.now.timeIntervalSince1970 * 1000).rounded())))
        return PlainAnswer(status: 200, headers: [("apns-request-id", requestID), ("apns-unique-id", uniqueID)])
    }
}

/// A broadcast the simulator took, as the control API lists it (`GET /broadcasts`).
public struct RecordedBroadcast: Codable, Hashable, Sendable {
    public var bundleID: String
    public var channelID: String
    public var priority: Int
    public var expiration: Int64
    public var requestID: String
    public var uniqueID: String
    /// The payload as sent (JSON text).
    public var payload: String
    /// Milliseconds since the epoch, by the simulator's clock.
    public var receivedAt: Int64
}

/// A channel the simulator keeps (`GET /channels` on the control API).
public struct SimulatedChannel: Codable, Hashable, Sendable {
    public var bundleID: String
    public var id: String
    public var storesMessages: Bool
}
