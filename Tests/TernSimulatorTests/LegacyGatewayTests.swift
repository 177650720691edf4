import Foundation
import TernAPNs
import TernSimulator
import Testing

@Suite("The legacy binary gateway and feedback service")
struct LegacyGatewayTests {
    static let bundleID = "com.example.app"
    static let token = (0..<32).map { UInt8($0) }
    static let payload = Array(alertPayload.utf8)

    /// Writes `chunks` to the gateway with a push certificate for `bundleID` and reads until it closes.
    static func exchange(_ sim: TestSimulator, _ chunks: [[UInt8]], certificate: IssuedCertificate? = nil) async throws
        -> LegacyTestConnection.Exchange
    {
        let certificate = try certificate ?? sim.simulator.certificateAuthority.issuePushCertificate(bundleID: bundleID)
        return try await LegacyTestConnection.exchange(
            port: try #require(sim.simulator.legacyGatewayPort), trusting: sim.simulator.certificateAuthority.certificatePEM,
            certificate: certificate, writing: chunks)
    }

    static func frame(token: [UInt8] = token, payload: [UInt8] = payload, identifier: UInt32) throws -> [UInt8] {
        try LegacyNotification(token: token, payload: payload, identifier: identifier).encoded(as: .frame)
    }

    static func errorResponse(_ status: UInt8, _ identifier: UInt32) -> [UInt8] {
        LegacyErrorResponse(status: LegacyStatus(rawValue: status), identifier: identifier).encoded
    }

    // MARK: Validation, like Apple's

    @Test func aTokenOverOneHundredBytesIsStatus5() async throws {
        try await withSimulator { sim in
            // The encoder refuses such a token, so the frame is written by hand: token item of 101 bytes.
            var items: [UInt8] = [1, 0, 101] + Array(repeating: 0xAB, count: 101)
            items += [2, 0, UInt8(Self.payload.count)] + Self.payload + [3, 0, 4, 0xDE, 0xAD, 0xBE, 0xEF]
            let frame: [UInt8] = [2, 0, 0, UInt8(items.count >> 8), UInt8(items.count & 0xFF)] + items
            let exchange = try await Self.exchange(sim, [frame])
            #expect(exchange.received == [8, 5, 0xDE, 0xAD, 0xBE, 0xEF])
            #expect(sim.state.notifications().isEmpty)
        }
    }

    @Test func aMissingPayloadIsStatus4() async throws {
        try await withSimulator { sim in
            // Enhanced format, identifier 7, payload length 0.
            let bytes: [UInt8] = [1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 32] + Self.token + [0, 0]
            let exchange = try await Self.exchange(sim, [bytes])
            #expect(exchange.received == Self.errorResponse(4, 7))
        }
    }

    @Test func aPayloadOverTheFormatsLimitIsStatus7() async throws {
        try await withSimulator { sim in
            let frame = try LegacyNotification(token: Self.token, payload: Self.payload, identifier: 9).encoded(as: .frame)
            // 2049 bytes in a frame (limit 2048): patch a valid frame's payload item.
            var items: [UInt8] = [1, 0, 32] + Self.token + [2, 0x08, 0x01] + Array(repeating: 0x20, count: 2049) + [3, 0, 4, 0, 0, 0, 9]
            let big: [UInt8] = [2] + withUnsafeBytes(of: UInt32(items.count).bigEndian, Array.init) + items
            #expect(try await Self.exchange(sim, [frame, big]).received == Self.errorResponse(7, 9))
            #expect(sim.state.notifications().count == 1)
            // 257 bytes in the enhanced format (limit 256).
            items = [1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 32] + Self.token + [0x01, 0x01] + Array(repeating: 0x20, count: 257)
            #expect(try await Self.exchange(sim, [items]).received == Self.errorResponse(7, 3))
        }
    }

    @Test func aTokenOfAnotherEnvironmentIsStatus8AndWhatFollowedIsDiscarded() async throws {
        try await withSimulator { sim in
            let bad = (0..<32).map { UInt8(255 - $0) }
            sim.state.bind(try DeviceToken(bytes: bad), topic: nil, environment: .production)  // it plays development
            let bytes = try Self.frame(identifier: 1) + Self.frame(token: bad, identifier: 2) + Self.frame(identifier: 3)
            let exchange = try await Self.exchange(sim, [bytes])
            #expect(exchange.received == Self.errorResponse(8, 2))
            let arrivals = sim.state.notifications()
            #expect(arrivals.map(\.legacyIdentifier) == [1])
            #expect(sim.state.stats().legacyRejectedByStatus == ["invalidToken": 1])
        }
    }

    @Test func aTokenOfAnotherAppIsStatus8() async throws {
        try await withSimulator { sim in
            sim.state.bind(try DeviceToken(bytes: Self.token), topic: "com.example.other", environment: nil)
            let exchange = try await Self.exchange(sim, [try Self.frame(identifier: 5)])
            #expect(exchange.received == Self.errorResponse(8, 5))
        }
    }

    @Test func garbageClosesTheConnectionWithoutAPacket() async throws {
        try await withSimulator { sim in
            let exchange = try await Self.exchange(sim, [try Self.frame(identifier: 1) + [9, 1, 2, 3]])
            #expect(exchange.received.isEmpty)
            #expect(sim.state.notifications().count == 1)
            #expect(sim.state.stats().legacyUnframeable == 1)
        }
    }

    @Test func theSimpleFormatGetsNoErrorResponse() async throws {
        try await withSimulator { sim in
            let bytes: [UInt8] = [0, 0, 32] + Self.token + [0, 0]  // missing payload
            let exchange = try await Self.exchange(sim, [bytes])
            #expect(exchange.received.isEmpty)
            #expect(sim.state.stats().legacyRejectedByStatus == ["missingPayload": 1])
        }
    }

    @Test func notificationsSplitAcrossReadsInAnyWayAreTaken() async throws {
        try await withSimulator { sim in
            let stream = try (1...20).flatMap { try Self.frame(identifier: UInt32($0)) }
            var chunks: [[UInt8]] = []
            var rest = stream[...]
            while !rest.isEmpty {
                let size = min(rest.count, Int.random(in: 1...97))
                chunks.append(Array(rest.prefix(size)))
                rest = rest.dropFirst(size)
            }
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: Self.bundleID)
            let state = sim.state
            _ = try await LegacyTestConnection.exchange(
                port: try #require(sim.simulator.legacyGatewayPort), trusting: sim.simulator.certificateAuthority.certificatePEM,
                certificate: certificate, writing: chunks, until: { state.notifications(limit: 100).count == 20 })
            let arrivals = sim.state.notifications()
            #expect(arrivals.map(\.legacyIdentifier) == (1...20).map { UInt32($0) })
            #expect(arrivals.allSatisfy { $0.transport == "legacy" && $0.topic == Self.bundleID && $0.token == DeviceToken.hex(Self.token) })
        }
    }

    @Test func aConnectionWithoutAClientCertificateIsRefused() async throws {
        try await withSimulator { sim in
            let exchange = try await LegacyTestConnection.exchange(
                port: try #require(sim.simulator.legacyGatewayPort), trusting: sim.simulator.certificateAuthority.certificatePEM,
                certificate: nil, writing: [try Self.frame(identifier: 1)])
            #expect(exchange.failed)
            #expect(exchange.received.isEmpty)
            #expect(sim.state.notifications().isEmpty)
        }
    }

    @Test func aCertificateForTheOtherEnvironmentIsRefused() async throws {
        try await withSimulator { sim in
            let production = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: Self.bundleID, environments: [.production])
            let exchange = try await Self.exchange(sim, [try Self.frame(identifier: 1)], certificate: production)
            #expect(exchange.received.isEmpty)
            #expect(sim.state.notifications().isEmpty)
        }
    }

    @Test func theShutdownScenarioAnswersStatus10NamingTheLastNotificationTaken() async throws {
        try await withSimulator { sim in
            #expect(try await sim.control.put("/scenario/legacy-shutdown", #"{"afterNotifications":2}"#).status == 204)
            #expect(try await sim.control.get("/scenario").json()["legacyShutdown"] == ["afterNotifications": 2])
            let bytes = try (1...4).flatMap { try Self.frame(identifier: UInt32($0)) }
            #expect(try await Self.exchange(sim, [bytes]).received == Self.errorResponse(10, 2))
            #expect(sim.state.notifications().map(\.legacyIdentifier) == [1, 2])
            // Used up: the next connection takes everything.
            #expect(try await sim.control.get("/scenario").json()["legacyShutdown"] == nil)
        }
    }

    @Test func theShutdownScenarioNeedsAPositiveCount() async throws {
        try await withSimulator { sim in
            let response = try await sim.control.put("/scenario/legacy-shutdown", #"{"afterNotifications":0}"#)
            #expect(response.status == 400)
            #expect(try response.json()["field"] == "afterNotifications")
        }
    }

    @Test func anUnregisteredTokenIsTakenButNotDelivered() async throws {
        try await withSimulator { sim in
            sim.state.unregister(try DeviceToken(bytes: Self.token))
            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: Self.bundleID)
            let state = sim.state
            _ = try await LegacyTestConnection.exchange(
                port: try #require(sim.simulator.legacyGatewayPort), trusting: sim.simulator.certificateAuthority.certificatePEM,
                certificate: certificate, writing: [try Self.frame(identifier: 1)], until: { state.stats().legacyUndelivered == 1 })
            #expect(sim.state.notifications().isEmpty)
        }
    }

    // MARK: Feedback

    @Test func theFeedbackServiceSendsPendingTuplesOnceAndTheControlAPIShowsThem() async throws {
        try await withSimulator { sim in
            let gone = try DeviceToken(bytes: Self.token)
            sim.state.unregister(gone, at: Date(timeIntervalSince1970: 1_700_000_123))
            let listed = try await sim.control.get("/feedback").json()
            #expect(listed == ["items": [["token": .string(gone.hex), "timestamp": 1_700_000_123]]])

            let certificate = try sim.simulator.certificateAuthority.issuePushCertificate(bundleID: Self.bundleID)
            let port = try #require(sim.simulator.feedbackPort)
            let authority = sim.simulator.certificateAuthority.certificatePEM
            let first = try await LegacyTestConnection.exchange(port: port, trusting: authority, certificate: certificate)
            #expect(first.received == (try FeedbackTuple(timestamp: 1_700_000_123, token: Self.token).encoded()))
            let second = try await LegacyTestConnection.exchange(port: port, trusting: authority, certificate: certificate)
            #expect(second.received.isEmpty)
            #expect(try await sim.control.get("/feedback").json() == ["items": []])
            #expect(sim.state.stats().feedbackConnections == 2)
        }
    }
}
