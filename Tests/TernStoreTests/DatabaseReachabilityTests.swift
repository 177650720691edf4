import Testing
@testable import TernStore

/// The decisions of ``DatabaseReachability``, as values: when calls fail at once, when a probe runs, when a pool is
/// retired and when a new one takes over.
@Suite("Database reachability")
struct DatabaseReachabilityTests {
    let start = ContinuousClock.now

    @Test("an outage: a call that could not reach the server starts one probe; its failure retires the pool and refuses calls at once; the first probe that reaches the server starts a new pool")
    func outage() {
        var reachability = DatabaseReachability(probeInterval: .seconds(1))
        #expect(reachability.admit() == .success(0))

        #expect(reachability.callCouldNotReach(generation: 0, because: .connectionFailed, at: start) == .probe)
        #expect(reachability.state == .checking)
        // Calls still go to the pool while the probe finds out, and other failures start no second probe.
        #expect(reachability.admit() == .success(0))
        #expect(reachability.callCouldNotReach(generation: 0, because: .connectionFailed, at: start) == .none)

        #expect(reachability.probeFailed("connection refused") == .probeAgain(retiringPool: true))
        #expect(reachability.admit() == .failure(.init(reason: "connection refused")))
        // A call that was waiting in the retired pool fails too; that says nothing new.
        #expect(reachability.callCouldNotReach(generation: 0, because: .connectionFailed, at: start) == .none)

        // Still away: probe again, the pool is retired already; the reason is the latest.
        #expect(reachability.probeFailed("timed out") == .probeAgain(retiringPool: false))
        #expect(reachability.admit() == .failure(.init(reason: "timed out")))

        #expect(reachability.probeReachedServer(at: start + .seconds(5)) == .startPool(generation: 1))
        #expect(reachability.state == .reachable)
        #expect(reachability.admit() == .success(1))
    }

    @Test("a server that is reached (slow, saturated, or back after a blip) keeps its pool and admits every call")
    func reachedWhileChecking() {
        var reachability = DatabaseReachability(probeInterval: .seconds(1))
        #expect(reachability.callCouldNotReach(generation: 0, because: .connectionFailed, at: start) == .probe)
        #expect(reachability.probeReachedServer(at: start) == .none)
        #expect(reachability.state == .reachable)
        #expect(reachability.admit() == .success(0))
    }

    @Test("after a probe that reached the server, a call without an answer on its connection starts the next check five seconds later, so slow statements do not make a probe a second")
    func quietAfterReaching() {
        var reachability = DatabaseReachability(probeInterval: .seconds(1))
        _ = reachability.callCouldNotReach(generation: 0, because: .noAnswer, at: start)
        _ = reachability.probeReachedServer(at: start)
        #expect(reachability.callCouldNotReach(generation: 0, because: .noAnswer, at: start + .milliseconds(4_999)) == .none)
        #expect(reachability.state == .reachable)
        #expect(reachability.callCouldNotReach(generation: 0, because: .noAnswer, at: start + DatabaseReachability.quiet) == .probe)
    }

    @Test("after a probe that reached the server, a call whose connection failed, or that got none, starts the next check a probe interval later: a server that stops just after a slow statement is found out within seconds",
          arguments: [DatabaseReachability.Cause.connectionFailed, .noConnection])
    func failureAfterReaching(cause: DatabaseReachability.Cause) {
        var reachability = DatabaseReachability(probeInterval: .seconds(1))
        _ = reachability.callCouldNotReach(generation: 0, because: .noAnswer, at: start)
        _ = reachability.probeReachedServer(at: start)
        #expect(reachability.callCouldNotReach(generation: 0, because: cause, at: start + .milliseconds(999)) == .none)
        #expect(reachability.state == .reachable)
        #expect(reachability.callCouldNotReach(generation: 0, because: cause, at: start + .seconds(1)) == .probe)
        #expect(reachability.state == .checking)
    }

    @Test("a failure on a pool that was replaced says nothing about the new one")
    func stalePool() {
        var reachability = DatabaseReachability(probeInterval: .seconds(1))
        _ = reachability.callCouldNotReach(generation: 0, because: .connectionFailed, at: start)
        _ = reachability.probeFailed("refused")
        #expect(reachability.probeReachedServer(at: start + .seconds(2)) == .startPool(generation: 1))
        #expect(reachability.callCouldNotReach(generation: 0, because: .connectionFailed, at: start + .seconds(10)) == .none)
        #expect(reachability.state == .reachable)
        #expect(reachability.callCouldNotReach(generation: 1, because: .connectionFailed, at: start + .seconds(10)) == .probe)
    }

    @Test("a probe's failure after the state was settled reachable changes nothing")
    func lateProbeFailure() {
        var reachability = DatabaseReachability(probeInterval: .seconds(1))
        #expect(reachability.probeFailed("refused") == .none)
        #expect(reachability.admit() == .success(0))
    }
}
