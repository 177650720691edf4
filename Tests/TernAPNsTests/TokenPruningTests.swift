import Foundation
import TernAPNs
import Testing

@Suite struct TokenPruningTests {
    static let registered = Date(timeIntervalSince1970: 1_800_000_000)
    /// When the answers below arrive: after every moment they name.
    static let answered = registered.addingTimeInterval(3600)

    static func gone(_ reason: APNsReason, at timestamp: Date?) -> APNsResponse {
        APNsResponse(status: 410, reason: reason, timestamp: timestamp)
    }

    @Test(arguments: [APNsReason.unregistered, .expiredToken])
    func aTokenNotRegisteredAgainAfterTheTimestampIsDeactivated(_ reason: APNsReason) {
        let response = Self.gone(reason, at: Self.registered.addingTimeInterval(60))
        #expect(TokenPruning.verdict(for: response, lastRegisteredAt: Self.registered, answeredAt: Self.answered) == .deactivate(reason: reason))
    }

    @Test(arguments: [APNsReason.unregistered, .expiredToken])
    func aTokenRegisteredAgainAfterTheTimestampIsKept(_ reason: APNsReason) {
        let response = Self.gone(reason, at: Self.registered.addingTimeInterval(-60))
        #expect(TokenPruning.verdict(for: response, lastRegisteredAt: Self.registered, answeredAt: Self.answered) == .keep)
        // Registered at the very moment APNs names: registered again, kept.
        let same = Self.gone(reason, at: Self.registered)
        #expect(TokenPruning.verdict(for: same, lastRegisteredAt: Self.registered, answeredAt: Self.answered) == .keep)
    }

    /// A report dated long after it came (a broken or hostile endpoint's year 9999; a feedback tuple's 2106) made
    /// every later registration look older than the token's death: a token registered again after the report was
    /// pruned. Such a timestamp counts as five minutes after the report; one within that is believed.
    @Test func aTimestampFarAfterTheAnswerCountsFromTheAnswerAndItsLeeway() {
        let answered = Self.registered.addingTimeInterval(10)
        let latest = answered.addingTimeInterval(TokenPruning.clockLeeway)
        for future in [latest.addingTimeInterval(1), Date(timeIntervalSince1970: 253_402_300_799.999), Date(timeIntervalSince1970: 4_294_967_295)] {
            #expect(TokenPruning.invalidSince(reported: future, observedAt: answered) == latest)
            // Registered before the answer: it goes. Registered again after the answer's leeway: it stays.
            #expect(TokenPruning.verdict(for: Self.gone(.unregistered, at: future), lastRegisteredAt: Self.registered, answeredAt: answered)
                == .deactivate(reason: .unregistered))
            #expect(TokenPruning.verdict(
                for: Self.gone(.unregistered, at: future), lastRegisteredAt: latest.addingTimeInterval(1), answeredAt: answered) == .keep)
        }
        // A clock a minute ahead of this one is believed; a past timestamp, and none, as before.
        let ahead = answered.addingTimeInterval(60)
        #expect(TokenPruning.invalidSince(reported: ahead, observedAt: answered) == ahead)
        #expect(TokenPruning.invalidSince(reported: Self.registered, observedAt: answered) == Self.registered)
        #expect(TokenPruning.invalidSince(reported: nil, observedAt: answered) == answered)
    }

    @Test func aGoneAnswerWithoutTimestampCountsFromWhenItArrived() {
        let response = Self.gone(.unregistered, at: nil)
        let before = Self.registered.addingTimeInterval(-1)
        let after = Self.registered.addingTimeInterval(1)
        #expect(TokenPruning.verdict(for: response, lastRegisteredAt: Self.registered, answeredAt: after) == .deactivate(reason: .unregistered))
        #expect(TokenPruning.verdict(for: response, lastRegisteredAt: Self.registered, answeredAt: before) == .keep)
    }

    @Test(arguments: [APNsReason.badDeviceToken, .deviceTokenNotForTopic])
    func aTokenWrongForTheAppGoesAtOnceWhateverItsHistory(_ reason: APNsReason) {
        let response = APNsResponse(status: 400, reason: reason)
        let future = Date.distantFuture
        #expect(TokenPruning.verdict(for: response, lastRegisteredAt: future, answeredAt: Self.registered) == .deactivate(reason: reason))
    }

    @Test(arguments: [
        APNsResponse(status: 200),
        APNsResponse(status: 400, reason: .badTopic),
        APNsResponse(status: 403, reason: .invalidProviderToken),
        APNsResponse(status: 429, reason: .tooManyRequests),
        APNsResponse(status: 503, reason: .serviceUnavailable),
        APNsResponse(status: 413, reason: .payloadTooLarge),
    ])
    func everyOtherAnswerKeepsTheToken(_ response: APNsResponse) {
        #expect(TokenPruning.verdict(for: response, lastRegisteredAt: Self.registered, answeredAt: Self.answered) == .keep)
    }

    @Test func theFeedbackRuleIsTheSameComparison() {
        #expect(TokenPruning.isStale(lastRegisteredAt: Self.registered, invalidSince: Self.registered.addingTimeInterval(1)))
        #expect(!TokenPruning.isStale(lastRegisteredAt: Self.registered, invalidSince: Self.registered))
        #expect(!TokenPruning.isStale(lastRegisteredAt: Self.registered, invalidSince: Self.registered.addingTimeInterval(-1)))
    }

    /// Only `alert` and `background` go to the device token; every other type has tokens of its own, and an answer to
    /// one of those deactivates nothing, whatever it says.
    @Test func onlyTheDeviceTokensOwnPushTypesPrune() {
        #expect(APNsPushType.allKnown.filter { $0.tokenSource == nil } == [.alert, .background])
        let dead = Self.gone(.unregistered, at: Self.registered.addingTimeInterval(60))
        for type in APNsPushType.allKnown {
            for response in [dead, APNsResponse(status: 400, reason: .deviceTokenNotForTopic), APNsResponse(status: 400, reason: .badDeviceToken)] {
                let verdict = TokenPruning.verdict(for: response, lastRegisteredAt: Self.registered, answeredAt: Self.answered, pushType: type)
                #expect(verdict == (type.tokenSource == nil ? .deactivate(reason: response.reason!) : .keep), "\(type): \(response)")
            }
        }
    }
}
