import Foundation
import TernAPNs
import Testing
import TernStore

@Suite("Recipients")
struct RecipientTests {
    /// dev-a…dev-e in app `demo` (dev-d deactivated), and in app `other` a device that would match everything.
    private func seed(_ store: any TernStore) async throws {
        try await store.createApp(makeApp("demo"))
        try await store.createApp(makeApp("other"))
        _ = try await store.register(registration("dev-c", token: "tc", alias: "bob", tags: ["sports"]), app: "demo", at: time(3))
        _ = try await store.register(registration("dev-a", token: "ta", alias: "alice", tags: ["news", "sports"]), app: "demo", at: time(1))
        _ = try await store.register(registration("dev-e", token: "te"), app: "demo", at: time(5))
        _ = try await store.register(
            registration("dev-b", token: "tb", alias: "alice", tags: ["news"], environment: .development), app: "demo", at: time(2)
        )
        _ = try await store.register(registration("dev-d", token: "td", alias: "carol", tags: ["news", "sports"]), app: "demo", at: time(4))
        _ = try await store.deactivateToken(app: "demo", token: "td", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(9))
        _ = try await store.register(
            registration("dev-0", token: "t0", alias: "alice", tags: ["news", "sports"]), app: "other", at: time(1)
        )
    }

    @Test("a devices audience lists the given active devices, by device id, each once", arguments: StoreFactory.all)
    func devicesAudience(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            let recipients = try await allRecipients(store, .devices(["dev-c", "dev-a", "dev-d", "dev-zz", "dev-a", "dev-0"]), limit: 10)
            #expect(recipients == [
                Recipient(key: "dev-a", deviceID: "dev-a", token: "ta", environment: .production, lastRegisteredAt: time(1), alias: "alice"),
                Recipient(key: "dev-c", deviceID: "dev-c", token: "tc", environment: .production, lastRegisteredAt: time(3), alias: "bob"),
            ])
        }
    }

    @Test("an aliases audience lists the aliases' active devices", arguments: StoreFactory.all)
    func aliasesAudience(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            for limit in [1, 2, 10] {
                let recipients = try await allRecipients(store, .aliases(["carol", "alice", "bob", "nobody", "alice"]), limit: limit)
                #expect(recipients.map(\.deviceID) == ["dev-a", "dev-b", "dev-c"], "limit \(limit)")
                #expect(Set(recipients.map(\.key)).count == 3, "limit \(limit)")
                let second = try #require(recipients.dropFirst().first)
                #expect(second.deviceID == "dev-b" && second.token == "tb" && second.environment == .development)
                #expect(second.lastRegisteredAt == time(2) && second.alias == "alice")
            }
        }
    }

    @Test("a tags(any) audience lists a device with two of the tags once", arguments: StoreFactory.all)
    func tagsAnyAudience(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            #expect(try await allRecipients(store, .tags(["news", "sports"], all: false), limit: 10).map(\.key) == ["dev-a", "dev-b", "dev-c"])
            #expect(try await allRecipients(store, .tags(["news", "sports"], all: false), limit: 1).map(\.key) == ["dev-a", "dev-b", "dev-c"])
            #expect(try await allRecipients(store, .tags(["news"], all: false), limit: 10).map(\.key) == ["dev-a", "dev-b"])
            #expect(try await allRecipients(store, .tags([], all: false), limit: 10).isEmpty)
        }
    }

    @Test("a tags(all) audience lists the devices with every one of the tags", arguments: StoreFactory.all)
    func tagsAllAudience(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            #expect(try await allRecipients(store, .tags(["news", "sports"], all: true), limit: 10).map(\.key) == ["dev-a"])
            #expect(try await allRecipients(store, .tags(["sports", "news", "sports"], all: true), limit: 10).map(\.key) == ["dev-a"])
            #expect(try await allRecipients(store, .tags(["sports"], all: true), limit: 10).map(\.key) == ["dev-a", "dev-c"])
            #expect(try await allRecipients(store, .tags(["sports"], all: true), limit: 1).map(\.key) == ["dev-a", "dev-c"])
            #expect(try await allRecipients(store, .tags(["news", "sports"], all: true), limit: 1).map(\.key) == ["dev-a"])
            #expect(try await allRecipients(store, .tags(["news", "nope"], all: true), limit: 10).isEmpty)
            #expect(try await allRecipients(store, .tags([], all: true), limit: 10).isEmpty, "no tags is nobody, not everyone")
        }
    }

    @Test("everyone is every active device of the app", arguments: StoreFactory.all)
    func everyoneAudience(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            #expect(try await allRecipients(store, .everyone, limit: 10).map(\.key) == ["dev-a", "dev-b", "dev-c", "dev-e"])
            #expect(try await allRecipients(store, .everyone, limit: 2).map(\.key) == ["dev-a", "dev-b", "dev-c", "dev-e"])
        }
    }

    @Test("a tokens audience lists the tokens by token, minus registered-and-deactivated ones", arguments: StoreFactory.all)
    func tokensAudience(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            let recipients = try await allRecipients(store, .tokens(["te", "unknown", "td", "ta", "te", "t0"]), limit: 10)
            #expect(recipients == [
                // t0 is registered in another app only: for this app it is an unknown token.
                Recipient(key: "t0", deviceID: nil, token: "t0", environment: nil, lastRegisteredAt: nil),
                Recipient(key: "ta", deviceID: "dev-a", token: "ta", environment: .production, lastRegisteredAt: time(1), alias: "alice"),
                Recipient(key: "te", deviceID: "dev-e", token: "te", environment: .production, lastRegisteredAt: time(5)),
                Recipient(key: "unknown", deviceID: nil, token: "unknown", environment: nil, lastRegisteredAt: nil),
            ])
        }
    }

    @Test("a page after the cursor starts past it; the last page has no next", arguments: StoreFactory.all)
    func cursorSemantics(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await seed(store)
            let first = try await store.recipients(app: "demo", audience: .everyone, after: nil, limit: 2)
            #expect(first.items.map(\.key) == ["dev-a", "dev-b"])
            #expect(first.next == "dev-b")
            let second = try await store.recipients(app: "demo", audience: .everyone, after: "dev-b", limit: 2)
            #expect(second.items.map(\.key) == ["dev-c", "dev-e"])
            #expect(second.next == nil, "no device after dev-e")
            // A cursor between keys works too (a device deleted since the page was read).
            #expect(try await store.recipients(app: "demo", audience: .everyone, after: "dev-bb", limit: 10).items.map(\.key) == ["dev-c", "dev-e"])
            #expect(try await store.recipients(app: "demo", audience: .tokens(["ta", "tb", "tc"]), after: "ta", limit: 10).items.map(\.key) == ["tb", "tc"])
            #expect(try await store.recipients(app: "demo", audience: .devices(["dev-a", "dev-c"]), after: "dev-a", limit: 10).items.map(\.key) == ["dev-c"])
        }
    }

    @Test("long audiences page completely, in key order, each recipient once", arguments: StoreFactory.all)
    func longAudiences(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            var active: [String] = []
            for n in 0..<1_200 where n % 2 == 0 {
                let deviceID = numbered("device", n)
                _ = try await store.register(
                    registration(deviceID, token: numbered("token", n), alias: "user-\(n % 5)", tags: n % 4 == 0 ? ["a", "b"] : ["b"]),
                    app: "demo", at: time(1)
                )
                if n % 10 == 6 {
                    _ = try await store.deactivateToken(app: "demo", token: numbered("token", n), reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(2))
                } else {
                    active.append(deviceID)
                }
            }

            // Lists longer than one query's slice, given out of order, with devices that are not registered.
            let everyDeviceID = (0..<1_200).map { numbered("device", $0) }.reversed()
            let devices = try await allRecipients(store, .devices(Array(everyDeviceID)), limit: 100)
            #expect(devices.map(\.key) == active)

            let tokens = try await allRecipients(store, .tokens((0..<1_200).map { numbered("token", $0) }.shuffled()), limit: 100)
            let expectedTokens = (0..<1_200).filter { $0 % 2 == 1 || $0 % 10 != 6 }.map { numbered("token", $0) }
            #expect(tokens.map(\.key) == expectedTokens)
            #expect(tokens.filter { $0.deviceID != nil }.count == active.count)

            #expect(try await allRecipients(store, .everyone, limit: 100).map(\.key) == active)
            #expect(try await allRecipients(store, .tags(["a", "b"], all: false), limit: 100).map(\.key) == active)
            let withBothTags = active.filter { Int($0.dropFirst("device-".count))! % 4 == 0 }
            #expect(try await allRecipients(store, .tags(["a", "b"], all: true), limit: 100).map(\.key) == withBothTags)
            // An aliases audience pages by alias, then device id.
            let byAlias = (0..<5).flatMap { user in active.filter { Int($0.dropFirst("device-".count))! % 5 == user } }
            let aliases = try await allRecipients(store, .aliases((0..<5).map { "user-\($0)" }.reversed()), limit: 100)
            #expect(aliases.map(\.deviceID) == byAlias)
            #expect(Set(aliases.map(\.key)).count == active.count)
        }
    }

    /// SQLite reads a tag's page without a join (``SQLStore/mergedTaggedRecipients``): the tag's ids, then the devices
    /// between the first and the last of them, and by id the ones past a range cut short. Tags dense and sparse,
    /// clustered at both ends, with deactivated devices, ids beyond ASCII and ids that begin others, page as the join
    /// does.
    @Test("tags dense, sparse and clustered page in byte order, active devices only", arguments: StoreFactory.all)
    func tagsOfEveryDensity(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            var tagged: [String: [Recipient]] = [:]
            var deviceIDs = (0..<400).map { numbered("device", $0) }
            deviceIDs += ["device-\u{E9}t\u{E9}", "device-Zulu", "device-\u{1F426}", "device-000", "device-04"]
            for (n, deviceID) in deviceIDs.enumerated() {
                var tags: Set<String> = ["every"]
                if n % 97 == 5 || n >= 400 { tags.insert("rare") }
                if n % 2 == 0 { tags.insert("half") }
                if (100..<110).contains(n) || (390..<400).contains(n) { tags.insert("clustered") }
                let token = numbered("token", n)
                _ = try await store.register(registration(deviceID, token: token, alias: "user-\(n % 3)", tags: tags), app: "demo", at: time(1))
                if n % 7 == 3 {
                    _ = try await store.deactivateToken(app: "demo", token: token, reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(2))
                    continue
                }
                let recipient = Recipient(
                    key: deviceID, deviceID: deviceID, token: token, environment: .production, lastRegisteredAt: time(1), alias: "user-\(n % 3)")
                for tag in tags { tagged[tag, default: []].append(recipient) }
            }
            func inByteOrder(_ recipients: [Recipient]?) -> [Recipient] {
                (recipients ?? []).sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            }
            for limit in [1, 3, 50, 1000] {
                for tag in ["every", "rare", "half", "clustered"] {
                    let found = try await allRecipients(store, .tags([tag], all: true), limit: limit)
                    #expect(found == inByteOrder(tagged[tag]), "tag \(tag), limit \(limit)")
                }
                let both = try await allRecipients(store, .tags(["clustered", "half"], all: true), limit: limit)
                #expect(both == inByteOrder(tagged["clustered"]?.filter { recipient in tagged["half"]!.contains(recipient) }), "limit \(limit)")
            }
        }
    }

    /// SQLite reads a fan-out's recipients packed, one value per column with a NUL between two (`PackedRows`): texts
    /// that look like packing, empty ones and NULL aliases must come back as they went in.
    @Test("ids and aliases holding colons, digits, format specifiers or no text read back exactly", arguments: StoreFactory.all)
    func textsThatLookLikePacking(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let aliases: [String?] = ["~", "12:34", "3:abc~", "", "\u{65E5}\u{672C}:~", nil, "0", "-1:", "%d:%s"]
            var expected: [Recipient] = []
            for (n, alias) in aliases.enumerated() {
                let deviceID = "dev-\(n):~\(n)"
                let token = numbered("token", n)
                _ = try await store.register(registration(deviceID, token: token, alias: alias, tags: ["t"]), app: "demo", at: time(Int64(n)))
                let stored = try #require(try await store.device(app: "demo", deviceID: deviceID))
                expected.append(Recipient(
                    key: deviceID, deviceID: deviceID, token: token, environment: .production, lastRegisteredAt: time(Int64(n)), alias: stored.alias))
            }
            for limit in [1, 2, 100] {
                #expect(try await allRecipients(store, .tags(["t"], all: true), limit: limit) == expected, "limit \(limit)")
                #expect(try await allRecipients(store, .everyone, limit: limit) == expected, "limit \(limit)")
            }
        }
    }

    /// The API stores no control characters; a NUL that got into a text some other way would split it in two where the
    /// packing puts a NUL between values, and reading the audience says so rather than sending with a text cut short.
    @Test("a text holding a NUL byte is an error when the audience is read, not a text cut short")
    func nulInATextIsAnError() async throws {
        try await StoreFactory.sqliteFile.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("dev-1", token: "t1", alias: "ok", tags: ["t"]), app: "demo", at: time(1))
            _ = try await store.register(registration("dev-2", token: "t2", alias: "a\u{0}b", tags: ["t"]), app: "demo", at: time(2))
            for audience in [Audience.tags(["t"], all: true), .everyone] {
                await #expect {
                    _ = try await store.recipients(app: "demo", audience: audience, after: nil, limit: 10)
                } throws: { error in
                    guard case StoreError.unreadable = error else { return false }
                    return true
                }
            }
        }
    }
}
