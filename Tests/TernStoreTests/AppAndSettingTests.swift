import Foundation
import TernAPNs
import Testing
import TernStore

@Suite("Apps and settings")
struct AppAndSettingTests {
    @Test("an app reads back with every field", arguments: StoreFactory.all)
    func appRoundTrips(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            var app = makeApp("sim", at: time(1_234))
            app.environment = .custom
            app.endpoint = .init(host: "127.0.0.1", port: 2197, caPEM: "-----BEGIN CERTIFICATE-----\n…")
            app.webhookURL = "https://example.com/hook"
            app.broadcastRatePerSecond = 250
            app.updatedAt = time(5_678)
            try await store.createApp(app)
            try await store.createApp(makeApp("alpha"))

            #expect(try await store.app("sim") == app)
            #expect(try await store.app("nope") == nil)
            #expect(try await store.apps().map(\.id) == ["alpha", "sim"])
        }
    }

    @Test("creating an app with a taken id is a conflict and changes nothing", arguments: StoreFactory.all)
    func duplicateAppIsAConflict(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            let original = makeApp("demo")
            try await store.createApp(original)
            var other = makeApp("demo")
            other.topic = "com.example.other"

            let error = await #expect(throws: StoreError.self) { try await store.createApp(other) }
            #expect(error?.isConflict == true)
            #expect(try await store.app("demo") == original)
        }
    }

    @Test("updateApp replaces every field but id and createdAt; an unknown app is notFound", arguments: StoreFactory.all)
    func updateApp(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp("demo", at: time(0)))
            var changed = makeApp("demo", at: time(999_999))
            changed.topic = "com.example.renamed"
            changed.environment = .development
            changed.endpoint = .init(host: "sim.local", port: 443, caPEM: nil)
            changed.sealedCredentials = [9, 9]
            changed.appKeyHash = [1]
            changed.masterSecretHash = [2]
            changed.webhookURL = "https://example.com/new"
            changed.broadcastRatePerSecond = 40
            changed.updatedAt = time(50)
            try await store.updateApp(changed)

            var expected = changed
            expected.createdAt = time(0)
            #expect(try await store.app("demo") == expected)

            let error = await #expect(throws: StoreError.self) { try await store.updateApp(makeApp("ghost")) }
            #expect(error?.isNotFound == true)
            #expect(try await store.app("ghost") == nil)
        }
    }

    @Test("deleteApp removes the app's devices, history, token events and pushes", arguments: StoreFactory.all)
    func deleteAppCascades(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp("demo"))
            try await store.createApp(makeApp("other"))
            _ = try await store.register(registration("d1", token: "t1", alias: "alice", tags: ["news"]), app: "demo", at: time(1))
            _ = try await store.register(registration("d1", token: "t2", alias: "alice", tags: ["news"]), app: "demo", at: time(2))
            _ = try await store.register(registration("d2", token: "t3"), app: "demo", at: time(3))
            #expect(try await store.deactivateToken(
                app: "demo", token: "t3", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(4)
            ) != nil)
            _ = try await store.createPush(makePush("p1", app: "demo", key: "k"))
            let chunk = try await store.claimChunk(node: "a", size: 1, leaseUntil: time(60_000), at: time(4))
            #expect(chunk.chunk?.push.id == "p1")
            #expect(try await store.recordChunk(
                pushID: "p1", sequence: 0, node: "a", PushProgress(accepted: 0, failures: [failure("t2")], pruned: 0), at: time(4)) != .lost)
            _ = try await store.register(registration("d1", token: "other-token"), app: "other", at: time(5))
            _ = try await store.createPush(makePush("p2", app: "other"))

            #expect(try await store.deleteApp("demo"))
            #expect(try await store.app("demo") == nil)
            #expect(try await store.deleteApp("demo") == false)

            // The same id again starts from nothing: no row of the old app survived.
            try await store.createApp(makeApp("demo"))
            #expect(try await store.device(app: "demo", deviceID: "d1") == nil)
            #expect(try await store.device(app: "demo", deviceID: "d2") == nil)
            #expect(try await store.tokenHistory(app: "demo", deviceID: "d1").isEmpty)
            #expect(try await store.devices(app: "demo", alias: "alice").isEmpty)
            #expect(try await store.devices(app: "demo", tag: "news", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.tokenEvents(app: "demo", after: nil, limit: 10).isEmpty)
            #expect(try await store.push(app: "demo", id: "p1") == nil)
            #expect(try await store.failures(pushID: "p1", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.createPush(makePush("p3", app: "demo", key: "k")).created, "the old push's idempotency key lingers")

            // The other app is untouched.
            #expect(try await store.device(app: "other", deviceID: "d1")?.token == "other-token")
            #expect(try await store.push(app: "other", id: "p2") != nil)
        }
    }

    @Test("a setting is nil until set, then the last value set", arguments: StoreFactory.all)
    func settings(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            #expect(try await store.setting("admin-token-hash") == nil)
            try await store.setSetting("admin-token-hash", to: "one")
            try await store.setSetting("admin-token-hash", to: "two")
            try await store.setSetting("other", to: "x")
            #expect(try await store.setting("admin-token-hash") == "two")
            #expect(try await store.setting("other") == "x")
        }
    }

    @Test("initializeSetting keeps the value in force and returns it", arguments: StoreFactory.all)
    func initializeSetting(_ factory: StoreFactory) async throws {
        try await factory.withStore { store async throws in
            #expect(try await store.initializeSetting("server-key", to: "first") == "first")
            #expect(try await store.initializeSetting("server-key", to: "second") == "first")
            #expect(try await store.setting("server-key") == "first")
        }
    }
}
