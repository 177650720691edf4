import Foundation
import TernAPNs
import Testing
@testable import TernStore

/// App versions and audience filters as values: what a device registered against what a push asks for.
@Suite("Audience filters as values")
struct AudienceFilterValueTests {
    @Test("a filter's version is 1-4 numbers joined by dots, and nothing else")
    func versionsAsGiven() {
        for text in ["2", "2.3", "2.3.1", "10.0.0.1", "0", "123456789"] { #expect(AppVersion(text) != nil, "\(text)") }
        for text in ["", "v2", "2.", ".2", "2..3", "2.3.1.4.5", "2.3-beta", "1234567890", "２", " 2", "2.a"] {
            #expect(AppVersion(text) == nil, "\(text)")
        }
    }

    @Test("versions compare number by number, a missing number being 0")
    func versionOrder() throws {
        func version(_ text: String) throws -> AppVersion { try #require(AppVersion(text)) }
        #expect(try version("2.3") < version("2.10"), "not as text")
        #expect(try version("2.3") == version("2.3.0.0"))
        #expect(try version("2") < version("2.0.1"))
        #expect(try version("10") > version("9.9.9"))
        #expect(try !(version("2.3.0") < version("2.3")))
    }

    @Test("a registered version is the numbers and dots it begins with")
    func registeredVersions() {
        #expect(AppVersion(registered: "2.3.1 (45)")?.numbers == [2, 3, 1])
        #expect(AppVersion(registered: "2.3-beta")?.numbers == [2, 3])
        #expect(AppVersion(registered: "2.3.")?.numbers == [2, 3])
        #expect(AppVersion(registered: "1.2.3.4.5")?.numbers == [1, 2, 3, 4], "four numbers at most")
        #expect(AppVersion(registered: "beta 2") == nil)
        #expect(AppVersion(registered: "") == nil)
        #expect(AppVersion(registered: "1234567890.1") == nil, "a number too long to be a version")
    }

    @Test("a device passes when it meets every condition given, and no condition on what it did not register")
    func admits() throws {
        let range = AudienceFilter.VersionRange(atLeast: AppVersion("2.3"), below: AppVersion("3"))
        let versions = AudienceFilter(appVersions: range)
        #expect(versions.admits(locale: nil, appVersion: "2.3", lastRegisteredAt: nil))
        #expect(versions.admits(locale: nil, appVersion: "2.10.4 (7)", lastRegisteredAt: nil))
        #expect(!versions.admits(locale: nil, appVersion: "3.0", lastRegisteredAt: nil), "below is excluded")
        #expect(!versions.admits(locale: nil, appVersion: "2.2.9", lastRegisteredAt: nil))
        #expect(!versions.admits(locale: nil, appVersion: nil, lastRegisteredAt: nil), "no version registered")
        #expect(!versions.admits(locale: nil, appVersion: "beta", lastRegisteredAt: nil))

        let languages = AudienceFilter(languages: ["ko", "zh-Hant"])
        #expect(languages.admits(locale: "ko-KR", appVersion: nil, lastRegisteredAt: nil))
        #expect(languages.admits(locale: "zh_TW", appVersion: nil, lastRegisteredAt: nil), "Taiwan writes zh-Hant")
        #expect(languages.admits(locale: "zh-Hant-HK", appVersion: nil, lastRegisteredAt: nil))
        #expect(!languages.admits(locale: "zh-Hans-CN", appVersion: nil, lastRegisteredAt: nil))
        #expect(!languages.admits(locale: "en-KR", appVersion: nil, lastRegisteredAt: nil), "the language, not the region")
        #expect(!languages.admits(locale: nil, appVersion: nil, lastRegisteredAt: nil))

        let since = AudienceFilter(registeredSince: time(1_000))
        #expect(since.admits(locale: nil, appVersion: nil, lastRegisteredAt: time(1_000)), "the time itself is included")
        #expect(!since.admits(locale: nil, appVersion: nil, lastRegisteredAt: time(999)))

        let all = AudienceFilter(appVersions: range, languages: ["ko"], registeredSince: time(1_000))
        #expect(all.admits(locale: "ko", appVersion: "2.5", lastRegisteredAt: time(2_000)))
        #expect(!all.admits(locale: "ja", appVersion: "2.5", lastRegisteredAt: time(2_000)), "each condition, not any")
    }
}

/// A filtered push handed out in chunks, on SQLite and PostgreSQL: each chunk's recipients are the devices of its
/// range that the filter admits, as they are registered when it is claimed or taken over.
@Suite("Filtered pushes in the store")
struct FilteredPushStoreTests {
    /// Twelve devices: versions, locales and registration times chosen so each condition keeps some and drops some.
    private static let devices: [(version: String?, locale: String?, at: Int64)] = [
        ("2.3", "ko-KR", 5_000), ("2.4.1 (9)", "ko", 5_000), ("3.0", "ko-KR", 5_000), ("2.2", "ko-KR", 5_000),
        ("2.9", "en-US", 5_000), (nil, "ko-KR", 5_000), ("2.5", nil, 5_000), ("2.5", "ko-KR", 100),
        ("2.6", "zh-TW", 5_000), ("2.6", "zh-CN", 5_000), ("2.7", "ko_KR", 5_000), ("beta", "ko", 5_000),
    ]

    /// The devices of ``devices`` the filter in ``filter`` admits: 2.3 ≤ version < 3, Korean or Traditional Chinese,
    /// registered at 1,000 or later.
    private static let admitted: Set<String> = [1, 2, 9, 11].reduce(into: []) { $0.insert(numbered("device", $1)) }

    private static let filter = AudienceFilter(
        appVersions: AudienceFilter.VersionRange(atLeast: AppVersion("2.3"), below: AppVersion("3")), languages: ["ko", "zh-Hant"],
        registeredSince: time(1_000))

    private func registerDevices(_ store: any TernStore) async throws {
        for (index, device) in Self.devices.enumerated() {
            var registration = registration(numbered("device", index + 1), token: numbered("token", index + 1))
            registration.appVersion = device.version
            registration.locale = device.locale
            _ = try await store.register(registration, app: "demo", at: time(device.at))
        }
    }

    /// The demo app with ``devices`` registered, and a push to everyone with `filter`, made at 6,000.
    private func storeFilteredPush(_ id: String, _ filter: AudienceFilter, _ store: any TernStore) async throws -> PushRecord {
        try await store.createApp(makeApp())
        try await registerDevices(store)
        var push = makePush(id, at: time(6_000))
        push.filter = filter
        return try await store.createPush(push).push
    }

    @Test("a push goes to the devices its filter admits, chunk by chunk, and completes with them", arguments: StoreFactory.all)
    func handedOutFiltered(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let stored = try await storeFilteredPush("f1", Self.filter, store)
            #expect(stored.filter == Self.filter)
            #expect(try await store.push(app: "demo", id: "f1")?.filter == Self.filter, "read back as stored")

            // Chunks of three devices: some hold no one the filter admits, and the push goes on past them.
            var sent: [String] = []
            var chunks = 0
            while case .chunk(let chunk) = try await store.claimChunk(node: "a", size: 3, leaseUntil: time(60_000), at: time(7_000)) {
                chunks += 1
                sent += chunk.recipients.compactMap(\.deviceID)
                let recorded = try await store.recordChunk(
                    pushID: "f1", sequence: chunk.sequence, node: "a", PushProgress(accepted: chunk.recipients.count, failures: [], pruned: 0),
                    at: time(7_000))
                #expect(recorded != .lost)
            }
            #expect(chunks == 4, "twelve devices in chunks of three")
            #expect(Set(sent) == Self.admitted && sent.count == Self.admitted.count, "\(sent)")
            let done = try #require(try await store.push(app: "demo", id: "f1"))
            #expect(done.status == .completed)
            #expect(done.counts.targeted == Self.admitted.count)

            // A device's report of it: only a device the filter admits, as it is registered now, was sent it.
            for number in 1...Self.devices.count {
                let device = try #require(try await store.device(app: "demo", deviceID: numbered("device", number)))
                #expect(done.wasHandedOut(to: device, at: time(8_000)) == Self.admitted.contains(device.deviceID), "\(device.deviceID)")
            }
            // The console's count pages the same way.
            var counted = 0
            var cursor: String?
            repeat {
                let page = try await store.recipients(app: "demo", audience: .everyone, filter: Self.filter, after: cursor, limit: 5)
                counted += page.items.count
                cursor = page.next
            } while cursor != nil
            #expect(counted == Self.admitted.count)
        }
    }

    @Test("a chunk taken over after its node died holds what the filter admits now", arguments: StoreFactory.all)
    func takenOverFiltered(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            _ = try await storeFilteredPush("f2", AudienceFilter(languages: ["ko"]), store)
            guard case .chunk(let first) = try await store.claimChunk(node: "a", size: 12, leaseUntil: time(10_000), at: time(7_000)) else {
                Issue.record("no chunk")
                return
            }
            #expect(first.recipients.count == 8, "\(first.recipients.map(\.deviceID))")
            // Node a dies; meanwhile a Korean device switches its phone to English.
            var english = registration(numbered("device", 1), token: numbered("token", 1))
            english.locale = "en-US"
            _ = try await store.register(english, app: "demo", at: time(8_000))
            guard case .chunk(let taken) = try await store.claimChunk(node: "b", size: 12, leaseUntil: time(60_000), at: time(11_000)) else {
                Issue.record("the chunk was not taken over")
                return
            }
            #expect(taken.reclaimed && taken.sequence == first.sequence)
            #expect(taken.recipients.count == 7 && !taken.recipients.contains { $0.deviceID == numbered("device", 1) })
        }
    }

    @Test("a filter is kept with the audience, so a node that knows no filters cannot read the push as one to everyone")
    func storedForm() throws {
        let text = try StoredAudience.encode(.tags(["news"], all: true), filter: Self.filter)
        #expect(text.contains(#""kind":"filtered-tags""#), "\(text)")
        let (audience, filter) = try StoredAudience.decode(text)
        #expect(audience == .tags(["news"], all: true))
        #expect(filter == Self.filter)
        let plain = try StoredAudience.encode(.everyone)
        #expect(try StoredAudience.decode(plain).1 == nil)
        #expect(!plain.contains("filter"))
    }
}
