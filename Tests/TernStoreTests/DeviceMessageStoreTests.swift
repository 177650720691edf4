import Foundation
import TernStore
import Testing

/// The online channel's storage: each device's messages numbered in its order, kept once per push, read after a
/// sequence until acknowledged or expired, acknowledged and fallen back once, swept; presence by node. On SQLite and
/// PostgreSQL alike.
@Suite("Device messages and presence")
struct DeviceMessageStoreTests {
    private func drafts(_ push: String, _ devices: [String]) -> [DeviceMessageDraft] {
        devices.map { DeviceMessageDraft(deviceID: $0, id: "\(push)-\($0)", notification: #"{"title":"\#(push)"}"#, data: nil) }
    }

    private func prepared(_ store: any TernStore) async throws {
        try await store.createApp(makeApp())
        for device in ["d1", "d2"] { _ = try await store.register(registration(device, token: "t-\(device)"), app: "demo", at: time(0)) }
        for push in ["p1", "p2", "p3"] { _ = try await store.createPush(makePush(push)) }
    }

    @Test("messages are numbered per device, kept once per push, and read after a sequence until acknowledged", arguments: StoreFactory.all)
    func numberingAndReading(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            let first = try await store.keepMessages(drafts("p1", ["d1", "d2"]), app: "demo", pushID: "p1", at: time(1), expiresAt: time(10_000))
            #expect(first.map(\.sequence) == [1, 1])
            // The same push again (a chunk sent twice): the same messages, no new numbers.
            let again = try await store.keepMessages(drafts("p1", ["d1", "d2"]), app: "demo", pushID: "p1", at: time(2), expiresAt: time(10_000))
            #expect(again == first)
            _ = try await store.keepMessages(drafts("p2", ["d1"]), app: "demo", pushID: "p2", at: time(3), expiresAt: time(10_000))
            _ = try await store.keepMessages(drafts("p3", ["d1"]), app: "demo", pushID: "p3", at: time(4), expiresAt: time(20))
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d1", after: 0, limit: 10, at: time(5)).map(\.sequence) == [1, 2, 3])
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d1", after: 1, limit: 10, at: time(5)).map(\.sequence) == [2, 3])
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d1", after: 0, limit: 2, at: time(5)).map(\.sequence) == [1, 2])
            // Expired: out of the reading at once.
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d1", after: 0, limit: 10, at: time(21)).map(\.sequence) == [1, 2])

            // Sent and acknowledged: never read again. Another device's id acknowledges nothing.
            let counted = try await store.recordChannel(
                delivered: [("demo", "d1", 1), ("demo", "d1", 2)], acks: [("demo", "d1", "p1-d1"), ("demo", "d1", "p1-d2")], at: time(6))
            #expect(counted.acked == 1)
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d1", after: 0, limit: 10, at: time(7)).map(\.sequence) == [2, 3])
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d2", after: 0, limit: 10, at: time(7)).map(\.sequence) == [1])
            let p1 = try await store.messageCounts(pushID: "p1")
            #expect(p1.deliveredOnline == 1)
            #expect(p1.acked == 1)

            // Swept once expired.
            #expect(try await store.purgeExpiredMessages(before: time(30), limit: 100) == 1)
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d1", after: 0, limit: 10, at: time(7)).map(\.sequence) == [2])
        }
    }

    @Test("a message sent and acknowledged in one report is written once, counted as both", arguments: StoreFactory.all)
    func deliveredAndAcked(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            _ = try await store.keepMessages(drafts("p1", ["d1", "d2"]), app: "demo", pushID: "p1", at: time(1), expiresAt: time(10_000))
            // d1's message in one report; an id of another device's message and a repeat acknowledge nothing.
            let counted = try await store.recordChannel(
                delivered: [], acks: [], deliveredAndAcked: [("demo", "d1", "p1-d1"), ("demo", "d1", "p1-d2")], at: time(2))
            #expect(counted.acked == 1)
            #expect(try await store.recordChannel(delivered: [], acks: [], deliveredAndAcked: [("demo", "d1", "p1-d1")], at: time(3)).acked == 0)
            // d2's sent in one report, then reported as both: counted once as delivered.
            _ = try await store.recordChannel(delivered: [("demo", "d2", 1)], acks: [], at: time(2))
            #expect(try await store.recordChannel(delivered: [], acks: [], deliveredAndAcked: [("demo", "d2", "p1-d2")], at: time(4)).acked == 1)
            let counts = try await store.messageCounts(pushID: "p1")
            #expect(counts.deliveredOnline == 2)
            #expect(counts.acked == 2)
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d1", after: 0, limit: 10, at: time(5)).isEmpty)
            #expect(try await store.pendingMessages(app: "demo", deviceID: "d2", after: 0, limit: 10, at: time(5)).isEmpty)
        }
    }

    @Test("a message falls back once, not once acknowledged, and a later ack is counted as such", arguments: StoreFactory.all)
    func fallback(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            _ = try await store.keepMessages(drafts("p1", ["d1", "d2"]), app: "demo", pushID: "p1", at: time(1), expiresAt: time(10_000))
            #expect(try await store.unacknowledged(app: "demo", ids: ["p1-d1", "p1-d2", "nothing"]) == ["p1-d1", "p1-d2"])
            _ = try await store.recordChannel(delivered: [], acks: [("demo", "d2", "p1-d2")], at: time(2))
            #expect(try await store.unacknowledged(app: "demo", ids: ["p1-d1", "p1-d2"]) == ["p1-d1"])
            #expect(try await store.unacknowledged(app: "other", ids: ["p1-d1"]) == [], "another app's messages are not this one's")
            #expect(try await store.fallBack(app: "demo", ids: ["p1-d1", "p1-d2"], at: time(3)) == ["p1-d1"])
            #expect(try await store.fallBack(app: "demo", ids: ["p1-d1", "p1-d2"], at: time(4)) == [])
            let late = try await store.recordChannel(delivered: [], acks: [("demo", "d1", "p1-d1")], at: time(5))
            #expect(late.acked == 1)
            #expect(late.afterFallback == 1)
            let counts = try await store.messageCounts(pushID: "p1")
            #expect(counts.fellBackToAPNs == 1)
            #expect(counts.ackedAfterFallback == 1)
            #expect(try await store.openMessage(app: "demo", deviceID: "d1", id: "p1-d1", at: time(6), openEvent: nil))
            #expect(try await store.openMessage(app: "demo", deviceID: "d2", id: "p1-d1", at: time(6), openEvent: nil) == false)
            #expect(try await store.messageCounts(pushID: "p1").opened == 1)
        }
    }

    @Test("devices with messages waiting: kept, not acknowledged, not expired", arguments: StoreFactory.all)
    func devicesWithMessages(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            #expect(try await store.devicesWithMessages(app: "demo", deviceIDs: ["d1", "d2"], at: time(1)).isEmpty)
            let kept = try await store.keepMessages(drafts("p1", ["d1", "d2"]), app: "demo", pushID: "p1", at: time(1), expiresAt: time(100))
            #expect(try await store.devicesWithMessages(app: "demo", deviceIDs: ["d1", "d2", "d1"], at: time(2)) == ["d1", "d2"])
            let d2 = try #require(kept.first { $0.deviceID == "d2" })
            _ = try await store.recordChannel(delivered: [], acks: [(app: "demo", deviceID: "d2", id: d2.id)], at: time(3))
            #expect(try await store.devicesWithMessages(app: "demo", deviceIDs: ["d1", "d2"], at: time(4)) == ["d1"])
            #expect(try await store.devicesWithMessages(app: "demo", deviceIDs: ["d1", "d2"], at: time(100)).isEmpty, "expired")
            #expect(try await store.devicesWithMessages(app: "other", deviceIDs: ["d1"], at: time(4)).isEmpty)
        }
    }

    @Test("presence: the newest connection's entry, removed only by its own connection or its node", arguments: StoreFactory.all)
    func presence(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            #expect(try await store.setPresence([entry("d1", "a", "c1")], at: time(1)).isEmpty)
            // In one batch, the device's last entry wins; the entry it replaces is told (to close its connection).
            let replaced = try await store.setPresence(
                [entry("d3", "a", "c4"), entry("d1", "b", "c2"), entry("d2", "a", "c3"), entry("d3", "b", "c5")], at: time(2))
            #expect(replaced == [entry("d1", "a", "c1")])
            // The same connection's entry again replaces nothing.
            #expect(try await store.setPresence([entry("d2", "a", "c3")], at: time(2)).isEmpty)
            // The replaced connections' goodbyes leave the newer entries; the last connection's removes its own.
            try await store.clearPresence([entry("d1", "a", "c1"), entry("d3", "a", "c4")])
            #expect(try await store.presence(app: "demo", deviceIDs: ["d3"]) == [DevicePresence(deviceID: "d3", node: "b", connection: "c5")])
            try await store.clearPresence([entry("d3", "b", "c5")])
            #expect(try await store.presence(app: "demo", deviceIDs: ["d1", "d2", "d3"]).sorted { $0.deviceID < $1.deviceID } == [
                DevicePresence(deviceID: "d1", node: "b", connection: "c2"), DevicePresence(deviceID: "d2", node: "a", connection: "c3"),
            ])
            #expect(try await store.clearPresence(node: "a") == 1)
            #expect(try await store.presence(app: "demo", deviceIDs: ["d1", "d2"]).map(\.deviceID) == ["d1"])
            #expect(try await store.clearPresence(node: nil) == 1)
            #expect(try await store.presence(app: "demo", deviceIDs: ["d1", "d2"]).isEmpty)
        }
    }

    @Test("nodes unseen for a while lose their presence entries; a node seen again after that is told, and puts back only the entries no newer connection took", arguments: StoreFactory.all)
    func unseenNodes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await prepared(store)
            #expect(try await store.nodeSeen("a", at: time(0)) == false, "a node new to the table")
            #expect(try await store.nodeSeen("b", at: time(0)) == false)
            #expect(try await store.nodeSeen("a", at: time(50)) == true)
            try await store.setPresence([entry("d1", "a", "c1"), entry("d2", "b", "c2")], at: time(50))
            // b was last seen at 0: unseen since 10, its entry goes, with its row; a's stays.
            #expect(try await store.clearPresenceOfUnseenNodes(since: time(10)) == 1)
            #expect(try await store.presence(app: "demo", deviceIDs: ["d1", "d2"]) == [DevicePresence(deviceID: "d1", node: "a", connection: "c1")])
            #expect(try await store.nodeSeen("b", at: time(60)) == false, "b is told it was taken for gone")
            // Meanwhile d2 connected to a; b puts back only what no one took.
            try await store.setPresence([entry("d2", "a", "c3")], at: time(55))
            try await store.restorePresence([entry("d2", "b", "c2"), entry("d3", "b", "c4")], at: time(60))
            #expect(try await store.presence(app: "demo", deviceIDs: ["d2", "d3"]).sorted { $0.deviceID < $1.deviceID } == [
                DevicePresence(deviceID: "d2", node: "a", connection: "c3"), DevicePresence(deviceID: "d3", node: "b", connection: "c4"),
            ])
        }
    }
}

/// A presence entry of app `demo`.
private func entry(_ device: String, _ node: String, _ connection: String) -> PresenceEntry {
    PresenceEntry(app: "demo", deviceID: device, node: node, connection: connection)
}
