/// The short pieces of work of this node's device connections (checking an upgrade's credentials, opening a
/// connection, sending a device what is new), each run as a child task of the channel's service for as long as it
/// takes, then gone.
///
/// Connections live on NIO handlers, not in tasks (``DeviceSocketHandler``); what they need done asynchronously is
/// handed here, so it stays structured under the service that owns the channel and ends with it. The queue holds at
/// most a few entries per connection (a connection asks for one sender at a time), so it is bounded by the
/// connections.
final class ChannelTasks: Sendable {
    typealias Work = @Sendable () async -> Void

    private let queue: AsyncStream<Work>
    private let input: AsyncStream<Work>.Continuation

    init() {
        (queue, input) = AsyncStream.makeStream(of: Work.self)
    }

    /// Runs `work` soon. - Returns: false if the node's channel has stopped (nothing will run it).
    @discardableResult
    func run(_ work: @escaping Work) -> Bool {
        if case .terminated = input.yield(work) { return false }
        return true
    }

    /// Runs the submitted work until cancelled; what runs then is cancelled and awaited. Work submitted later is
    /// refused.
    func serve() async {
        await withDiscardingTaskGroup { group in
            for await work in queue {
                group.addTask(operation: work)
            }
            group.cancelAll()
        }
    }

    /// Refuses further work and ends ``serve()`` once the queue is empty.
    func finish() {
        input.finish()
    }
}
