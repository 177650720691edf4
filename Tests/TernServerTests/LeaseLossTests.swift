import Foundation
import Logging
import TernAPNs
@testable import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// A node whose chunk another node took over (its lease ran out while the database was away, say) stops sending
/// it, and its other work goes on: the chunk's notifications held the node's in-flight permits until recorded, and
/// none of them can be recorded any more.
struct LeaseLossTests {
    @Test func aNodeThatLostAChunkStopsSendingItAndKeepsDeliveringOtherPushes() async throws {
        // Slow answers: the chunk is still being sent when it is taken (40 at 4 in flight: 4 s, time enough on a busy
        // machine).
        try await Self.withSlowPush(devices: 9_001...9_040, tag: "lease", concurrency: 4, latency: 400) { server, _ in
            try await waitUntil("the push's first notifications at the simulator") { try await server.arrivals().count >= 4 }

            // Another node takes the chunk over: to the store, its lease has run out.
            let store = try await SQLStore.openSQLite(path: server.folder.appendingPathComponent("tern.db").path, logger: Logger(label: "thief"))
            let taken = try await store.claimChunk(
                node: "thief", size: 40, leaseUntil: Date().addingTimeInterval(3_600), at: Date().addingTimeInterval(600))
            try await store.close()
            guard case .chunk(let chunk) = taken else {
                Issue.record("nothing to take over: \(taken)")
                return
            }
            #expect(chunk.reclaimed)

            // Another app's push, which does not wait for the first: it is delivered, so the node's permits came back.
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 0}"#)
            let other = try await server.admin.post("/v1/apps", #"{"id": "lease-other", "topic": "com.example.other", "environment": "simulator"}"#)
            let appKey = try #require(try other.json()["appKey"]?.string)
            let master = try #require(try other.json()["masterSecret"]?.string)
            let registered = try await server.api.with(bearer: appKey).put(
                "/v1/apps/lease-other/devices/\(Fixture.device(9_999))", Fixture.registration(token: Fixture.token(9_999)))
            #expect(registered.status == 200)
            let pushed = try await server.api.with(bearer: master).post(
                "/v1/apps/lease-other/pushes?wait=8", Fixture.push(audience: #"{"all": true}"#))
            #expect(try pushed.json()["status"]?.string == "completed", "\(pushed.status) \(pushed.text) \(registered.text)")
            #expect(try pushed.json()[path: "counts.accepted"]?.int == 1)
        }
    }

    @Test func aChunkBeingSentIsRenewedEveryThirdOfItsLeaseOnTheServersClock() async throws {
        let clock = ManualClock()
        // One at a time, 300 ms each: the chunk is in flight for twelve seconds of real time (on a loaded machine the
        // test may take several to reach its renewal; three were once too few), and none passes on the server's clock
        // unless the test moves it. The rest go at once when the test is done.
        try await Self.withSlowPush(devices: 9_101...9_140, tag: "renew", concurrency: 1, latency: 300, clock: clock) { server, _ in
            let store = try await SQLStore.openSQLite(path: server.folder.appendingPathComponent("tern.db").path, logger: Logger(label: "reader"))
            @Sendable func leaseUntil() async throws -> Int? {
                try await store.exclusive { db in
                    try await db.raw("SELECT lease_until FROM push_chunks ORDER BY sequence LIMIT 1").first()?.decode(column: "lease_until", as: Int.self)
                }
            }
            try await waitUntil("the chunk claimed") { try await leaseUntil() != nil }
            let claimed = try #require(try await leaseUntil())
            let expected = Int((clock.wall.now.timeIntervalSince1970 + 15) * 1000)
            #expect(abs(claimed - expected) <= 1, "claimed for a lease of 15 s from the server's clock: \(claimed) vs \(expected)")
            // The row is written before the node counts the chunk as in flight; the first notification at the simulator
            // says it does. A renewal before then finds nothing to renew and sleeps another third on the test's clock.
            try await waitUntil("the chunk's first notification at the simulator") { try await !server.arrivals().isEmpty }

            // A third of the lease later on the server's clock, the node renews it from then. The renewer sleeps a third
            // of the lease at a time from the server's start, and the test waits for that sleep by its name: another
            // loop's sleep can end at the same instant.
            try await withTimeout(10, "the renewer to wait") {
                await clock.waitUntilSleeping(until: clock.now.advanced(by: .seconds(5)), label: ServerClocks.Waiter.leaseRenewal.rawValue)
            }
            clock.advance(by: .seconds(5))
            try await waitUntil("the lease renewed") { try await leaseUntil().map { $0 != claimed } ?? false }
            // Within a millisecond, as the claim: each is the clock's time in seconds plus the lease, rounded to
            // milliseconds. Renewed from the server's clock when it renewed: its time then, plus the lease.
            let lease = try #require(try await leaseUntil())
            #expect(abs(lease - (claimed + 5_000)) <= 1, "renewed to \(lease), a third of the lease after the claim at \(claimed)")
            try await store.close()
        }
    }

    @Test func aNodeWhoseClockJumpsForwardMidChunkDoesNotSendItsOwnChunkAgain() async throws {
        let clock = ManualClock()
        // 40 at 4 in flight, 300 ms each: the chunk is being sent for about three seconds.
        let devices = 9_201...9_240
        try await Self.withSlowPush(devices: devices, tag: "jump", concurrency: 4, latency: 300, clock: clock) { server, id in
            try await waitUntil("the push's first notifications at the simulator") { try await server.arrivals().count >= 4 }

            // The node's clock is set a minute forward (NTP, a machine resumed): to the store, the lease of the chunk
            // it is sending ran out long ago, and the next claim finds it.
            clock.wall.advance(by: 60)
            try await waitUntil("the push to complete", within: 30) {
                try await server.master.get("/v1/apps/demo/pushes/\(id)").json()["status"]?.string == "completed"
            }
            let tokens = Set(devices.map(Fixture.token))
            let ours = try await server.arrivals().filter { tokens.contains($0.token) }
            #expect(ours.count == devices.count, "\(ours.count - devices.count) sent twice")
            #expect(Set(ours.map(\.token)) == tokens)
        }
    }

    @Test func aPushUnderWayWhenItsAppsClientIsReplacedIsSentToEveryoneWithoutWaitingForItsLease() async throws {
        // 40 at 4 in flight, 300 ms each: the chunk is being sent for about three seconds when the operator changes the
        // app, and the next push asks for a client made from the changed app, which replaces (and shuts down) the one
        // the chunk is sending through.
        let devices = 9_301...9_340
        try await Self.withSlowPush(devices: devices, tag: "replaced", concurrency: 4, latency: 300) { server, id in
            try await waitUntil("the push's first notifications at the simulator") { try await server.arrivals().count >= 4 }
            let changed = try await server.admin.patch("/v1/apps/demo", #"{"inboxCap": 10}"#)
            #expect(changed.status == 200, "\(changed.text)")
            _ = try await server.register(Fixture.device(9_399), token: Fixture.token(9_399), tags: ["other"])
            let next = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": ["other"]}"#))
            #expect(next.status == 202, "\(next.text)")

            // What the replaced client did not send is neither failed nor left for the lease (15 s) to run out.
            let started = ContinuousClock.now
            try await waitUntil("the push to complete", within: 30) {
                try await server.master.get("/v1/apps/demo/pushes/\(id)").json()["status"]?.string == "completed"
            }
            #expect(ContinuousClock.now - started < .seconds(12), "the chunk was given up, not left until its lease ran out")
            let push = try await server.master.get("/v1/apps/demo/pushes/\(id)").json()
            #expect(push[path: "counts.accepted"]?.int == devices.count, "\(push)")
            #expect(push[path: "counts.failed"]?.int == 0, "\(push)")
            let tokens = Set(devices.map(Fixture.token))
            #expect(Set(try await server.arrivals().map(\.token)).isSuperset(of: tokens), "every device got the push")
        }
    }

    /// A server sending one chunk of a push to `devices` (each registered with `tag`), `concurrency` notifications in
    /// flight, the simulator answering each after `latency` ms; on `clock` when given (15 s leases), the system's
    /// otherwise. `body` gets the server and the push's id as soon as the push is accepted; the simulator answers at
    /// once again afterwards.
    private static func withSlowPush(
        devices: ClosedRange<Int>, tag: String, concurrency: Int, latency: Int, clock: ManualClock? = nil,
        _ body: @escaping @Sendable (RoutedServer, String) async throws -> Void
    ) async throws {
        try await RouterHarness.withServer(configure: {
            $0.delivery.chunkSize = devices.count
            $0.delivery.concurrency = concurrency
            $0.delivery.chunkLease = .seconds(15)
        }, clocks: clock.map { .manual($0) } ?? .system) { server in
            for number in devices {
                _ = try await server.register(Fixture.device(number), token: Fixture.token(number), tags: [tag])
            }
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": \#(latency)}"#)
            let accepted = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": ["\#(tag)"]}"#))
            #expect(accepted.status == 202, "\(accepted.text)")
            let id = try #require(try accepted.json()["id"]?.string)
            try await body(server, id)
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 0}"#)
        }
    }
}
