import Foundation

/// The token-hygiene rule a device registry applies to APNs' answers and to the legacy feedback service.
///
/// A token APNs calls dead at time T (410 `Unregistered` or `ExpiredToken` with its timestamp, or a feedback tuple)
/// may have been registered again since: the app was reinstalled and got the same token back, or the report was
/// delayed. Apple's rule (spec §1.4 and §5): deactivate it only if it was last registered before T. A token APNs
/// rejects outright (`BadDeviceToken`, `DeviceTokenNotForTopic`) is wrong for this app and environment whatever its
/// history, and goes at once.
public enum TokenPruning {
    /// What to do with a token after an answer.
    public enum Verdict: Equatable, Sendable {
        /// Keep sending to it.
        case keep
        /// Stop sending to it until it is registered again.
        case deactivate(reason: APNsReason)
    }

    /// The verdict for `response`, about a token last registered at `lastRegisteredAt`.
    /// - Parameters:
    ///   - answeredAt: when the answer arrived: the time a 410 without a timestamp stands for.
    ///   - pushType: what was sent. A type with tokens of its own (``APNsPushType/tokenSource``: VoIP, Live
    ///     Activities…) prunes nothing: APNs' answer is about a token of that kind, or refuses a device token for
    ///     that topic alone, and a registry of device tokens must not lose a device for either…
    ///   - registeredForType: …unless the token is one the registry keeps for that type (a device's VoIP token),
    ///     which the rule applies to as to a device token.
    public static func verdict(
        for response: APNsResponse, lastRegisteredAt: Date, answeredAt: Date, pushType: APNsPushType = .alert,
        registeredForType: Bool = false
    ) -> Verdict {
        guard response.outcomeClass == .tokenInvalid, pushType.tokenSource == nil || registeredForType else { return .keep }
        switch response.reason {
        case .badDeviceToken?, .deviceTokenNotForTopic?:
            return .deactivate(reason: response.reason!)
        default:
            let invalidSince = invalidSince(reported: response.timestamp, observedAt: answeredAt)
            guard isStale(lastRegisteredAt: lastRegisteredAt, invalidSince: invalidSince) else { return .keep }
            return .deactivate(reason: response.reason ?? .unregistered)
        }
    }

    /// When a token reported dead at `reported` (a 410 timestamp, a feedback tuple's time; nil: none given) counts as
    /// dead from: that moment, but never later than ``clockLeeway`` after `observedAt`, when the report came. A
    /// report dated far in the future (a broken or hostile endpoint: the year 9999, or 2106 in a feedback tuple)
    /// would otherwise make every later registration of the token look older than its death, and prune a token
    /// registered again after the report. The leeway keeps a timestamp from a clock a little ahead of this one.
    public static func invalidSince(reported: Date?, observedAt: Date) -> Date {
        min(reported ?? observedAt, observedAt.addingTimeInterval(clockLeeway))
    }

    /// How far after the moment a report came its timestamp is believed: five minutes.
    public static let clockLeeway: TimeInterval = 300

    /// Whether a token reported dead since `invalidSince` (a 410 timestamp, a feedback tuple's time) should go: only
    /// when it was not registered again at or after that moment.
    public static func isStale(lastRegisteredAt: Date, invalidSince: Date) -> Bool {
        lastRegisteredAt < invalidSince
    }
}
