import Foundation
import TernAPNs
import Testing

@testable import TernSimulator

/// Broadcast channels (spec §7) on the simulator's one listener: management under `/1/apps/…`, broadcasts at
/// `/4/broadcasts/apps/…`, each refusal with its status and reason.
@Suite("Broadcast channels over real TLS")
struct BroadcastChannelTests {
    static let bundle = "com.example.app"

    static func manage(_ sim: TestSimulator, _ method: String, _ path: String, channel: String? = nil, body: String = "", requestID: String? = nil) -> HTTP2Request {
        var headers: [(name: String, value: String)] = [("authorization", sim.authorization)]
        if let channel { headers.append(("apns-channel-id", channel)) }
        if let requestID { headers.append(("apns-request-id", requestID)) }
        return HTTP2Request(method: method, path: "/1/apps/\(bundle)/\(path)", headers: headers, body: Array(body.utf8))
    }

    static let update = #"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"score":"1-0"}}}"#

    static func broadcast(
        _ sim: TestSimulator, channel: String?, pushType: String? = "liveactivity", priority: String? = "10", expiration: String? = "0",
        topic: String? = nil, payload: String = update, method: String = "POST", requestID: String? = nil
    ) -> HTTP2Request {
        var headers: [(name: String, value: String)] = [("authorization", sim.authorization)]
        if let channel { headers.append(("apns-channel-id", channel)) }
        if let pushType { headers.append(("apns-push-type", pushType)) }
        if let priority { headers.append(("apns-priority", priority)) }
        if let expiration { headers.append(("apns-expiration", expiration)) }
        if let topic { headers.append(("apns-topic", topic)) }
        if let requestID { headers.append(("apns-request-id", requestID)) }
        return HTTP2Request(method: method, path: "/4/broadcasts/apps/\(bundle)", headers: headers, body: Array(payload.utf8))
    }

    static func expectRefusal(_ response: HTTP2Response, _ status: Int, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == status, "\(response.bodyText)", sourceLocation: sourceLocation)
        #expect(response.bodyText == #"{"reason":"\#(reason)"}"#, sourceLocation: sourceLocation)
        #expect(response.header("apns-request-id").flatMap { UUID(uuidString: $0) } != nil, sourceLocation: sourceLocation)
    }

    @Test("a channel is made, read, listed, broadcast to and deleted, each answer with its request id")
    func aChannelsWholeLife() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let requestID = "123e4567-e89b-12d3-a456-426614174000"
            let made = try await client.send(Self.manage(
                sim, "POST", "channels", body: #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#, requestID: requestID.uppercased()))
            #expect(made.status == 201)
            #expect(made.header("apns-request-id") == requestID, "echoed, in APNs' lowercase form")
            let id = try #require(made.header("apns-channel-id"))
            #expect(Data(base64Encoded: id)?.count == 16)

            let read = try await client.send(Self.manage(sim, "GET", "channels", channel: id))
            #expect(read.status == 200)
            #expect(try JSONValue(parsing: Data(read.body)) == .object(["message-storage-policy": .int(1), "push-type": .string("LiveActivity")]))
            let other = try #require(try await client.send(Self.manage(
                sim, "POST", "channels", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)).header("apns-channel-id"))
            let list = try await client.send(Self.manage(sim, "GET", "all-channels"))
            #expect(try JSONValue(parsing: Data(list.body)) == .object(["channels": .array([.string(id), .string(other)])]))

            let sent = try await client.send(Self.broadcast(sim, channel: id, priority: "5", expiration: "1700003600"))
            #expect(sent.status == 200, "\(sent.bodyText)")
            #expect(sent.header("apns-unique-id") != nil && sent.header("apns-request-id") != nil)
            let taken = sim.state.broadcasts()
            #expect(taken.count == 1)
            #expect(taken.first?.channelID == id && taken.first?.priority == 5 && taken.first?.expiration == 1_700_003_600)
            #expect(taken.first?.payload == Self.update && taken.first?.uniqueID == sent.header("apns-unique-id"))

            #expect(try await client.send(Self.manage(sim, "DELETE", "channels", channel: id)).status == 204)
            Self.expectRefusal(try await client.send(Self.manage(sim, "DELETE", "channels", channel: id)), 400, "ChannelNotRegistered")
            Self.expectRefusal(try await client.send(Self.broadcast(sim, channel: id)), 400, "ChannelNotRegistered")
            #expect(sim.state.channels().map(\.id) == [other])
            let stats = sim.state.stats()
            #expect(stats.requests == 8 && stats.accepted == 6 && stats.rejected == 2 && stats.broadcasts == 1, "\(stats)")
        }
    }

    @Test("each bad broadcast or management request gets its status and reason")
    func refusals() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let storing = try #require(try await client.send(Self.manage(
                sim, "POST", "channels", body: #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)).header("apns-channel-id"))
            let bare = try #require(try await client.send(Self.manage(
                sim, "POST", "channels", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)).header("apns-channel-id"))
            let cases: [(String, HTTP2Request, Int, String)] = [
                ("no channel id", Self.broadcast(sim, channel: nil), 400, "MissingChannelId"),
                ("a channel id not base64", Self.broadcast(sim, channel: "not base64!"), 400, "BadChannelId"),
                ("an unknown channel", Self.broadcast(sim, channel: "AAAAAAAAAAAAAAAAAAAAAA=="), 400, "ChannelNotRegistered"),
                ("no push type", Self.broadcast(sim, channel: storing, pushType: nil), 400, "MissingPushType"),
                ("push type alert", Self.broadcast(sim, channel: storing, pushType: "alert"), 400, "InvalidPushType"),
                ("a topic", Self.broadcast(sim, channel: storing, topic: "com.example.app.push-type.liveactivity"), 400, "TopicDisallowed"),
                ("priority 1", Self.broadcast(sim, channel: storing, priority: "1"), 400, "BadPriority"),
                ("no priority", Self.broadcast(sim, channel: storing, priority: nil), 400, "BadPriority"),
                ("no expiration", Self.broadcast(sim, channel: storing, expiration: nil), 400, "BadExpirationDate"),
                ("an expiration on a channel that stores nothing", Self.broadcast(sim, channel: bare, expiration: "1700003600"), 400, "BadExpirationDate"),
                ("an empty payload", Self.broadcast(sim, channel: storing, payload: ""), 400, "PayloadEmpty"),
                ("a payload of 5,121 bytes", Self.broadcast(sim, channel: storing, payload: payload(ofSize: 5121)), 413, "PayloadTooLarge"),
                ("a start", Self.broadcast(sim, channel: storing, payload: #"{"aps":{"event":"start","timestamp":1}}"#), 400, "BadRequestPayload"),
                ("a bad request id", Self.broadcast(sim, channel: storing, requestID: "nope"), 400, "BadMessageId"),
                ("GET on broadcasts", Self.broadcast(sim, channel: storing, payload: "", method: "GET"), 405, "MethodNotAllowed"),
                ("a storage policy of 2", Self.manage(sim, "POST", "channels", body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#), 400, "BadRequestPayload"),
                ("a push type of Alert", Self.manage(sim, "POST", "channels", body: #"{"message-storage-policy":0,"push-type":"Alert"}"#), 400, "BadRequestPayload"),
                ("a read without a channel id", Self.manage(sim, "GET", "channels"), 400, "MissingChannelId"),
                ("PUT on channels", Self.manage(sim, "PUT", "channels", body: "{}"), 405, "MethodNotAllowed"),
                ("an unknown path", Self.manage(sim, "GET", "channel-list"), 404, "BadPath"),
            ]
            for (name, request, status, reason) in cases {
                let response = try await client.send(request)
                #expect(response.status == status && response.bodyText == #"{"reason":"\#(reason)"}"#, "\(name): \(response.status) \(response.bodyText)")
            }
            #expect(sim.state.broadcasts().isEmpty, "none was taken")
            #expect(sim.state.stats().rejectedByReason["BadExpirationDate"] == 2)
        }
    }

    @Test("a certificate manages and broadcasts on its own app's channels only, with no token")
    func aCertificateIsForItsOwnBundleID() async throws {
        try await withSimulator { sim in
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: Self.bundle)
            let client = try await sim.connect(certificate: certificate)
            var create = Self.manage(sim, "POST", "channels", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
            create.headers.removeAll { $0.name == "authorization" }
            let made = try await client.send(create)
            #expect(made.status == 201, "\(made.bodyText)")
            var other = create
            other.path = "/1/apps/com.example.other/channels"
            Self.expectRefusal(try await client.send(other), 403, "TopicMismatch")
            let id: String = try #require(made.header("apns-channel-id"))
            var broadcast = Self.broadcast(sim, channel: id)
            broadcast.headers.removeAll { $0.name == "authorization" }
            #expect(try await client.send(broadcast).status == 200)
            #expect(sim.state.channels().count == 1 && sim.state.broadcasts().count == 1)
        }
    }

    @Test("the credentials must be for the bundle id in the path, and an app has at most 10,000 channels")
    func credentialsAndTheLimit() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            var noToken = Self.manage(sim, "GET", "all-channels")
            noToken.headers.removeAll { $0.name == "authorization" }
            Self.expectRefusal(try await client.send(noToken), 403, "MissingProviderToken")

            for _ in 0..<APNsBroadcastRules.maximumChannels { _ = sim.state.createChannel(bundleID: Self.bundle, storesMessages: false) }
            let refused = try await client.send(Self.manage(sim, "POST", "channels", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#))
            Self.expectRefusal(refused, 400, "CannotCreateChannelConfig")
            let list = try await client.send(Self.manage(sim, "GET", "all-channels"))
            #expect(list.status == 200)
            guard case .array(let items)? = try JSONValue(parsing: Data(list.body))["channels"] else {
                Issue.record("not a list: \(list.bodyText.prefix(200))")
                return
            }
            #expect(items.count == APNsBroadcastRules.maximumChannels, "the whole list, \(list.body.count) bytes")
        }
    }
}
