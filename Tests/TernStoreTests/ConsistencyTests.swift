import Foundation
import Testing
import TernStore
import TernTestSupport

@Suite("Dates and concurrency")
struct ConsistencyTests {
    @Test("dates come back at millisecond precision", arguments: StoreFactory.all)
    func datesRoundTripToTheMillisecond(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let precise = Date(timeIntervalSince1970: 1_750_000_000.123_456)
            let millisecond = Date(timeIntervalSince1970: 1_750_000_000.123)
            let device = try await store.register(registration("d1", token: "t1"), app: "demo", at: precise)
            #expect(device.lastRegisteredAt == millisecond)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.createdAt == millisecond)

            // A date read back is stored unchanged: no drift from one round trip to the next.
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: device.lastRegisteredAt)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.lastRegisteredAt == millisecond)

            let old = Date(timeIntervalSince1970: 1.999)
            _ = try await store.register(registration("d2", token: "t2"), app: "demo", at: old)
            #expect(try await store.device(app: "demo", deviceID: "d2")?.lastRegisteredAt == old)
        }
    }

    @Test("200 concurrent registrations all succeed and are all stored", arguments: StoreFactory.all)
    func concurrentRegistrations(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let registered = try await withTimeout(60, "200 concurrent registrations") {
                try await withThrowingTaskGroup(of: DeviceRecord.self) { group in
                    for n in 0..<200 {
                        group.addTask {
                            try await store.register(
                                registration(numbered("device", n), token: numbered("token", n), alias: "user-\(n % 7)", tags: ["load"]),
                                app: "demo", at: time(Int64(n))
                            )
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            #expect(registered.count == 200)
            let expected = (0..<200).map { numbered("device", $0) }
            let stored = try await store.devices(app: "demo", tag: "load", after: nil, limit: 1_000)
            #expect(stored.items.map(\.deviceID) == expected)
            #expect(stored.items.map(\.token) == (0..<200).map { numbered("token", $0) })
            #expect(try await store.devices(app: "demo", alias: "user-3").count == 29)
        }
    }
}
