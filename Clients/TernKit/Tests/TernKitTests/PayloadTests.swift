import Foundation
import Testing

@testable import TernKit

/// What TernKit reads in a notification's payload and in a channel frame: the shapes the server sends (README, "The
/// online channel"; the payloads below are what `tern serve`'s simulator received).
struct PayloadTests {
    private func payload(_ json: String) throws -> TernPayload {
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
        return TernPayload(userInfo: object)
    }

    @Test func anAutoPushThatFellBackCarriesTheDeviceMessage() throws {
        let fallback = try payload(
            #"{"aps":{"alert":{"title":"hi"},"badge":1},"k":1,"tern":{"id":"75F7E009-0893-555A-98AD-B527BF108E29","messageId":"8c693256-6f6b-4bc2-bf74-5a7267737671","sequence":1}}"#
        )
        #expect(fallback.messageID == "75f7e009-0893-555a-98ad-b527bf108e29")
        #expect(fallback.sequence == 1)
        #expect(fallback.inboxMessageID == "8c693256-6f6b-4bc2-bf74-5a7267737671")
        #expect(fallback.badge == 1)
        #expect(fallback.data == ["k": .int(1)])
        let message = try #require(fallback.message())
        #expect(message.source == .apns)
        #expect(message.notification == TernNotification(title: "hi", badge: 1))
        #expect(message.pushID == "8c693256-6f6b-4bc2-bf74-5a7267737671")
        #expect(message.data == .object(["k": .int(1)]))
    }

    @Test func inboxWakeAndBadgePushesAreToldApart() throws {
        let inbox = try payload(
            #"{"aps":{"alert":{"title":"Your order shipped"},"badge":2},"orderId":17,"tern":{"messageId":"9409c256-ca71-4d2c-803f-9f0e5e6bb894"}}"#)
        #expect(inbox.messageID == nil && inbox.inboxMessageID == "9409c256-ca71-4d2c-803f-9f0e5e6bb894" && inbox.message() == nil)
        let wake = try payload(#"{"aps":{"content-available":1},"tern":{"wake":true}}"#)
        #expect(wake.isWake && wake.isFromTern && wake.notification == nil)
        let badge = try payload(#"{"aps":{"badge":1,"content-available":1}}"#)
        #expect(badge.badge == 1 && !badge.isFromTern)
        #expect(try payload(#"{"aps":{"alert":"Hello"}}"#).notification?.body == "Hello")
    }

    @Test func aPushThatCameThroughAPNsCarriesItsId() throws {
        let push = try payload(#"{"aps":{"alert":{"title":"Sale"}},"tern":{"pushId":"4C6E7812-5B50-4A02-807A-011D4BA548A3"}}"#)
        #expect(push.pushID == "4c6e7812-5b50-4a02-807a-011d4ba548a3" && push.isFromTern)
        #expect(push.messageID == nil && push.inboxMessageID == nil && push.message() == nil)
        #expect(push.data.isEmpty, "tern is not the app's data")
        #expect(try payload(#"{"aps":{"alert":"x"},"tern":{"pushId":"not-a-uuid"}}"#).pushID == nil)
    }

    @Test func idsThatAreNotUUIDsAreNotTernsAndNeverReachAnAck() throws {
        let forged = try payload(#"{"aps":{"alert":"x"},"tern":{"id":"\"],\"type\":\"x","sequence":1}}"#)
        #expect(forged.messageID == nil)
        #expect(forged.message() == nil)
    }

    @Test func booleansAndNumbersFromFoundationStayWhatTheyWere() {
        let payload = TernPayload(userInfo: ["flag": true, "count": 3, "ratio": 0.5, "name": "x", 7: "not a string key"])
        #expect(payload.data == ["flag": .bool(true), "count": .int(3), "ratio": .double(0.5), "name": .string("x")])
    }

    @Test func aMessageFrameIsReadWithItsNotificationDataAndTime() throws {
        let frame =
            #"{"createdAt":"2026-11-24T17:47:50.584Z","data":{"orderId":17},"id":"05D8B23B-95CC-56F8-845E-649182656BB7","notification":{"title":"one","badge":2,"threadId":"orders"},"pushId":"4c6e7812-5b50-4a02-807a-011d4ba548a3","sequence":1,"type":"message"}"#
        guard case .message(let message) = try ChannelFrame.decode(frame) else {
            Issue.record("not a message")
            return
        }
        #expect(message.id == "05d8b23b-95cc-56f8-845e-649182656bb7")
        #expect(message.sequence == 1)
        #expect(message.notification == TernNotification(title: "one", badge: 2, threadID: "orders"))
        #expect(message.data == .object(["orderId": .int(17)]))
        #expect(abs((message.createdAt?.timeIntervalSince1970 ?? 0) - 1_795_542_470.584) < 0.0005)
        #expect(message.source == .channel)
        // A frame type this version does not know is skipped, not an error.
        #expect(try ChannelFrame.decode(#"{"type":"hello","version":2}"#) == .other(type: "hello"))
    }

    @Test(arguments: [
        ("not json", "cannot be read: not JSON"),
        (#"{"id":"05d8b23b-95cc-56f8-845e-649182656bb7"}"#, "'type' is missing"),
        (#"{"type":"message","sequence":1}"#, "no message id"),
        (#"{"type":"message","id":"05d8b23b-95cc-56f8-845e-649182656bb7"}"#, "no 'sequence'"),
        (#"{"type":"message","id":"05d8b23b-95cc-56f8-845e-649182656bb7","sequence":"one"}"#, "'sequence' is not"),
        (#"{"type":"message","id":"05d8b23b-95cc-56f8-845e-649182656bb7","sequence":1,"createdAt":"yesterday"}"#, "'createdAt'"),
    ])
    func aBadFrameIsAnErrorNamingWhatIsWrong(_ frame: String, _ named: String) {
        #expect {
            try ChannelFrame.decode(frame)
        } throws: { error in
            guard let error = error as? TernError else { return false }
            return error.kind == .badAnswer && error.message.contains(named)
        }
    }

    @Test func acksGoAtMostAThousandIdsAFrame() throws {
        let ids = (0..<2500).map { _ in UUID().uuidString.lowercased() }
        let frames = ChannelFrame.acks(ids)
        #expect(frames.count == 3)
        let decoded = try frames.map { try JSONDecoder().decode(TernJSON.self, from: Data($0.utf8)) }
        #expect(decoded.allSatisfy { $0["type"] == .string("ack") })
        let sent = decoded.flatMap { frame -> [String] in
            guard case .array(let items)? = frame["ids"] else { return [] }
            return items.compactMap(\.stringValue)
        }
        #expect(sent == ids)
        #expect(decoded.map { frame -> Int in if case .array(let items)? = frame["ids"] { items.count } else { 0 } } == [1000, 1000, 500])
    }
}

/// The alias token: TernKit reads the user from its `sub`; the tests mint tokens as a backend does.
struct AliasTokenTests {
    @Test func theUserIsTheTokensSubject() throws {
        let token = AliasTokenMinter.token(user: "user-42", app: "demo", identitySecret: "tis_x")
        #expect(try AliasToken.subject(of: token) == "user-42")
    }

    @Test(arguments: [("abc", "three base64url parts"), ("a.!!!.c", "not base64url"), ("a.WzFd.c", "not a JSON object"), ("a.e30.c", "no 'sub'")])
    func aTokenThatIsNotOneIsAnErrorThatDoesNotRepeatIt(_ token: String, _ named: String) {
        #expect {
            try AliasToken.subject(of: token)
        } throws: { error in
            guard let error = error as? TernError else { return false }
            return error.kind == .aliasToken && error.message.contains(named) && !error.description.contains(token)
        }
    }

    @Test func theMintersHMACMatchesRFC4231() {
        // RFC 4231 test cases 1 and 2.
        let one = AliasTokenMinter.hmacSHA256(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
        #expect(one.map { String(format: "%02x", $0) }.joined() == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let two = AliasTokenMinter.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(two.map { String(format: "%02x", $0) }.joined() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(
            AliasTokenMinter.sha256([]).map { String(format: "%02x", $0) }.joined()
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }
}

/// Which APNs environment a build's tokens belong to, from its provisioning profile.
struct BuildEnvironmentTests {
    private func profile(_ entitlements: String) -> Data {
        // A profile is a signed envelope around a property list; a few bytes of it around the XML will do.
        Data([0x30, 0x80, 0x06, 0x09])
            + Data(
                """
                <?xml version="1.0" encoding="UTF-8"?>
                <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
                <plist version="1.0"><dict><key>Name</key><string>Shop Dev</string>
                <key>Entitlements</key><dict>\(entitlements)</dict></dict></plist>
                """.utf8) + Data([0xa0, 0x82, 0x0d, 0x00])
    }

    @Test func aDevelopmentProfileMeansSandboxTokens() {
        let development = profile("<key>aps-environment</key><string>development</string>")
        #expect(APNsBuildEnvironment.environment(provisioningProfile: development, isSimulator: false) == "development")
        let mac = profile("<key>com.apple.developer.aps-environment</key><string>development</string>")
        #expect(APNsBuildEnvironment.environment(provisioningProfile: mac, isSimulator: false) == "development")
    }

    @Test func anAppStoreBuildAnAdHocProfileOrNoPushEntitlementMeansProduction() {
        #expect(APNsBuildEnvironment.environment(provisioningProfile: nil, isSimulator: false) == "production")
        let adHoc = profile("<key>aps-environment</key><string>production</string>")
        #expect(APNsBuildEnvironment.environment(provisioningProfile: adHoc, isSimulator: false) == "production")
        #expect(APNsBuildEnvironment.environment(provisioningProfile: profile(""), isSimulator: false) == "production")
        #expect(APNsBuildEnvironment.environment(provisioningProfile: Data("garbage".utf8), isSimulator: false) == "production")
    }

    @Test func theSimulatorGetsSandboxTokens() {
        #expect(APNsBuildEnvironment.environment(provisioningProfile: nil, isSimulator: true) == "development")
    }

    @Test func theFactsOfThisInstallationNameTheTokenAndVersion() {
        let facts = RegistrationFacts.current(deviceToken: Data([0xab, 0x01]))
        #expect(facts.token == "ab01")
        #expect(facts.environment == "production")
        #expect(facts.locale?.contains("_") == false)
        #expect(facts.timezone == TimeZone.current.identifier)
    }

    @Test func theLocaleIsTheUsersFirstLanguageNotTheAppsLocalization() {
        // A Korean user of an app localized only in English: Locale.current is en_KR.
        let appLocale = Locale(identifier: "en_KR")
        #expect(RegistrationFacts.locale(preferredLanguages: ["ko-KR", "en-US"], current: appLocale) == "ko-KR")
        #expect(RegistrationFacts.locale(preferredLanguages: ["zh-Hans-CN"], current: appLocale) == "zh-Hans-CN")
        #expect(RegistrationFacts.locale(preferredLanguages: [], current: appLocale) == "en-KR", "no preferred language: the app's locale")
    }
}
