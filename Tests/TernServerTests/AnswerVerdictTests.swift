import Foundation
import TernAPNs
import TernStore
import Testing

@testable import TernServer

/// What each way a notification can end means for the recipient and its token, as values: no server, no sockets.
struct AnswerVerdictTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let registered = now.addingTimeInterval(-3_600)

    static func recipient(registeredAt: Date? = registered) -> Recipient {
        Recipient(key: "d1", deviceID: "d1", token: "ab12", environment: .production, lastRegisteredAt: registeredAt)
    }

    static func failure(_ status: Int?, _ reason: DeliveryFailureReason, detail: String? = nil) -> PushFailure {
        PushFailure(deviceID: "d1", token: "ab12", status: status, reason: reason, at: now, detail: detail)
    }

    static func verdict(
        _ ending: AnswerVerdict.Ending, registeredAt: Date? = registered, pushType: APNsPushType = .alert, registeredForType: Bool = false
    ) -> AnswerVerdict {
        AnswerVerdict.of(ending, recipient: recipient(registeredAt: registeredAt), pushType: pushType, registeredForType: registeredForType, at: now)
    }

    @Test func acceptedAndSupersededCountAsAccepted() {
        #expect(Self.verdict(.answered(APNsResponse(status: 200))) == .accepted)
        #expect(Self.verdict(.superseded) == .accepted, "a newer badge took its place: nothing failed")
    }

    @Test func clientErrorsAreFailuresThatKeepTheToken() {
        // The client's words go with the failure as its detail: the cause its code does not say.
        let unreachable = "no connection to APNs has worked for longer than a send may wait; last connect error: api.push.apple.com:443: connection refused"
        #expect(
            Self.verdict(.clientError(.timedOut, message: "no answer from APNs in time after 3 attempt(s)"))
                == .failed(Self.failure(nil, .clientError("timedOut"), detail: "no answer from APNs in time after 3 attempt(s)")))
        #expect(
            Self.verdict(.clientError(.connectionFailed, message: unreachable))
                == .failed(Self.failure(nil, .clientError("connectionFailed"), detail: unreachable)))
        #expect(Self.verdict(.answered(APNsResponse(status: 429, reason: .tooManyRequests))) == .failed(Self.failure(429, .apns(.tooManyRequests))))
        #expect(Self.verdict(.answered(APNsResponse(status: 400, reason: .payloadEmpty))) == .failed(Self.failure(400, .apns(.payloadEmpty))))
        // Refused unsent because its endpoint answers nothing: a failure of its own, the token kept.
        #expect(Self.verdict(.refused(.silent)) == .failed(Self.failure(nil, .notAnswering)))
        // Refused unsent because the endpoint refuses the app's key: APNs' reason with no status (APNs did not answer
        // this one), the cause in the detail, the token kept.
        #expect(Self.verdict(.refused(.credentials(.invalidProviderToken))) == .failed(Self.failure(
            nil, .apns(.invalidProviderToken), detail: AnswerVerdict.credentialsRefusedDetail(.invalidProviderToken))))
        #expect(DeliveryFailureReason(rawValue: "notAnswering") == .notAnswering)
    }

    @Test func whatThisNodeStoppedSendingHasNoVerdict() {
        // A stop cut it off, before it went or before its answer came: not a failure of the push, sent again later.
        #expect(Self.verdict(.notSent) == .unsettled)
        #expect(Self.verdict(.clientError(.cancelled, message: "cancelled")) == .unsettled)
        #expect(Self.verdict(.clientError(.shutDown, message: "the client is shut down")) == .unsettled)
    }

    @Test func aTokenThatWasNeverValidIsDeadAtOnce() {
        #expect(Self.verdict(.answered(APNsResponse(status: 400, reason: .badDeviceToken)))
            == .deadToken(Self.failure(400, .apns(.badDeviceToken)), reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil))
        #expect(Self.verdict(.answered(APNsResponse(status: 400, reason: .deviceTokenNotForTopic)))
            == .deadToken(Self.failure(400, .apns(.deviceTokenNotForTopic)), reason: .apns(.deviceTokenNotForTopic), invalidSince: nil, apnsTimestamp: nil))
    }

    @Test func aPushTypeWithTokensOfItsOwnDeactivatesNothing() {
        // A VoIP or Live Activity push to a device token: APNs' refusal is about that topic, not the device's token.
        let later = Self.now.addingTimeInterval(60)
        for type in [APNsPushType.voip, .liveactivity, .location, .pushtotalk, .widgets] {
            for response in [
                APNsResponse(status: 400, reason: .deviceTokenNotForTopic), APNsResponse(status: 400, reason: .badDeviceToken),
                APNsResponse(status: 410, reason: .unregistered, timestamp: later),
            ] {
                #expect(
                    Self.verdict(.answered(response), pushType: type) == .failed(Self.failure(response.status, .apns(response.reason!))),
                    "\(type): \(response)")
            }
        }
        // The app's own topic, alert or background: the same answers deactivate.
        for type in [APNsPushType.alert, .background] {
            guard case .deadToken = Self.verdict(.answered(APNsResponse(status: 400, reason: .deviceTokenNotForTopic)), pushType: type) else {
                Issue.record("\(type): DeviceTokenNotForTopic keeps the token")
                continue
            }
        }
    }

    @Test func aDevicesOwnTokenOfThePushTypesKindIsJudgedAsADeviceTokenIs() {
        // A VoIP push to the devices' VoIP tokens (PushRecord.tokenKind): a dead one goes, by the same rules.
        let died = Self.now.addingTimeInterval(-60)
        for type in [APNsPushType.voip, .liveactivity] {
            #expect(Self.verdict(.answered(APNsResponse(status: 410, reason: .unregistered, timestamp: died)), pushType: type, registeredForType: true)
                == .deadToken(Self.failure(410, .apns(.unregistered)), reason: .apns(.unregistered), invalidSince: died, apnsTimestamp: died))
            #expect(Self.verdict(.answered(APNsResponse(status: 400, reason: .badDeviceToken)), pushType: type, registeredForType: true)
                == .deadToken(Self.failure(400, .apns(.badDeviceToken)), reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil))
            // Set again after APNs says it died: kept.
            #expect(Self.verdict(
                .answered(APNsResponse(status: 410, reason: .unregistered, timestamp: died)), registeredAt: Self.now, pushType: type,
                registeredForType: true) == .failed(Self.failure(410, .apns(.unregistered))))
        }
    }

    @Test func a410IsDeadSinceItsTimestampUnlessTheTokenWasRegisteredAgainSince() {
        let died = Self.now.addingTimeInterval(-60)
        #expect(Self.verdict(.answered(APNsResponse(status: 410, reason: .unregistered, timestamp: died)))
            == .deadToken(Self.failure(410, .apns(.unregistered)), reason: .apns(.unregistered), invalidSince: died, apnsTimestamp: died))
        // Registered again after APNs says it died (a reinstall gave the same token back): kept.
        #expect(Self.verdict(.answered(APNsResponse(status: 410, reason: .unregistered, timestamp: died)), registeredAt: Self.now)
            == .failed(Self.failure(410, .apns(.unregistered))))
        // No timestamp: dead as of the answer.
        #expect(Self.verdict(.answered(APNsResponse(status: 410, reason: .expiredToken)))
            == .deadToken(Self.failure(410, .apns(.expiredToken)), reason: .apns(.expiredToken), invalidSince: Self.now, apnsTimestamp: nil))
    }

    @Test func a410WithoutAReasonIsDeadForItsBareStatus() {
        #expect(Self.verdict(.answered(APNsResponse(status: 410)))
            == .deadToken(Self.failure(410, .apnsStatus(410)), reason: .apnsStatus(410), invalidSince: Self.now, apnsTimestamp: nil))
        #expect(Self.verdict(.answered(APNsResponse(status: 500))) == .failed(Self.failure(500, .apnsStatus(500))))
    }
}
