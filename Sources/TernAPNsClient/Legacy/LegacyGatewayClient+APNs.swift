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
    public func sendAll(
        _ notifications: AsyncStream<APNsNotification>, onResult: @escaping @Sendable (APNsBatchResult) async -> Void
    ) async {
        let bursts = Bursts()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await notification in notifications { bursts.add(notification) }
                bursts.finish()
            }
            while let burst = await bursts.next() {
                group.addTask {
                    // One clock reading per burst for the default 30-day expiration, not one per notification.
                    let now = Date()
                    let outcomes = await self.send(burst.map { LegacyNotification($0, now: now) })
                    for (notification, outcome) in zip(burst, outcomes) {
                        await onResult(APNsBatchResult(notification: notification, result: Self.result(outcome, for: notification)))
                    }
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

/// Notifications read from a stream, handed out in bursts: whatever arrived since the last burst was taken.
private final class Bursts: Sendable {
    private struct State {
        var items: [APNsNotification] = []
        var finished = false
        var waiter: CheckedContinuation<[APNsNotification]?, Never>?
    }

    private let state = Mutex(State())

    func add(_ notification: APNsNotification) {
        let waiter = state.withLock { state -> CheckedContinuation<[APNsNotification]?, Never>? in
            guard let waiter = state.waiter else {
                state.items.append(notification)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: [notification])
    }

    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[APNsNotification]?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next burst, or nil once the stream ended and everything was handed out.
    func next() async -> [APNsNotification]? {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> [APNsNotification]?? in
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
