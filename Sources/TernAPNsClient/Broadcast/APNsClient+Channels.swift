import Foundation
import TernAPNs

/// What a broadcast channel keeps for a device that is offline when a broadcast goes out. Fixed when the channel is
/// made.
public enum APNsChannelStoragePolicy: Int, Sendable, Hashable, CaseIterable {
    /// Nothing: a broadcast reaches the devices that are online, and its expiration must be 0. APNs gives such
    /// channels the larger budget.
    case noStorage = 0
    /// The most recent broadcast, for up to 8 hours.
    case mostRecentMessage = 1
}

/// A broadcast channel as APNs describes it.
public struct APNsChannel: Sendable, Hashable {
    /// APNs' id for it (base64, of no fixed length), which the app subscribes its Live Activity to.
    public var id: String
    public var storagePolicy: APNsChannelStoragePolicy

    public init(id: String, storagePolicy: APNsChannelStoragePolicy) {
        self.id = id
        self.storagePolicy = storagePolicy
    }
}

/// One broadcast (iOS 18): an update or end of the Live Activities subscribed to a channel, on every device at once.
/// It goes to `POST /4/broadcasts/apps/<bundle id>` on the notification hosts, with no topic and push type
/// `liveactivity`.
public struct APNsBroadcast: Sendable {
    public var bundleID: String
    public var channelID: String
    /// The JSON payload: `aps` with `event` (update or end), `timestamp` and `content-state`; at most 5,120 bytes.
    public var payload: [UInt8]
    public var priority: APNsPriority
    /// When APNs stops trying; `.immediately` (0) on a channel that stores nothing.
    public var expiration: APNsExpiration
    /// `apns-request-id`, which APNs echoes.
    public var requestID: UUID

    public init(
        bundleID: String, channelID: String, payload: [UInt8], priority: APNsPriority = .immediate,
        expiration: APNsExpiration = .immediately, requestID: UUID = UUID()
    ) {
        self.bundleID = bundleID
        self.channelID = channelID
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
        self.requestID = requestID
    }
}

/// APNs' answer to a broadcast, after any retries. A rejection is an answer, as a notification's is.
public struct APNsBroadcastDelivery: Sendable {
    /// 200, or APNs' rejection with its reason (`ChannelNotRegistered`, `FeatureNotEnabled`, …).
    public var response: APNsResponse
    /// `apns-request-id` as APNs answered it.
    public var requestID: String?
    /// `apns-unique-id`, which APNs' console finds the broadcast by.
    public var uniqueID: String?
    public var attempts: Int

    public var isDelivered: Bool { response.isSuccess }
}

/// APNs refused a call to manage channels: its status and reason (`ChannelNotRegistered`, `CannotCreateChannelConfig`
/// when the environment has its 10,000 channels, `FeatureNotEnabled`, a credentials reason…).
public struct APNsChannelRejection: Error, Sendable, CustomStringConvertible {
    public var response: APNsResponse
    /// `apns-request-id` as APNs answered it.
    public var requestID: String?

    public init(response: APNsResponse, requestID: String?) {
        self.response = response
        self.requestID = requestID
    }

    public var description: String {
        "APNs answered \(response.status)" + (response.reason.map { " \($0)" } ?? "")
    }
}

extension APNsClientConfiguration.Endpoint {
    /// Where an environment's channels are managed (spec §7): not the notification hosts, and not on port 443.
    public static func channelManagement(_ environment: APNsEnvironment) -> Self {
        environment == .production
            ? Self(host: "api-manage-broadcast.push.apple.com", port: 2196)
            : Self(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
    }
}

extension APNsClient {
    // MARK: Broadcasts

    /// Sends one broadcast and returns APNs' final answer. Retried as a notification is (429, 500, 503, a lost
    /// connection), with the same `apns-request-id`: a broadcast carries the activity's whole state and a
    /// timestamp, so one that arrives twice changes nothing the first did not.
    /// - Throws: ``APNsClientError`` as ``send(_:)`` does, and `invalidRequest` for a bundle id, channel id or
    ///   payload APNs cannot take.
    public func broadcast(_ broadcast: APNsBroadcast) async throws -> APNsBroadcastDelivery {
        try Self.check(bundleID: broadcast.bundleID, channelID: broadcast.channelID)
        guard !broadcast.payload.isEmpty, broadcast.payload.count <= APNsBroadcastRules.maximumPayloadSize else {
            throw APNsClientError.invalidRequest("a broadcast's payload is 1-\(APNsBroadcastRules.maximumPayloadSize) bytes")
        }
        // Room for the provider token the send adds.
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(6)
        headers += [
            ("apns-channel-id", broadcast.channelID), ("apns-push-type", APNsPushType.liveactivity.rawValue),
            ("apns-priority", String(broadcast.priority.rawValue)), ("apns-expiration", broadcast.expiration.headerValue ?? "0"),
            ("apns-request-id", broadcast.requestID.apnsString),
        ]
        let answer = try await send(APNsRequest(
            method: "POST", path: "/4/broadcasts/apps/" + broadcast.bundleID, headers: headers, body: broadcast.payload))
        return APNsBroadcastDelivery(
            response: answer.response, requestID: answer.full?.header("apns-request-id"), uniqueID: answer.full?.header("apns-unique-id"),
            attempts: answer.attempts)
    }

    // MARK: Channels (on the management endpoint)

    /// Makes a channel for the app's Live Activities. Not sent again once it may have reached APNs (a connection
    /// lost with it in flight): a second channel would count against the 10,000.
    /// - Throws: ``APNsChannelRejection`` when APNs refuses it; ``APNsClientError`` when there is no answer.
    public func createChannel(bundleID: String, storagePolicy: APNsChannelStoragePolicy) async throws -> APNsChannel {
        try Self.check(bundleID: bundleID, channelID: nil)
        let body = try JSONValue.object([
            "message-storage-policy": .int(storagePolicy.rawValue), "push-type": .string("LiveActivity"),
        ]).serialized()
        let answer = try await manage(
            "POST", bundleID: bundleID, path: "channels", channelID: nil, body: body, idempotent: false)
        guard let id = answer.header("apns-channel-id"), APNsBroadcastRules.isValidChannelID(id) else {
            throw APNsClientError.connectionFailed("APNs made the channel but its answer carried no valid apns-channel-id")
        }
        return APNsChannel(id: id, storagePolicy: storagePolicy)
    }

    /// A channel as APNs has it.
    /// - Throws: ``APNsChannelRejection`` (`ChannelNotRegistered` when there is no such channel), or
    ///   ``APNsClientError``.
    public func channel(bundleID: String, id: String) async throws -> APNsChannel {
        try Self.check(bundleID: bundleID, channelID: id)
        let answer = try await manage("GET", bundleID: bundleID, path: "channels", channelID: id)
        guard case .int(let raw)? = (try? JSONValue(parsing: Data(answer.body)))?["message-storage-policy"],
            let policy = APNsChannelStoragePolicy(rawValue: raw)
        else {
            throw APNsClientError.connectionFailed("APNs' description of the channel has no known message-storage-policy")
        }
        return APNsChannel(id: id, storagePolicy: policy)
    }

    /// The ids of every channel of the app in this client's environment.
    public func channelIDs(bundleID: String) async throws -> [String] {
        try Self.check(bundleID: bundleID, channelID: nil)
        let answer = try await manage("GET", bundleID: bundleID, path: "all-channels", channelID: nil)
        guard case .array(let items)? = (try? JSONValue(parsing: Data(answer.body)))?["channels"] else {
            throw APNsClientError.connectionFailed("APNs' list of channels is not {\"channels\": […]}")
        }
        return items.compactMap { if case .string(let id) = $0 { id } else { nil } }
    }

    /// Deletes a channel, for good (broadcasts it stored may still arrive).
    /// - Throws: ``APNsChannelRejection`` (`ChannelNotRegistered` when it is already gone), or ``APNsClientError``.
    public func deleteChannel(bundleID: String, id: String) async throws {
        try Self.check(bundleID: bundleID, channelID: id)
        _ = try await manage("DELETE", bundleID: bundleID, path: "channels", channelID: id)
    }

    private func manage(
        _ method: String, bundleID: String, path: String, channelID: String?, body: [UInt8] = [], idempotent: Bool = true
    ) async throws -> APNsFullAnswer {
        var headers: [(name: String, value: String)] = [("apns-request-id", UUID().apnsString)]
        if let channelID { headers.append(("apns-channel-id", channelID)) }
        if !body.isEmpty { headers.append(("content-type", "application/json")) }
        headers.reserveCapacity(headers.count + 1)
        let answer = try await send(APNsRequest(
            method: method, path: "/1/apps/\(bundleID)/\(path)", headers: headers, body: body, largestAnswer: 1 << 20,
            idempotent: idempotent))
        guard answer.response.isSuccess, let full = answer.full else {
            throw APNsChannelRejection(response: answer.response, requestID: answer.full?.header("apns-request-id"))
        }
        return full
    }

    private static func check(bundleID: String, channelID: String?) throws {
        guard APNsBroadcastRules.isValidBundleID(bundleID) else {
            throw APNsClientError.invalidRequest("a bundle id is 1-155 letters, digits, '.' and '-'")
        }
        if let channelID, !APNsBroadcastRules.isValidChannelID(channelID) {
            throw APNsClientError.invalidRequest("a channel id is 1-256 characters of base64")
        }
    }
}
