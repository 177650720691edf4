import Foundation
import Logging
import TernAPNs
import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// A node whose chunk another node took over (its lease ran out while the database was away, say) stops sending
/// it, and its other work goes on: the chunk's notifications held the node's in-flight permits until recorded, and
/// none of them can be recorded any more.
struct LeaseLossTests {
    @Test func aNodeThatLostAChunkStopsSendingItAndKeepsDeliveringOtherPushes() async throws {
        try await RouterHarness.withServer(configure: {
            $0.delivery.chunkSize = 40
            $0.delivery.concurrency = 4
        }) { server in
            for number in 1...40 {
                _ = try await server.register(Fixture.device(9_000 + number), token: Fixture.token(9_000 + number), tags: ["lease"])
            }
            // Slow answers: the chunk is still being sent when it is taken.
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 150}"#)
            let accepted = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": ["lease"]}"#))
            #expect(accepted.status == 202)
            try await waitUntil("the push's first notifications at the simulator") { try await server.arrivals().count >= 4 }

            // Another node takes the chunk over: to the store, its lease has run out.
            let store = try await SQLStore.openSQLite(path: server.folder.appendingPathComponent("tern.db").path, logger: Logger(label: "thief"))
            let taken = try await store.claimChunk(
                node: "thief", size: 40, leaseUntil: Date().addingTimeInterval(3_600), at: Date().addingTimeInterval(600))
            guard case .chunk(let chunk) = taken else {
                Issue.record("nothing to take over: \(taken)")
                return
            }
            #expect(chunk.reclaimed)
            try await store.close()

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
}
