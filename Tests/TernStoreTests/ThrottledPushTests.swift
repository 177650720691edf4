import Foundation
import TernAPNs
import Testing
@testable import TernStore

/// Throttled pushes (`ratePerSecond`): handed out a second's worth at a time, one chunk at a time, whichever node
/// claims; and out of their app's order, so a slow broadcast holds none of the app's other pushes back.
@Suite("Throttled pushes")
struct ThrottledPushTests {
    @Test("a throttled push is handed out one chunk of a second's worth at a time, each when the one before has had its time", arguments: StoreFactory.all)
    func handedOutAtItsRate(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(25, in: store)
            let stored = try await store.createPush(throttled("t1", rate: 10, at: time(0)))
            #expect(stored.push.ratePerSecond == 10)
            #expect(try await store.push(app: "demo", id: "t1")?.ratePerSecond == 10)

            // Ten of the 25, though the node has room for 100; no second chunk while the first is open, on any node.
            let first = try #require(try await claim(store, node: "a", at: time(1_000)))
            #expect(first.recipients.count == 10)
            #expect(try await store.claimChunk(node: "b", size: 100, leaseUntil: time(60_000), at: time(1_000)) == .notBefore(time(2_000)))
            try await close(first, store, at: time(1_200))
            // Closed, its second has not passed: the next is due then, for every node.
            #expect(try await store.claimChunk(node: "b", size: 100, leaseUntil: time(60_000), at: time(1_500)) == .notBefore(time(2_000)))
            let second = try #require(try await claim(store, node: "b", at: time(2_000)))
            #expect(second.recipients.count == 10)
            #expect(second.recipients.first?.key ?? "" > first.recipients.last?.key ?? "", "the audience goes on where it stopped")
            // Its second has passed, but it is still being sent: nothing, until it is closed.
            #expect(try await store.claimChunk(node: "a", size: 100, leaseUntil: time(60_000), at: time(3_500)) == .idle)
            try await close(second, by: "b", store, at: time(3_600))
            // The last five: half a second's worth.
            let third = try #require(try await claim(store, node: "a", at: time(3_600)))
            #expect(third.recipients.count == 5)
            try await close(third, store, at: time(3_610))
            let done = try #require(try await store.push(app: "demo", id: "t1"))
            #expect(done.status == .completed)
            #expect(done.counts.accepted == 25)
        }
    }

    @Test("a throttled push holds none of its app's later pushes back, and waits for none of the earlier ones", arguments: StoreFactory.all)
    func outOfItsAppsOrder(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(30, in: store)
            _ = try await store.createPush(makePush("p1", at: time(0)))
            _ = try await store.createPush(throttled("t1", rate: 5, at: time(1)))
            _ = try await store.createPush(makePush("p2", at: time(2)))
            // Node b sends p1, all of it in one chunk, and has not finished.
            let p1 = try #require(try await claim(store, node: "b", at: time(100)))
            #expect(p1.push.id == "p1" && p1.recipients.count == 30)

            // The throttled push does not wait for it; p2, after it in the app's order, does.
            let t1 = try #require(try await claim(store, node: "a", at: time(100)))
            #expect(t1.push.id == "t1" && t1.recipients.count == 5)
            #expect(try await store.claimChunk(node: "a", size: 100, leaseUntil: time(60_000), at: time(100)) == .notBefore(time(1_100)))

            // Once p1 is done, p2 goes, though the throttled push, made before it, has 25 recipients left.
            try await close(p1, by: "b", store, at: time(200))
            let p2 = try #require(try await claim(store, node: "a", at: time(200)))
            #expect(p2.push.id == "p2" && p2.recipients.count == 30)
            try await close(p2, store, at: time(300))
            try await close(t1, store, at: time(300))
            #expect(try await store.push(app: "demo", id: "p2")?.status == .completed)
            let throttled = try #require(try await store.push(app: "demo", id: "t1"))
            #expect(throttled.status == .sending && throttled.counts.accepted == 5)
        }
    }

    @Test("a throttled push stopped between chunks completes at once; one scheduled is throttled from its time; a chunk whose node died is taken over, and the next still waits its turn", arguments: StoreFactory.all)
    func stoppedScheduledAndTakenOver(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(25, in: store)

            // Stopped while it waits for its next chunk: nothing is open, so it completes at once, with what it sent.
            _ = try await store.createPush(throttled("stopped", rate: 10, at: time(0)))
            try await close(try #require(try await claim(store, node: "a", at: time(100))), store, at: time(200))
            let cancelled = try #require(try await store.cancelPush(app: "demo", id: "stopped", at: time(300)))
            #expect(cancelled.completedNow && cancelled.push.status == .completed && cancelled.push.counts.accepted == 10)
            #expect(try await store.claimChunk(node: "a", size: 100, leaseUntil: time(60_000), at: time(5_000)) == .idle)

            // Scheduled and throttled: nothing before its time, then ten at a time.
            var later = throttled("later", rate: 10, at: time(0))
            later.status = .scheduled
            later.sendAt = time(10_000)
            _ = try await store.createPush(later)
            #expect(try await store.claimChunk(node: "a", size: 100, leaseUntil: time(60_000), at: time(9_999)) == .idle)
            let first = try #require(try await claim(store, node: "a", at: time(10_000)))
            #expect(first.push.id == "later" && first.recipients.count == 10)

            // Node a dies with that chunk: once its lease has run out (a minute), node b takes it over as it was. The
            // next chunk was due a second after the first was handed out, long past, so it goes once that one is
            // closed; the one after it a second later.
            let takenOver = try #require(try await claim(store, node: "b", at: time(70_001)))
            #expect(takenOver.reclaimed && takenOver.sequence == first.sequence && takenOver.recipients == first.recipients)
            try await close(takenOver, by: "b", store, at: time(70_002))
            let second = try #require(try await claim(store, node: "b", at: time(70_002)))
            #expect(second.recipients.count == 10 && second.sequence == first.sequence + 1)
            #expect(try await store.claimChunk(node: "a", size: 100, leaseUntil: time(130_000), at: time(70_003)) == .notBefore(time(71_002)))
        }
    }

    @Test("nodes claiming a throttled push at once hand out one chunk between them", arguments: StoreFactory.all)
    func oneChunkWhateverTheNodes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(25, in: store)
            _ = try await store.createPush(throttled("t1", rate: 10, at: time(0)))
            // Four nodes at the same moment, each asking until it is told there is nothing for now.
            let claimed = try await claimTogether(["a", "b", "c", "d"], size: 100, leaseUntil: time(60_000), at: time(1_000), in: store)
            #expect(claimed.count == 1, "\(claimed.map(\.sequence))")
            #expect(claimed.first?.recipients.count == 10)
        }
    }

    private func throttled(_ id: String, rate: Int, at created: Date) -> PushRecord {
        var push = makePush(id, at: created)
        push.ratePerSecond = rate
        return push
    }

    private func claim(_ store: any TernStore, node: String, size: Int = 100, at now: Date) async throws -> PushChunk? {
        guard case .chunk(let chunk) = try await store.claimChunk(node: node, size: size, leaseUntil: now.addingTimeInterval(60), at: now)
        else { return nil }
        return chunk
    }

    private func close(_ chunk: PushChunk, by node: String = "a", _ store: any TernStore, at now: Date) async throws {
        let recorded = try await store.recordChunk(
            pushID: chunk.push.id, sequence: chunk.sequence, node: node, PushProgress(accepted: chunk.recipients.count, failures: [], pruned: 0),
            at: now)
        #expect(recorded != .lost)
    }
}
