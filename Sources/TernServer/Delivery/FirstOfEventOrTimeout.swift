/// Waits for `event` until `timeout` has passed on `clock`, whichever comes first; the other is cancelled. A
/// cancelled caller returns at once, with whichever of the two returns first (both are told of the cancellation).
///
/// The one way this module races a wait against a clock: ``Doorbell/wait(upTo:on:)`` and
/// ``PushCompletions/wait(for:upTo:on:)`` wait for their events through it, and tests move `clock` by hand.
/// - Returns: what `event` returned, or `timedOut` if the time ran out first.
func firstOf<Value: Sendable>(
    _ event: @escaping @Sendable () async -> Value, orTimeout timeout: Duration, on clock: any Clock<Duration>, timedOut: Value
) async -> Value {
    await withTaskGroup(of: Value.self) { group in
        group.addTask {
            try? await clock.sleep(for: timeout)
            return timedOut
        }
        group.addTask(operation: event)
        let first = await group.next() ?? timedOut
        group.cancelAll()
        return first
    }
}
