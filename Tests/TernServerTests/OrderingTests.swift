import Foundation
import TernAPNs
import TernTestSupport
import Testing

/// Rapid pushes to one device leave in order, one at a time, so its badges only go up (seed 003: 1, 3, 2, 4 …).
@Suite(.serialized) struct OrderingTests {
    @Test func rapidIncrementsReachEachDeviceInOrderUnderRandomLatency() async throws {
        try await RouterHarness.withServer(configure: { $0.apns.connections = 4 }) { server in
            let devices = 20
            let pushesPerDevice = 10
            for number in 1...devices {
                try await server.register(Fixture.device(number), token: Fixture.token(number), alias: "user-\(number)")
            }
            // Every answer takes 0-20 ms: without ordering, streams overtake each other.
            let latency = try await server.simulator.put("/scenario/latency", #"{"minMilliseconds": 0, "maxMilliseconds": 20}"#)
            #expect(latency.status < 300, "\(latency.text)")

            try await withThrowingTaskGroup(of: Void.self) { group in
                for number in 1...devices {
                    group.addTask {
                        for index in 1...pushesPerDevice {
                            let body = #"""
                                {"audience": {"devices": ["\#(Fixture.device(number))"]}, "inbox": {},
                                 "notification": {"title": "message \#(index)", "badge": "+1"}}
                                """#
                            let response = try await server.master.post("/v1/apps/demo/pushes", body)
                            #expect(response.status == 202 || response.status == 201, "\(response.text)")
                        }
                    }
                }
                try await group.waitForAll()
            }

            // Alone, they arrive within a few seconds; with the whole suite running on two cores, once not within
            // 30 s. So the wait fails when no more arrive for 30 s, not at a deadline tuned to one machine's speed.
            var arrivals: [Arrival] = []
            try await waitUntil("\(devices * pushesPerDevice) arrivals", stalledFor: 30, within: 180, every: .milliseconds(100)) {
                arrivals = try await server.arrivals()
                return (arrivals.count >= devices * pushesPerDevice, arrivals.count)
            }
            #expect(arrivals.count == devices * pushesPerDevice)
            for number in 1...devices {
                let badges = try arrivals.filter { $0.token == Fixture.token(number) }.map { arrival in
                    try JSONValue(parsing: Data(arrival.payload.utf8))[path: "aps.badge"]?.int
                }
                #expect(badges == (1...pushesPerDevice).map { $0 }, "device \(number) saw badges \(badges)")
                // And in the order the pushes were made.
                let titles = try arrivals.filter { $0.token == Fixture.token(number) }.map { arrival in
                    try JSONValue(parsing: Data(arrival.payload.utf8))[path: "aps.alert.title"]?.string
                }
                #expect(titles == (1...pushesPerDevice).map { "message \($0)" }, "device \(number) saw \(titles)")
                let inbox = try await server.master.get("/v1/apps/demo/inbox?alias=user-\(number)&limit=100").json()
                #expect(inbox["messages"]?.arrayItems?.count == pushesPerDevice)
                #expect(inbox["unread"]?.int == pushesPerDevice)
            }
        }
    }
}
