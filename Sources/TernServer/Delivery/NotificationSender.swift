import TernAPNs
import TernAPNsClient

/// What delivers an app's notifications: the HTTP/2 provider API or the legacy binary gateway. Either answers
/// every notification once, in HTTP/2 terms, so the dispatcher classifies and prunes the same way.
protocol NotificationSender: Sendable {
    /// Sends what `notifications` yields, handing each result to `onResults` once, in bunches as they come (each
    /// with its place in the feed). `concurrency` bounds HTTP/2 streams in flight; the legacy gateway, which has no
    /// per-notification answer, is bounded by its replay buffer instead.
    func sendAll(
        _ notifications: NotificationFeed, concurrency: Int,
        onResults: @escaping @Sendable ([APNsBatchResult]) async -> Void
    ) async throws
    /// Returns once the endpoint has a connection ready, or once it is known not to get one in time: then
    /// ``sendAll(_:concurrency:onResults:)`` answers each notification with a classified failure, at once when the
    /// endpoint has been unreachable for a whole send time. Before then, nothing is committed to the endpoint: a chunk
    /// asks this before its notifications take any of the node's permits, which every app shares. `onWaiting` is
    /// called before it waits, only when no connection is ready yet.
    func waitForConnection(onWaiting: () -> Void) async
    /// The endpoint's window (``EndpointGate``), which every batch to it goes through before it takes the node's
    /// permits; nil when the sender bounds itself.
    var gate: EndpointGate? { get }
    func shutdown() async
}

struct HTTP2Sender: NotificationSender {
    let client: APNsClient
    let gate: EndpointGate?

    func sendAll(
        _ notifications: NotificationFeed, concurrency: Int,
        onResults: @escaping @Sendable ([APNsBatchResult]) async -> Void
    ) async throws {
        try await client.sendAllBunched(notifications, concurrency: concurrency, onResults: onResults)
    }

    func waitForConnection(onWaiting: () -> Void) async {
        // Whatever the answer: the sends that follow fail with the same error, each classified for its recipient.
        try? await client.waitForConnection(onWaiting: onWaiting)
    }

    func shutdown() async { await client.shutdown() }
}

struct LegacySender: NotificationSender {
    let client: LegacyGatewayClient

    func sendAll(
        _ notifications: NotificationFeed, concurrency: Int,
        onResults: @escaping @Sendable ([APNsBatchResult]) async -> Void
    ) async throws {
        await client.sendAllBunched(notifications, onResults: onResults)
    }

    func waitForConnection(onWaiting: () -> Void) async {
        // Whatever the answer: while the gateway counts as unreachable, the sends that follow fail at once.
        try? await client.waitForConnection(onWaiting: onWaiting)
    }

    /// None: the gateway answers only errors, so silence is its usual answer; its replay buffer bounds what it has
    /// out.
    var gate: EndpointGate? { nil }

    func shutdown() async { await client.shutdown() }
}
