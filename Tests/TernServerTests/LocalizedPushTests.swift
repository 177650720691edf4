import Foundation
import TernAPNs
import TernStore
import TernTestSupport
import TernWeb
import Testing

@testable import TernServer

/// Which of a push's languages a device's locale picks (``LanguageTags``), as values.
@Suite struct LocalizationValueTests {
    @Test(arguments: ["ko", "zh-Hans", "pt-BR", "sr-Latn-RS", "es-419", "fil", "zh-Hant-TW-x1"])
    func aLanguageTagIsTaken(_ tag: String) {
        #expect(LanguageTags.isValidTag(tag))
    }

    @Test(arguments: ["", "k", "english", "zh_Hans", "zh-", "-zh", "ko--KR", "zh-Hant-TW-x1-y2", "ko-abcdefghi", "ко", "k1", "ko KR"])
    func aTagThatIsNotOneIsRefused(_ tag: String) {
        #expect(!LanguageTags.isValidTag(tag))
    }

    @Test func localesAreComparedWithoutCaseSeparatorsOrKeywords() {
        #expect(LanguageTags.key("zh_Hans_CN") == "zh-hans-cn")
        #expect(LanguageTags.key("en_US@calendar=gregorian") == "en-us")
        #expect(LanguageTags.key("KO") == "ko")
    }

    @Test func aLocaleGetsItsOwnTagElseItsTagWithTheLastSubtagsDropped() {
        let given: Set = ["zh-hans", "zh", "ko", "pt-br"]
        func pick(_ locale: String?) -> String? { LanguageTags.pick(locale: locale, has: given.contains) }
        #expect(pick("zh-Hans-CN") == "zh-hans")
        #expect(pick("zh-Hant-TW") == "zh")
        #expect(pick("ko-KR") == "ko")
        #expect(pick("ko_KR@calendar=gregorian") == "ko")
        #expect(pick("pt_BR") == "pt-br")
        #expect(pick("pt-PT") == nil, "Portugal's Portuguese is not Brazil's: the notification's own texts")
        #expect(pick("en-US") == nil)
        #expect(pick(nil) == nil)
        #expect(pick("") == nil)
        #expect(pick("-") == nil)
    }

    @Test func chineseWithoutItsScriptLooksForTheScriptItsRegionWrites() {
        #expect(LanguageTags.lookup("zh-cn") == ["zh-cn", "zh-hans-cn", "zh-hans", "zh"])
        #expect(LanguageTags.lookup("zh-hk") == ["zh-hk", "zh-hant-hk", "zh-hant", "zh"])
        #expect(LanguageTags.lookup("zh-hant-tw") == ["zh-hant-tw", "zh-hant", "zh"], "a script given is kept")
        #expect(LanguageTags.lookup("zh-xx") == ["zh-xx", "zh"], "a region not known for a script")
        #expect(LanguageTags.lookup("ko-kr") == ["ko-kr", "ko"])
        let scripts: Set = ["zh-hans", "zh-hant", "zh-cn"]
        #expect(LanguageTags.pick(locale: "zh_TW", has: scripts.contains) == "zh-hant")
        #expect(LanguageTags.pick(locale: "zh-SG", has: scripts.contains) == "zh-hans")
        #expect(LanguageTags.pick(locale: "zh-CN", has: scripts.contains) == "zh-cn", "the region's own tag first, if the push gives it")
        #expect(LanguageTags.pick(locale: "zh-MO", has: ["zh"].contains) == "zh")
    }
}

/// A push in several languages (`notification.localizations`), through the API in-process to the built-in simulator,
/// the inbox and the console's preview.
@Suite struct LocalizedPushTests {
    private static let localizations = #"""
        {"ko": {"title": "세일", "body": "반값"}, "zh-Hans": {"body": "半价"}, "zh": {"title": "促銷"}}
        """#

    /// The alert each token's notification carried, by token.
    private static func alerts(_ server: RoutedServer) async throws -> [String: JSONValue] {
        var alerts: [String: JSONValue] = [:]
        for arrival in try await server.arrivals() {
            alerts[arrival.token] = try JSONValue(parsing: Data(arrival.payload.utf8))[path: "aps.alert"]
        }
        return alerts
    }

    @Test func eachDeviceGetsTheLanguageItsLocalePicksAndTheOthersTheNotificationsOwn() async throws {
        try await RouterHarness.withServer { server in
            let locales: [String?] = ["ko-KR", "zh-Hans-CN", "en-US", nil, "zh-Hant-TW", "pt_BR"]
            for (number, locale) in locales.enumerated() {
                try await server.register(Fixture.device(number), token: Fixture.token(number), locale: locale)
            }
            let devices = locales.indices.map { #""\#(Fixture.device($0))""# }.joined(separator: ", ")
            let push = try await server.push(#"""
                {"audience": {"devices": [\#(devices)]},
                 "notification": {"title": "Sale", "subtitle": "Store", "body": "Half price", "localizations": \#(Self.localizations)}}
                """#)
            #expect(push[path: "counts.accepted"]?.int == 6, "\(push)")
            let alerts = try await Self.alerts(server)
            func alert(_ title: String, _ body: String) -> JSONValue {
                .object(["title": .string(title), "subtitle": .string("Store"), "body": .string(body)])
            }
            #expect(alerts[Fixture.token(0)] == alert("세일", "반값"))
            #expect(alerts[Fixture.token(1)] == alert("Sale", "半价"), "a field the language leaves out is the notification's")
            #expect(alerts[Fixture.token(2)] == alert("Sale", "Half price"))
            #expect(alerts[Fixture.token(3)] == alert("Sale", "Half price"), "no locale: the notification's own")
            #expect(alerts[Fixture.token(4)] == alert("促銷", "Half price"), "zh-Hant-TW falls back to zh")
            #expect(alerts[Fixture.token(5)] == alert("Sale", "Half price"))
            // Every language carries the push's id, for the app's open report.
            for arrival in try await server.arrivals() {
                #expect(try JSONValue(parsing: Data(arrival.payload.utf8))[path: "tern.pushId"]?.string == push["id"]?.string)
            }
        }
    }

    @Test func theInboxListsAMessageInTheReadersLanguageAndTheBadgeIsEachRecipients() async throws {
        try await RouterHarness.withServer { server in
            let korean = try await server.register(Fixture.device(1), token: Fixture.token(1), alias: "user-1", locale: "ko-KR")
            try await server.register(Fixture.device(2), token: Fixture.token(2), alias: "user-1", locale: "en-GB")
            let push = try await server.push(#"""
                {"audience": {"aliases": ["user-1"]}, "inbox": {},
                 "notification": {"title": "Sale", "body": "Half price", "badge": "+1", "localizations": {"ko": {"body": "반값"}}}}
                """#)
            #expect(push[path: "counts.accepted"]?.int == 2, "\(push)")
            let payloads = Dictionary(
                try await server.arrivals().map { ($0.token, try JSONValue(parsing: Data($0.payload.utf8))) }, uniquingKeysWith: { first, _ in first })
            #expect(payloads[Fixture.token(1)]?[path: "aps.alert.body"]?.string == "반값")
            #expect(payloads[Fixture.token(1)]?[path: "aps.badge"]?.int == 1, "the language and the badge together")
            #expect(payloads[Fixture.token(2)]?[path: "aps.alert.body"]?.string == "Half price")
            #expect(payloads[Fixture.token(2)]?[path: "aps.badge"]?.int == 1)

            func listed(_ response: HTTPTestResponse) throws -> (title: String?, body: String?) {
                #expect(response.status == 200, "\(response.text)")
                let message = try response.json()["messages"]?.arrayFirst
                return (message?["title"]?.string, message?["body"]?.string)
            }
            let secret = try #require(korean["deviceSecret"]?.string)
            let asDevice = try await server.device.send(
                .GET, "/v1/apps/demo/inbox?deviceId=\(Fixture.device(1))", headers: [("X-Tern-Device-Secret", secret)])
            #expect(try listed(asDevice) == ("Sale", "반값"), "the reading device's locale; the title as the notification's")
            #expect(try listed(try await server.master.get("/v1/apps/demo/inbox?alias=user-1")) == ("Sale", "Half price"))
            #expect(try listed(try await server.master.get("/v1/apps/demo/inbox?alias=user-1&locale=ko")) == ("Sale", "반값"))
            #expect(try listed(try await server.master.get("/v1/apps/demo/inbox?deviceId=\(Fixture.device(2))")) == ("Sale", "Half price"))
            let english = try await server.device.send(
                .GET, "/v1/apps/demo/inbox?deviceId=\(Fixture.device(1))&locale=en", headers: [("X-Tern-Device-Secret", secret)])
            #expect(try listed(english) == ("Sale", "Half price"), "?locale= over the device's own")
            for bad in ["korean!", "k", "ko@x"] {
                let refused = try await server.master.get("/v1/apps/demo/inbox?alias=user-1&locale=\(bad)")
                #expect(refused.status == 400, "\(bad): \(refused.text)")
                #expect(try refused.json()["field"]?.string == "locale", "\(bad): \(refused.text)")
            }
        }
    }

    @Test func languagesThatCannotBeSentAreRefusedNamingTheirField() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1))
            func refusal(_ localizations: String, extra: String = "") async throws -> String? {
                let response = try await server.master.post("/v1/apps/demo/pushes", #"""
                    {"audience": {"devices": ["\#(Fixture.device(1))"]}, "notification": {"title": "Hi", "localizations": \#(localizations)}\#(extra)}
                    """#)
                #expect(response.status == 400, "\(localizations): \(response.text)")
                return try response.json()["field"]?.string
            }
            #expect(try await refusal(#"{"korean!": {"title": "x"}}"#) == "notification.localizations.korean!")
            #expect(try await refusal(#"{"ko": {}}"#) == "notification.localizations.ko")
            #expect(try await refusal(#"{"ko": {"titel": "x"}}"#) == "notification.localizations.ko.titel")
            #expect(try await refusal(#"{"ko": {"title": 3}}"#) == "notification.localizations.ko.title")
            #expect(try await refusal(#"{"ko": {"title": "a"}, "KO": {"title": "b"}}"#)?.hasPrefix("notification.localizations.") == true)
            #expect(try await refusal(#"["ko"]"#) == "notification.localizations")
            let long = String(repeating: "가", count: 1_400)
            #expect(try await refusal(#"{"ko": {"body": "\#(long)"}}"#) == "notification.localizations.ko", "over APNs' 4 KB")
            let many = (0...Localizations.limit).map { #""ab-x\#($0)": {"title": "t"}"# }.joined(separator: ", ")
            #expect(try await refusal("{\(many)}") == "notification.localizations")
            // An auto push's fallback adds its ids to the largest language too.
            let nearly = String(repeating: "가", count: 1_320)
            #expect(try await refusal(#"{"ko": {"body": "\#(nearly)"}}"#, extra: #", "delivery": "auto""#) == "notification")
            #expect(try await server.arrivals().isEmpty, "nothing was sent")
        }
    }

    @Test func theConsolesComposerSendsTheLanguagesAndNamesTheFieldOfBadOnes() async throws {
        try await RouterHarness.withServer { server in
            try await server.register(Fixture.device(1), token: Fixture.token(1), locale: "ko-KR")
            let browser = ConsoleBrowser(server)
            try await browser.signIn(server.master.bearer!)
            let form = [
                ("audience.kind", "devices"), ("audience.values", Fixture.device(1)), ("notification.title", "Sale"),
                ("notification.localizations", #"{"ko": {"title": "세일"}}"#),
            ]
            let preview = try await browser.post("/console/apps/demo/preview", form).json()
            #expect(preview["note"]?.string?.contains("one other language (ko)") == true, "\(preview)")
            let sent = try await browser.post("/console/apps/demo/pushes", form)
            #expect(sent.status == 303, "\(sent.status) \(sent.text.prefix(2000))")
            try await waitUntil("the notification arrives") { try await server.arrivals().count == 1 }
            #expect(try await Self.alerts(server)[Fixture.token(1)] == .object(["title": .string("세일")]))

            let refused = try await browser.post(
                "/console/apps/demo/pushes", Array(form.dropLast()) + [("notification.localizations", #"{"ko": {"titel": "세일"}}"#)])
            #expect(refused.status == 400 && refused.text.contains("<code>notification.localizations.ko.titel</code>"), "\(refused.text.prefix(3000))")
            #expect(refused.text.contains("titel"), "the form as it was sent")
            #expect(try await server.arrivals().count == 1, "nothing more was sent")
        }
    }

    @Test func theComposersPreviewNamesTheLanguagesAndTheLargest() throws {
        let app = AppRecord(
            id: "demo", topic: "com.example.demo", environment: .production, endpoint: nil, sealedCredentials: [], appKeyHash: [],
            masterSecretHash: [], webhookURL: nil, createdAt: Date(), updatedAt: Date())
        let request = try StrictJSONDecoder().decode(
            PushesAPI.PushRequest.self,
            from: Array(#"{"audience": {"all": true}, "notification": {"title": "Sale", "localizations": \#(Self.localizations)}}"#.utf8))
        let content = try PushesAPI.content(request, app: app, pushID: PushContent.previewPushID)
        #expect(content.localizedPayloads.map { Set($0.keys) } == ["ko", "zh", "zh-hans"])
        var shown = ComposePreview()
        shown.show(content, app: app)
        let largest = try #require(content.localizedPayloads?.values.map(\.count).max())
        #expect(shown.note.contains("3 other languages (ko, zh, zh-hans)"), "\(shown.note)")
        #expect(shown.note.contains("the largest is \(largest) bytes"), "\(shown.note)")
    }
}
