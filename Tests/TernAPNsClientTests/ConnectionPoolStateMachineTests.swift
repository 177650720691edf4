import Testing

@testable import TernAPNsClient

/// The connection pool's decisions as values: events in, actions out, no sockets and no sleeping.
///
/// Events are fed outside `#expect`, whose expansion cannot call mutating methods.
@Suite struct ConnectionPoolStateMachineTests {
    /// Stands in for a channel and its handler: the machine only keeps and returns it.
    struct FakeLease: Equatable {
        var connectionID: Int
    }

    typealias Machine = ConnectionPoolStateMachine<FakeLease>

    static let backoff = APNsClientConfiguration.Backoff(initial: .milliseconds(200), maximum: .seconds(30))

    static func machine(connections: Int = 2, loops: Int = 1, failFastAfter: Duration? = nil) -> Machine {
        Machine(poolSize: connections, loops: loops, backoff: backoff, endpoint: "apns.test:443", failFastAfter: failFastAfter)
    }

    /// Plays a connect of the planned connection `plan` that the server refuses, and returns the machine's action.
    static func refuse(_ machine: inout Machine, _ plan: Machine.ConnectPlan) -> Machine.Action {
        _ = machine.startConnect(plan.connectionID)
        return machine.connectFailed(plan.connectionID, description: "connection refused")
    }

    /// Plays a successful connect of the planned connection `plan` (socket, then SETTINGS) and returns both actions.
    @discardableResult
    static func open(
        _ machine: inout Machine, _ plan: Machine.ConnectPlan?, maxStreams: Int = 100,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> (connected: Machine.Action, settings: Machine.Action) {
        guard let plan else {
            Issue.record("no connect was planned", sourceLocation: sourceLocation)
            return (.none, .none)
        }
        let started = machine.startConnect(plan.connectionID)
        #expect(started, sourceLocation: sourceLocation)
        let connected = machine.connected(plan.connectionID, lease: FakeLease(connectionID: plan.connectionID))
        let settings = machine.settingsReceived(plan.connectionID, maxStreams: maxStreams)
        return (connected, settings)
    }

    static func lend(_ waiterID: Int, _ connectionID: Int) -> Machine.Lend {
        Machine.Lend(waiterID: waiterID, connectionID: connectionID, lease: FakeLease(connectionID: connectionID))
    }

    static func fail(_ waiterID: Int, _ reason: Machine.WaiterFailure) -> Machine.Action {
        Machine.Action(fail: [Machine.Failure(waiterID: waiterID, reason: reason)])
    }

    // MARK: Lending

    @Test func theFirstCallerWaitsAndAConnectStartsWithoutDelay() {
        var machine = Self.machine()
        let action = machine.acquire(1)
        #expect(action.lend.isEmpty)
        #expect(action.startDeadline == 1)
        #expect(action.connect == Machine.ConnectPlan(connectionID: 1, loop: 0, afterFailures: 0, delay: .zero))
        #expect(machine.waiters.elementsEqual([1]))
    }

    @Test func lendsTheLeastLoadedReadyConnection() {
        var machine = Self.machine(connections: 2)
        Self.open(&machine, machine.acquire(1).connect)
        let second = machine.acquire(2)
        #expect(second.lend == [Self.lend(2, 1)], "a free stream is lent at once")
        Self.open(&machine, second.connect)
        #expect(machine.connections[1]?.inFlight == 2)
        #expect(machine.connections[2]?.inFlight == 0)

        let third = machine.acquire(3)
        #expect(third.lend == [Self.lend(3, 2)], "connection 2 has fewer streams in flight")
        _ = machine.release(1)
        let fourth = machine.acquire(4)
        #expect(fourth.lend == [Self.lend(4, 1)], "equal load: the lower id")
        let fifth = machine.acquire(5)
        #expect(fifth.lend == [Self.lend(5, 2)])
    }

    /// The pool asks `lendAtOnce` first and goes through `acquire` only when it says nil: so it must lend as
    /// `acquire` does whenever it decides at all, and decide nothing (no waiter, no connect) when the caller would
    /// wait or fail.
    @Test func lendAtOnceDecidesAsAcquireDoesOrNotAtAll() {
        var machine = Self.machine(connections: 2)
        let beforeAnyConnection = machine.lendAtOnce()
        #expect(beforeAnyConnection == nil, "nothing is open yet")
        #expect(machine.waiters.isEmpty)
        #expect(!machine.connectScheduled, "deciding nothing plans no connect either")

        Self.open(&machine, machine.acquire(1).connect, maxStreams: 2)
        _ = machine.release(1)
        // Twin machines from here: one answers through `acquire`, the other through `lendAtOnce`.
        var twin = machine
        var planned: Machine.ConnectPlan?
        for caller in 2...6 {
            let slow = machine.acquire(caller)
            let fast = twin.lendAtOnce()
            if let fast {
                #expect(slow.lend == [Self.lend(caller, fast.connectionID)], "caller \(caller)")
                #expect(fast.lease == FakeLease(connectionID: fast.connectionID))
                #expect(slow.connect == fast.connect, "caller \(caller): the same growth")
                #expect(slow.startDeadline == nil)
                planned = fast.connect ?? planned
            } else {
                #expect(slow.lend.isEmpty, "caller \(caller): no stream free, so it waits")
                #expect(twin.waiters.isEmpty)
                _ = machine.waiterCancelled(caller)
            }
            #expect(machine.connections.mapValues(\.inFlight) == twin.connections.mapValues(\.inFlight), "caller \(caller)")
            #expect(machine.connectScheduled == twin.connectScheduled, "caller \(caller)")
            // The connection that caller 2 found every stream busy for opens, with room for one stream, on both.
            if caller == 3 {
                #expect(planned?.connectionID == 2)
                Self.open(&machine, planned, maxStreams: 1)
                Self.open(&twin, planned, maxStreams: 1)
            }
        }
        #expect(twin.connections.values.allSatisfy { $0.inFlight == $0.maxStreams }, "every stream was lent")
        let whenFull = twin.lendAtOnce()
        #expect(whenFull == nil, "and none is left")

        _ = twin.release(1)
        _ = twin.shutdown()
        let afterShutdown = twin.lendAtOnce()
        #expect(afterShutdown == nil, "a shut-down pool lends nothing, even with a stream free")
    }

    // MARK: Event loops

    /// Opens `count` connections, each with one stream (every new caller finds all busy, so the pool grows), and
    /// returns the loop each was planned on, by connection id.
    static func openBusy(_ machine: inout Machine, count: Int) -> [Int: Int] {
        var loops: [Int: Int] = [:]
        for waiter in 1...count {
            guard let plan = machine.acquire(waiter).connect else { break }
            loops[plan.connectionID] = plan.loop
            open(&machine, plan, maxStreams: 1)
        }
        return loops
    }

    @Test func aPoolsConnectionsTakeTheLoopsInTurn() {
        var machine = Self.machine(connections: 4, loops: 2)
        #expect(Self.openBusy(&machine, count: 4) == [1: 0, 2: 1, 3: 0, 4: 1])

        var wide = Self.machine(connections: 3, loops: 8)
        #expect(Self.openBusy(&wide, count: 3) == [1: 0, 2: 1, 3: 2], "fewer connections than loops: one each")
    }

    @Test func aReplacementGoesOnTheLoopItsPredecessorLeft() {
        var machine = Self.machine(connections: 4, loops: 2)
        _ = Self.openBusy(&machine, count: 4)
        // A caller waits; connection 1 (loop 0) is sent away: its replacement, connection 5, goes on loop 0, where
        // taking the loops in turn by id would have put it on loop 1 beside two others.
        #expect(machine.acquire(5).lend.isEmpty)
        let replacement = machine.draining(1).connect
        #expect(replacement?.connectionID == 5)
        #expect(replacement?.loop == 0)

        // Connection 4 (loop 1) closes while a caller waits: connection 6 goes on loop 1.
        Self.open(&machine, replacement, maxStreams: 1)
        _ = machine.closed(1)
        #expect(machine.acquire(6).lend.isEmpty)
        let next = machine.closed(4).connect
        #expect(next?.connectionID == 6)
        #expect(next?.loop == 1)
    }

    @Test func growsToThePoolSizeOnlyWhileEveryOpenConnectionIsBusy() {
        var machine = Self.machine(connections: 2)
        let (connected, _) = Self.open(&machine, machine.acquire(1).connect)
        #expect(connected.opened == FakeLease(connectionID: 1))
        _ = machine.release(1)

        let onIdle = machine.acquire(2)
        #expect(onIdle.lend == [Self.lend(2, 1)])
        #expect(onIdle.connect?.connectionID == 2, "the only connection is now busy: grow")
        let whileConnecting = machine.acquire(3)
        #expect(whileConnecting.lend == [Self.lend(3, 1)])
        #expect(whileConnecting.connect == nil, "one connect at a time")
        #expect(machine.connections.count == 2)

        // Two idle connections (the pool size): lending on one does not grow, and when both are busy the pool is full.
        var full = Self.machine(connections: 2)
        Self.open(&full, full.acquire(1).connect)
        Self.open(&full, full.acquire(2).connect)
        _ = full.release(1)
        _ = full.release(1)
        let oneBusy = full.acquire(3)
        #expect(oneBusy.lend == [Self.lend(3, 1)])
        #expect(oneBusy.connect == nil, "connection 2 is idle")
        let bothBusy = full.acquire(4)
        #expect(bothBusy.lend == [Self.lend(4, 2)])
        #expect(bothBusy.connect == nil, "already `connections` open")
        #expect(full.connections.count == 2)
    }

    @Test func aConnectionLentNothingForAWholeIdlePeriodIsClosedAndTheNextCallerOpensOneAgain() throws {
        var machine = Self.machine(connections: 2)
        // Two connections: one opened for caller 1, a second while it was busy (caller 2); caller 2 still holds a stream.
        Self.open(&machine, machine.acquire(1).connect)
        Self.open(&machine, machine.acquire(2).connect)
        _ = machine.acquire(3)
        _ = machine.release(1)
        _ = machine.release(1)
        #expect(machine.connections[1]?.inFlight == 0 && machine.connections[2]?.inFlight == 1)

        // The first look after they were lent closes nothing: each was lent since the one before.
        #expect(machine.sweepIdle() == .none)
        // Caller 4 is lent connection 1 (the least loaded) and gives it back; connection 2's stream is still out.
        #expect(machine.acquire(4).lend == [Self.lend(4, 1)])
        _ = machine.release(1)
        #expect(machine.sweepIdle() == .none, "connection 1 was lent since the last look; connection 2 has a stream out")
        _ = machine.release(2)
        // A whole period with nothing lent: both idle, both closed; not failed connects, though neither answered.
        let sweep = machine.sweepIdle()
        #expect(sweep.drain == [FakeLease(connectionID: 1), FakeLease(connectionID: 2)])
        let next = machine.acquire(5)
        #expect(next.lend.isEmpty, "a draining connection is not lent")
        #expect(next.connect?.delay == .zero, "the next caller opens a connection at once, with no back-off")
        _ = machine.closed(1)
        _ = machine.closed(2)
        #expect(machine.consecutiveFailures == 0, "closed by choice, not failed connects")
        #expect(machine.sweepIdle() == .none, "nothing ready to look at")
    }

    @Test func waitersAreServedInOrderAsStreamsFreeUp() {
        var machine = Self.machine(connections: 1)
        let first = machine.acquire(1)
        let second = machine.acquire(2)
        let third = machine.acquire(3)
        #expect(second.connect == nil && third.connect == nil, "one connect is on its way")
        let (_, settings) = Self.open(&machine, first.connect, maxStreams: 1)
        #expect(settings.lend == [Self.lend(1, 1)])
        #expect(machine.waiters.elementsEqual([2, 3]))

        let released1 = machine.release(1)
        #expect(released1.lend == [Self.lend(2, 1)])
        let released2 = machine.release(1)
        #expect(released2.lend == [Self.lend(3, 1)])
        let released3 = machine.release(1)
        #expect(released3 == .none)
        #expect(machine.connections[1]?.inFlight == 0)
    }

    @Test(arguments: [true, false])
    func waitersAreServedWhenTheConnectionBecomesReadyInEitherOrder(settingsFirst: Bool) throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.acquire(1).connect)
        _ = machine.acquire(2)
        _ = machine.startConnect(plan.connectionID)
        let lease = FakeLease(connectionID: plan.connectionID)

        let first: Machine.Action
        let second: Machine.Action
        if settingsFirst {
            first = machine.settingsReceived(plan.connectionID, maxStreams: 10)
            second = machine.connected(plan.connectionID, lease: lease)
        } else {
            first = machine.connected(plan.connectionID, lease: lease)
            second = machine.settingsReceived(plan.connectionID, maxStreams: 10)
        }
        #expect(first.lend.isEmpty, "not ready with only one of the two")
        #expect(machine.connections[1]?.state == .ready)
        #expect(second.lend == [Self.lend(1, 1), Self.lend(2, 1)])
        #expect(machine.waiters.isEmpty)
        #expect(machine.openConnections == 1)
    }

    @Test func maxConcurrentStreamsIsRespectedAndCanBeLowered() {
        var machine = Self.machine(connections: 1)
        let (_, settings) = Self.open(&machine, machine.acquire(1).connect, maxStreams: 2)
        #expect(settings.lend == [Self.lend(1, 1)])
        let second = machine.acquire(2)
        #expect(second.lend == [Self.lend(2, 1)])
        let third = machine.acquire(3)
        #expect(third.startDeadline == 3, "two streams in flight out of two")

        // The server lowers the limit below what is in flight: nothing new until it is under the limit again.
        let lowered = machine.settingsReceived(1, maxStreams: 1)
        #expect(lowered.lend.isEmpty)
        let stillAtLimit = machine.release(1)
        #expect(stillAtLimit.lend.isEmpty)
        let underLimit = machine.release(1)
        #expect(underLimit.lend == [Self.lend(3, 1)])

        // And raised again: waiters get the new streams at once.
        _ = machine.acquire(4)
        _ = machine.acquire(5)
        let raised = machine.settingsReceived(1, maxStreams: 3)
        #expect(raised.lend == [Self.lend(4, 1), Self.lend(5, 1)])
    }

    // MARK: Draining and retiring

    @Test func aDrainingConnectionIsNotLentAndIsReplacedOnlyWhenCallersWait() {
        var machine = Self.machine(connections: 1)
        Self.open(&machine, machine.acquire(1).connect)
        _ = machine.release(1)

        let goAwayWhileIdle = machine.draining(1)
        #expect(goAwayWhileIdle == .none, "GOAWAY with nobody waiting: no replacement yet")
        #expect(machine.connections[1]?.state == .draining)
        let waiting = machine.acquire(2)
        #expect(waiting.lend.isEmpty, "a draining connection lends nothing")
        #expect(waiting.connect?.connectionID == 2, "the caller that waits gets a new connection")
        let secondGoAway = machine.draining(1)
        #expect(secondGoAway == .none)

        var busy = Self.machine(connections: 1)
        Self.open(&busy, busy.acquire(1).connect, maxStreams: 1)
        _ = busy.acquire(2)
        let goAwayWhileWaited = busy.draining(1)
        #expect(goAwayWhileWaited.connect?.connectionID == 2, "GOAWAY while a caller waits: open a replacement")
        let released = busy.release(1)
        #expect(released.lend.isEmpty)
        let (_, settings) = Self.open(&busy, goAwayWhileWaited.connect)
        #expect(settings.lend == [Self.lend(2, 2)])
    }

    @Test func retireDrainsTheConnectionStopsLendingItAndReplacesItForWaiters() {
        var machine = Self.machine(connections: 1)
        Self.open(&machine, machine.acquire(1).connect, maxStreams: 1)
        _ = machine.acquire(2)

        let retire = machine.retire(1)
        #expect(retire.drain == [FakeLease(connectionID: 1)])
        #expect(retire.connect?.connectionID == 2, "a caller waits: replace it")
        #expect(machine.connections[1]?.state == .draining)
        let released = machine.release(1)
        #expect(released.lend.isEmpty)

        let again = machine.retire(1)
        #expect(again.drain == [FakeLease(connectionID: 1)])
        #expect(again.connect == nil)
        let closed = machine.closed(1)
        #expect(closed == .none, "the replacement is already on its way")
        let afterClose = machine.retire(1)
        #expect(afterClose == .none, "closed: nothing left to drain")
    }

    // MARK: Failures and back-off

    @Test func backoffGrowsWithConsecutiveFailuresAndResetsWhenAConnectionAnswers() throws {
        var machine = Self.machine(connections: 1)
        var plan = try #require(machine.acquire(1).connect)
        #expect(plan.afterFailures == 0)
        #expect(plan.delay == .zero)

        for failures in 1...4 {
            let action = Self.refuse(&machine, plan)
            let next = try #require(action.connect, "a waiting caller causes another connect")
            #expect(next.afterFailures == failures)
            // Full jitter between half the initial wait and initial × 2^(failures-1).
            let ceiling = Duration.milliseconds(200) * (1 << (failures - 1))
            #expect(next.delay >= .milliseconds(100) && next.delay <= ceiling)
            plan = next
        }
        #expect(machine.lastConnectError == "apns.test:443: connection refused")

        let (_, settings) = Self.open(&machine, plan)
        #expect(settings.lend == [Self.lend(1, 5)])
        #expect(machine.consecutiveFailures == 4, "ready is not yet working")
        machine.answered(5)
        #expect(machine.consecutiveFailures == 0)
        #expect(machine.lastConnectError == nil)

        _ = machine.release(5)
        _ = machine.draining(5)
        let next = machine.acquire(2).connect
        #expect(next?.afterFailures == 0, "after a connection worked, the next connect does not wait")
        #expect(next?.delay == .zero)
    }

    @Test func aCallerFailsAtOnceOnlyOnceNoConnectionHasWorkedForLongerThanASendMayWait() throws {
        var machine = Self.machine(failFastAfter: .seconds(30))
        let start = ContinuousClock.now
        let plan = try #require(machine.acquire(1, now: start).connect)
        let replacement = try #require(Self.refuse(&machine, plan).connect)
        // Found failing at second 1: it waits, as callers do through a short outage.
        #expect(machine.acquire(2, now: start + .seconds(1)).startDeadline == 2)
        #expect(machine.acquire(3, now: start + .seconds(31)).startDeadline == 3, "30 s since it was found failing, not more")
        // Past 30 s: fails at once, with the connect error; the callers already waiting keep waiting.
        let late = machine.acquire(4, now: start + .seconds(32))
        #expect(late.fail == [Machine.Failure(waiterID: 4, reason: .unreachable(lastConnectError: "apns.test:443: connection refused"))])
        #expect(late.startDeadline == nil)
        #expect(machine.waiters.elementsEqual([1, 2, 3]))

        // The replacement connect works: the waiting callers are served, and later callers are lent streams again.
        let (_, settings) = Self.open(&machine, replacement)
        #expect(settings.lend.map(\.waiterID) == [1, 2, 3])
        machine.answered(replacement.connectionID)
        #expect(machine.unreachableSince == nil)
        #expect(machine.acquire(5, now: start + .seconds(90)).lend.map(\.waiterID) == [5])
    }

    @Test func aFailedConnectWithNobodyWaitingPlansNoRetry() throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.acquire(1).connect)
        _ = machine.waiterCancelled(1)
        let failed = machine.connectFailed(plan.connectionID, description: "connection refused")
        #expect(failed == .none)
        #expect(machine.consecutiveFailures == 1)
        let nextCaller = machine.acquire(2)
        #expect(nextCaller.connect?.afterFailures == 1, "the next caller's connect still backs off")
    }

    @Test func aConnectionThatClosesBeforeReadyCountsAsAFailureAndItsSetupErrorIsInTheTimeout() throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.acquire(1).connect)
        _ = machine.startConnect(plan.connectionID)
        _ = machine.connected(plan.connectionID, lease: FakeLease(connectionID: plan.connectionID))
        #expect(machine.openConnections == 1)
        machine.setupFailed(plan.connectionID, description: "handshake failed: certificate unknown")

        let closed = machine.closed(plan.connectionID)
        #expect(machine.consecutiveFailures == 1)
        #expect(machine.openConnections == 0)
        #expect(closed.connect?.afterFailures == 1, "the caller still waits: try again, after a back-off")
        let timedOut = machine.waiterTimedOut(1)
        #expect(timedOut == Self.fail(1, .timedOut(lastConnectError: "apns.test:443: handshake failed: certificate unknown")))
    }

    @Test func aConnectionThatClosesBeforeReadyWithoutAnErrorSaysSoInTheTimeout() throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.acquire(1).connect)
        _ = machine.startConnect(plan.connectionID)
        _ = machine.connected(plan.connectionID, lease: FakeLease(connectionID: plan.connectionID))
        _ = machine.closed(plan.connectionID)
        let timedOut = machine.waiterTimedOut(1)
        #expect(timedOut == Self.fail(1, .timedOut(lastConnectError: "apns.test:443: the connection closed before TLS and HTTP/2 were set up")))
    }

    /// A server that answers nothing: SETTINGS, then GOAWAY with last stream 0 at the first request, or a close.
    enum Refusal: CaseIterable, Sendable {
        case goAway
        case close
    }

    @Test(arguments: Refusal.allCases)
    func aConnectionThatNeverAnswersIsAFailedConnectAndItsReplacementBacksOff(_ refusal: Refusal) throws {
        var machine = Self.machine(connections: 1)
        var plan = try #require(machine.acquire(1).connect)
        for failures in 1...4 {
            let (_, settings) = Self.open(&machine, plan)
            #expect(settings.lend == [Self.lend(failures, plan.connectionID)], "SETTINGS made it ready and the caller got a stream")
            // The request comes back unanswered, and its caller asks again.
            switch refusal {
            case .goAway: _ = machine.draining(plan.connectionID)
            case .close: _ = machine.closed(plan.connectionID)
            }
            _ = machine.release(plan.connectionID)
            let next = try #require(machine.acquire(failures + 1).connect, "the caller waits: a new connection")
            #expect(next.afterFailures == failures)
            let ceiling = Duration.milliseconds(200) * (1 << (failures - 1))
            #expect(next.delay >= .milliseconds(100) && next.delay <= ceiling, "the replacement waits out the back-off")
            if refusal == .goAway {
                _ = machine.closed(plan.connectionID)
                #expect(machine.consecutiveFailures == failures, "the close after the GOAWAY is the same failure")
            }
            plan = next
        }
        #expect(machine.lastConnectError == (refusal == .goAway
            ? "apns.test:443: the server sent GOAWAY before answering any request"
            : "apns.test:443: the connection closed before answering any request"))
    }

    @Test(arguments: Refusal.allCases)
    func aConnectionThatAnsweredIsReplacedAtOnceWhenItGoesAwayOrCloses(_ refusal: Refusal) throws {
        var machine = Self.machine(connections: 1)
        var plan = try #require(machine.acquire(1).connect)
        for _ in 1...3 {
            plan = try #require(Self.refuse(&machine, plan).connect)
        }
        Self.open(&machine, plan)
        machine.answered(plan.connectionID)
        machine.setupFailed(plan.connectionID, description: "late error")
        _ = machine.release(plan.connectionID)
        #expect(machine.consecutiveFailures == 0)

        // APNs' graceful shutdown after many answered streams, or a dropped connection: no back-off.
        _ = machine.acquire(2)  // lent at once
        switch refusal {
        case .goAway: _ = machine.draining(plan.connectionID)
        case .close: _ = machine.closed(plan.connectionID)
        }
        _ = machine.release(plan.connectionID)
        let next = try #require(machine.acquire(3).connect)
        #expect(next.afterFailures == 0)
        #expect(next.delay == .zero)
        _ = machine.closed(plan.connectionID)
        #expect(machine.consecutiveFailures == 0)
        #expect(machine.lastConnectError == nil)
    }

    @Test func aConnectionThatAnsweredAndClosesWhileNobodyWaitsIsNoFailureAndNotReplaced() {
        var machine = Self.machine(connections: 1)
        Self.open(&machine, machine.acquire(1).connect)
        machine.answered(1)
        _ = machine.release(1)
        let closed = machine.closed(1)
        #expect(closed == .none, "nobody waits: no replacement")
        #expect(machine.consecutiveFailures == 0)
        #expect(machine.lastConnectError == nil)
    }

    @Test func theSetupTimeoutClosesOnlyAConnectionThatIsNotReady() throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.acquire(1).connect)
        _ = machine.startConnect(plan.connectionID)
        _ = machine.connected(plan.connectionID, lease: FakeLease(connectionID: plan.connectionID))
        let stuck = machine.setupTimedOut(plan.connectionID)
        #expect(stuck.close == [FakeLease(connectionID: plan.connectionID)])

        var ready = Self.machine(connections: 1)
        Self.open(&ready, ready.acquire(1).connect)
        let inTime = ready.setupTimedOut(1)
        #expect(inTime == .none)
    }

    // MARK: Waiters

    @Test func cancelAndTimeoutOfAWaiterThatWasAlreadyServedDoNothing() {
        var machine = Self.machine(connections: 1)
        let (_, settings) = Self.open(&machine, machine.acquire(1).connect)
        #expect(settings.lend == [Self.lend(1, 1)])
        let timedOut = machine.waiterTimedOut(1)
        let cancelled = machine.waiterCancelled(1)
        #expect(timedOut == .none)
        #expect(cancelled == .none)
        #expect(machine.connections[1]?.inFlight == 1, "the served caller keeps its stream")
    }

    @Test func aCancelledWaiterLeavesTheQueueOnceAndTheNextIsServed() {
        var machine = Self.machine(connections: 1)
        let plan = machine.acquire(1).connect
        _ = machine.acquire(2)
        let cancelled = machine.waiterCancelled(1)
        let cancelledAgain = machine.waiterCancelled(1)
        #expect(cancelled == Self.fail(1, .cancelled))
        #expect(cancelledAgain == .none)
        let (_, settings) = Self.open(&machine, plan)
        #expect(settings.lend == [Self.lend(2, 1)])
    }

    @Test func aWaiterThatTimesOutWithoutConnectErrorsGetsNoReason() {
        var machine = Self.machine(connections: 1)
        _ = machine.acquire(7)
        let timedOut = machine.waiterTimedOut(7)
        #expect(timedOut == Self.fail(7, .timedOut(lastConnectError: nil)))
        #expect(machine.waiters.isEmpty)
    }

    // MARK: Waiting for a connection, without a stream

    @Test func aCallerWaitingForAConnectionIsToldWhenOneIsReadyAndTakesNoStream() throws {
        var machine = Self.machine(connections: 2)
        let first = machine.awaitConnection(1)
        #expect(first.connected.isEmpty)
        #expect(first.startDeadline == 1)
        let plan = try #require(first.connect)
        #expect(machine.connectionWaiters == [1])
        let stream = machine.acquire(2)
        #expect(stream.connect == nil, "one connect at a time")
        let (connected, settings) = Self.open(&machine, plan)
        #expect(connected.connected.isEmpty, "not ready before the server's SETTINGS")
        #expect(settings.connected == [1])
        #expect(settings.lend == [Self.lend(2, plan.connectionID)])
        #expect(machine.connections[plan.connectionID]?.inFlight == 1, "only the caller that asked for a stream took one")
        // Asked again with a connection ready: told at once; nothing waits, nothing is planned.
        let again = machine.awaitConnection(3)
        #expect(again == Machine.Action(connected: [3]))
        #expect(machine.connectionWaiters.isEmpty)
    }

    @Test func aCallerWaitingForAConnectionKeepsConnectsGoingAndEndsAtItsDeadlineOrShutdownOrWhenCancelled() throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.awaitConnection(1).connect)
        let failed = Self.refuse(&machine, plan)
        #expect(failed.connect?.afterFailures == 1, "someone waits for a connection: the connect is tried again, backing off")
        _ = machine.awaitConnection(2)
        _ = machine.awaitConnection(3)
        let cancelled = machine.waiterCancelled(2)
        let timedOut = machine.waiterTimedOut(1)
        #expect(cancelled == Self.fail(2, .cancelled))
        #expect(timedOut == Self.fail(1, .timedOut(lastConnectError: "apns.test:443: connection refused")))
        let shutdown = machine.shutdown()
        #expect(shutdown.fail == [Machine.Failure(waiterID: 3, reason: .shutDown)])
        #expect(machine.connectionWaiters.isEmpty)
        let afterShutdown = machine.awaitConnection(4)
        #expect(afterShutdown == Self.fail(4, .shutDown))
    }

    @Test func onceACallerWaitedItsWholeDeadlineWhileConnectsFailedOthersFailAtOnceUntilAConnectionWorks() throws {
        var machine = Self.machine(failFastAfter: .seconds(30))
        let start = ContinuousClock.now
        let plan = try #require(machine.awaitConnection(1, now: start).connect)
        let retry = try #require(Self.refuse(&machine, plan).connect)
        // Found failing only now: by the clock alone, a caller would wait 30 s more.
        #expect(machine.acquire(2, now: start + .seconds(5)).startDeadline == 2)
        // The first caller's deadline (a whole send time) passes with no connection ready.
        _ = machine.waiterTimedOut(1)
        #expect(machine.waitedInVain)
        let unreachable = Machine.WaiterFailure.unreachable(lastConnectError: "apns.test:443: connection refused")
        let waiting = machine.awaitConnection(3, now: start + .seconds(6))
        let sending = machine.acquire(4, now: start + .seconds(6))
        #expect(waiting.fail == [Machine.Failure(waiterID: 3, reason: unreachable)])
        #expect(sending.fail == [Machine.Failure(waiterID: 4, reason: unreachable)])
        // The retry connects: the caller still waiting is served, and with a connection ready nobody fails fast.
        let (_, settings) = Self.open(&machine, retry)
        #expect(settings.lend.map(\.waiterID) == [2])
        let ready = machine.awaitConnection(5, now: start + .seconds(7))
        #expect(ready.connected == [5])
        machine.answered(retry.connectionID)
        #expect(!machine.waitedInVain)
    }

    @Test func aCallerThatTimesOutWaitingForABusyReadyConnectionMakesNobodyFailFast() throws {
        var machine = Self.machine(connections: 1, failFastAfter: .seconds(30))
        let start = ContinuousClock.now
        let plan = try #require(machine.acquire(1, now: start).connect)
        let retry = try #require(Self.refuse(&machine, plan).connect)
        let (_, settings) = Self.open(&machine, retry, maxStreams: 1)
        #expect(settings.lend.map(\.waiterID) == [1])
        // The only stream is busy: the next caller waits, and times out, while a connection is ready.
        #expect(machine.acquire(2, now: start + .seconds(1)).startDeadline == 2)
        _ = machine.waiterTimedOut(2)
        #expect(!machine.waitedInVain)
        #expect(machine.acquire(3, now: start + .seconds(2)).startDeadline == 3)
    }

    // MARK: Shutdown

    @Test func shutdownFailsWaitersDrainsConnectionsAndRefusesNewAcquires() {
        var machine = Self.machine(connections: 2)
        Self.open(&machine, machine.acquire(1).connect, maxStreams: 1)
        _ = machine.acquire(2)  // plans connection 2, which is still connecting at shutdown
        _ = machine.acquire(3)

        let shutdown = machine.shutdown()
        #expect(shutdown.fail == [.init(waiterID: 2, reason: .shutDown), .init(waiterID: 3, reason: .shutDown)])
        #expect(shutdown.drain == [FakeLease(connectionID: 1)], "only connected connections have a channel to drain")
        let refused = machine.acquire(4)
        #expect(refused == Self.fail(4, .shutDown))
        let released = machine.release(1)
        #expect(released == .none, "streams still come back; nobody waits for them")
        let closed = machine.closed(1)
        #expect(closed == .none)
        #expect(machine.openConnections == 0)
    }

    @Test func aConnectPlannedBeforeShutdownDoesNothingAfterIt() throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.acquire(1).connect)
        _ = machine.shutdown()
        let started = machine.startConnect(plan.connectionID)
        #expect(!started)
        #expect(machine.connections.isEmpty)
        #expect(!machine.connectScheduled)
    }

    @Test func aConnectThatCompletesAfterShutdownIsClosed() throws {
        var machine = Self.machine(connections: 1)
        let plan = try #require(machine.acquire(1).connect)
        _ = machine.startConnect(plan.connectionID)
        _ = machine.shutdown()
        let lease = FakeLease(connectionID: plan.connectionID)
        let connected = machine.connected(plan.connectionID, lease: lease)
        #expect(connected == Machine.Action(close: [lease]))
        #expect(machine.connections.isEmpty)
        let settings = machine.settingsReceived(plan.connectionID, maxStreams: 10)
        #expect(settings == .none)
    }
}
