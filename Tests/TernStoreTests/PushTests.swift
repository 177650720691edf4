import Foundation
import Testing
import TernStore

@Suite("Pushes")
struct PushTests {
    @Test("a created push reads back as it was stored, whatever its audience", arguments: StoreFactory.all)
    func pushRoundTrips(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let audiences: [Audience] = [
                .tokens(["t1", "t2"]), .devices(["d1"]), .aliases(["alice", "bob"]), .tags(["a", "b"], all: false),
                .tags(["a"], all: true), .everyone,
            ]
            for (n, audience) in audiences.enumerated() {
                var push = makePush("push-\(n)", key: n == 0 ? nil : "key-\(n)", audience: audience, at: time(Int64(n)))
                push.notification = n == 0 ? [] : Array("{\"aps\":{\"alert\":\"hi \(n)\"}}".utf8)
                let (stored, created) = try await store.createPush(push)
                #expect(created)
                #expect(stored == push)
                #expect(try await store.push(app: "demo", id: push.id) == push)
            }
            #expect(try await store.push(app: "other", id: "push-1") == nil, "a push is found under its own app only")
            #expect(try await store.push(app: "demo", id: "nope") == nil)
        }
    }

    @Test("the same idempotency key returns the first push and stores nothing new", arguments: StoreFactory.all)
    func idempotencyKeyReturnsFirstPush(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let first = makePush("p1", key: "order-42", audience: .aliases(["alice"]), at: time(1))
            #expect(try await store.createPush(first).created)

            let (returned, created) = try await store.createPush(makePush("p2", key: "order-42", audience: .everyone, at: time(2)))

            #expect(!created)
            #expect(returned == first)
            #expect(try await store.push(app: "demo", id: "p2") == nil)
            #expect(try await store.push(app: "demo", id: "p1") == first)
        }
    }

    @Test("ten concurrent creates with one key make exactly one push", arguments: StoreFactory.all)
    func concurrentIdempotentCreates(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let results = try await withThrowingTaskGroup(of: (push: PushRecord, created: Bool).self) { group in
                for n in 0..<10 {
                    group.addTask { try await store.createPush(makePush("p\(n)", key: "same", at: time(Int64(n)))) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.count == 10)
            #expect(results.filter(\.created).count == 1)
            #expect(Set(results.map(\.push.id)).count == 1, "every call returns the one stored push")
            let winner = try #require(results.first?.push.id)
            for n in 0..<10 where "p\(n)" != winner {
                #expect(try await store.push(app: "demo", id: "p\(n)") == nil, "only the first push is stored")
            }
        }
    }

    @Test("different apps may use the same idempotency key", arguments: StoreFactory.all)
    func keysAreScopedByApp(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp("a"))
            try await store.createApp(makeApp("b"))
            #expect(try await store.createPush(makePush("p1", app: "a", key: "k")).created)
            #expect(try await store.createPush(makePush("p2", app: "b", key: "k")).created)
            #expect(try await store.push(app: "b", id: "p2") != nil)
        }
    }

    @Test("a reused push id is a conflict; an unknown app is notFound", arguments: StoreFactory.all)
    func createPushErrors(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.createPush(makePush("p1", key: "k1", audience: .everyone))
            let conflict = await #expect(throws: StoreError.self) {
                try await store.createPush(makePush("p1", key: "k2", audience: .devices(["d"])))
            }
            #expect(conflict?.isConflict == true)
            #expect(try await store.push(app: "demo", id: "p1")?.audience == .everyone)

            let notFound = await #expect(throws: StoreError.self) { try await store.createPush(makePush("p9", app: "ghost")) }
            #expect(notFound?.isNotFound == true)
        }
    }
}
