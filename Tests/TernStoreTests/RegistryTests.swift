import Foundation
import TernAPNs
import Testing
import TernStore

@Suite("Device registry")
struct RegistryTests {
    @Test("a new token replaces the device's token; the old one goes to its history", arguments: StoreFactory.all)
    func newTokenReplacesOld(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "old", environment: .development), app: "demo", at: time(1_000))
            // Registering the same token again keeps its first registration time for the history.
            _ = try await store.register(registration("d1", token: "old", environment: .development), app: "demo", at: time(2_000))
            let device = try await store.register(registration("d1", token: "new"), app: "demo", at: time(3_000))

            #expect(device.token == "new")
            #expect(device.environment == .production)
            #expect(device.createdAt == time(1_000))
            #expect(device.lastRegisteredAt == time(3_000))
            #expect(try await store.device(app: "demo", deviceID: "d1") == device)
            #expect(try await store.tokenHistory(app: "demo", deviceID: "d1") == [
                TokenHistoryEntry(
                    token: "old", environment: .development, firstRegisteredAt: time(1_000), replacedAt: time(3_000), reason: .replaced
                ),
            ])
            // The old token is nobody's now.
            #expect(try await store.recipients(app: "demo", audience: .tokens(["old"]), after: nil, limit: 10).items == [
                Recipient(key: "old", deviceID: nil, token: "old", environment: nil, lastRegisteredAt: nil),
            ])
        }
    }

    @Test("history lists a device's tokens oldest first", arguments: StoreFactory.all)
    func historyIsOldestFirst(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for (n, token) in ["a", "b", "c", "d"].enumerated() {
                _ = try await store.register(registration("d1", token: token), app: "demo", at: time(Int64(n) * 10))
            }
            let history = try await store.tokenHistory(app: "demo", deviceID: "d1")
            #expect(history.map(\.token) == ["a", "b", "c"])
            #expect(history.map(\.firstRegisteredAt) == [time(0), time(10), time(20)])
            #expect(history.map(\.replacedAt) == [time(10), time(20), time(30)])
        }
    }

    @Test("a token registered under another device id moves there; the device that had it is deleted", arguments: StoreFactory.all)
    func tokenMovesToNewDevice(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("lost", token: "shared", alias: "alice", tags: ["news"]), app: "demo", at: time(1))
            _ = try await store.register(registration("found", token: "mine", tags: ["sports"]), app: "demo", at: time(2))

            let device = try await store.register(registration("found", token: "shared"), app: "demo", at: time(3))

            #expect(device.deviceID == "found")
            #expect(device.token == "shared")
            #expect(device.alias == nil, "the alias went with the deleted device")
            #expect(device.tags == ["sports"])
            #expect(try await store.device(app: "demo", deviceID: "lost") == nil)
            #expect(try await store.devices(app: "demo", alias: "alice").isEmpty)
            #expect(try await store.devices(app: "demo", tag: "news", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.tokenHistory(app: "demo", deviceID: "lost") == [
                TokenHistoryEntry(token: "shared", environment: .production, firstRegisteredAt: time(1), replacedAt: time(3), reason: .moved),
            ])
            #expect(try await store.tokenHistory(app: "demo", deviceID: "found") == [
                TokenHistoryEntry(token: "mine", environment: .production, firstRegisteredAt: time(2), replacedAt: time(3), reason: .replaced),
            ])
            let holders = try await store.recipients(app: "demo", audience: .tokens(["shared"]), after: nil, limit: 10).items
            #expect(holders.map(\.deviceID) == ["found"])
        }
    }

    @Test("a token is one device's in one app only; another app may hold it too", arguments: StoreFactory.all)
    func tokensAreScopedByApp(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp("a"))
            try await store.createApp(makeApp("b"))
            _ = try await store.register(registration("d1", token: "t"), app: "a", at: time(1))
            _ = try await store.register(registration("d2", token: "t"), app: "b", at: time(2))
            #expect(try await store.device(app: "a", deviceID: "d1")?.token == "t")
            #expect(try await store.device(app: "b", deviceID: "d2")?.token == "t")
        }
    }

    @Test("registering the same token again moves lastRegisteredAt and reactivates the device", arguments: StoreFactory.all)
    func reRegistrationReactivates(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1", alias: "alice", tags: ["news"]), app: "demo", at: time(100))
            _ = try await store.deactivateToken(
                app: "demo", token: "t1", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(200)
            )
            let deactivated = try #require(try await store.device(app: "demo", deviceID: "d1"))
            #expect(deactivated.deactivatedAt == time(200))
            #expect(deactivated.deactivationReason == .apns(.unregistered))
            #expect(!deactivated.isActive)

            let device = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(300))

            #expect(device.isActive)
            #expect(device.deactivatedAt == nil)
            #expect(device.deactivationReason == nil)
            #expect(device.lastRegisteredAt == time(300))
            #expect(device.createdAt == time(100))
            #expect(device.alias == "alice")
            #expect(device.tags == ["news"])
            #expect(try await store.tokenHistory(app: "demo", deviceID: "d1").isEmpty, "the same token is not a replacement")
            #expect(try await store.device(app: "demo", deviceID: "d1") == device)
        }
    }

    @Test("a registration's locale, timezone and app version are stored", arguments: StoreFactory.all)
    func registrationDetails(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            var details = registration("d1", token: "t1")
            details.locale = "fr_FR"
            details.timezone = "Europe/Paris"
            details.appVersion = "2.1"
            let device = try await store.register(details, app: "demo", at: time(5))
            #expect(device == DeviceRecord(
                appID: "demo", deviceID: "d1", token: "t1", environment: .production, alias: nil, tags: [], locale: "fr_FR",
                timezone: "Europe/Paris", appVersion: "2.1", lastRegisteredAt: time(5), deactivatedAt: nil,
                deactivationReason: nil, createdAt: time(5)
            ))
        }
    }

    @Test("aliases: many devices each, one per device, nil leaves it, removeAlias logs out", arguments: StoreFactory.all)
    func aliases(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d2", token: "t2", alias: "alice"), app: "demo", at: time(1))
            _ = try await store.register(registration("d1", token: "t1", alias: "alice"), app: "demo", at: time(2))
            #expect(try await store.devices(app: "demo", alias: "alice").map(\.deviceID) == ["d1", "d2"])

            let unchanged = try await store.register(registration("d1", token: "t1", alias: nil), app: "demo", at: time(3))
            #expect(unchanged.alias == "alice")

            let rebound = try await store.register(registration("d1", token: "t1", alias: "bob"), app: "demo", at: time(4))
            #expect(rebound.alias == "bob")
            #expect(try await store.devices(app: "demo", alias: "alice").map(\.deviceID) == ["d2"])
            #expect(try await store.devices(app: "demo", alias: "bob").map(\.deviceID) == ["d1"])

            let loggedOut = try await store.removeAlias(app: "demo", deviceID: "d2", at: time(5))
            #expect(loggedOut?.alias == nil)
            #expect(loggedOut?.token == "t2")
            #expect(try await store.devices(app: "demo", alias: "alice").isEmpty)
            #expect(try await store.device(app: "demo", deviceID: "d2")?.alias == nil)
            #expect(try await store.removeAlias(app: "demo", deviceID: "ghost", at: time(6)) == nil)
        }
    }

    @Test("devices(alias:) lists inactive devices too, with their tags", arguments: StoreFactory.all)
    func aliasListingIncludesInactive(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1", alias: "alice", tags: ["a"]), app: "demo", at: time(1))
            _ = try await store.register(registration("d2", token: "t2", alias: "alice", tags: ["b", "c"]), app: "demo", at: time(1))
            _ = try await store.deactivateToken(app: "demo", token: "t2", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(2))
            let devices = try await store.devices(app: "demo", alias: "alice")
            #expect(devices.map(\.deviceID) == ["d1", "d2"])
            #expect(devices.map(\.tags) == [["a"], ["b", "c"]])
            #expect(devices.map(\.isActive) == [true, false])
        }
    }

    @Test("devices(createdSince:) lists the devices created in a time, oldest first, paged; a device deleted between pages moves nothing", arguments: StoreFactory.all)
    func devicesByCreation(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            for (deviceID, at) in [("d2", 1), ("d1", 1), ("d3", 2), ("d6", 3), ("d4", 3), ("d5", 3), ("d7", 5)] {
                _ = try await store.register(registration(deviceID, token: "token-\(deviceID)", tags: ["t"]), app: "demo", at: time(Int64(at)))
            }
            _ = try await store.register(registration("o1", token: "token-o1"), app: "other", at: time(3))
            // Registered again later, and deactivated: each keeps its place, as created.
            _ = try await store.register(registration("d1", token: "token-d1b"), app: "demo", at: time(4))
            _ = try await store.deactivateToken(app: "demo", token: "token-d4", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(4))

            let all = try await store.devices(app: "demo", createdSince: time(0), before: nil, after: nil, limit: 100)
            #expect(all.items.map(\.deviceID) == ["d1", "d2", "d3", "d4", "d5", "d6", "d7"])
            #expect(all.next == nil)
            #expect(all.items.first { $0.deviceID == "d1" }?.token == "token-d1b")
            #expect(all.items.first { $0.deviceID == "d4" }?.isActive == false)
            #expect(all.items.allSatisfy { $0.tags == ["t"] })

            // From 2 up to (not including) 5, two a page; the cursor's own device deleted before the next page.
            let first = try await store.devices(app: "demo", createdSince: time(2), before: time(5), after: nil, limit: 2)
            #expect(first.items.map(\.deviceID) == ["d3", "d4"])
            let cursor = try #require(first.next)
            #expect(try await store.deleteDevice(app: "demo", deviceID: "d4"))
            let second = try await store.devices(app: "demo", createdSince: time(2), before: time(5), after: DeviceCreationCursor(cursor), limit: 2)
            #expect(second.items.map(\.deviceID) == ["d5", "d6"])
            #expect(second.next == nil)

            #expect(try await store.devices(app: "demo", createdSince: time(6), before: nil, after: nil, limit: 10).items.isEmpty)
            #expect(try await store.devices(app: "other", createdSince: time(0), before: nil, after: nil, limit: 10).items.map(\.deviceID) == ["o1"])
            #expect(DeviceCreationCursor(cursor)?.description == cursor)
            #expect(DeviceCreationCursor("not-a-cursor") == nil && DeviceCreationCursor("-5:d1") == nil)
        }
    }

    @Test("tags: a registration's set replaces them, nil leaves them, updateTags adds and removes", arguments: StoreFactory.all)
    func tags(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            #expect(try await store.register(registration("d1", token: "t1", tags: ["a", "b"]), app: "demo", at: time(1)).tags == ["a", "b"])
            #expect(try await store.register(registration("d1", token: "t1", tags: nil), app: "demo", at: time(2)).tags == ["a", "b"])
            #expect(try await store.register(registration("d1", token: "t1", tags: ["c"]), app: "demo", at: time(3)).tags == ["c"])

            let updated = try await store.updateTags(app: "demo", deviceID: "d1", add: ["d", "e", "c"], remove: ["c", "zz"], at: time(4))
            #expect(updated?.tags == ["d", "e"])
            #expect(try await store.device(app: "demo", deviceID: "d1")?.tags == ["d", "e"])
            #expect(try await store.devices(app: "demo", tag: "c", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.devices(app: "demo", tag: "d", after: nil, limit: 10).items.map(\.deviceID) == ["d1"])

            #expect(try await store.register(registration("d1", token: "t1", tags: []), app: "demo", at: time(5)).tags == [])
            #expect(try await store.updateTags(app: "demo", deviceID: "ghost", add: ["a"], remove: [], at: time(6)) == nil)
            #expect(try await store.device(app: "demo", deviceID: "ghost") == nil)
        }
    }

    @Test("pages follow byte order whatever the database's collation: B, Z, _, a, é", arguments: StoreFactory.all)
    func pagesAreInByteOrder(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for deviceID in ["a", "é", "Z", "_", "B"] {
                _ = try await store.register(registration(deviceID, token: "token-\(deviceID)", tags: ["t"]), app: "demo", at: time(1))
            }
            var seen: [String] = []
            var cursor: String?
            repeat {
                let page = try await store.devices(app: "demo", tag: "t", after: cursor, limit: 2)
                seen += page.items.map(\.deviceID)
                cursor = page.next
            } while cursor != nil
            #expect(seen == ["B", "Z", "_", "a", "é"])
            #expect(seen == seen.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        }
    }

    @Test("devices(tag:) pages by device id: 250 devices, 100 at a time, each exactly once", arguments: StoreFactory.all)
    func tagPaging(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            var tagged: [String] = []
            for n in 0..<300 {
                let deviceID = numbered("device", (n * 7919) % 300)  // registered out of order
                let isTagged = n % 6 != 0
                if isTagged { tagged.append(deviceID) }
                _ = try await store.register(
                    registration(deviceID, token: "token-\(deviceID)", tags: isTagged ? ["beta", "x"] : ["other"]), app: "demo", at: time(1)
                )
            }
            #expect(tagged.count == 250)

            var pages: [Page<DeviceRecord>] = []
            var cursor: String?
            repeat {
                let page = try await store.devices(app: "demo", tag: "beta", after: cursor, limit: 100)
                pages.append(page)
                cursor = page.next
            } while cursor != nil && pages.count < 10

            #expect(pages.map(\.items.count) == [100, 100, 50])
            #expect(pages.map(\.next) == [pages[0].items.last?.deviceID, pages[1].items.last?.deviceID, nil])
            let listed = pages.flatMap(\.items)
            #expect(listed.map(\.deviceID) == tagged.sorted())
            #expect(listed.allSatisfy { $0.tags == ["beta", "x"] })
        }
    }

    @Test("deleteDevice removes the device; false when there is none", arguments: StoreFactory.all)
    func deleteDevice(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1", alias: "alice", tags: ["a"]), app: "demo", at: time(1))
            _ = try await store.register(registration("d1", token: "t2", alias: "alice", tags: ["a"]), app: "demo", at: time(2))
            #expect(try await store.deleteDevice(app: "demo", deviceID: "d1"))
            #expect(try await store.device(app: "demo", deviceID: "d1") == nil)
            #expect(try await store.devices(app: "demo", alias: "alice").isEmpty)
            #expect(try await store.devices(app: "demo", tag: "a", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.tokenHistory(app: "demo", deviceID: "d1").isEmpty)
            #expect(try await store.deleteDevice(app: "demo", deviceID: "d1") == false)

            // Registering afresh is a new device.
            let again = try await store.register(registration("d1", token: "t2"), app: "demo", at: time(3))
            #expect(again.createdAt == time(3))
            #expect(again.tags.isEmpty)
        }
    }

    @Test("registering into an unknown app throws notFound and stores nothing", arguments: StoreFactory.all)
    func unknownAppIsNotFound(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let error = await #expect(throws: StoreError.self) {
                try await store.register(registration("d1", token: "t1", alias: "alice", tags: ["a"]), app: "ghost", at: time(1))
            }
            #expect(error?.isNotFound == true)

            try await store.createApp(makeApp("ghost"))
            #expect(try await store.device(app: "ghost", deviceID: "d1") == nil)
            #expect(try await store.devices(app: "ghost", alias: "alice").isEmpty)
            #expect(try await store.devices(app: "ghost", tag: "a", after: nil, limit: 10).items.isEmpty)
        }
    }

    @Test("reinstall: same device id, new token, the alias lists one device with the new token", arguments: StoreFactory.all)
    func reinstallKeepsOneDevice(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("phone", token: "before-reinstall", alias: "alice"), app: "demo", at: time(1_000))
            // The app is reinstalled: the keychain kept the device id, APNs issued a new token, the app logs in again.
            _ = try await store.register(registration("phone", token: "after-reinstall", alias: "alice"), app: "demo", at: time(9_000))

            let devices = try await store.devices(app: "demo", alias: "alice")
            #expect(devices.count == 1)
            #expect(devices.first?.deviceID == "phone")
            #expect(devices.first?.token == "after-reinstall")
            #expect(try await store.tokenHistory(app: "demo", deviceID: "phone").map(\.token) == ["before-reinstall"])
            let recipients = try await allRecipients(store, .aliases(["alice"]), limit: 10)
            #expect(recipients.map(\.token) == ["after-reinstall"])
        }
    }
}
