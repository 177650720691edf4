import Foundation
import TernAPNs
import Testing
import TernStore

@Suite("The console's reads")
struct ConsoleQueryTests {
    @Test("a device is found by its token of any kind, active or deactivated, and only in its own app", arguments: StoreFactory.all)
    func deviceByToken(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            _ = try await store.register(registration("d1", token: "aa", alias: "alice", tags: ["news"]), app: "demo", at: time(1))
            _ = try await store.register(registration("d2", token: "bb"), app: "demo", at: time(2))
            _ = try await store.deactivateToken(
                app: "demo", token: "bb", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(3))

            let found = try await store.devices(app: "demo", token: "aa")
            #expect(found.map(\.deviceID) == ["d1"])
            #expect(found.first?.tags == ["news"])
            #expect(try await store.devices(app: "demo", token: "bb").map(\.isActive) == [false])
            #expect(try await store.devices(app: "other", token: "aa").isEmpty)
            #expect(try await store.devices(app: "demo", token: "cc").isEmpty)

            // A VoIP token finds its device, and a text that is one device's device token and another's VoIP token
            // finds both, the device token's first.
            _ = try await store.setPushToken(app: "demo", deviceID: "d2", kind: .voip, token: "cc", at: time(4))
            #expect(try await store.devices(app: "demo", token: "cc").map(\.deviceID) == ["d2"])
            _ = try await store.setPushToken(app: "demo", deviceID: "d2", kind: .pushToStart, token: "aa", at: time(5))
            #expect(try await store.devices(app: "demo", token: "aa").map(\.deviceID) == ["d1", "d2"])
            // A Live Activity's token finds the device that follows it.
            _ = try await store.setActivityToken(app: "demo", deviceID: "d1", activity: "match-1", token: "dd", at: time(6))
            #expect(try await store.devices(app: "demo", token: "dd").map(\.deviceID) == ["d1"])
        }
    }

    @Test("an app's pushes are listed newest first, a page at a time, by status if asked", arguments: StoreFactory.all)
    func listedPushes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            _ = try await store.register(registration("device", token: "aa"), app: "demo", at: time(0))
            for n in 0..<5 { _ = try await store.createPush(makePush(numbered("push", n), at: time(Int64(n)))) }
            _ = try await store.createPush(makePush("elsewhere", app: "other"))
            var later = makePush("later", at: time(10))
            later.status = .scheduled
            later.sendAt = time(1_000)
            _ = try await store.createPush(later)
            // push-0000 is sent (completed), push-0001 is being sent; the rest wait.
            while case .chunk(let chunk) = try await store.claimChunk(node: "a", size: 10, leaseUntil: time(500), at: time(20)) {
                if chunk.push.id == "push-0000" {
                    _ = try await store.recordChunk(
                        pushID: chunk.push.id, sequence: chunk.sequence, node: "a", PushProgress(accepted: 1, failures: [], pruned: 0), at: time(21))
                } else {
                    break
                }
            }

            func ids(_ status: PushRecord.Status? = nil, after: String? = nil, limit: Int = 10) async throws -> [String] {
                try await store.pushes(app: "demo", status: status, after: after, limit: limit).items.map(\.id)
            }
            #expect(try await ids() == ["later", "push-0004", "push-0003", "push-0002", "push-0001", "push-0000"])
            let first = try await store.pushes(app: "demo", status: nil, after: nil, limit: 4)
            #expect(first.items.map(\.id) == ["later", "push-0004", "push-0003", "push-0002"])
            let second = try await store.pushes(app: "demo", status: nil, after: first.next, limit: 4)
            #expect(second.items.map(\.id) == ["push-0001", "push-0000"])
            #expect(second.next == nil)
            #expect(try await ids(.scheduled) == ["later"])
            #expect(try await ids(.pending) == ["push-0004", "push-0003", "push-0002"])
            #expect(try await ids(.pending, limit: 2) == ["push-0004", "push-0003"])
            #expect(try await ids(.sending) == ["push-0001"])
            #expect(try await ids(.completed) == ["push-0000"])
            #expect(try await store.pushes(app: "demo", status: .completed, after: nil, limit: 1).items.first?.counts.accepted == 1)
            #expect(try await store.pushes(app: "other", status: nil, after: nil, limit: 10).items.map(\.id) == ["elsewhere"])
            #expect(try await store.pushes(app: "nobody", status: nil, after: nil, limit: 10).items.isEmpty)
            #expect(try await ids(after: "not a cursor").isEmpty)
        }
    }

    @Test("a device's token events are its own, newest first", arguments: StoreFactory.all)
    func deviceTokenEvents(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "aa"), app: "demo", at: time(1))
            _ = try await store.register(registration("d2", token: "bb"), app: "demo", at: time(1))
            _ = try await store.deactivateToken(
                app: "demo", token: "aa", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: time(5), at: time(6))
            _ = try await store.register(registration("d1", token: "aa"), app: "demo", at: time(7))
            _ = try await store.deactivateToken(
                app: "demo", token: "aa", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil, at: time(8))
            _ = try await store.deactivateToken(
                app: "demo", token: "bb", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(9))

            let events = try await store.tokenEvents(app: "demo", deviceID: "d1", limit: 10)
            #expect(events.map(\.occurredAt) == [time(8), time(6)])
            #expect(events.map(\.reason) == [.apns(.badDeviceToken), .apns(.unregistered)])
            #expect(try await store.tokenEvents(app: "demo", deviceID: "d1", limit: 1).count == 1)
        }
    }
}
