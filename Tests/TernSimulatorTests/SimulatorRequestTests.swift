import Foundation
import TernAPNs
import TernSimulator
import Testing

/// A request the simulator must refuse, and how.
struct RejectionCase: Sendable, CustomTestStringConvertible {
    let name: String
    let status: Int
    let reason: String
    let request: @Sendable (TestSimulator) -> HTTP2Request

    init(_ name: String, _ status: Int, _ reason: String, _ request: @escaping @Sendable (TestSimulator) -> HTTP2Request) {
        self.name = name
        self.status = status
        self.reason = reason
        self.request = request
    }

    var testDescription: String { "\(name) → \(status) \(reason)" }
}

/// A request at the edge of a rule that the simulator must accept.
struct AcceptedCase: Sendable, CustomTestStringConvertible {
    let name: String
    let request: @Sendable (TestSimulator) -> HTTP2Request

    init(_ name: String, _ request: @escaping @Sendable (TestSimulator) -> HTTP2Request) {
        self.name = name
        self.request = request
    }

    var testDescription: String { name }
}

/// Checks the APNs error shape: status, `content-type: application/json`, a valid `apns-id`, and exactly
/// `{"reason":"…"}` as the body.
func expectRejection(
    _ response: HTTP2Response, status: Int, reason: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(response.status == status, "body: \(response.bodyText)", sourceLocation: sourceLocation)
    #expect(response.bodyText == #"{"reason":"\#(reason)"}"#, sourceLocation: sourceLocation)
    #expect(response.header("content-type") == "application/json", sourceLocation: sourceLocation)
    #expect(response.header("apns-id").flatMap { UUID(uuidString: $0) } != nil || reason == "BadMessageId", sourceLocation: sourceLocation)
}

@Suite("Requests: every status and reason over real TLS")
struct SimulatorRequestTests {
    static let rejections: [RejectionCase] = [
        RejectionCase("apns-id not a UUID", 400, "BadMessageId") { $0.push(apnsID: "not-a-uuid") },
        RejectionCase("apns-id without dashes", 400, "BadMessageId") { $0.push(apnsID: "123e4567e89b12d3a456426614174000") },
        RejectionCase("GET", 405, "MethodNotAllowed") { $0.push(payload: "", method: "GET") },
        RejectionCase("PUT with a body", 405, "MethodNotAllowed") { $0.push(method: "PUT") },
        RejectionCase("no apns-topic", 400, "MissingTopic") { $0.push(topic: nil) },
        RejectionCase("empty apns-topic", 400, "MissingTopic") { $0.push(topic: "") },
        RejectionCase("collapse id of 65 bytes", 400, "BadCollapseId") { $0.push(collapseID: String(repeating: "c", count: 65)) },
        RejectionCase("priority 7", 400, "BadPriority") { $0.push(priority: "7") },
        RejectionCase("priority not a number", 400, "BadPriority") { $0.push(priority: "high") },
        RejectionCase("background push with priority 10", 400, "BadPriority") {
            $0.push(pushType: "background", priority: "10", payload: #"{"aps":{"content-available":1}}"#)
        },
        RejectionCase("liveactivity push with priority 1", 400, "BadPriority") {
            $0.push(topic: "com.example.app.push-type.liveactivity", pushType: "liveactivity", priority: "1")
        },
        RejectionCase("unknown push type", 400, "InvalidPushType") { $0.push(pushType: "banner") },
        RejectionCase("push type in the wrong case", 400, "InvalidPushType") { $0.push(pushType: "Alert") },
        RejectionCase("path /3/devices/x", 404, "BadPath") { $0.push(path: "/3/devices/x") },
        RejectionCase("path of API version 2", 404, "BadPath") { $0.push(path: "/2/device/\(deviceToken)") },
        RejectionCase("path with a segment after the token", 404, "BadPath") { $0.push(path: "/3/device/\(deviceToken)/extra") },
        RejectionCase("no :path", 404, "BadPath") { sim in
            var request = sim.push()
            request.path = nil
            return request
        },
        RejectionCase("path /3/device/", 400, "MissingDeviceToken") { $0.push(path: "/3/device/") },
        RejectionCase("token not hex", 400, "BadDeviceToken") { $0.push(token: String(repeating: "zz", count: 32)) },
        RejectionCase("token of odd length", 400, "BadDeviceToken") { $0.push(token: String(deviceToken.dropLast())) },
        RejectionCase("token of 101 bytes", 400, "BadDeviceToken") { $0.push(token: String(repeating: "ab", count: 101)) },
        RejectionCase("token with a space", 400, "BadDeviceToken") { $0.push(token: "abab%20abab") },
        RejectionCase("expiration not a number", 400, "BadExpirationDate") { $0.push(expiration: "tomorrow") },
        RejectionCase("negative expiration", 400, "BadExpirationDate") { $0.push(expiration: "-1") },
        RejectionCase("fractional expiration", 400, "BadExpirationDate") { $0.push(expiration: "1700000000.5") },
        RejectionCase("voip push to a topic without .voip", 400, "BadTopic") { $0.push(topic: "com.example.app", pushType: "voip") },
        RejectionCase("complication push to the bare bundle id", 400, "BadTopic") {
            $0.push(topic: "com.example.app", pushType: "complication")
        },
        RejectionCase("empty body", 400, "PayloadEmpty") { $0.push(payload: "") },
        RejectionCase("alert payload of 4097 bytes", 413, "PayloadTooLarge") { $0.push(payload: payload(ofSize: 4097)) },
        RejectionCase("voip payload of 5121 bytes", 413, "PayloadTooLarge") {
            $0.push(topic: "com.example.app.voip", pushType: "voip", payload: payload(ofSize: 5121))
        },
        RejectionCase("payload of 70,000 bytes (above the stream window)", 413, "PayloadTooLarge") {
            $0.push(payload: payload(ofSize: 70_000))
        },
        RejectionCase("apns-topic twice", 400, "DuplicateHeaders") {
            $0.push(extraHeaders: [("apns-topic", "com.example.app")])
        },
        RejectionCase("apns-push-type twice with different values", 400, "DuplicateHeaders") {
            $0.push(extraHeaders: [("apns-push-type", "background")])
        },
        RejectionCase("authorization twice", 400, "DuplicateHeaders") { sim in
            sim.push(extraHeaders: [("authorization", sim.authorization)])
        },
        RejectionCase(":method twice", 400, "DuplicateHeaders") { $0.push(extraHeaders: [(":method", "POST")]) },
    ]

    @Test("A malformed apns-id is answered with that apns-id as sent, so a client matching answers by it finds its own")
    func aMalformedApnsIDIsEchoed() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            for sent in ["not-a-uuid", "123e4567e89b12d3a456426614174000", "123E4567-E89B-12D3-A456-4266141740"] {
                let response = try await client.send(sim.push(apnsID: sent))
                expectRejection(response, status: 400, reason: "BadMessageId")
                #expect(response.header("apns-id") == sent)
            }
        }
    }

    @Test("content-available alone at priority 10 is refused; at 5, or with an alert, it is taken")
    func contentAvailableOnlyMayNotUsePriorityTen() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let silent = #"{"aps":{"content-available":1},"orderId":7}"#
            expectRejection(try await client.send(sim.push(pushType: "alert", priority: "10", payload: silent)), status: 400, reason: "BadPriority")
            expectRejection(try await client.send(sim.push(pushType: "alert", payload: silent)), status: 400, reason: "BadPriority")
            #expect(try await client.send(sim.push(pushType: "alert", priority: "5", payload: silent)).status == 200)
            #expect(try await client.send(sim.push(pushType: "alert", priority: "10", payload: #"{"aps":{"content-available":1,"badge":3}}"#)).status == 200)
            #expect(try await client.send(sim.push(pushType: "background", priority: "5", payload: silent)).status == 200)
        }
    }

    @Test("Each bad request gets its status, application/json and exactly {\"reason\":…}", arguments: rejections)
    func rejectedRequestGetsItsReason(_ rejection: RejectionCase) async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let response = try await client.send(rejection.request(sim))
            expectRejection(response, status: rejection.status, reason: rejection.reason)
            #expect(sim.state.stats().rejectedByReason[rejection.reason] == 1)
            #expect(sim.state.notifications().isEmpty, "a rejected push is not logged")
        }
    }

    static let edges: [AcceptedCase] = [
        AcceptedCase("alert payload of exactly 4096 bytes") { $0.push(payload: payload(ofSize: 4096)) },
        AcceptedCase("voip payload of exactly 5120 bytes") {
            $0.push(topic: "com.example.app.voip", pushType: "voip", payload: payload(ofSize: 5120))
        },
        AcceptedCase("collapse id of 64 bytes") { $0.push(collapseID: String(repeating: "c", count: 64)) },
        AcceptedCase("token of 100 bytes") { $0.push(token: String(repeating: "ab", count: 100)) },
        AcceptedCase("token of 1 byte") { $0.push(token: "ab") },
        AcceptedCase("token in uppercase hex") { $0.push(token: deviceToken.uppercased()) },
        AcceptedCase("priority 5") { $0.push(priority: "5") },
        AcceptedCase("priority 1") { $0.push(priority: "1") },
        AcceptedCase("background push with priority 5") {
            $0.push(pushType: "background", priority: "5", payload: #"{"aps":{"content-available":1}}"#)
        },
        AcceptedCase("background push without a priority (defaults to 5)") {
            $0.push(pushType: "background", payload: #"{"aps":{"content-available":1}}"#)
        },
        AcceptedCase("expiration 0") { $0.push(expiration: "0") },
        AcceptedCase("expiration in the future") { $0.push(expiration: "1800000000") },
        AcceptedCase("no apns-push-type (taken as alert)") { $0.push(pushType: nil) },
        AcceptedCase("liveactivity push to its topic") {
            $0.push(topic: "com.example.app.push-type.liveactivity", pushType: "liveactivity", priority: "10")
        },
        AcceptedCase("a header APNs does not know") { $0.push(extraHeaders: [("x-trace", "1"), ("x-trace", "2")]) },
    ]

    @Test("Requests at the edge of a rule are accepted", arguments: edges)
    func requestAtTheEdgeIsAccepted(_ edge: AcceptedCase) async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let response = try await client.send(edge.request(sim))
            #expect(response.status == 200, "body: \(response.bodyText)")
            #expect(response.body.isEmpty)
            #expect(sim.state.stats().accepted == 1)
        }
    }

    @Test func acceptedPushEchoesApnsIDAndAddsUniqueIDInDevelopment() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let apnsID = UUID().apnsString
            let response = try await client.send(sim.push(apnsID: apnsID))
            #expect(response.status == 200)
            #expect(response.header("apns-id") == apnsID)
            #expect(response.body.isEmpty)
            #expect(response.header("content-type") == nil)
            let uniqueID = try #require(response.header("apns-unique-id"))
            #expect(UUID(uuidString: uniqueID) != nil)
            #expect(uniqueID != apnsID)
            #expect(response.apns.isSuccess)
            #expect(response.apns.apnsID == UUID(uuidString: apnsID))
        }
    }

    @Test func uppercaseApnsIDIsEchoedInLowercase() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let apnsID = UUID()
            let response = try await client.send(sim.push(apnsID: apnsID.uuidString.uppercased()))
            #expect(response.status == 200)
            #expect(response.header("apns-id") == apnsID.apnsString)
        }
    }

    @Test func pushWithoutApnsIDGetsAGeneratedLowercaseOne() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let first = try await client.send(sim.push())
            let second = try await client.send(sim.push())
            let firstID = try #require(first.header("apns-id"))
            let secondID = try #require(second.header("apns-id"))
            #expect(UUID(uuidString: firstID) != nil)
            #expect(firstID == firstID.lowercased())
            #expect(firstID != secondID)
            #expect(sim.state.notifications().map(\.apnsID) == [firstID, secondID])
        }
    }

    @Test func errorEchoesAValidApnsIDAndCarriesUniqueIDInDevelopment() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let apnsID = UUID().apnsString
            let response = try await client.send(sim.push(topic: nil, apnsID: apnsID))
            expectRejection(response, status: 400, reason: "MissingTopic")
            #expect(response.header("apns-id") == apnsID)
            #expect(response.header("apns-unique-id").flatMap { UUID(uuidString: $0) } != nil)
        }
    }

    @Test func productionAnswersCarryNoUniqueID() async throws {
        try await withSimulator({ $0.environment = .production }) { sim in
            let client = try await sim.connect()
            let accepted = try await client.send(sim.push())
            #expect(accepted.status == 200)
            #expect(accepted.header("apns-id") != nil)
            #expect(accepted.header("apns-unique-id") == nil)
            let rejected = try await client.send(sim.push(payload: ""))
            expectRejection(rejected, status: 400, reason: "PayloadEmpty")
            #expect(rejected.header("apns-unique-id") == nil)
        }
    }

    @Test func rejectionsDoNotCloseTheConnection() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            for _ in 0..<3 {
                let response = try await client.send(sim.push(priority: "7"))
                #expect(response.status == 400)
            }
            #expect(try await client.send(sim.push()).status == 200)
            #expect(!client.events.value.closed)
            #expect(client.events.value.goAway == nil)
        }
    }

    @Test func pingIsAnswered() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            try await client.ping()
            try await client.ping()
            #expect(client.events.value.pingAcks.count == 2)
        }
    }

    /// Spec §1.4 and RequestValidator: apns-id, method, topic present, collapse-id length, priority, push type, path
    /// and token, expiration, auth, topic and priority rules for the push type, payload. Each row breaks two rules;
    /// the earlier one must win.
    static let order: [RejectionCase] = [
        RejectionCase("bad apns-id before wrong method", 400, "BadMessageId") { $0.push(apnsID: "nope", method: "GET") },
        RejectionCase("wrong method before missing topic", 405, "MethodNotAllowed") { $0.push(topic: nil, method: "GET") },
        RejectionCase("missing topic before long collapse id", 400, "MissingTopic") {
            $0.push(topic: nil, collapseID: String(repeating: "c", count: 65))
        },
        RejectionCase("long collapse id before bad priority", 400, "BadCollapseId") {
            $0.push(priority: "7", collapseID: String(repeating: "c", count: 65))
        },
        RejectionCase("bad priority before unknown push type", 400, "BadPriority") { $0.push(pushType: "banner", priority: "7") },
        RejectionCase("unknown push type before bad path", 400, "InvalidPushType") { $0.push(pushType: "banner", path: "/3/devices/x") },
        RejectionCase("bad path before bad expiration", 404, "BadPath") { $0.push(expiration: "soon", path: "/3/devices/x") },
        RejectionCase("missing device token before bad expiration", 400, "MissingDeviceToken") {
            $0.push(expiration: "soon", path: "/3/device/")
        },
        RejectionCase("bad device token before bad expiration", 400, "BadDeviceToken") { $0.push(token: "xyz", expiration: "soon") },
        RejectionCase("bad expiration before missing provider token", 400, "BadExpirationDate") {
            $0.push(expiration: "soon", authorization: .omitted)
        },
        RejectionCase("missing provider token before topic rule of the push type", 403, "MissingProviderToken") {
            $0.push(pushType: "voip", authorization: .omitted)
        },
        RejectionCase("invalid provider token before empty payload", 403, "InvalidProviderToken") {
            $0.push(authorization: .header("bearer a.b.c"), payload: "")
        },
        RejectionCase("topic rule before priority rule of the push type", 400, "BadTopic") {
            $0.push(topic: "com.example.app", pushType: "liveactivity", priority: "1")
        },
        RejectionCase("priority rule of the push type before empty payload", 400, "BadPriority") {
            $0.push(pushType: "background", priority: "10", payload: "")
        },
        RejectionCase("topic rule before payload too large", 400, "BadTopic") {
            $0.push(topic: "com.example.app", pushType: "voip", payload: payload(ofSize: 6000))
        },
        RejectionCase("everything wrong at once: apns-id first", 400, "BadMessageId") {
            $0.push(
                token: "xyz", topic: nil, pushType: "banner", apnsID: "nope", priority: "7", expiration: "soon",
                collapseID: String(repeating: "c", count: 65), authorization: .omitted, payload: "", method: "DELETE")
        },
    ]

    @Test("The first broken rule in validation order decides the reason", arguments: order)
    func firstBrokenRuleWins(_ rejection: RejectionCase) async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let response = try await client.send(rejection.request(sim))
            expectRejection(response, status: rejection.status, reason: rejection.reason)
        }
    }
}
