import Foundation
import TernAPNs
import Testing
@testable import TernStore

/// Pushes stored to be sent later (`status` `scheduled`, `sendAt`): when nodes claim them, and where they go in their
/// app's order.
@Suite("Scheduled pushes")
struct ScheduledPushTests {
    @Test("a scheduled push is claimed only once its time has come, after the pushes stored before then", arguments: StoreFactory.all)
    func claimedWhenDue(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(2, in: store)
            let stored = try await store.createPush(scheduled("s1", sendAt: time(100), at: time(1)))
            #expect(stored.push.status == .scheduled)
            #expect(stored.push.sendAt == time(100))
            _ = try await store.createPush(makePush("p1", at: time(2)))

            // p1, stored after it, does not wait for it.
            #expect(try await sendAll(store, at: time(10)) == ["p1"])
            #expect(try await store.claimChunk(node: "a", size: 10, leaseUntil: time(1_000), at: time(99)) == .idle)
            #expect(try await store.push(app: "demo", id: "s1")?.status == .scheduled)

            // p2 is stored before s1's time: it goes first, then s1.
            _ = try await store.createPush(makePush("p2", at: time(60)))
            #expect(try await sendAll(store, at: time(100)) == ["p2", "s1"])
            let sent = try #require(try await store.push(app: "demo", id: "s1"))
            #expect(sent.status == .completed)
            #expect(sent.counts.targeted == 2)
            #expect(sent.sendAt == time(100))
        }
    }

    @Test("scheduled pushes due together go in the order of their times, then of their storing", arguments: StoreFactory.all)
    func dueTogether(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            try await registerDevices(1, in: store)
            _ = try await store.register(registration("solo", token: "solo-token"), app: "other", at: time(0))
            _ = try await store.createPush(scheduled("late", sendAt: time(300), at: time(1)))
            _ = try await store.createPush(scheduled("early", sendAt: time(200), at: time(2)))
            _ = try await store.createPush(scheduled("early-too", sendAt: time(200), at: time(3)))
            _ = try await store.createPush(scheduled("elsewhere", app: "other", sendAt: time(250), at: time(4)))
            #expect(try await sendAll(store, app: nil, at: time(400)) == ["early", "early-too", "elsewhere", "late"])
        }
    }

    @Test("pushes waiting for their time hold back no push stored after them, however many wait", arguments: StoreFactory.all)
    func manyWaiting(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(1, in: store)
            // More than one claim looks at (64) and makes pending (100).
            let waiting = (0..<150).map { numbered("s", $0) }
            for (position, id) in waiting.enumerated() {
                _ = try await store.createPush(scheduled(id, sendAt: time(1_000), at: time(Int64(position))))
            }
            _ = try await store.createPush(makePush("p1", at: time(200)))
            #expect(try await sendAll(store, at: time(300)) == ["p1"])
            #expect(try await sendAll(store, at: time(1_000)) == waiting)
        }
    }

    @Test("a scheduled push cancelled before its time completes at once and is never sent", arguments: StoreFactory.all)
    func cancelledBeforeItsTime(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(2, in: store)
            _ = try await store.createPush(scheduled("s1", sendAt: time(100), at: time(1)))
            let cancelled = try #require(try await store.cancelPush(app: "demo", id: "s1", at: time(5)))
            #expect(cancelled.completedNow)
            #expect(cancelled.push.status == .completed)
            #expect(cancelled.push.cancelledAt == time(5))
            #expect(cancelled.push.finishedAt == time(5))
            #expect(try await store.claimChunk(node: "a", size: 10, leaseUntil: time(1_000), at: time(200)) == .idle)
            let after = try #require(try await store.push(app: "demo", id: "s1"))
            #expect(after.status == .completed)
            #expect(after.counts.targeted == 0)
        }
    }

    private func scheduled(_ id: String, app: String = "demo", sendAt: Date, at created: Date) -> PushRecord {
        var push = makePush(id, app: app, at: created)
        push.status = .scheduled
        push.sendAt = sendAt
        return push
    }

    /// Claims and records chunks as node `a` at `now` until there is nothing to claim. - Returns: the pushes of the
    /// chunks, in the order they were claimed, each once (of app `app`, or all when nil).
    private func sendAll(_ store: any TernStore, app: String? = "demo", at now: Date) async throws -> [String] {
        var order: [String] = []
        for _ in 0..<1_000 {
            guard case .chunk(let chunk) = try await store.claimChunk(node: "a", size: 10, leaseUntil: now.addingTimeInterval(60), at: now)
            else { return order }
            if order.last != chunk.push.id, app == nil || chunk.push.appID == app { order.append(chunk.push.id) }
            _ = try await store.recordChunk(
                pushID: chunk.push.id, sequence: chunk.sequence, node: "a",
                PushProgress(accepted: chunk.recipients.count, failures: [], pruned: 0), at: now)
        }
        Issue.record("still claiming after 1,000 chunks")
        return order
    }
}
