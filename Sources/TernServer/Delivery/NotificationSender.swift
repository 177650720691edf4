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
    func shutdown() async
}

struct HTTP2Sender: NotificationSender {
    let client: APNsClient

    func sendAll(
        _ notifications: NotificationFeed, concurrency: Int,
        onResults: @escaping @Sendable ([APNsBatchResult]) async -> Void
    ) async throws {
        try await client.sendAllBunched(notifications, concurrency: concurrency, onResults: onResults)
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

    func shutdown() async { await client.shutdown() }
}
