import Foundation
import Testing
import TernStore

@Suite("Inbox and badges")
struct InboxStoreTests {
    private let alice = InboxOwner.alias("alice")
    private let bob = InboxOwner.alias("bob")

    /// A message created at `created` ms that expires `ttl` ms later.
    private func message(_ id: String, app: String = "demo", created: Int64 = 0, ttl: Int64 = 10_000) -> InboxMessage {
        InboxMessage(
            id: id, appID: app, title: "title \(id)", body: "body \(id)", data: #"{"n":1}"#, createdAt: time(created),
            expiresAt: time(created + ttl))
    }

    private func listed(_ store: any TernStore, _ owner: InboxOwner, app: String = "demo", at: Int64, limit: Int = 100) async throws -> [String] {
        var ids: [String] = []
        var cursor: Int64?
        while true {
            let page = try await store.inbox(app: app, owner: owner, after: cursor, limit: limit, at: time(at))
            #expect(page.items.count <= limit)
            ids += page.items.map(\.message.id)
            guard let next = page.next else { return ids }
            cursor = Int64(next)
        }
    }

    @Test("delivering a message twice to an owner keeps one entry with its first sequence", arguments: StoreFactory.all)
    func idempotentDelivery(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            #expect(try await store.deliverToInbox(message("m1"), owners: [alice, bob], cap: 10, at: time(1)) == 0)
            let first = try await store.inbox(app: "demo", owner: alice, after: nil, limit: 10, at: time(2)).items
            #expect(try await store.deliverToInbox(message("m1"), owners: [alice, alice], cap: 10, at: time(3)) == 0)
            let again = try await store.inbox(app: "demo", owner: alice, after: nil, limit: 10, at: time(4)).items
            #expect(first.count == 1)
            #expect(again == first)
            #expect(first.first?.message == message("m1"))
            #expect(try await store.unreadCount(app: "demo", owner: bob, at: time(4)) == 1)
        }
    }

    @Test("a listing is oldest first and pages with its cursor", arguments: StoreFactory.all)
    func listingAndCursor(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let ids = (1...7).map { numbered("m", $0) }
            for (index, id) in ids.enumerated() {
                _ = try await store.deliverToInbox(message(id, created: Int64(index)), owners: [alice], cap: 100, at: time(Int64(index)))
            }
            #expect(try await listed(store, alice, at: 10, limit: 3) == ids)
            #expect(try await listed(store, alice, at: 10, limit: 100) == ids)
            let page = try await store.inbox(app: "demo", owner: alice, after: nil, limit: 3, at: time(10))
            let sequences = page.items.map(\.sequence)
            #expect(sequences == sequences.sorted() && Set(sequences).count == 3)
        }
    }

    @Test("an expired message leaves listings and unread counts at once, and the sweeper deletes it", arguments: StoreFactory.all)
    func expiry(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.deliverToInbox(message("short", created: 0, ttl: 100), owners: [alice], cap: 10, at: time(0))
            _ = try await store.deliverToInbox(message("long", created: 0, ttl: 100_000), owners: [alice], cap: 10, at: time(0))
            #expect(try await listed(store, alice, at: 99) == ["short", "long"])
            #expect(try await store.unreadCount(app: "demo", owner: alice, at: time(99)) == 2)
            #expect(try await listed(store, alice, at: 100) == ["long"], "expired at its expiry")
            #expect(try await store.unreadCount(app: "demo", owner: alice, at: time(100)) == 1)

            #expect(try await store.purgeExpiredInbox(before: time(50), limit: 10) == 0, "nothing expired before 50 ms")
            #expect(try await store.purgeExpiredInbox(before: time(101), limit: 10) == 1)
            #expect(try await store.purgeExpiredInbox(before: time(101), limit: 10) == 0)
            #expect(try await listed(store, alice, at: 0) == ["long"], "the expired entry is gone, not just hidden")
        }
    }

    @Test("the sweeper deletes at most limit entries a call, oldest expiry first", arguments: StoreFactory.all)
    func purgeLimit(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for number in 1...5 {
                _ = try await store.deliverToInbox(message(numbered("m", number), ttl: Int64(number)), owners: [alice, bob], cap: 10, at: time(0))
            }
            #expect(try await store.purgeExpiredInbox(before: time(1_000), limit: 3) == 3)
            #expect(try await store.purgeExpiredInbox(before: time(1_000), limit: 3) == 3)
            #expect(try await store.purgeExpiredInbox(before: time(1_000), limit: 3) == 3)
            #expect(try await store.purgeExpiredInbox(before: time(1_000), limit: 3) == 1)
            #expect(try await store.purgeExpiredInbox(before: time(1_000), limit: 3) == 0)
            // Delivering a purged message again stores it anew: the message row went with its last entry.
            _ = try await store.deliverToInbox(message("m-0001", created: 2_000), owners: [alice], cap: 10, at: time(2_000))
            #expect(try await listed(store, alice, at: 2_001) == ["m-0001"])
        }
    }

    @Test("owners see only their own messages, and apps only theirs", arguments: StoreFactory.all)
    func isolation(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp("demo"))
            try await store.createApp(makeApp("other"))
            _ = try await store.deliverToInbox(message("for-alice"), owners: [alice], cap: 10, at: time(0))
            _ = try await store.deliverToInbox(message("for-device"), owners: [.device("dev-1")], cap: 10, at: time(0))
            _ = try await store.deliverToInbox(message("other-app", app: "other"), owners: [alice], cap: 10, at: time(0))
            #expect(try await listed(store, alice, at: 1) == ["for-alice"])
            #expect(try await listed(store, bob, at: 1) == [])
            #expect(try await listed(store, .device("dev-1"), at: 1) == ["for-device"])
            #expect(try await listed(store, .alias("dev-1"), at: 1) == [], "an alias named like a device id is another owner")
            #expect(try await listed(store, alice, app: "other", at: 1) == ["other-app"])
            #expect(try await store.markRead(app: "other", owner: alice, upTo: "for-alice", ids: ["for-alice"], at: time(2)) == 0)
            #expect(try await store.deleteFromInbox(app: "demo", owner: bob, messageID: "for-alice") == false)
            #expect(try await store.unreadCount(app: "demo", owner: alice, at: time(3)) == 1)
        }
    }

    @Test("the cap keeps the newest messages and says how many it dropped", arguments: StoreFactory.all)
    func cap(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for number in 1...3 {
                #expect(try await store.deliverToInbox(message(numbered("m", number)), owners: [alice], cap: 3, at: time(0)) == 0)
            }
            #expect(try await store.deliverToInbox(message("m-0004"), owners: [alice, bob], cap: 3, at: time(0)) == 1)
            #expect(try await listed(store, alice, at: 1) == ["m-0002", "m-0003", "m-0004"])
            #expect(try await listed(store, bob, at: 1) == ["m-0004"])
            #expect(try await store.deliverToInbox(message("m-0005"), owners: [alice], cap: 1, at: time(0)) == 3)
            #expect(try await listed(store, alice, at: 1) == ["m-0005"])
            // Expired messages do not count toward the cap.
            _ = try await store.deliverToInbox(message("brief", ttl: 5), owners: [bob], cap: 2, at: time(0))
            #expect(try await store.deliverToInbox(message("later", created: 10), owners: [bob], cap: 2, at: time(10)) == 0)
            #expect(try await listed(store, bob, at: 10) == ["m-0004", "later"])
        }
    }

    @Test("reading up to a message, by ids, and unread counts; deleting one message", arguments: StoreFactory.all)
    func readState(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for number in 1...5 {
                _ = try await store.deliverToInbox(message(numbered("m", number)), owners: [alice], cap: 10, at: time(0))
            }
            #expect(try await store.markRead(app: "demo", owner: alice, upTo: "m-0003", ids: [], at: time(5)) == 3)
            #expect(try await store.markRead(app: "demo", owner: alice, upTo: "m-0002", ids: ["m-0003", "m-0005", "nope"], at: time(6)) == 1)
            #expect(try await store.markRead(app: "demo", owner: alice, upTo: "nope", ids: [], at: time(7)) == 0)
            #expect(try await store.unreadCount(app: "demo", owner: alice, at: time(8)) == 1)
            let items = try await store.inbox(app: "demo", owner: alice, after: nil, limit: 10, at: time(8)).items
            #expect(items.map { $0.readAt != nil } == [true, true, true, false, true])
            #expect(items.first?.readAt == time(5))
            #expect(try await store.deleteFromInbox(app: "demo", owner: alice, messageID: "m-0004"))
            #expect(try await store.deleteFromInbox(app: "demo", owner: alice, messageID: "m-0004") == false)
            #expect(try await store.unreadCount(app: "demo", owner: alice, at: time(9)) == 0)
        }
    }

    @Test("badges: unread counts and sets the counter, +N once per push and owner, a number sets the counter", arguments: StoreFactory.all)
    func badgeModes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for id in ["p1", "p2", "p3", "p4"] { _ = try await store.createPush(makePush(id)) }
            _ = try await store.deliverToInbox(message("m1"), owners: [alice], cap: 10, at: time(0))
            _ = try await store.deliverToInbox(message("m2"), owners: [alice], cap: 10, at: time(0))
            _ = try await store.markRead(app: "demo", owner: alice, upTo: "m1", ids: [], at: time(1))
            #expect(try await store.badges(app: "demo", owners: [alice, bob], pushID: "p1", change: .unread, at: time(2)) == [alice: 1, bob: 0])

            // The unread count given is the counter an increment counts on from (alice 1, bob 0).
            #expect(try await store.badges(app: "demo", owners: [alice, bob], pushID: "p1", change: .increment(2), at: time(3)) == [alice: 3, bob: 2])
            #expect(try await store.badges(app: "demo", owners: [alice], pushID: "p1", change: .increment(2), at: time(4)) == [alice: 3], "same push: same value")
            #expect(try await store.badges(app: "demo", owners: [alice], pushID: "p2", change: .increment(1), at: time(5)) == [alice: 4])
            #expect(try await store.badges(app: "demo", owners: [alice], pushID: "p3", change: .set(10), at: time(6)) == [alice: 10])
            #expect(try await store.badges(app: "demo", owners: [alice, bob], pushID: "p4", change: .increment(1), at: time(7)) == [alice: 11, bob: 3])
            // A counter stops at the largest badge: a payload checked with that badge's width never outgrows APNs' limit.
            for id in ["p5", "p6"] { _ = try await store.createPush(makePush(id)) }
            #expect(try await store.badges(app: "demo", owners: [alice, bob], pushID: "p5", change: .increment(99_995), at: time(8))
                == [alice: 99_999, bob: 99_998])
            #expect(try await store.badges(app: "demo", owners: [alice, bob], pushID: "p6", change: .increment(99_999), at: time(9))
                == [alice: BadgeChange.largest, bob: BadgeChange.largest])
        }
    }

    @Test("the inbox settings of an app and a push's inboxDropped are stored", arguments: StoreFactory.all)
    func appSettingsAndPushCount(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            var app = makeApp()
            #expect(app.inboxMaxTTL == AppRecord.defaultInboxMaxTTL && app.inboxCap == AppRecord.defaultInboxCap)
            app.inboxCap = 7
            try await store.createApp(app)
            #expect(try await store.app("demo")?.inboxCap == 7)
            app.inboxMaxTTL = 3600
            try await store.updateApp(app)
            #expect(try await store.app("demo") == app)

            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(0))
            _ = try await store.register(registration("d2", token: "t2"), app: "demo", at: time(0))
            _ = try await store.createPush(makePush("p1"))
            for (sequence, dropped) in [3, 1].enumerated() {
                #expect(try await store.claimChunk(node: "a", size: 1, leaseUntil: time(60_000), at: time(1)).chunk?.sequence == sequence)
                let progress = PushProgress(accepted: 1, failures: [], pruned: 0, inboxDropped: dropped)
                #expect(try await store.recordChunk(pushID: "p1", sequence: sequence, node: "a", progress, at: time(2)) != .lost)
            }
            #expect(try await store.push(app: "demo", id: "p1")?.counts.inboxDropped == 4)
        }
    }

    @Test("deleting an app deletes its inboxes", arguments: StoreFactory.all)
    func appDeletion(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.deliverToInbox(message("m1"), owners: [alice], cap: 10, at: time(0))
            #expect(try await store.deleteApp("demo"))
            try await store.createApp(makeApp())
            #expect(try await listed(store, alice, at: 1) == [])
            // The message id is free again.
            _ = try await store.deliverToInbox(message("m1"), owners: [alice], cap: 10, at: time(0))
            #expect(try await listed(store, alice, at: 1) == ["m1"])
        }
    }

    @Test("a deleted device's own inbox and badge go with it, whether deleted or its token moved; an alias's inbox stays",
        arguments: StoreFactory.all)
    func deletedDevicesInbox(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let (d1, d2, d3) = (InboxOwner.device("d1"), InboxOwner.device("d2"), InboxOwner.device("d3"))
            for (id, token) in [("d1", "t1"), ("d2", "t2"), ("d3", "t3")] {
                _ = try await store.register(registration(id, token: token), app: "demo", at: time(0))
            }
            _ = try await store.register(registration("a1", token: "ta", alias: "alice"), app: "demo", at: time(0))
            for id in ["p", "q"] { _ = try await store.createPush(makePush(id)) }
            _ = try await store.deliverToInbox(message("m1"), owners: [d1, d2, d3, alice], cap: 10, at: time(1))
            #expect(try await store.badges(app: "demo", owners: [d1, d2], pushID: "p", change: .increment(3), at: time(1)) == [d1: 3, d2: 3])

            // Deleted on purpose, and registered afresh under the same id by someone else: nothing of the old device.
            #expect(try await store.deleteDevice(app: "demo", deviceID: "d1"))
            #expect(try await listed(store, d1, at: 2) == [])
            #expect(try await store.unreadCount(app: "demo", owner: d1, at: time(2)) == 0)
            _ = try await store.register(registration("d1", token: "t9"), app: "demo", at: time(3))
            #expect(try await listed(store, d1, at: 4) == [])
            #expect(try await store.badges(app: "demo", owners: [d1], pushID: "q", change: .increment(1), at: time(4)) == [d1: 1])

            // d2's token registered under another id (a cleared keychain): d2 goes, and its inbox with it.
            _ = try await store.register(registration("d4", token: "t2"), app: "demo", at: time(5))
            #expect(try await store.device(app: "demo", deviceID: "d2") == nil)
            #expect(try await listed(store, d2, at: 6) == [])

            // The others keep theirs, the alias's included.
            #expect(try await listed(store, d3, at: 6) == ["m1"])
            #expect(try await listed(store, alice, at: 6) == ["m1"])
            #expect(try await store.deleteDevice(app: "demo", deviceID: "a1"))
            #expect(try await listed(store, alice, at: 7) == ["m1"])
        }
    }

    @Test("a message keeps its texts in other languages, and devices' locales are read by id", arguments: StoreFactory.all)
    func localizationsAndLocales(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            var localized = message("m1")
            localized.localizations = #"{"ko":{"body":"본문","title":"제목"}}"#
            _ = try await store.deliverToInbox(localized, owners: [alice], cap: 10, at: time(1))
            _ = try await store.deliverToInbox(message("m2"), owners: [alice], cap: 10, at: time(1))
            let items = try await store.inbox(app: "demo", owner: alice, after: nil, limit: 10, at: time(2)).items
            #expect(items.map(\.message) == [localized, message("m2")])
            #expect(items.last?.message.localizations == nil)

            var korean = registration("k", token: "token-k")
            korean.locale = "ko-KR"
            _ = try await store.register(korean, app: "demo", at: time(0))
            _ = try await store.register(registration("none", token: "token-none"), app: "demo", at: time(0))
            var elsewhere = registration("x", token: "token-x")
            elsewhere.locale = "en-US"
            _ = try await store.register(elsewhere, app: "other", at: time(0))
            // Another app's device of that id, one with no locale and an unknown id are left out.
            let found = try await store.locales(app: "demo", deviceIDs: ["k", "none", "x", "unknown"])
            #expect(found == ["k": "ko-KR"])
            #expect(try await store.locales(app: "demo", deviceIDs: []).isEmpty)
            // More ids than one statement binds.
            let many = (0..<1_200).map { "id-\($0)" } + ["k"]
            #expect(try await store.locales(app: "demo", deviceIDs: many) == ["k": "ko-KR"])
        }
    }
}
