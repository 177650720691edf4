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
}
