import Foundation
import TernAPNs
import TernAPNsClient
import TernStore

/// What one notification's ending means for its recipient and the push, decided from values alone: the dispatcher
/// records the failure and, for a dead token, deactivates it (``TokenPruning`` has already said it may).
enum AnswerVerdict: Equatable, Sendable {
    case accepted
    case failed(PushFailure)
    /// Failed because the token is dead: deactivate it for `reason` (what APNs said, as the failure does).
    /// `invalidSince` is when it died (nil for a token that was never valid: `BadDeviceToken`,
    /// `DeviceTokenNotForTopic`), `apnsTimestamp` APNs' own time if it gave one.
    case deadToken(PushFailure, reason: TokenDeactivationReason, invalidSince: Date?, apnsTimestamp: Date?)
    /// No verdict: this node stopped sending before the notification went or was answered (a stop, its client shut
    /// down). The recipient stays unrecorded, so whichever node takes the chunk up again sends it.
    case unsettled

    /// How a notification ended, as far as the verdict cares.
    enum Ending: Sendable {
        /// APNs answered (accepted or not).
        case answered(APNsResponse)
        /// The client gave up with an error: its code (`timedOut`, `connectionFailed`, …) and its message, which
        /// becomes the failure's detail.
        case clientError(APNsClientError.Code, message: String)
        /// A newer badge-only update for the token replaced it: nothing to deliver, nothing failed.
        case superseded
        /// It never went (the batch stopped first: cancelled, or its client stopped taking work).
        case notSent
        /// It never went: its endpoint's window refused it (``EndpointWindow/Refusal``).
        case refused(EndpointWindow.Refusal)
    }

    /// The detail of a notification that did not go because APNs refuses the app's credentials.
    static func credentialsRefusedDetail(_ reason: APNsReason) -> String {
        "not sent: APNs refused the app's credentials (\(reason)) for an earlier notification, and would refuse this one too; one notification a minute is tried until APNs takes them or the app's credentials or topic change"
    }

    /// - Parameters:
    ///   - pushType: what was sent: a type with tokens of its own deactivates none (``TokenPruning``)…
    ///   - registeredForType: …unless the recipients' tokens are the devices' tokens of that type (``PushRecord/tokenKind``).
    static func of(
        _ ending: Ending, recipient: Recipient, pushType: APNsPushType = .alert, registeredForType: Bool = false, at now: Date
    ) -> AnswerVerdict {
        func failure(status: Int?, reason: DeliveryFailureReason, detail: String? = nil) -> PushFailure {
            PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: status, reason: reason, at: now, detail: detail)
        }
        switch ending {
        case .superseded:
            return .accepted
        case .notSent:
            return .unsettled
        case .refused(.silent):
            return .failed(failure(status: nil, reason: .notAnswering))
        case .refused(.credentials(let reason)):
            // APNs' reason, with no status: APNs did not answer this one.
            return .failed(failure(status: nil, reason: .apns(reason), detail: credentialsRefusedDetail(reason)))
        case .clientError(let code, _) where code == .cancelled || code == .shutDown:
            // Cut off by this node's stop, not judged by APNs or by the client's own limits.
            return .unsettled
        case .clientError(let code, let message):
            return .failed(failure(status: nil, reason: .clientError(code.rawValue), detail: message))
        case .answered(let response) where response.isSuccess:
            return .accepted
        case .answered(let response):
            // APNs' reason, or its bare status when it gave none.
            let failed = failure(status: response.status, reason: response.reason.map(DeliveryFailureReason.apns) ?? .apnsStatus(response.status))
            guard case .deactivate = TokenPruning.verdict(
                for: response, lastRegisteredAt: recipient.lastRegisteredAt ?? .distantPast, answeredAt: now, pushType: pushType,
                registeredForType: registeredForType)
            else { return .failed(failed) }
            let reason = response.reason.map(TokenDeactivationReason.apns) ?? .apnsStatus(response.status)
            let neverValid = response.reason == .badDeviceToken || response.reason == .deviceTokenNotForTopic
            return .deadToken(
                failed, reason: reason,
                invalidSince: neverValid ? nil : TokenPruning.invalidSince(reported: response.timestamp, observedAt: now),
                apnsTimestamp: response.timestamp)
        }
    }
}
