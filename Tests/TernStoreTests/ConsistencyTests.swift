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

    /// Registrations that arrive together are written together; the registry's rules still hold as if one by one.
    @Test("one device registered concurrently with many tokens keeps one, the rest in its history", arguments: StoreFactory.all)
    func concurrentTokensForOneDevice(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let tokens = (0..<30).map { numbered("token", $0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (n, token) in tokens.enumerated() {
                    group.addTask { _ = try await store.register(registration("d1", token: token), app: "demo", at: time(Int64(n))) }
                }
                try await group.waitForAll()
            }
            let device = try #require(try await store.device(app: "demo", deviceID: "d1"))
            let history = try await store.tokenHistory(app: "demo", deviceID: "d1")
            #expect(tokens.contains(device.token))
            #expect(history.count == 29)
            #expect(Set(history.map(\.token) + [device.token]) == Set(tokens), "every token is current or in history, once")
            #expect(history.allSatisfy { $0.reason == .replaced })
        }
    }

    @Test("one token registered concurrently under many device ids ends on exactly one", arguments: StoreFactory.all)
    func concurrentDevicesForOneToken(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let deviceIDs = (0..<30).map { numbered("device", $0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (n, deviceID) in deviceIDs.enumerated() {
                    group.addTask { _ = try await store.register(registration(deviceID, token: "shared", tags: ["t"]), app: "demo", at: time(Int64(n))) }
                }
                try await group.waitForAll()
            }
            var holders: [String] = []
            for deviceID in deviceIDs where try await store.device(app: "demo", deviceID: deviceID) != nil { holders.append(deviceID) }
            #expect(holders.count == 1)
            #expect(try await store.devices(app: "demo", tag: "t", after: nil, limit: 100).items.map(\.deviceID) == holders)
        }
    }

    @Test("a token moving to a device while its holder registers a new one lands as in either order", arguments: StoreFactory.all)
    func movingTokenAndItsHolderTogether(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d2", token: "t2"), app: "demo", at: time(1))
            for round in 0..<20 {
                // d1 takes t2 from d2 while d2 moves on to a fresh token; any order ends with d1:t2 and d2:fresh.
                let fresh = numbered("fresh", round)
                async let first = store.register(registration("d1", token: "t2"), app: "demo", at: time(Int64(10 + round)))
                async let second = store.register(registration("d2", token: fresh), app: "demo", at: time(Int64(10 + round)))
                _ = try await (first, second)
                #expect(try await store.device(app: "demo", deviceID: "d1")?.token == "t2")
                #expect(try await store.device(app: "demo", deviceID: "d2")?.token == fresh)
                // Set up the next round: d2 holds t2 again.
                _ = try await store.register(registration("d2", token: "t2"), app: "demo", at: time(Int64(40 + round)))
            }
        }
    }
}
