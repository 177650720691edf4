import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import TernTestSupport
import Testing

extension ClientFaultTests {
    /// The legacy binary gateway client against the simulator's gateway and feedback ports, over real TLS with a
    /// client certificate from the simulator's CA.
    @Suite struct LegacyGateway {
        static let bundleID = Harness.topic

        /// A simulator and a legacy client configuration (certificate for `bundleID`, short replay window).
        static func withLegacySimulator<T: Sendable>(
            configure: (inout LegacyClientConfiguration) -> Void = { _ in },
            _ body: (APNsSimulator, LegacyClientConfiguration) async throws -> T
        ) async throws -> T {
            try await Harness.withSimulator { simulator in
                let certificate = try simulator.certificateAuthority.issuePushCertificate(bundleID: bundleID)
                var configuration = LegacyClientConfiguration(
                    authentication: .certificate(chainPEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM),
                    endpoint: .init(
                        host: "127.0.0.1", port: try #require(simulator.legacyGatewayPort),
                        trustRootsPEM: simulator.certificateAuthority.certificatePEM))
                // Short, so a test that writes a few notifications settles them quickly. The tests in which the
                // gateway answers an error mid-stream widen it: see `patientWindow`.
                configuration.replayWindow = .milliseconds(300)
                configuration.reconnectBackoff = .init(initial: .milliseconds(50), maximum: .milliseconds(200))
                configure(&configuration)
                return try await body(simulator, configuration)
            }
        }

        /// For the tests in which the gateway answers an error in the middle of 10,000 notifications: the client
        /// counts a notification accepted once this long passed without an error naming it or an earlier one, so the
        /// error must arrive within it. On two busy cores, with the in-process suites running alongside, the
        /// simulator's answer once took longer than 300 ms, and the client had settled everything before it came.
        static let patientWindow: Duration = .seconds(2)

        static func notifications(_ count: Int, series: Int = 0) -> [LegacyNotification] {
            (0..<count).map { index in
                LegacyNotification(
                    token: Harness.token(index, series: series).bytes, payload: Array(#"{"aps":{"alert":"Hello \#(index)"}}"#.utf8))
            }
        }

        @Test(arguments: [LegacyCommand.frame, .enhanced])
        func aBadTokenMidStreamIsReportedAndEveryOtherNotificationArrivesOnce(format: LegacyCommand) async throws {
            try await Self.withLegacySimulator(configure: {
                $0.format = format
                $0.replayWindow = Self.patientWindow
            }) { simulator, configuration in
                let bad = Harness.token(5_000)
                simulator.state.bind(bad, topic: nil, environment: .production)  // the simulator plays development
                let client = try LegacyGatewayClient(configuration: configuration)
                let outcomes = await client.send(Self.notifications(10_000))
                await client.shutdown()

                #expect(outcomes.count == 10_000)
                #expect(outcomes[5_000] == .rejected(.invalidToken))
                let notAccepted = outcomes.enumerated().filter { $0.offset != 5_000 && $0.element != .accepted }
                #expect(notAccepted.isEmpty, "not accepted: \(notAccepted.prefix(5))")
                let arrivals = Harness.arrivalsByToken(simulator)
                #expect(arrivals.count == 9_999)
                #expect(arrivals[bad.hex] == nil)
                #expect(arrivals.values.allSatisfy { $0 == 1 })
                #expect(await client.connectionsOpened == 2)
                let stats = simulator.state.stats()
                #expect(stats.legacyRejectedByStatus["invalidToken"] == 1)
                #expect(stats.legacyAccepted == 9_999)
            }
        }

        @Test func aShutdownMidStreamLosesNothingAndRepeatsNothing() async throws {
            try await Self.withLegacySimulator(configure: { $0.replayWindow = Self.patientWindow }) { simulator, configuration in
                try simulator.state.setLegacyShutdown(.init(afterNotifications: 3_000))
                let client = try LegacyGatewayClient(configuration: configuration)
                let outcomes = await client.send(Self.notifications(10_000))
                await client.shutdown()

                #expect(outcomes.allSatisfy { $0 == .accepted })
                let arrivals = Harness.arrivalsByToken(simulator)
                #expect(arrivals.count == 10_000)
                #expect(arrivals.values.allSatisfy { $0 == 1 })
                #expect(await client.connectionsOpened == 2)
                #expect(simulator.state.stats().legacyRejectedByStatus["shutdown"] == 1)
            }
        }

        @Test func whatIsHandedOverAfterShutdownIsNeverWrittenAndSaysSo() async throws {
            try await Self.withLegacySimulator { simulator, configuration in
                let client = try LegacyGatewayClient(configuration: configuration)
                await client.shutdown()
                #expect(await client.send(Self.notifications(2)) == [.shutDown, .shutDown])
                #expect(Harness.arrivals(simulator).isEmpty)
                // In the HTTP/2 client's terms, `shutDown`: a sender tells it from a connection that failed.
                await client.sendAllBunched(AsyncStream { $0.yield(Harness.notification(0)); $0.finish() }) { results in
                    let codes = results.map { result -> APNsClientError.Code? in
                        if case .failure(let error) = result.result { error.code } else { nil }
                    }
                    #expect(codes == [.shutDown])
                }
            }
        }

        @Test func arrivalsAreLoggedAsLegacyWithTheirIdentifiers() async throws {
            try await Self.withLegacySimulator { simulator, configuration in
                let client = try LegacyGatewayClient(configuration: configuration)
                var notification = Self.notifications(1)[0]
                notification.priority = 5
                notification.expiration = 2_000_000_000
                let outcomes = await client.send([notification])
                await client.shutdown()
                #expect(outcomes == [.accepted])
                let arrival = try #require(Harness.arrivals(simulator).first)
                #expect(arrival.transport == "legacy")
                #expect(arrival.legacyIdentifier == 1)
                #expect(arrival.topic == Self.bundleID)
                #expect(arrival.priority == 5)
                #expect(arrival.expiration == 2_000_000_000)
                #expect(arrival.payload == #"{"aps":{"alert":"Hello 0"}}"#)
            }
        }

        @Test func aNotificationThatDoesNotEncodeFailsAloneAndTheRestGo() async throws {
            try await Self.withLegacySimulator(configure: { $0.format = .enhanced }) { simulator, configuration in
                let client = try LegacyGatewayClient(configuration: configuration)
                var batch = Self.notifications(3)
                batch[1].payload = Array(repeating: UInt8(ascii: "x"), count: 257)  // over the enhanced format's 256
                let outcomes = await client.send(batch)
                await client.shutdown()
                #expect(outcomes[0] == .accepted && outcomes[2] == .accepted)
                guard case .failed(let message) = outcomes[1] else {
                    Issue.record("expected a failure, got \(outcomes[1])")
                    return
                }
                #expect(message.contains("256"))
                #expect(Harness.arrivals(simulator).count == 2)
            }
        }

        @Test func anUnreachableGatewayFailsTheSendsAfterBackingOff() async throws {
            try await withClosedPort { port in
                let authority = try SimulatorCertificateAuthority.generate()
                let certificate = try authority.issuePushCertificate(bundleID: Self.bundleID)
                var configuration = LegacyClientConfiguration(
                    authentication: .certificate(chainPEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM),
                    endpoint: .init(host: "127.0.0.1", port: port, trustRootsPEM: authority.certificatePEM))
                configuration.reconnectBackoff = .init(initial: .milliseconds(100), maximum: .milliseconds(100))
                configuration.maxConnectFailures = 4
                let client = try LegacyGatewayClient(configuration: configuration)
                let started = ContinuousClock.now
                let outcomes = await client.send(Self.notifications(5))
                let elapsed = ContinuousClock.now - started
                await client.shutdown()
                for outcome in outcomes {
                    guard case .failed(let message) = outcome else {
                        Issue.record("expected a failure, got \(outcome)")
                        continue
                    }
                    #expect(message.contains("cannot connect"))
                }
                // Three waits between four attempts, each at least half the initial back-off: no tight loop.
                #expect(elapsed >= .milliseconds(150))
            }
        }

        @Test func aWaitForAConnectionReturnsOnceTheHandshakeIsDoneAndAtOnceAfter() async throws {
            try await Self.withLegacySimulator { simulator, configuration in
                let client = try LegacyGatewayClient(configuration: configuration)
                var waited = 0
                try await client.waitForConnection { waited += 1 }
                #expect(waited == 1)
                #expect(await client.connectionsOpened == 1)
                try await client.waitForConnection { waited += 1 }
                #expect(waited == 1, "a connection was ready: the second caller did not wait")
                let outcomes = await client.send(Self.notifications(2))
                #expect(outcomes == [.accepted, .accepted])
                #expect(await client.connectionsOpened == 1)
                await client.shutdown()
            }
        }

        @Test func aGatewayThatWasDownIsFoundAgainByOneConnectionAProbeInterval() async throws {
            try await Self.withLegacySimulator(configure: {
                $0.maxConnectFailures = 2
                $0.reconnectBackoff = .init(initial: .milliseconds(20), maximum: .milliseconds(300))
            }) { simulator, configuration in
                let relay = try await TCPRelay(to: "127.0.0.1", port: configuration.endpoint.port)
                await relay.refuse()
                var relayed = configuration
                relayed.endpoint.port = relay.port
                let client = try LegacyGatewayClient(configuration: relayed)

                // Down: every connection closes before its handshake, and the client gives up after two.
                let first = try await withTimeout(10, "a wait for a gateway that is down") {
                    await ClientFaultTests.LegacyHostilePeer.waitForConnection(client)
                }
                #expect((first as? APNsClientError)?.code == .connectionFailed, "\(String(describing: first))")
                let down = await client.send(Self.notifications(1))
                if case .failed(let message)? = down.first {
                    #expect(message.hasPrefix("not sent: the gateway is unreachable"), "\(message)")
                } else {
                    Issue.record("expected a failure at once, got \(down)")
                }

                // Back: a caller a probe interval on has one connection tried, and once it is through its handshake
                // the client sends again.
                relay.carry()
                try await waitUntil("the client to find the gateway back", within: 10) {
                    await ClientFaultTests.LegacyHostilePeer.waitForConnection(client) == nil
                }
                let outcomes = await client.send(Self.notifications(3, series: 1))
                #expect(outcomes == [.accepted, .accepted, .accepted])
                #expect(Set(Harness.arrivals(simulator).map(\.token)) == Set((0..<3).map { Harness.token($0, series: 1).hex }))
                await client.shutdown()
                await relay.close()
            }
        }

        @Test func aClientWithoutAPushCertificateIsTurnedAwayAndFails() async throws {
            try await Self.withLegacySimulator(configure: {
                // A certificate from another CA: the simulator's TLS handshake refuses it.
                let stranger = try! SimulatorCertificateAuthority.generate().issuePushCertificate(bundleID: Self.bundleID)
                $0.authentication = .certificate(chainPEM: stranger.certificatePEM, privateKeyPEM: stranger.privateKeyPEM)
                $0.maxConnectFailures = 2
            }) { simulator, configuration in
                let client = try LegacyGatewayClient(configuration: configuration)
                let outcomes = await client.send(Self.notifications(2))
                await client.shutdown()
                #expect(outcomes.allSatisfy { if case .failed = $0 { true } else { false } })
                #expect(Harness.arrivals(simulator).isEmpty)
            }
        }

        @Test func aProviderTokenIsRefused() throws {
            let configuration = LegacyClientConfiguration(authentication: .token(Harness.key), endpoint: .init(host: "127.0.0.1", port: 2195))
            let error = #expect(throws: APNsClientError.self) { _ = try LegacyGatewayClient(configuration: configuration) }
            #expect(error?.code == .invalidConfiguration)
        }

        @Test func feedbackListsUnregisteredTokensWithTheirTimestampsOnce() async throws {
            try await Self.withLegacySimulator { simulator, configuration in
                var feedback = configuration
                feedback.endpoint.port = try #require(simulator.feedbackPort)
                let gone = (0..<300).map { Harness.token($0, series: 7) }
                for (index, token) in gone.enumerated() {
                    simulator.state.unregister(token, at: Date(timeIntervalSince1970: TimeInterval(1_700_000_000 + index)))
                }
                // Another app's token is not this certificate's to hear about.
                let foreign = Harness.token(1, series: 8)
                simulator.state.bind(foreign, topic: "com.example.other", environment: nil)
                simulator.state.unregister(foreign)

                let tuples = try await LegacyFeedbackClient.fetch(feedback)
                #expect(tuples.count == 300)
                let byToken = Dictionary(uniqueKeysWithValues: tuples.map { (DeviceToken.hex($0.token), $0.timestamp) })
                for (index, token) in gone.enumerated() { #expect(byToken[token.hex] == UInt32(1_700_000_000 + index)) }
                #expect(byToken[foreign.hex] == nil)

                // The list is cleared once read.
                #expect(try await LegacyFeedbackClient.fetch(feedback).isEmpty)
                #expect(simulator.state.stats().feedbackTuplesSent == 300)
                // Unregistered again later: listed again, with the new time.
                simulator.state.unregister(gone[0], at: Date(timeIntervalSince1970: 1_800_000_000))
                #expect(try await LegacyFeedbackClient.fetch(feedback) == [FeedbackTuple(timestamp: 1_800_000_000, token: gone[0].bytes)])
            }
        }
    }
}
