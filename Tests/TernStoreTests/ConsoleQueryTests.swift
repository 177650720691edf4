import Foundation
import TernAPNs
import Testing
import TernStore

@Suite("The console's reads")
struct ConsoleQueryTests {
    @Test("a device is found by its token, active or deactivated, and only in its own app", arguments: StoreFactory.all)
    func deviceByToken(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            _ = try await store.register(registration("d1", token: "aa", alias: "alice", tags: ["news"]), app: "demo", at: time(1))
            _ = try await store.register(registration("d2", token: "bb"), app: "demo", at: time(2))
            _ = try await store.deactivateToken(
                app: "demo", token: "bb", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(3))

            let found = try #require(try await store.device(app: "demo", token: "aa"))
            #expect(found.deviceID == "d1")
            #expect(found.tags == ["news"])
            #expect(try await store.device(app: "demo", token: "bb")?.isActive == false)
            #expect(try await store.device(app: "other", token: "aa") == nil)
            #expect(try await store.device(app: "demo", token: "cc") == nil)
        }
    }

    @Test("recent pushes are the app's, newest first, at most the limit", arguments: StoreFactory.all)
    func recentPushes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            for n in 0..<5 { _ = try await store.createPush(makePush(numbered("push", n), at: time(Int64(n)))) }
            _ = try await store.createPush(makePush("elsewhere", app: "other"))

            #expect(try await store.recentPushes(app: "demo", limit: 3).map(\.id) == ["push-0004", "push-0003", "push-0002"])
            #expect(try await store.recentPushes(app: "other", limit: 10).map(\.id) == ["elsewhere"])
            #expect(try await store.recentPushes(app: "nobody", limit: 10).isEmpty)
        }
    }

    @Test("a device's token events are its own, newest first", arguments: StoreFactory.all)
    func deviceTokenEvents(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "aa"), app: "demo", at: time(1))
            _ = try await store.register(registration("d2", token: "bb"), app: "demo", at: time(1))
            _ = try await store.deactivateToken(
                app: "demo", token: "aa", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: time(5), at: time(6))
            _ = try await store.register(registration("d1", token: "aa"), app: "demo", at: time(7))
            _ = try await store.deactivateToken(
                app: "demo", token: "aa", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil, at: time(8))
            _ = try await store.deactivateToken(
                app: "demo", token: "bb", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(9))

            let events = try await store.tokenEvents(app: "demo", deviceID: "d1", limit: 10)
            #expect(events.map(\.occurredAt) == [time(8), time(6)])
            #expect(events.map(\.reason) == [.apns(.badDeviceToken), .apns(.unregistered)])
            #expect(try await store.tokenEvents(app: "demo", deviceID: "d1", limit: 1).count == 1)
        }
    }
}
