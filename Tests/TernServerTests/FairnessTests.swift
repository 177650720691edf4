import Foundation
import TernTestSupport
import Testing

/// Several apps on one node: one app's large push does not hold up another app's small one.
struct FairnessTests {
    @Test func anotherAppsSmallPushGoesOutWhileALargePushIsSentNotAfterIt() async throws {
        // Chunks of 20 and 20 in flight: a node holds about three chunks of the large push at a time.
        try await RouterHarness.withServer(configure: {
            $0.delivery.chunkSize = 20
            $0.delivery.concurrency = 20
            $0.delivery.minimumConcurrency = 20
        }) { server in
            let devices = 600
            for number in 0..<devices {
                _ = try await server.register(Fixture.device(number), token: Fixture.token(number), tags: ["big"])
            }
            let created = try await server.admin.post("/v1/apps", #"{"id": "small", "topic": "com.example.small", "environment": "simulator"}"#)
            #expect(created.status == 201, "\(created.text)")
            let app = try created.json()
            let appKey = try #require(app["appKey"]?.string)
            let masterSecret = try #require(app["masterSecret"]?.string)
            let registered = try await server.device.with(bearer: appKey)
                .put("/v1/apps/small/devices/\(Fixture.device(9_999))", Fixture.registration(token: Fixture.token(9_999)))
            #expect(registered.status == 200, "\(registered.text)")

            // Each answer takes 100 ms: the large push needs about three seconds.
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 100}"#)
            let large = try await server.master.post("/v1/apps/demo/pushes", Fixture.push(audience: #"{"tags": ["big"]}"#, title: "large"))
            #expect(large.status == 202, "\(large.text)")
            let largeID = try #require(try large.json()["id"]?.string)
            let small = try await server.master.with(bearer: masterSecret)
                .post("/v1/apps/small/pushes?wait=30", Fixture.push(audience: #"{"devices": ["\#(Fixture.device(9_999))"]}"#, title: "small"))
            #expect(small.status == 201, "\(small.text)")
            #expect(try small.json()[path: "counts.accepted"]?.int == 1)

            // The small push took the first room a chunk of the large one gave back: most of the large push was still
            // to go. (Claimed oldest push first, it waited until the large push's last chunk was claimed.)
            let largeNow = try await server.master.get("/v1/apps/demo/pushes/\(largeID)").json()
            let sent = (largeNow[path: "counts.accepted"]?.int ?? 0) + (largeNow[path: "counts.failed"]?.int ?? 0)
            #expect(sent < devices / 2, "the large push had sent \(sent) of \(devices) when the small one completed")
            _ = try await server.simulator.put("/scenario/latency", #"{"fixedMilliseconds": 0}"#)
            try await waitUntil("the large push to complete", within: 30) {
                try await server.master.get("/v1/apps/demo/pushes/\(largeID)").json()["status"]?.string == "completed"
            }
        }
    }
}
