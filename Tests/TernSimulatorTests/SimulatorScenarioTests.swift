import Foundation
import NIOCore
import NIOHTTP2
import NIOPosix
import TernAPNs
import TernSimulator
import Testing
import TernTestSupport

@Suite("Scenarios through the in-process API")
struct SimulatorScenarioTests {
    // MARK: Tokens

    @Test func unregisteredTokenGets410WithTheTimestampInEpochMilliseconds() async throws {
        try await withSimulator { sim in
            let when = Date(timeIntervalSince1970: 1_690_000_123.456)
            sim.state.unregister(try DeviceToken(hex: deviceToken), at: when)
            let client = try await sim.connect()
            let response = try await client.send(sim.push())
            #expect(response.status == 410)
            #expect(response.bodyText == #"{"reason":"Unregistered","timestamp":1690000123456}"#)
            #expect(response.header("content-type") == "application/json")
            let decoded = response.apns
            #expect(decoded.reason == .unregistered)
            #expect(decoded.timestamp == when)
            #expect(decoded.outcomeClass == .tokenInvalid)
            // Other tokens are unaffected, and the 410 is not logged.
            #expect(try await client.send(sim.push(token: otherDeviceToken)).status == 200)
            #expect(sim.state.notifications().map(\.token) == [otherDeviceToken])
        }
    }

    @Test func unregisterWithoutADateUsesTheSimulatorsClock() async throws {
        try await withSimulator { sim in
            sim.state.unregister(try DeviceToken(hex: deviceToken))
            let client = try await sim.connect()
            let response = try await client.send(sim.push())
            #expect(response.status == 410)
            #expect(response.apns.timestamp == sim.clock.now)
        }
    }

    @Test func unregisterWithReasonExpiredTokenGets410ExpiredToken() async throws {
        try await withSimulator { sim in
            let when = Date(timeIntervalSince1970: 1_690_000_000)
            sim.state.unregister(try DeviceToken(hex: deviceToken), at: when, reason: .expiredToken)
            let client = try await sim.connect()
            let response = try await client.send(sim.push())
            #expect(response.status == 410)
            #expect(response.bodyText == #"{"reason":"ExpiredToken","timestamp":1690000000000}"#)
            #expect(response.apns.reason == .expiredToken)
        }
    }

    @Test func tokenBoundToATopicRefusesOtherTopicsWithDeviceTokenNotForTopic() async throws {
        try await withSimulator { sim in
            sim.state.bind(try DeviceToken(hex: deviceToken), topic: "com.example.app", environment: .development)
            let client = try await sim.connect()
            expectRejection(try await client.send(sim.push(topic: "com.other.app")), status: 400, reason: "DeviceTokenNotForTopic")
            #expect(try await client.send(sim.push(topic: "com.example.app")).status == 200)
            // The topic binds, push type suffix included: a device token is not the app's PushKit token.
            expectRejection(
                try await client.send(sim.push(topic: "com.example.app.voip", pushType: "voip")), status: 400, reason: "DeviceTokenNotForTopic")
            sim.state.bind(try DeviceToken(hex: otherDeviceToken), topic: "com.example.app.voip", environment: .development)
            #expect(try await client.send(sim.push(token: otherDeviceToken, topic: "com.example.app.voip", pushType: "voip")).status == 200)
            expectRejection(try await client.send(sim.push(token: otherDeviceToken)), status: 400, reason: "DeviceTokenNotForTopic")
        }
    }

    @Test func tokenOfTheOtherEnvironmentIsBadDeviceToken() async throws {
        try await withSimulator { sim in
            sim.state.bind(try DeviceToken(hex: deviceToken), topic: nil, environment: .production)
            let client = try await sim.connect()
            expectRejection(try await client.send(sim.push()), status: 400, reason: "BadDeviceToken")
        }
    }

    // MARK: Faults

    @Test func faultByCountFailsExactlyTheNextRequests() async throws {
        try await withSimulator { sim in
            try sim.state.setFaults([.init(status: 503, count: 3)])
            let client = try await sim.connect()
            for _ in 0..<3 {
                expectRejection(try await client.send(sim.push()), status: 503, reason: "ServiceUnavailable")
            }
            #expect(try await client.send(sim.push()).status == 200)
            #expect(try await client.send(sim.push()).status == 200)
            #expect(sim.state.scenarios().faults.isEmpty, "a spent fault is removed")
            let stats = sim.state.stats()
            #expect(stats.faultsInjected == 3)
            #expect(stats.rejectedByReason == ["ServiceUnavailable": 3])
            #expect(sim.state.notifications().count == 2)
        }
    }

    @Test(
        "A fault at rate 1 fails every request with its status and reason",
        arguments: [(429, nil, "TooManyRequests"), (500, nil, "InternalServerError"), (503, "Shutdown", "Shutdown")])
    func faultAtRateOneFailsEveryRequest(status: Int, reason: String?, expected: String) async throws {
        try await withSimulator { sim in
            try sim.state.setFaults([.init(status: status, reason: reason, rate: 1.0)])
            let client = try await sim.connect()
            for _ in 0..<5 {
                expectRejection(try await client.send(sim.push()), status: status, reason: expected)
            }
            #expect(sim.state.stats().faultsInjected == 5)
        }
    }

    @Test func faultAtRateZeroNeverFires() async throws {
        try await withSimulator { sim in
            try sim.state.setFaults([.init(status: 500, rate: 0)])
            let client = try await sim.connect()
            for _ in 0..<5 { #expect(try await client.send(sim.push()).status == 200) }
        }
    }

    @Test func faultsDoNotReplaceProtocolErrors() async throws {
        try await withSimulator { sim in
            try sim.state.setFaults([.init(status: 503, count: 1)])
            let client = try await sim.connect()
            // A request that fails validation gets its own reason and does not spend the fault.
            expectRejection(try await client.send(sim.push(priority: "7")), status: 400, reason: "BadPriority")
            expectRejection(try await client.send(sim.push()), status: 503, reason: "ServiceUnavailable")
        }
    }

    @Test func invalidFaultsAreRefusedWithTheField() throws {
        let state = try APNsSimulator(configuration: APNsSimulator.Configuration()).state
        let status = #expect(throws: ScenarioError.self) { try state.setFaults([.init(status: 404, count: 1)]) }
        #expect(status?.field == "[0].status")
        let rate = #expect(throws: ScenarioError.self) { try state.setFaults([.init(status: 503, rate: 2)]) }
        #expect(rate?.field == "[0].rate")
        let both = #expect(throws: ScenarioError.self) {
            try state.setFaults([.init(status: 503, count: 1), .init(status: 503, rate: 0.5, count: 1)])
        }
        #expect(both?.field == "[1].rate")
        let mismatched = #expect(throws: ScenarioError.self) { try state.setFaults([.init(status: 429, reason: "Shutdown", count: 1)]) }
        #expect(mismatched?.field == "[0].reason")
        #expect(state.scenarios().faults.isEmpty)
    }

    // MARK: Latency

    @Test func fixedLatencyDelaysEveryAnswer() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            try sim.state.setLatency(.init(fixedMilliseconds: 150))
            let clock = ContinuousClock()
            for _ in 0..<2 {
                let start = clock.now
                #expect(try await client.send(sim.push()).status == 200)
                #expect(clock.now - start >= .milliseconds(150))
            }
            #expect(sim.state.scenarios().latency == .init(fixedMilliseconds: 150))
        }
    }

    @Test func randomLatencyStaysWithinItsRange() async throws {
        try await withSimulator { sim in
            try sim.state.setLatency(.init(minMilliseconds: 60, maxMilliseconds: 120))
            let client = try await sim.connect()
            let clock = ContinuousClock()
            for _ in 0..<3 {
                let start = clock.now
                #expect(try await client.send(sim.push()).status == 200)
                #expect(clock.now - start >= .milliseconds(60))
            }
            try sim.state.setLatency(nil)
            #expect(sim.state.scenarios().latency == nil)
        }
    }

    @Test func manyAnswersHeldAtOnceEachComeAfterTheirOwnDelay() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            // The first valid provider token raises the connection's stream limit.
            #expect(try await client.send(sim.push()).status == 200)
            try sim.state.setLatency(.init(minMilliseconds: 40, maxMilliseconds: 90))
            let answers = try await withThrowingTaskGroup(of: (status: Int?, took: Duration).self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        let clock = ContinuousClock()
                        let start = clock.now
                        let response = try await client.start(sim.push()).response(timeout: 10)
                        return (response.status, clock.now - start)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 200)
            #expect(answers.allSatisfy { $0.status == 200 }, "every held answer comes")
            #expect(answers.allSatisfy { $0.took >= .milliseconds(40) }, "none before its delay: \(answers.map(\.took).min()!)")
            #expect(try await sim.control.get("/stats").decode(SimulatorStats.self).accepted == 201)
        }
    }

    @Test func latencyDelaysFaultsAndUnregisteredAnswers() async throws {
        try await withSimulator { sim in
            try sim.state.setLatency(.init(fixedMilliseconds: 100))
            try sim.state.setFaults([.init(status: 500, count: 1)])
            sim.state.unregister(try DeviceToken(hex: otherDeviceToken))
            let client = try await sim.connect()
            let clock = ContinuousClock()
            var start = clock.now
            expectRejection(try await client.send(sim.push()), status: 500, reason: "InternalServerError")
            #expect(clock.now - start >= .milliseconds(100))
            start = clock.now
            #expect(try await client.send(sim.push(token: otherDeviceToken)).status == 410)
            #expect(clock.now - start >= .milliseconds(100))
        }
    }

    // MARK: Connection events

    @Test("GOAWAY after N streams carries {\"reason\":…} and closes the connection", arguments: [nil, "IdleTimeout"])
    func goAwayAfterStreams(reason: String?) async throws {
        try await withSimulator { sim in
            try sim.state.setGoAway(.init(afterStreams: 5, reason: reason))
            let client = try await sim.connect()
            for _ in 0..<4 {
                #expect(try await client.send(sim.push()).status == 200)
            }
            #expect(client.events.value.goAway == nil)
            let fifth = try await client.send(sim.push())
            #expect(fifth.status == 200, "the fifth stream is answered before GOAWAY")
            #expect(fifth.streamID == 9)
            let goAway = try await client.goAway()
            #expect(goAway.debugText == #"{"reason":"\#(reason ?? "Shutdown")"}"#)
            #expect(goAway.errorCode == .noError)
            #expect(goAway.lastStreamID == 9)
            try await client.waitUntilClosed()
            #expect(sim.state.stats().goAwaysSent == 1)
            #expect(sim.state.notifications().count == 5)
        }
    }

    @Test func goAwayCountsStreamsFromWhenItIsSet() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            for _ in 0..<3 { #expect(try await client.send(sim.push()).status == 200) }
            try sim.state.setGoAway(.init(afterStreams: 2))
            #expect(try await client.send(sim.push()).status == 200)
            #expect(client.events.value.goAway == nil)
            #expect(try await client.send(sim.push()).status == 200)
            #expect(try await client.goAway().lastStreamID == 9)
        }
    }

    @Test func goAwayLimitedToOneConnectionSparesTheNext() async throws {
        try await withSimulator { sim in
            try sim.state.setGoAway(.init(afterStreams: 1, connections: 1))
            let first = try await sim.connect()
            #expect(try await first.send(sim.push()).status == 200)
            _ = try await first.goAway()
            let second = try await sim.connect()
            for _ in 0..<3 { #expect(try await second.send(sim.push()).status == 200) }
            #expect(second.events.value.goAway == nil)
            #expect(sim.state.scenarios().goAway == nil)
        }
    }

    @Test func dropAfterStreamsClosesTheConnectionWithTheLastRequestUnanswered() async throws {
        try await withSimulator { sim in
            try sim.state.setDrop(.init(afterStreams: 3))
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            #expect(try await client.send(sim.push()).status == 200)
            await #expect(throws: StreamEndedWithoutResponse.self) { try await client.send(sim.push()) }
            try await client.waitUntilClosed()
            #expect(client.events.value.goAway == nil, "dropped without a word")
            let stats = sim.state.stats()
            #expect(stats.connectionsDropped == 1)
            #expect(stats.accepted == 2)
            #expect(sim.state.notifications().count == 2)
        }
    }

    @Test func stoppingTheSimulatorSendsGoAwayShutdownToOpenConnections() async throws {
        let client = try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            return client
        }
        // withRunning has returned: the simulator has stopped.
        let goAway = try await client.goAway()
        #expect(goAway.debugText == #"{"reason":"Shutdown"}"#)
        #expect(goAway.errorCode == .noError)
        #expect(goAway.lastStreamID == 1)
        try await client.waitUntilClosed()
    }

    @Test func stoppingLetsADelayedAnswerFinishBeforeClosing() async throws {
        let (client, pending) = try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            try sim.state.setLatency(.init(fixedMilliseconds: 200))
            let pending = try await client.start(sim.push())
            // Frames are handled in order: once the PING is answered, the simulator has taken the request.
            try await client.ping()
            #expect(sim.state.stats().requests == 2)
            return (client, pending)
        }
        #expect(try await pending.response().status == 200)
        let goAway = try await client.goAway()
        #expect(goAway.lastStreamID == 3)
        #expect(goAway.debugText == #"{"reason":"Shutdown"}"#)
        try await client.waitUntilClosed()
    }

    // MARK: Arrival log

    @Test func arrivalLogRecordsEachAcceptedNotificationInOrder() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            let firstID = UUID().apnsString
            let first = #"{"aps":{"alert":"one"},"n":1}"#
            let second = #"{"aps":{"content-available":1}}"#
            let third = #"{"aps":{"alert":"three"}}"#
            #expect(
                try await client.send(
                    sim.push(apnsID: firstID, priority: "10", expiration: "1800000000", collapseID: "group-1", payload: first)
                ).status == 200)
            let secondResponse = try await client.send(
                sim.push(token: otherDeviceToken.uppercased(), pushType: "background", priority: "5", payload: second))
            #expect(secondResponse.status == 200)
            #expect(try await client.send(sim.push(topic: "com.example.app.voip", pushType: "voip", payload: third)).status == 200)

            let log = sim.state.notifications()
            try #require(log.count == 3)
            #expect(log.map(\.sequence) == [1, 2, 3])
            #expect(log.map(\.token) == [deviceToken, otherDeviceToken, deviceToken], "tokens are logged in lowercase")
            #expect(log.map(\.topic) == ["com.example.app", "com.example.app", "com.example.app.voip"])
            #expect(log.map(\.pushType) == ["alert", "background", "voip"])
            #expect(log.map(\.priority) == [10, 5, 10])
            #expect(log.map(\.payload) == [first, second, third])
            #expect(log[0].apnsID == firstID)
            #expect(log[1].apnsID == secondResponse.header("apns-id"))
            #expect(log.map(\.collapseID) == ["group-1", nil, nil])
            #expect(log.map(\.expiration) == [1_800_000_000, nil, nil])
            #expect(log.map(\.stream) == [1, 3, 5])
            #expect(Set(log.map(\.connection)).count == 1)
            #expect(log.allSatisfy { $0.receivedAt == Int64(sim.clock.now.timeIntervalSince1970 * 1000) })
        }
    }

    @Test func arrivalLogFiltersByTokenAndPagesWithAfter() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            for index in 0..<6 {
                let token = index.isMultiple(of: 2) ? deviceToken : otherDeviceToken
                #expect(try await client.send(sim.push(token: token)).status == 200)
            }
            #expect(sim.state.notifications(token: otherDeviceToken).map(\.sequence) == [2, 4, 6])
            #expect(sim.state.notifications(after: 2).map(\.sequence) == [3, 4, 5, 6])
            #expect(sim.state.notifications(after: 2, limit: 2).map(\.sequence) == [3, 4])
            #expect(sim.state.notifications(after: 3, limit: 1, token: deviceToken).map(\.sequence) == [5])
            #expect(sim.state.notifications(after: 6).isEmpty)
            // Paging through with `after` = the last sequence seen visits every entry once.
            var seen: [UInt64] = []
            var after: UInt64 = 0
            while case let page = sim.state.notifications(after: after, limit: 4), !page.isEmpty {
                seen += page.map(\.sequence)
                after = page.last!.sequence
            }
            #expect(seen == [1, 2, 3, 4, 5, 6])
        }
    }

    @Test func arrivalLogKeepsOnlyTheNewestUpToItsCapacity() async throws {
        try await withSimulator({ $0.logCapacity = 10 }) { sim in
            let client = try await sim.connect()
            for _ in 0..<25 {
                #expect(try await client.send(sim.push()).status == 200)
            }
            #expect(sim.state.notifications(limit: 100).map(\.sequence) == Array(16...25))
            #expect(sim.state.notifications(after: 20).map(\.sequence) == Array(21...25))
            #expect(sim.state.notifications(after: 3, limit: 2).map(\.sequence) == [16, 17], "pages start at the oldest kept")
            let stats = sim.state.stats()
            #expect(stats.accepted == 25)
            #expect(stats.logCount == 10)
            #expect(stats.logCapacity == 10)
        }
    }

    // MARK: Counters

    @Test func statsCountConnectionsAcceptedAndRejectedByReason() async throws {
        try await withSimulator { sim in
            let first = try await sim.connect()
            #expect(try await first.send(sim.push()).status == 200)
            #expect(try await first.send(sim.push()).status == 200)
            #expect(try await first.send(sim.push(priority: "7")).status == 400)
            #expect(try await first.send(sim.push(topic: nil)).status == 400)
            let second = try await sim.connect()
            #expect(try await second.send(sim.push(payload: "")).status == 400)
            #expect(try await second.send(sim.push()).status == 200)
            try sim.state.setFaults([.init(status: 429, count: 1)])
            #expect(try await second.send(sim.push()).status == 429)

            let stats = sim.state.stats()
            #expect(stats.connectionsOpened == 2)
            #expect(stats.connectionsActive == 2)
            #expect(stats.requests == 7)
            #expect(stats.accepted == 3)
            #expect(stats.rejected == 4)
            #expect(stats.rejectedByReason == ["BadPriority": 1, "MissingTopic": 1, "PayloadEmpty": 1, "TooManyRequests": 1])
            #expect(stats.faultsInjected == 1)
            #expect(stats.goAwaysSent == 0)
            #expect(stats.connectionsDropped == 0)
            #expect(stats.logCount == 3)
        }
    }

    @Test func resetClearsScenariosTokensLogAndCountersButKeepsConnections() async throws {
        try await withSimulator { sim in
            let client = try await sim.connect()
            #expect(try await client.send(sim.push()).status == 200)
            try sim.state.setFaults([.init(status: 500, rate: 1)])
            try sim.state.setLatency(.init(fixedMilliseconds: 10))
            try sim.state.setGoAway(.init(afterStreams: 100))
            try sim.state.setDrop(.init(afterStreams: 100))
            sim.state.unregister(try DeviceToken(hex: deviceToken))
            sim.state.reset()

            let scenarios = sim.state.scenarios()
            #expect(scenarios.faults.isEmpty)
            #expect(scenarios.latency == nil)
            #expect(scenarios.goAway == nil)
            #expect(scenarios.drop == nil)
            #expect(sim.state.tokens().isEmpty)
            #expect(sim.state.notifications().isEmpty)
            let stats = sim.state.stats()
            #expect(stats.connectionsActive == 1, "open connections stay counted")
            #expect(stats.connectionsOpened == 0)
            #expect(stats.requests == 0)
            #expect(stats.accepted == 0)
            #expect(stats.rejected == 0)
            #expect(stats.rejectedByReason.isEmpty)
            #expect(stats.logCount == 0)
            #expect(stats.logCapacity == 100_000)
            #expect(try await client.send(sim.push()).status == 200)
        }
    }

    @Test func withLatencyGoAwayFollowsTheDelayedAnswerOfTheNthStream() async throws {
        try await withSimulator { sim in
            try sim.state.setLatency(.init(fixedMilliseconds: 150))
            try sim.state.setGoAway(.init(afterStreams: 1))
            let client = try await sim.connect()
            let clock = ContinuousClock()
            let start = clock.now
            let pending = try await client.start(sim.push())
            let goAway = try await client.goAway()
            #expect(clock.now - start >= .milliseconds(150), "GOAWAY must not overtake the delayed answer")
            #expect(goAway.lastStreamID == 1)
            #expect(try await pending.response().status == 200)
            try await client.waitUntilClosed()
        }
    }

    @Test func stoppingClosesConnectionsStillInTheirTLSHandshakeAtOnce() async throws {
        let clock = ContinuousClock()
        var stoppedAt = clock.now
        // A grace period far above any stop time under load, so waiting it out cannot pass for closing at once.
        let channel = try await withSimulator({ $0.shutdownGracePeriod = .seconds(20) }) { sim in
            // A TCP connection that never starts TLS: nothing to drain, so it must not hold up the stop.
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: sim.simulator.port).get()
            try await Task.sleep(for: .milliseconds(100))
            stoppedAt = clock.now
            return channel
        }
        #expect(clock.now - stoppedAt < .seconds(10), "stop waited out the grace period for a connection with nothing in flight")
        try await withTimeout(5, "the half-open connection to close") { try await channel.closeFuture.get() }
    }
}
