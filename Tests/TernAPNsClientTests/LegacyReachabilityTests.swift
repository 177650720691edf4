import NIOCore
import Testing

@testable import TernAPNsClient

/// The legacy client's decision to fail at once while its gateway is unreachable, as a value with explicit times.
@Suite struct LegacyReachabilityTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func reason(_ decision: LegacyReachability.Decision) -> String? {
        if case .failAtOnce(let reason, _) = decision { reason } else { nil }
    }

    @Test func aReachableGatewayLetsEveryCallerGoOn() {
        var reachability = LegacyReachability(probeInterval: .seconds(30))
        let decision = reachability.admit(now: Self.start, canConnect: true)
        #expect(decision == .proceed)
    }

    @Test func onceGivenUpCallersFailAtOnceAndOneProbeGoesPerInterval() throws {
        var reachability = LegacyReachability(probeInterval: .seconds(30))
        reachability.gaveUp("cannot connect to gateway.test:2195: connection refused", now: Self.start)

        // Within the interval: failed at once, no connection tried.
        let soon = reachability.admit(now: Self.start + .seconds(29), canConnect: true)
        let reason = try #require(Self.reason(soon), "\(soon)")
        #expect(soon == .failAtOnce(reason: reason, probe: false))
        #expect(reason.hasPrefix("not sent: the gateway is unreachable (cannot connect to gateway.test:2195: connection refused)"))
        #expect(reason.contains("every 30.0 seconds"), "\(reason)")

        // Due, but a connection is open or under way: the probe waits for a caller that can have one tried.
        let busy = reachability.admit(now: Self.start + .seconds(31), canConnect: false)
        #expect(busy == .failAtOnce(reason: reason, probe: false))

        // Due: this caller fails too, and has one connection tried; the next waits another interval.
        let probe = reachability.admit(now: Self.start + .seconds(32), canConnect: true)
        #expect(probe == .failAtOnce(reason: reason, probe: true))
        let after = reachability.admit(now: Self.start + .seconds(33), canConnect: true)
        #expect(after == .failAtOnce(reason: reason, probe: false))
        #expect(reachability.nextProbe == Self.start + .seconds(62))
    }

    @Test func aProbeThatFailsKeepsTheNewerProblemAndOneThatHandshakesEndsIt() {
        var reachability = LegacyReachability(probeInterval: .seconds(30))
        reachability.stillUnreachable("ignored: the gateway was never given up on")
        #expect(reachability.problem == nil)

        reachability.gaveUp("connection refused", now: Self.start)
        reachability.stillUnreachable("no TLS handshake within 10.0 seconds")
        #expect(reachability.problem == "no TLS handshake within 10.0 seconds")
        reachability.stillUnreachable(nil)
        #expect(reachability.problem == "no TLS handshake within 10.0 seconds")

        reachability.reached()
        #expect(reachability.problem == nil && reachability.nextProbe == nil)
        let decision = reachability.admit(now: Self.start + .seconds(1), canConnect: true)
        #expect(decision == .proceed)
    }
}
