import Testing

@testable import TernAPNs

/// The signal the server's banner and a database pool's first calls wait on.
struct OneTimeSignalTests {
    @Test func everyWaiterIsLetGoWhenItFiresAndLaterWaitsReturnAtOnce() async {
        let signal = OneTimeSignal()
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 { group.addTask { await signal.wait(); return signal.hasFired } }
            signal.fire()
            for await sawItFired in group { #expect(sawItFired) }
        }
        await signal.wait()
        #expect(signal.hasFired)
    }

    @Test func aCancelledWaitEndsAloneAndTheOthersWaitOnForTheSignal() async {
        let signal = OneTimeSignal()
        // Already cancelled when it waits, and cancelled while waiting: both return without the signal.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await signal.wait()
            return signal.hasFired
        }
        #expect(await early.value == false)
        let other = Task { await signal.wait(); return signal.hasFired }
        let cancelled = Task { await signal.wait(); return signal.hasFired }
        while signal.waiters < 2 { await Task.yield() }
        cancelled.cancel()
        #expect(await cancelled.value == false)
        // Had the cancellation let every waiter go, the other would have returned without the signal.
        signal.fire()
        #expect(await other.value == true)
    }
}
