import Foundation
import Synchronization
import TernAPNs

extension LegacyGatewayClient {
    /// Sends HTTP/2-style notifications over the legacy gateway, answering each as ``APNsClient`` would: 200 when
    /// accepted, the closest HTTP/2 rejection for a status (8 and 5 are `BadDeviceToken`, so a device registry
    /// treats them alike), or an ``APNsClientError`` when it could not be sent.
    ///
    /// It reads `notifications` as they come and hands each burst to the gateway at once: the binary protocol has
    /// no per-request answer, so what bounds the work in flight is the replay buffer, not a stream limit.
    /// `onResult` may run for several bursts at a time.
    public func sendAll<Notifications: AsyncSequence & Sendable>(
        _ notifications: Notifications, onResult: @escaping @Sendable (APNsBatchResult) async -> Void
    ) async where Notifications.Element == APNsNotification {
        await sendAllBunched(notifications) { results in
            for result in results { await onResult(result) }
        }
    }

    /// ``sendAll(_:onResult:)`` with each burst's results handed over together.
    public func sendAllBunched<Notifications: AsyncSequence & Sendable>(
        _ notifications: Notifications, onResults: @escaping @Sendable ([APNsBatchResult]) async -> Void
    ) async where Notifications.Element == APNsNotification {
        let bursts = Bursts()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var index = 0
                do {
                    for try await notification in notifications {
                        bursts.add((index, notification))
                        index += 1
                    }
                } catch {
                    // A sequence that fails ends the input as one that finishes does: what was read is sent and answered.
                }
                bursts.finish()
            }
            while let burst = await bursts.next() {
                group.addTask {
                    // One clock reading per burst for the default 30-day expiration, not one per notification.
                    let now = Date()
                    let outcomes = await self.send(burst.map { LegacyNotification($0.notification, now: now) })
                    await onResults(zip(burst, outcomes).map { item, outcome in
                        APNsBatchResult(notification: item.notification, result: Self.result(outcome, for: item.notification), index: item.index)
                    })
                }
            }
        }
    }

    static func result(_ outcome: LegacyOutcome, for notification: APNsNotification) -> Result<APNsDelivery, APNsClientError> {
        let response: APNsResponse
        switch outcome {
        case .accepted:
            response = APNsResponse(status: 200, apnsID: notification.metadata.apnsID)
        case .rejected(let status):
            response = Self.response(for: status, apnsID: notification.metadata.apnsID)
        case .shutDown:
            // As ``APNsClient`` answers what it is handed once it is shutting down.
            return .failure(APNsClientError.shutDown)
        case .failed(let message):
            return .failure(APNsClientError.connectionFailed(message))
        }
        return .success(APNsDelivery(deviceToken: notification.deviceToken, apnsID: notification.metadata.apnsID, response: response, attempts: 1))
    }

    /// The HTTP/2 answer closest to a legacy status.
    public static func response(for status: LegacyStatus, apnsID: UUID? = nil) -> APNsResponse {
        let (code, reason): (Int, APNsReason) =
            switch status {
            case .invalidToken, .invalidTokenSize: (400, .badDeviceToken)
            case .missingDeviceToken: (400, .missingDeviceToken)
            case .missingTopic: (400, .missingTopic)
            case .invalidTopicSize: (400, .badTopic)
            case .missingPayload: (400, .payloadEmpty)
            case .invalidPayloadSize: (413, .payloadTooLarge)
            case .shutdown: (503, .shutdown)
            default: (500, .internalServerError)
            }
        return APNsResponse(status: code, apnsID: apnsID, reason: reason)
    }
}

/// Notifications read from a stream, with their places in it, handed out in bursts: whatever arrived since the last
/// burst was taken.
private final class Bursts: Sendable {
    typealias Item = (index: Int, notification: APNsNotification)

    private struct State {
        var items: [Item] = []
        var finished = false
        var waiter: CheckedContinuation<[Item]?, Never>?
    }

    private let state = Mutex(State())

    func add(_ item: Item) {
        let waiter = state.withLock { state -> CheckedContinuation<[Item]?, Never>? in
            guard let waiter = state.waiter else {
                state.items.append(item)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: [item])
    }

    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[Item]?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next burst, or nil once the stream ended and everything was handed out.
    func next() async -> [Item]? {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> [Item]?? in
                if !state.items.isEmpty {
                    defer { state.items = [] }
                    return .some(state.items)
                }
                if state.finished { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if let now { continuation.resume(returning: now) }
        }
    }
}
