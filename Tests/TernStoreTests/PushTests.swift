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
            #expect(try await store.unfinishedPushes(limit: 10).map(\.id) == ["p1"])
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
            #expect(try await store.unfinishedPushes(limit: 100).count == 1)
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

    @Test("unfinished pushes are pending and sending ones, oldest first", arguments: StoreFactory.all)
    func unfinishedPushes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            _ = try await store.createPush(makePush("p3", at: time(30)))
            _ = try await store.createPush(makePush("p1", at: time(10)))
            _ = try await store.createPush(makePush("p4", app: "other", at: time(40)))
            _ = try await store.createPush(makePush("p2", at: time(20)))
            try await store.startPush(id: "p3", at: time(50))
            try await store.startPush(id: "p2", at: time(51))
            try await store.completePush(id: "p2", at: time(60))

            let unfinished = try await store.unfinishedPushes(limit: 10)
            #expect(unfinished.map(\.id) == ["p1", "p3", "p4"])
            #expect(unfinished.map(\.status) == [.pending, .sending, .pending])
            #expect(try await store.unfinishedPushes(limit: 2).map(\.id) == ["p1", "p3"])
        }
    }

    @Test("startPush marks sending; completePush marks completed with finishedAt", arguments: StoreFactory.all)
    func pushLifecycle(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.createPush(makePush("p1"))
            #expect(try await store.push(app: "demo", id: "p1")?.status == .pending)

            try await store.startPush(id: "p1", at: time(5))
            #expect(try await store.push(app: "demo", id: "p1")?.status == .sending)
            #expect(try await store.push(app: "demo", id: "p1")?.finishedAt == nil)

            try await store.completePush(id: "p1", at: time(9))
            let push = try #require(try await store.push(app: "demo", id: "p1"))
            #expect(push.status == .completed)
            #expect(push.finishedAt == time(9))

            let start = await #expect(throws: StoreError.self) { try await store.startPush(id: "ghost", at: time(1)) }
            #expect(start?.isNotFound == true)
            let complete = await #expect(throws: StoreError.self) { try await store.completePush(id: "ghost", at: time(1)) }
            #expect(complete?.isNotFound == true)
        }
    }

    @Test("recordProgress adds to the counts and moves the cursor", arguments: StoreFactory.all)
    func progressAccumulates(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.createPush(makePush("p1"))
            try await store.startPush(id: "p1", at: time(1))

            try await store.recordProgress(pushID: "p1", PushProgress(
                accepted: 5, failures: [failure("t1", reason: "Unregistered", status: 410), failure("t2")], pruned: 1, cursor: "dev-10"
            ))
            try await store.recordProgress(pushID: "p1", PushProgress(
                accepted: 3, failures: [failure("t3"), failure("t4", reason: "timeout", status: nil)], pruned: 2, cursor: "dev-20"
            ))
            try await store.recordProgress(pushID: "p1", PushProgress(accepted: 4, failures: [], pruned: 0, cursor: "dev-30"))

            let push = try #require(try await store.push(app: "demo", id: "p1"))
            #expect(push.counts == PushCounts(
                targeted: 16, accepted: 12, failed: 4, pruned: 3, failedByReason: ["Unregistered": 1, "BadDeviceToken": 2, "timeout": 1]
            ))
            #expect(push.cursor == "dev-30")
            #expect(push.status == .sending)
        }
    }

    @Test("failures are stored with the progress and page completely", arguments: StoreFactory.all)
    func failurePaging(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.createPush(makePush("p1"))
            _ = try await store.createPush(makePush("p2"))
            let recorded = (0..<250).map { (n: Int) -> PushFailure in
                let deviceID: String? = n % 3 == 0 ? nil : "device-\(n)"
                let status: Int? = n % 5 == 0 ? nil : 410
                let reason = n % 2 == 0 ? "Unregistered" : "BadDeviceToken"
                return PushFailure(deviceID: deviceID, token: "token-\(n)", status: status, reason: reason, at: time(Int64(n)))
            }
            // A batch of more than one insert's worth, then smaller ones.
            for batch in [recorded[0..<180], recorded[180..<200], recorded[200..<250]] {
                try await store.recordProgress(pushID: "p1", PushProgress(accepted: 0, failures: Array(batch), pruned: 0, cursor: "x"))
            }
            try await store.recordProgress(pushID: "p2", PushProgress(accepted: 0, failures: [failure("elsewhere")], pruned: 0, cursor: "x"))

            var pages: [Page<PushFailure>] = []
            var cursor: String?
            repeat {
                let page = try await store.failures(pushID: "p1", after: cursor, limit: 100)
                pages.append(page)
                cursor = page.next
            } while cursor != nil && pages.count < 10

            #expect(pages.map(\.items.count) == [100, 100, 50])
            #expect(pages.last?.next == nil)
            #expect(pages.flatMap(\.items) == recorded)
            #expect(try await store.push(app: "demo", id: "p1")?.counts.failed == 250)
            #expect(try await store.failures(pushID: "ghost", after: nil, limit: 10).items.isEmpty)
        }
    }

    @Test("recordProgress for an unknown push throws notFound and changes nothing", arguments: StoreFactory.all)
    func progressForUnknownPush(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.createPush(makePush("p1"))
            let before = try await store.push(app: "demo", id: "p1")

            let error = await #expect(throws: StoreError.self) {
                try await store.recordProgress(pushID: "ghost", PushProgress(accepted: 1, failures: [failure("t1")], pruned: 1, cursor: "z"))
            }

            #expect(error?.isNotFound == true)
            #expect(try await store.failures(pushID: "ghost", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.push(app: "demo", id: "p1") == before)
        }
    }

    @Test("concurrent progress on one push loses no count", arguments: StoreFactory.all)
    func concurrentProgress(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.createPush(makePush("p1"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<50 {
                    group.addTask {
                        try await store.recordProgress(pushID: "p1", PushProgress(
                            accepted: 1, failures: [failure("t\(n)", reason: n % 2 == 0 ? "even" : "odd")], pruned: 1, cursor: "c\(n)"
                        ))
                    }
                }
                try await group.waitForAll()
            }
            let counts = try #require(try await store.push(app: "demo", id: "p1")?.counts)
            #expect(counts == PushCounts(targeted: 100, accepted: 50, failed: 50, pruned: 50, failedByReason: ["even": 25, "odd": 25]))
        }
    }
}
