import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The device's side of Tern's HTTP API (README, "The API"), one call per method, every answer checked. ``Tern``
/// uses it; an app (or a Notification Service Extension) may call it directly.
///
/// Every call sends the app key as `Authorization: Bearer …` and, about an existing device, its secret as
/// `X-Tern-Device-Secret`. A refusal becomes a ``TernError`` of kind ``TernError/Kind/refused`` with the server's
/// status, error and field; an answer that cannot be read, ``TernError/Kind/badAnswer`` naming what was wrong.
public struct TernClient: Sendable {
    public let configuration: TernConfiguration
    public let transport: any HTTPTransport

    public init(configuration: TernConfiguration, transport: any HTTPTransport = URLSessionHTTPTransport()) {
        self.configuration = configuration
        self.transport = transport
    }

    // MARK: Devices

    /// `PUT /v1/apps/{app}/devices/{deviceId}`: registers the device, or registers it again.
    /// - Parameters:
    ///   - secret: the device's secret, once it has one (nil for the first registration of this id).
    ///   - alias: binds the device to this user; with the app key it needs `aliasToken`. nil leaves the binding.
    ///   - tags: replaces the device's tags; nil leaves them.
    public func register(
        deviceID: String, secret: String?, facts: RegistrationFacts, alias: String? = nil, aliasToken: String? = nil, tags: [String]? = nil
    ) async throws(TernError) -> RegisteredDevice {
        let body = RegistrationBody(
            token: facts.token, environment: facts.environment, alias: alias, aliasToken: aliasToken, tags: tags, locale: facts.locale,
            timezone: facts.timezone, appVersion: facts.appVersion)
        let request = try makeRequest("PUT", ["devices", deviceID], secret: secret, body: body)
        let answer = try await call(request, expecting: DeviceAnswer.self, what: "registering device \(deviceID)")
        guard answer.deviceId.lowercased() == deviceID.lowercased() else {
            throw TernError(.badAnswer, "registering device \(deviceID) answered device \(answer.deviceId)")
        }
        return answer.device
    }

    /// `DELETE …/devices/{deviceId}/alias`: unbinds the device from its user (signing out).
    public func removeAlias(_ device: DeviceCredentials) async throws(TernError) -> RegisteredDevice {
        let request = try makeRequest("DELETE", ["devices", device.deviceID, "alias"], secret: device.secret)
        return try await call(request, expecting: DeviceAnswer.self, what: "signing device \(device.deviceID) out").device
    }

    /// `PATCH …/devices/{deviceId}/tags`: adds and removes tags.
    public func updateTags(_ device: DeviceCredentials, add: [String], remove: [String]) async throws(TernError) -> RegisteredDevice {
        let body = TagsBody(add: add.isEmpty ? nil : add, remove: remove.isEmpty ? nil : remove)
        let request = try makeRequest("PATCH", ["devices", device.deviceID, "tags"], secret: device.secret, body: body)
        return try await call(request, expecting: DeviceAnswer.self, what: "changing the tags of device \(device.deviceID)").device
    }

    /// `PUT …/devices/{deviceId}/push-tokens/{kind}`: sets the device's token of `kind` (its VoIP token, its
    /// push-to-start token), replacing the one it had.
    public func setPushToken(_ device: DeviceCredentials, kind: PushTokenKind, token: Data) async throws(TernError) -> RegisteredPushToken {
        let body = PushTokenBody(token: RegistrationFacts.hex(token))
        let request = try makeRequest("PUT", ["devices", device.deviceID, "push-tokens", kind.rawValue], secret: device.secret, body: body)
        return try await call(request, expecting: RegisteredPushToken.self, what: "setting the \(kind.rawValue) token of device \(device.deviceID)")
    }

    /// `DELETE …/devices/{deviceId}/push-tokens/{kind}`: the device gets no more pushes of that kind's type (the user
    /// turned calls off). - Returns: false if it had no token of the kind (404).
    @discardableResult
    public func removePushToken(_ device: DeviceCredentials, kind: PushTokenKind) async throws(TernError) -> Bool {
        let request = try makeRequest("DELETE", ["devices", device.deviceID, "push-tokens", kind.rawValue], secret: device.secret)
        return try await callUnlessNotFound(request, what: "removing the \(kind.rawValue) token of device \(device.deviceID)")
    }

    /// `PUT …/devices/{deviceId}/activities/{activityId}`: sets the device's update token for Live Activity `activity`
    /// (ActivityKit's `pushTokenUpdates`), replacing the one it had for it; the activity keeps its start. A device
    /// keeps at most 16 activities: one more makes the server forget its oldest.
    /// - Parameter activity: the id the app gives the activity (a match, an order): 1-128 letters, digits, `.`, `_`,
    ///   `:` and `-`; anything else is a ``TernError/Kind/invalidArgument`` and is not sent.
    public func setActivityToken(_ device: DeviceCredentials, activity: String, token: Data) async throws(TernError) -> RegisteredActivityToken {
        try Self.checkActivityID(activity)
        let body = PushTokenBody(token: RegistrationFacts.hex(token))
        let request = try makeRequest("PUT", ["devices", device.deviceID, "activities", activity], secret: device.secret, body: body)
        let what = "setting the token of activity \(activity) on device \(device.deviceID)"
        let answer = try await call(request, expecting: RegisteredActivityToken.self, what: what)
        guard answer.activityID == activity else { throw TernError(.badAnswer, "\(what) answered activity \(answer.activityID)") }
        return answer
    }

    /// `DELETE …/devices/{deviceId}/activities/{activityId}`: the activity ended on the device. - Returns: false if the
    /// device had no token for it (404).
    @discardableResult
    public func removeActivityToken(_ device: DeviceCredentials, activity: String) async throws(TernError) -> Bool {
        try Self.checkActivityID(activity)
        let request = try makeRequest("DELETE", ["devices", device.deviceID, "activities", activity], secret: device.secret)
        return try await callUnlessNotFound(request, what: "removing the token of activity \(activity) on device \(device.deviceID)")
    }

    /// `GET …/broadcast-channels/{name}`: the broadcast channel (iOS 18) the app's backend made under `name` (its
    /// match's id, say), whose ``BroadcastChannel/channelID`` the app subscribes its Live Activity to
    /// (`pushType: .channel(channelID)`): one broadcast then updates it on every device at once. The app key alone
    /// reads it; no device is needed.
    /// - Returns: nil when the app has no channel of that name (404).
    public func broadcastChannel(named name: String) async throws(TernError) -> BroadcastChannel? {
        try Self.checkActivityID(name, what: "a channel's name")
        let request = try makeRequest("GET", ["broadcast-channels", name], secret: nil)
        let what = "reading broadcast channel \(name)"
        do throws(TernError) {
            let channel = try await call(request, expecting: BroadcastChannel.self, what: what)
            guard channel.name == name else { throw TernError(.badAnswer, "\(what) answered channel \(channel.name)") }
            return channel
        } catch where error.status == 404 {
            return nil
        }
    }

    static func checkActivityID(_ activity: String, what: String = "an activity id") throws(TernError) {
        guard RegisteredActivityToken.isValidActivityID(activity) else {
            throw TernError(
                .invalidArgument, "\(what) is 1-128 letters, digits, '.', '_', ':' and '-', not '\(activity.prefix(64))'")
        }
    }

    /// `POST …/devices/{deviceId}/opens`: the user opened this message (a device message: the `id` of a channel
    /// frame, or `tern.id` of a notification). - Returns: false if the server does not know the message (404).
    @discardableResult
    public func reportOpen(_ device: DeviceCredentials, messageID: String) async throws(TernError) -> Bool {
        try await reportOpen(device, OpenBody(messageId: messageID), what: "message \(messageID)")
    }

    /// `POST …/devices/{deviceId}/opens`: the user opened this push, one that came through APNs (`tern.pushId` of a
    /// notification). - Returns: false if the server did not send the device that push (404).
    @discardableResult
    public func reportOpen(_ device: DeviceCredentials, pushID: String) async throws(TernError) -> Bool {
        try await reportOpen(device, OpenBody(pushId: pushID), what: "push \(pushID)")
    }

    private func reportOpen(_ device: DeviceCredentials, _ body: OpenBody, what: String) async throws(TernError) -> Bool {
        let request = try makeRequest("POST", ["devices", device.deviceID, "opens"], secret: device.secret, body: body)
        return try await callUnlessNotFound(request, what: "reporting the open of \(what)")
    }

    /// `POST …/devices/{deviceId}/acks`: acknowledges messages outside the channel (1-1,000 ids), as a Notification
    /// Service Extension does for one that came through APNs. - Returns: how many this call acknowledged (the
    /// device's own, not acknowledged before).
    @discardableResult
    public func acknowledge(_ device: DeviceCredentials, messageIDs: [String]) async throws(TernError) -> Int {
        try await acknowledge(device, AckBody(ids: messageIDs), what: "\(messageIDs.count) message(s)")
    }

    /// `POST …/devices/{deviceId}/acks`: a push that came through APNs arrived (its `tern.pushId`), as a Notification
    /// Service Extension sees it. - Returns: 1 if this call acknowledged it, 0 if the device had already.
    @discardableResult
    public func acknowledge(_ device: DeviceCredentials, pushID: String) async throws(TernError) -> Int {
        try await acknowledge(device, AckBody(pushId: pushID), what: "push \(pushID)")
    }

    private func acknowledge(_ device: DeviceCredentials, _ body: AckBody, what: String) async throws(TernError) -> Int {
        let request = try makeRequest("POST", ["devices", device.deviceID, "acks"], secret: device.secret, body: body)
        return try await call(request, expecting: AckAnswer.self, what: "acknowledging \(what)").acked
    }

    // MARK: The inbox

    /// `GET /v1/apps/{app}/inbox`: a page of the inbox of the device's user, oldest first.
    /// - Parameters:
    ///   - after: the previous page's ``InboxPage/next``.
    ///   - limit: 1-1000 messages.
    public func inbox(_ device: DeviceCredentials, after: String? = nil, limit: Int? = nil) async throws(TernError) -> InboxPage {
        var query = [URLQueryItem(name: "deviceId", value: device.deviceID)]
        if let after { query.append(URLQueryItem(name: "after", value: after)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        let request = try makeRequest("GET", ["inbox"], query: query, secret: device.secret)
        return try await call(request, expecting: InboxPage.self, what: "reading the inbox")
    }

    /// `POST …/inbox/read` with `upTo`: marks this message and every older one read.
    public func markRead(_ device: DeviceCredentials, upTo messageID: String) async throws(TernError) -> ReadResult {
        try await markRead(device, body: ReadBody(upTo: messageID))
    }

    /// `POST …/inbox/read` with `ids` (at most 1,000).
    public func markRead(_ device: DeviceCredentials, ids: [String]) async throws(TernError) -> ReadResult {
        guard (1...1000).contains(ids.count) else { throw TernError(.invalidArgument, "mark 1-1000 messages read at once, not \(ids.count)") }
        return try await markRead(device, body: ReadBody(ids: ids))
    }

    private func markRead(_ device: DeviceCredentials, body: ReadBody) async throws(TernError) -> ReadResult {
        let query = [URLQueryItem(name: "deviceId", value: device.deviceID)]
        let request = try makeRequest("POST", ["inbox", "read"], query: query, secret: device.secret, body: body)
        return try await call(request, expecting: ReadResult.self, what: "marking messages read")
    }

    /// `DELETE …/inbox/{messageId}`.
    public func deleteInboxMessage(_ device: DeviceCredentials, id: String) async throws(TernError) {
        let query = [URLQueryItem(name: "deviceId", value: device.deviceID)]
        try await call(try makeRequest("DELETE", ["inbox", id], query: query, secret: device.secret), what: "deleting inbox message \(id)")
    }

    // MARK: The online channel

    /// The WebSocket request of `GET …/devices/{deviceId}/connect[?after=SEQ]`, with the device's credentials.
    public func channelRequest(_ device: DeviceCredentials, after: Int64?) throws(TernError) -> URLRequest {
        var request = try makeRequest(
            "GET", ["devices", device.deviceID, "connect"], query: after.map { [URLQueryItem(name: "after", value: String($0))] } ?? [],
            secret: device.secret)
        guard let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw TernError(.invalidArgument, "the server URL \(configuration.serverURL) cannot make a WebSocket address")
        }
        // URL schemes are case-insensitive: "HTTPS://…" is TLS too, and the upgrade carries the device's secret.
        components.scheme = components.scheme?.lowercased() == "https" ? "wss" : "ws"
        request.url = components.url
        request.httpMethod = "GET"
        request.setValue(nil, forHTTPHeaderField: "Content-Type")
        return request
    }

    /// Why the server refuses this device's connection: the same `GET …/connect` without the upgrade, which
    /// answers the refusal's JSON (the server answers a refused upgrade with it too, but URLSession's WebSocket task
    /// does not hand over that body). - Returns: nil when the server would
    /// take the connection (426, "upgrade required"), so the refusal was passing.
    public func channelRefusal(_ device: DeviceCredentials) async throws(TernError) -> TernError? {
        let request = try makeRequest("GET", ["devices", device.deviceID, "connect"], secret: device.secret)
        let (data, response) = try await send(request, what: "checking the connection of device \(device.deviceID)")
        if response.statusCode == 426 { return nil }
        return Self.refusal(data, response, what: "connecting device \(device.deviceID)")
    }

    // MARK: Requests and answers

    private func makeRequest(
        _ method: String, _ path: [String], query: [URLQueryItem] = [], secret: String?, body: (any Encodable)? = nil
    ) throws(TernError) -> URLRequest {
        var url = configuration.serverURL.appendingPathComponent("v1").appendingPathComponent("apps").appendingPathComponent(configuration.appID)
        for component in path { url.appendPathComponent(component) }
        if !query.isEmpty {
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
                throw TernError(.invalidArgument, "the server URL \(configuration.serverURL) is not an http(s) address")
            }
            components.queryItems = query
            guard let withQuery = components.url else { throw TernError(.invalidArgument, "cannot add \(query) to \(url)") }
            url = withQuery
        }
        var request = URLRequest(url: url, timeoutInterval: configuration.requestTimeout)
        request.httpMethod = method
        request.setValue("Bearer \(configuration.appKey)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let secret { request.setValue(secret, forHTTPHeaderField: "X-Tern-Device-Secret") }
        if let body {
            do {
                request.httpBody = try JSONEncoder.tern.encode(body)
            } catch {
                throw TernError(.invalidArgument, "cannot encode the request to \(url.path): \(error)")
            }
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return request
    }

    private func send(_ request: URLRequest, what: String) async throws(TernError) -> (Data, HTTPURLResponse) {
        do {
            return try await transport.send(request)
        } catch {
            // The error names the URL at most: ids, never a secret (those are in headers).
            throw TernError(.unreachable, "\(what): \(error.localizedDescription)")
        }
    }

    private func call<Answer: Decodable>(_ request: URLRequest, expecting: Answer.Type, what: String) async throws(TernError) -> Answer {
        let (data, response) = try await send(request, what: what)
        guard (200..<300).contains(response.statusCode) else { throw Self.refusal(data, response, what: what) }
        do {
            return try JSONDecoder.tern.decode(Answer.self, from: data)
        } catch {
            throw TernError(.badAnswer, "\(what): the answer cannot be read: \(Self.describe(error))", status: response.statusCode)
        }
    }

    /// ``call(_:what:)``. - Returns: false for a 404 (what the call names is not there), true for a success.
    private func callUnlessNotFound(_ request: URLRequest, what: String) async throws(TernError) -> Bool {
        do throws(TernError) {
            try await call(request, what: what)
            return true
        } catch where error.status == 404 {
            return false
        }
    }

    private func call(_ request: URLRequest, what: String) async throws(TernError) {
        let (data, response) = try await send(request, what: what)
        guard (200..<300).contains(response.statusCode) else { throw Self.refusal(data, response, what: what) }
    }

    /// The longest wait a `Retry-After` is taken for, in seconds: an hour.
    static let longestRetryAfter: TimeInterval = 3600

    /// A `Retry-After` header's seconds (whole, not negative; at most ``longestRetryAfter``), or nil for none or
    /// anything else: `inf`, `nan`, `1e300` or a date (which Tern does not send) are not waits to take.
    static func retryAfter(_ header: String?) -> TimeInterval? {
        guard let text = header?.trimmingCharacters(in: .whitespaces), !text.isEmpty, text.utf8.allSatisfy({ (48...57).contains($0) })
        else { return nil }
        // Digits only: too many of them for an Int is past the longest wait anyway.
        return min(TimeInterval(Int(text) ?? Int.max), longestRetryAfter)
    }

    /// The server's error answer as a ``TernError``.
    static func refusal(_ data: Data, _ response: HTTPURLResponse, what: String) -> TernError {
        let retryAfter = Self.retryAfter(response.value(forHTTPHeaderField: "Retry-After"))
        guard let answer = try? JSONDecoder().decode(ErrorAnswer.self, from: data) else {
            // Not Tern's JSON (a proxy's page, an empty body): the status alone.
            return TernError(.refused, "\(what): HTTP \(response.statusCode)", status: response.statusCode, retryAfter: retryAfter)
        }
        return TernError(
            .refused, "\(what): \(answer.message)", status: response.statusCode, serverError: answer.error, field: answer.field,
            retryAfter: retryAfter)
    }

    /// A decoding error in a few words: which key, at which path.
    static func describe(_ error: any Error) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.isEmpty ? "the top level" : codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?:
            return "'\(path(context.codingPath + [key]))' is missing"
        case .typeMismatch(let type, let context)?:
            return "'\(path(context.codingPath))' is not \(type)"
        case .valueNotFound(let type, let context)?:
            return "'\(path(context.codingPath))' is null, not \(type)"
        case .dataCorrupted(let context)?:
            return context.codingPath.isEmpty ? "not JSON" : "'\(path(context.codingPath))': \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }
}
