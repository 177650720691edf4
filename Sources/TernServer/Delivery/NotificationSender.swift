import TernAPNs
import TernAPNsClient

/// What delivers an app's notifications: the HTTP/2 provider API or the legacy binary gateway. Either answers
/// every notification once, in HTTP/2 terms, so the dispatcher classifies and prunes the same way.
protocol NotificationSender: Sendable {
    /// Sends what `notifications` yields, calling `onResult` once for each. `concurrency` bounds HTTP/2 streams in
    /// flight; the legacy gateway, which has no per-notification answer, is bounded by its replay buffer instead.
    func sendAll(
        _ notifications: AsyncStream<APNsNotification>, concurrency: Int,
        onResult: @escaping @Sendable (APNsBatchResult) async -> Void
    ) async throws
    func shutdown() async
}

struct HTTP2Sender: NotificationSender {
    let client: APNsClient

    func sendAll(
        _ notifications: AsyncStream<APNsNotification>, concurrency: Int,
        onResult: @escaping @Sendable (APNsBatchResult) async -> Void
    ) async throws {
        try await client.sendAll(notifications, concurrency: concurrency, onResult: onResult)
    }

    func shutdown() async { await client.shutdown() }
}

struct LegacySender: NotificationSender {
    let client: LegacyGatewayClient

    func sendAll(
        _ notifications: AsyncStream<APNsNotification>, concurrency: Int,
        onResult: @escaping @Sendable (APNsBatchResult) async -> Void
    ) async throws {
        await client.sendAll(notifications, onResult: onResult)
    }

    func shutdown() async { await client.shutdown() }
}
