import Foundation
import TernAPNs
import TernStore
import Testing

/// Broadcast channels kept under the names apps give them: one per name, paged by name, gone with their app.
@Suite("Broadcast channels")
struct BroadcastChannelStoreTests {
    static func channel(_ name: String, id: String, storing: Bool = false, environment: APNsEnvironment = .production) -> BroadcastChannelRecord {
        BroadcastChannelRecord(name: name, channelID: id, environment: environment, storesMessages: storing, createdAt: time(10))
    }

    @Test("a name keeps the first channel given it; another app's name is its own", arguments: StoreFactory.all)
    func oneChannelPerName(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            let first = Self.channel("match-1", id: "AAAA+/==", storing: true, environment: .development)
            #expect(try await store.addBroadcastChannel(app: "demo", first) == (first, true))
            let second = try await store.addBroadcastChannel(app: "demo", Self.channel("match-1", id: "BBBB"))
            #expect(second.added == false && second.channel == first, "the kept one, as it was")
            #expect(try await store.addBroadcastChannel(app: "other", Self.channel("match-1", id: "CCCC")).added)
            #expect(try await store.broadcastChannel(app: "demo", name: "match-1") == first)
            #expect(try await store.broadcastChannel(app: "other", name: "match-1")?.channelID == "CCCC")
            #expect(try await store.broadcastChannel(app: "demo", name: "match-2") == nil)
        }
    }

    @Test("channels page by name; a deleted one is gone, and so are an app's with the app", arguments: StoreFactory.all)
    func pagesAndDeletion(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for n in [3, 1, 2, 5, 4] { _ = try await store.addBroadcastChannel(app: "demo", Self.channel("c\(n)", id: "ID\(n)")) }
            let first = try await store.broadcastChannels(app: "demo", after: nil, limit: 2)
            #expect(first.items.map(\.name) == ["c1", "c2"] && first.next == "c2")
            let rest = try await store.broadcastChannels(app: "demo", after: first.next, limit: 3)
            #expect(rest.items.map(\.name) == ["c3", "c4", "c5"] && rest.next == nil)
            #expect(try await store.deleteBroadcastChannel(app: "demo", name: "c3"))
            #expect(try await !store.deleteBroadcastChannel(app: "demo", name: "c3"), "deleted already")
            #expect(try await store.broadcastChannels(app: "demo", after: nil, limit: 10).items.map(\.name) == ["c1", "c2", "c4", "c5"])
            _ = try await store.deleteApp("demo")
            try await store.createApp(makeApp())
            #expect(try await store.broadcastChannels(app: "demo", after: nil, limit: 10).items.isEmpty, "gone with the app")
        }
    }

    static func broadcast(_ channel: String, _ n: Int, result: BroadcastRecord.Result = .delivered) -> BroadcastRecord {
        BroadcastRecord(
            channel: channel, sentAt: time(Int64(100 + n)), priority: 10, expiration: 0, payload: #"{"n":\#(n)}"#, result: result,
            reason: result == .delivered ? nil : "ChannelNotRegistered", requestID: "request-\(n)", uniqueID: result == .delivered ? "unique-\(n)" : nil,
            attempts: 1)
    }

    @Test("a channel's broadcasts are listed newest first with what became of each; the latest 100 are kept, and they go with their channel", arguments: StoreFactory.all)
    func broadcastsAreKeptWithTheirChannel(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.addBroadcastChannel(app: "demo", Self.channel("match-1", id: "ID1"))
            _ = try await store.addBroadcastChannel(app: "demo", Self.channel("match-2", id: "ID2"))
            let first = try await store.recordBroadcast(app: "demo", Self.broadcast("match-1", 0, result: .rejected))
            #expect(first.id > 0)
            var expected = Self.broadcast("match-1", 0, result: .rejected)
            expected.id = first.id
            #expect(first == expected)
            _ = try await store.recordBroadcast(app: "demo", Self.broadcast("match-2", 0))
            for n in 1...BroadcastRecord.kept { _ = try await store.recordBroadcast(app: "demo", Self.broadcast("match-1", n)) }

            let latest = try await store.latestBroadcasts(app: "demo", channels: ["match-1", "match-2", "match-3"])
            #expect(latest.mapValues(\.payload) == ["match-1": #"{"n":100}"#, "match-2": #"{"n":0}"#], "one each, none for a channel without")
            #expect(try await store.latestBroadcasts(app: "demo", channels: []).isEmpty)

            let page = try await store.broadcasts(app: "demo", channel: "match-1", before: nil, limit: 3)
            #expect(page.items.map(\.payload) == [#"{"n":100}"#, #"{"n":99}"#, #"{"n":98}"#])
            #expect(page.items.first?.uniqueID == "unique-100" && page.items.first?.sentAt == time(200))
            let next = try #require(page.next.flatMap { Int64($0) })
            let rest = try await store.broadcasts(app: "demo", channel: "match-1", before: next, limit: 1_000)
            #expect(rest.next == nil)
            #expect(page.items.count + rest.items.count == BroadcastRecord.kept, "the first, refused, was the oldest and is gone")
            #expect(rest.items.last?.payload == #"{"n":1}"#)
            #expect(try await store.broadcasts(app: "demo", channel: "match-2", before: nil, limit: 10).items.map(\.payload) == [#"{"n":0}"#])

            #expect(try await store.deleteBroadcastChannel(app: "demo", name: "match-1"))
            await #expect(throws: StoreError.self) { _ = try await store.recordBroadcast(app: "demo", Self.broadcast("match-1", 101)) }
            _ = try await store.addBroadcastChannel(app: "demo", Self.channel("match-1", id: "ID3"))
            #expect(try await store.broadcasts(app: "demo", channel: "match-1", before: nil, limit: 10).items.isEmpty, "gone with the channel")
            _ = try await store.deleteApp("demo")
            try await store.createApp(makeApp())
            _ = try await store.addBroadcastChannel(app: "demo", Self.channel("match-2", id: "ID2"))
            #expect(try await store.broadcasts(app: "demo", channel: "match-2", before: nil, limit: 10).items.isEmpty, "gone with the app")
        }
    }
}
