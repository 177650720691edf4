import Foundation
import TernAPNs
import TernStore
import TernTestSupport
import TernWeb
import Testing

@testable import TernServer

/// A push to the devices of an audience that registered an app version, a language or lately
/// (`audience.filters`), through the API in-process to the built-in simulator, and from the console's composer.
@Suite struct FilteredPushTests {
    /// Six devices tagged `news`: (app version, locale).
    private static let devices: [(version: String?, locale: String?)] = [
        ("2.3.0", "ko-KR"), ("2.9 (41)", "en-US"), ("3.1", "ko-KR"), ("2.2.9", "zh-Hant-TW"), (nil, "ko"), ("2.4", "zh-TW"),
    ]

    private static func registerDevices(_ server: RoutedServer) async throws {
        for (number, device) in devices.enumerated() {
            try await server.register(
                Fixture.device(number), token: Fixture.token(number), tags: ["news"], locale: device.locale, appVersion: device.version)
        }
    }

    private static func tokens(_ server: RoutedServer) async throws -> Set<String> {
        Set(try await server.arrivals().map(\.token))
    }

    @Test func aPushGoesOnlyToTheDevicesItsFiltersAdmit() async throws {
        try await RouterHarness.withServer { server in
            try await Self.registerDevices(server)
            let push = try await server.push(#"""
                {"audience": {"tags": ["news"], "filters": {"appVersion": {"atLeast": "2.3", "below": "3"}, "languages": ["ko", "zh-Hant"]}},
                 "notification": {"title": "New in 2.3"}}
                """#)
            #expect(push["status"]?.string == "completed" && push[path: "counts.accepted"]?.int == 2, "\(push)")
            #expect(try await Self.tokens(server) == [Fixture.token(0), Fixture.token(5)], "2.3.0 in Korean, and 2.4 in Taiwan's Chinese")

            // Only a version bound, with everyone: the devices with a version from 2.4, whatever their language.
            let later = try await server.push(#"""
                {"audience": {"all": true, "filters": {"appVersion": {"atLeast": "2.4"}}}, "notification": {"title": "Later"}}
                """#)
            #expect(later[path: "counts.accepted"]?.int == 3, "2.9 (41), 3.1 and 2.4: \(later)")

            // A user's devices, by alias, are filtered as well.
            try await server.register(Fixture.device(10), token: Fixture.token(10), alias: "user-1", locale: "ko-KR", appVersion: "1.0")
            try await server.register(Fixture.device(11), token: Fixture.token(11), alias: "user-1", locale: "ko-KR", appVersion: "2.0")
            let user = try await server.push(#"""
                {"audience": {"aliases": ["user-1"], "filters": {"appVersion": {"below": "2"}}}, "notification": {"title": "Please update"}}
                """#)
            #expect(user[path: "counts.accepted"]?.int == 1, "\(user)")
            #expect(try await server.arrivals().last?.token == Fixture.token(10))
        }
    }

    @Test func aPushsViewShowsItsAudienceWithItsFiltersAsGivenAndTheConsoleInWords() async throws {
        try await RouterHarness.withServer { server in
            try await Self.registerDevices(server)
            let push = try await server.push(#"""
                {"audience": {"tags": ["sale", "news", "news"], "match": "all",
                              "filters": {"appVersion": {"atLeast": "2.3"}, "languages": ["zh-Hant", "ko"], "registeredSince": "2026-01-01T09:00:00+09:00"}},
                 "notification": {"title": "Hi"}}
                """#)
            #expect(push["audience"] == nil, "the answer to the POST has no audience: the caller gave it")
            let id = try #require(push["id"]?.string)
            let shown = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
            let expected = try JSONValue(parsing: Data(#"""
                {"tags": ["news", "sale"], "match": "all",
                 "filters": {"appVersion": {"atLeast": "2.3"}, "languages": ["zh-Hant", "ko"], "registeredSince": "2026-01-01T00:00:00.000Z"}}
                """#.utf8))
            #expect(shown["audience"] == expected, "\(shown)")
            let listed = try await server.master.get("/v1/apps/demo/pushes").json()
            #expect(listed["pushes"]?.arrayFirst?["audience"] == nil, "not in a list of pushes")

            let browser = ConsoleBrowser(server)
            try await browser.signIn(server.master.bearer!)
            let page = try await browser.get("/console/apps/demo/pushes/\(id)")
            #expect(page.text.contains("tags news, sale (all of them); app version 2.3 or later; languages zh-Hant, ko; registered since"), "\(page.text.prefix(4000))")
        }
    }

    @Test func anAudienceInWordsNamesAFewOfALongList() {
        let devices = (0..<8).map { Fixture.device($0) }
        let words = PushPageView.words(PushesAPI.AudienceInput(.devices(devices), filter: AudienceFilter(appVersions: .init(atLeast: nil, below: AppVersion("3")))))
        #expect(words == "devices \(devices.prefix(5).joined(separator: ", ")) and 3 more; app version below 3")
        #expect(PushPageView.words(PushesAPI.AudienceInput(.everyone, filter: nil)) == "everyone")
        #expect(PushPageView.words(PushesAPI.AudienceInput(.activity("order-1", aliases: ["user-1"]), filter: nil)) == "the Live Activity order-1 of the users user-1")
    }

    @Test func aDeviceTheFiltersLeftOutCannotReportThePush() async throws {
        try await RouterHarness.withServer { server in
            try await Self.registerDevices(server)
            let push = try await server.push(#"""
                {"audience": {"tags": ["news"], "filters": {"languages": ["en"]}}, "notification": {"title": "Hello"}}
                """#)
            let pushID = try #require(push["id"]?.string)
            #expect(push[path: "counts.accepted"]?.int == 1, "\(push)")
            func open(_ number: Int) async throws -> Int {
                try await server.device.send(
                    .POST, "/v1/apps/demo/devices/\(Fixture.device(number))/opens", body: #"{"pushId": "\#(pushID)"}"#,
                    headers: server.asDevice(Fixture.device(number))
                ).status
            }
            #expect(try await open(1) == 204, "the English device was sent it")
            #expect(try await open(0) == 404, "a Korean device of the same tag was not")
            let counted = try await server.master.get("/v1/apps/demo/pushes/\(pushID)").json()
            #expect(counted[path: "counts.opened"]?.int == 1, "\(counted)")
        }
    }

    @Test func filtersThatCannotBeAppliedAreRefusedNamingTheirField() async throws {
        try await RouterHarness.withServer { server in
            try await Self.registerDevices(server)
            func refusal(_ filters: String, audience: String = #""tags": ["news"]"#) async throws -> String? {
                let response = try await server.master.post(
                    "/v1/apps/demo/pushes", #"{"audience": {\#(audience), "filters": \#(filters)}, "notification": {"title": "Hi"}}"#)
                #expect(response.status == 400, "\(filters): \(response.text)")
                return try response.json()["field"]?.string
            }
            #expect(try await refusal("{}") == "audience.filters")
            #expect(try await refusal(#"{"appVersion": {}}"#) == "audience.filters.appVersion")
            #expect(try await refusal(#"{"appVersion": {"atLeast": "2.x"}}"#) == "audience.filters.appVersion.atLeast")
            #expect(try await refusal(#"{"appVersion": {"below": "v3"}}"#) == "audience.filters.appVersion.below")
            #expect(try await refusal(#"{"appVersion": {"atLeast": "3", "below": "3.0"}}"#) == "audience.filters.appVersion.below")
            #expect(try await refusal(#"{"appVersion": {"atleast": "3"}}"#) == "audience.filters.appVersion.atleast", "an unknown field")
            #expect(try await refusal(#"{"languages": []}"#) == "audience.filters.languages")
            #expect(try await refusal(#"{"languages": ["ko", "korean!"]}"#) == "audience.filters.languages[1]")
            #expect(try await refusal(#"{"languages": ["ko", "KO"]}"#) == "audience.filters.languages[1]")
            #expect(try await refusal(#"{"registeredSince": "yesterday"}"#) == "audience.filters.registeredSince")
            #expect(try await refusal(#"{"registeredSince": "2999-01-01T00:00:00Z"}"#) == "audience.filters.registeredSince")
            #expect(try await refusal(#"{"country": "KR"}"#) == "audience.filters.country")
            #expect(try await refusal(#"{"languages": ["ko"]}"#, audience: #""tokens": ["\#(Fixture.token(0))"]"#) == "audience.filters")
            #expect(try await server.arrivals().isEmpty, "nothing was sent")
        }
    }

    @Test func theComposerCountsAndSendsWithFilters() async throws {
        try await RouterHarness.withServer { server in
            try await Self.registerDevices(server)
            let browser = ConsoleBrowser(server)
            try await browser.signIn(server.master.bearer!)
            let form = [
                ("audience.kind", "tags"), ("audience.values", "news"), ("notification.title", "Korean users on 2.x"),
                ("audience.filters.appVersion.atLeast", "2"), ("audience.filters.appVersion.below", "3"),
                ("audience.filters.languages", "ko, zh-Hant"), ("audience.filters.registeredSince", ""),
            ]
            let preview = try await browser.post("/console/apps/demo/preview", form).json()
            #expect(preview["audience"]?.string == "Reaches 3 devices now.", "2.3.0 ko-KR, 2.2.9 zh-Hant-TW, 2.4 zh-TW: \(preview)")
            #expect(preview["problem"] == nil || preview["problem"] == .null, "\(preview)")
            let page = try await browser.get("/console/apps/demo/compose")
            #expect(page.text.contains(#"name="audience.filters.languages""#))
            let sent = try await browser.post("/console/apps/demo/pushes", form)
            #expect(sent.status == 303, "\(sent.status) \(sent.text.prefix(2000))")
            try await waitUntil("the notifications arrive") { try await server.arrivals().count == 3 }
            #expect(try await Self.tokens(server) == [Fixture.token(0), Fixture.token(3), Fixture.token(5)])

            let refused = try await browser.post(
                "/console/apps/demo/preview", form.filter { $0.0 != "audience.filters.languages" } + [("audience.filters.languages", "ko, ko")])
            #expect(try refused.json()["problem"]?.string?.hasPrefix("audience.filters.languages[1]") == true, "\(refused.text)")
        }
    }
}
