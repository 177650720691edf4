import Foundation
import Logging
import SQLKit
import TernAPNs
import TernTestSupport
import Testing

@testable import TernStore

/// The text the store keeps each typed value as (the API and the webhook show the same), and what reading text the
/// store never writes does.
struct StoredValueTests {
    @Test func environmentsAreKeptAsTheirNames() throws {
        for (environment, text) in [(APNsEnvironment.production, "production"), (.development, "development")] {
            #expect(environment.storedWord == text)
            #expect(try APNsEnvironment(storedWord: text, column: "environment") == environment)
        }
        #expect(AppEnvironment.allCases.map(\.storedWord) == ["production", "development", "simulator", "custom"])
        for environment in AppEnvironment.allCases {
            #expect(try AppEnvironment(storedWord: environment.storedWord, column: "environment") == environment)
        }
    }

    /// A date is stored as milliseconds; one beyond 64 bits is stored as the nearest end, never a trap that takes
    /// the node down.
    @Test func datesBeyondSixtyFourBitsOfMillisecondsAreClamped() {
        #expect(Date(milliseconds: 1_700_000_000_123).milliseconds == 1_700_000_000_123)
        #expect(Date(milliseconds: -86_400_000).milliseconds == -86_400_000)
        for (seconds, stored) in [(1e300, Int64.max), (9.3e15, .max), (Double.infinity, .max), (.nan, .max), (-1e300, .min), (-Double.infinity, .min)] {
            #expect(Date(timeIntervalSince1970: seconds).milliseconds == stored, "\(seconds)")
        }
    }

    @Test func chunkRunsAreKeptAsJSONThatReadsBackTheSame() throws {
        let keys = [
            "6f1c1f9e-8d7a-4d44-9d2e-000000000001", "alias\u{1F}device", #"quote " and backslash \"#, "tab\tnewline\n\u{0}",
            "ünïcødé ✓ 🎉", "",
        ]
        let runs = zip(keys, keys.reversed()).map { ChunkMark.Run(first: $0, last: $1) }
        for count in [1, 2, runs.count] {
            let written = ChunkMark.Run.json(Array(runs.prefix(count)))
            #expect(try JSON.decode([ChunkMark.Run].self, written) == Array(runs.prefix(count)))
        }
        #expect(ChunkMark.Run.json([ChunkMark.Run(first: "a", last: "b")]) == #"[{"first":"a","last":"b"}]"#)
    }

    @Test func tokenReplacementReasonsAreKeptAsTheirNames() throws {
        #expect(TokenReplacementReason.replaced.storedWord == "replaced")
        #expect(TokenReplacementReason.moved.storedWord == "moved")
        for reason in TokenReplacementReason.allCases {
            #expect(try TokenReplacementReason(storedWord: reason.storedWord, column: "reason") == reason)
        }
    }

    @Test func aWordTheStoreNeverWritesIsAnErrorNamingTheColumnAndTheText() {
        // Only the exact words: not the API's `sandbox` synonym, not another case.
        #expect(throws: StoreError.unreadable("column environment holds 'sandbox', which is none of production, development")) {
            try APNsEnvironment(storedWord: "sandbox", column: "environment")
        }
        #expect(throws: StoreError.unreadable("column environment holds 'Production', which is none of production, development")) {
            try APNsEnvironment(storedWord: "Production", column: "environment")
        }
        #expect(throws: StoreError.unreadable("column environment holds 'staging', which is none of production, development, simulator, custom")) {
            try AppEnvironment(storedWord: "staging", column: "environment")
        }
        #expect(throws: StoreError.unreadable("column reason holds 'lost', which is none of replaced, moved")) {
            try TokenReplacementReason(storedWord: "lost", column: "reason")
        }
    }

    @Test func deliveryFailureReasonsReadBackFromTheirText() {
        let reasons: [(DeliveryFailureReason, String)] = [
            (.apns(.badDeviceToken), "BadDeviceToken"), (.apns(.unregistered), "Unregistered"),
            (.apns(.unknown("SomethingNew")), "SomethingNew"), (.apnsStatus(500), "500"), (.clientError("timedOut"), "timedOut"),
            (.clientError("connectionFailed"), "connectionFailed"), (.clientUnavailable, "clientUnavailable"), (.notSent, "notSent"),
        ]
        for (reason, text) in reasons {
            #expect(reason.rawValue == text)
            #expect(DeliveryFailureReason(rawValue: text) == reason)
        }
    }

    /// A metric's label takes a reason's text, except an APNs reason this version does not know: an endpoint that
    /// makes reasons up must not grow `tern_push_failures_total` or `tern_apns_rejected_total` without bound.
    @Test func aReasonsMetricLabelIsItsTextUnlessAPNsMadeItUp() {
        let labels: [(DeliveryFailureReason, String)] = [
            (.apns(.unregistered), "Unregistered"), (.apns(.invalidProviderToken), "InvalidProviderToken"),
            (.apns(.unknown("SomethingNew")), "unknown"), (.apns(.unknown("Another\(UUID())")), "unknown"),
            (.apnsStatus(500), "500"), (.clientError("timedOut"), "timedOut"), (.notAnswering, "notAnswering"),
            (.clientUnavailable, "clientUnavailable"),
        ]
        for (reason, label) in labels {
            #expect(reason.metricLabel == label)
        }
        #expect(APNsReason(rawValue: "Made up").metricLabel == "unknown")
        #expect(APNsReason.allKnown.allSatisfy { $0.metricLabel == $0.rawValue })
    }

    @Test func tokenDeactivationReasonsReadBackFromTheirText() {
        let reasons: [(TokenDeactivationReason, String)] = [
            (.apns(.unregistered), "Unregistered"), (.apns(.expiredToken), "ExpiredToken"), (.apns(.badDeviceToken), "BadDeviceToken"),
            (.apns(.deviceTokenNotForTopic), "DeviceTokenNotForTopic"), (.apns(.unknown("GoneForGood")), "GoneForGood"),
            (.apnsStatus(410), "410"),
        ]
        for (reason, text) in reasons {
            #expect(reason.rawValue == text)
            #expect(TokenDeactivationReason(rawValue: text) == reason)
        }
    }

    /// Reasons are an open set (Apple adds reasons): any text reads as a reason that writes the same text again.
    @Test(arguments: ["BadEnvironmentKeyInToken", "007", "-1", "", "timeout", "notsent", "Unregistered "])
    func anyReasonTextIsKeptAsItIs(_ text: String) {
        #expect(DeliveryFailureReason(rawValue: text).rawValue == text)
        #expect(TokenDeactivationReason(rawValue: text).rawValue == text)
    }

    @Test("a row holding a word the store never writes fails the read with that error, and nothing crashes")
    func unreadableRows() async throws {
        let directory = try TemporaryDirectory()
        defer { try? directory.remove() }
        let store = try await SQLStore.openSQLite(path: directory.path("tern.sqlite"), logger: Logger(label: "tern.store.tests"))
        do {
            try await store.migrate()
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(1))
            _ = try await store.register(registration("d1", token: "t2"), app: "demo", at: time(2))
            try await store.exclusive { db in
                try await db.raw("UPDATE devices SET environment = 'staging'").run()
                try await db.raw("UPDATE token_history SET reason = 'lost'").run()
                try await db.raw("UPDATE apps SET environment = 'sandbox'").run()
            }
            let device = StoreError.unreadable("column environment holds 'staging', which is none of production, development")
            await #expect(throws: device) { try await store.device(app: "demo", deviceID: "d1") }
            await #expect(throws: device) { try await store.recipients(app: "demo", audience: .everyone, after: nil, limit: 10) }
            await #expect(throws: StoreError.unreadable("column reason holds 'lost', which is none of replaced, moved")) {
                try await store.tokenHistory(app: "demo", deviceID: "d1")
            }
            await #expect(throws: StoreError.unreadable("column environment holds 'sandbox', which is none of production, development, simulator, custom")) {
                try await store.app("demo")
            }
            // A device's token of an unknown kind, and a push that names one.
            _ = try await store.setPushToken(app: "demo", deviceID: "d1", kind: .voip, token: "v1", at: time(3))
            var push = makePush("p1", at: time(4))
            push.tokenKind = .voip
            _ = try await store.createPush(push)
            try await store.exclusive { db in
                try await db.raw("UPDATE device_push_tokens SET kind = 'fcm'").run()
                try await db.raw("UPDATE pushes SET token_kind = 'VoIP'").run()
            }
            await #expect(throws: StoreError.unreadable("column kind holds 'fcm', which is none of voip, pushToStart")) {
                try await store.pushTokens(app: "demo", deviceID: "d1")
            }
            await #expect(throws: StoreError.unreadable("column token_kind holds 'VoIP', which is none of voip, pushToStart")) {
                try await store.push(app: "demo", id: "p1")
            }
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }
}
