import Foundation
import TernAPNs
import Testing
import TernStore

@Suite("Token hygiene")
struct TokenHygieneTests {
    @Test("a token not registered since invalidSince is deactivated and an event recorded", arguments: StoreFactory.all)
    func staleTokenIsDeactivated(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(1_000))

            let event = try #require(try await store.deactivateToken(
                app: "demo", token: "t1", reason: .apns(.unregistered), invalidSince: time(2_000), apnsTimestamp: time(2_000), at: time(3_000)
            ))

            #expect(event.appID == "demo")
            #expect(event.deviceID == "d1")
            #expect(event.token == "t1")
            #expect(event.reason == .apns(.unregistered))
            #expect(event.apnsTimestamp == time(2_000))
            #expect(event.occurredAt == time(3_000))
            let device = try #require(try await store.device(app: "demo", deviceID: "d1"))
            #expect(device.deactivatedAt == time(3_000))
            #expect(device.deactivationReason == .apns(.unregistered))
            #expect(try await store.tokenEvents(app: "demo", after: nil, limit: 10) == [event])
        }
    }

    @Test("a token registered again after invalidSince stays active, and no event is recorded", arguments: StoreFactory.all)
    func reRegisteredTokenSurvives(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(1_000))
            // APNs says the token died at 2 000, but the device registered it again at 2 500.
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(2_500))

            let event = try await store.deactivateToken(
                app: "demo", token: "t1", reason: .apns(.unregistered), invalidSince: time(2_000), apnsTimestamp: time(2_000), at: time(3_000)
            )

            #expect(event == nil)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.isActive == true)
            #expect(try await store.tokenEvents(app: "demo", after: nil, limit: 10).isEmpty)
        }
    }

    @Test("a token registered exactly at invalidSince stays active", arguments: StoreFactory.all)
    func registrationAtInvalidSinceSurvives(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(2_000))
            #expect(try await store.deactivateToken(
                app: "demo", token: "t1", reason: .apns(.unregistered), invalidSince: time(2_000), apnsTimestamp: nil, at: time(3_000)
            ) == nil)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.isActive == true)
        }
    }

    @Test("without invalidSince the token is deactivated at once", arguments: StoreFactory.all)
    func deactivationWithoutInvalidSince(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            // Registered "after" the deactivation time: without invalidSince that does not matter.
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(5_000))
            let event = try await store.deactivateToken(
                app: "demo", token: "t1", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil, at: time(3_000)
            )
            #expect(event?.reason == .apns(.badDeviceToken))
            #expect(event?.apnsTimestamp == nil)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.isActive == false)
        }
    }

    @Test("an inactive or unknown token returns nil and records nothing", arguments: StoreFactory.all)
    func nothingToDeactivate(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            _ = try await store.register(registration("d1", token: "t1"), app: "demo", at: time(1))
            _ = try await store.register(registration("d9", token: "elsewhere"), app: "other", at: time(1))
            #expect(try await store.deactivateToken(
                app: "demo", token: "t1", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(2)
            ) != nil)

            #expect(try await store.deactivateToken(
                app: "demo", token: "t1", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil, at: time(3)
            ) == nil)
            #expect(try await store.deactivateToken(
                app: "demo", token: "never-seen", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(3)
            ) == nil)
            #expect(try await store.deactivateToken(
                app: "demo", token: "elsewhere", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(3)
            ) == nil, "another app's token")

            let device = try #require(try await store.device(app: "demo", deviceID: "d1"))
            #expect(device.deactivatedAt == time(2), "the first deactivation stands")
            #expect(device.deactivationReason == .apns(.unregistered))
            #expect(try await store.tokenEvents(app: "demo", after: nil, limit: 10).count == 1)
            #expect(try await store.device(app: "other", deviceID: "d9")?.isActive == true)
        }
    }

    @Test("token events list oldest first with increasing ids, paged by the last id", arguments: StoreFactory.all)
    func tokenEventPaging(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            for n in 0..<7 {
                _ = try await store.register(registration("d\(n)", token: "t\(n)"), app: "demo", at: time(0))
                _ = try await store.register(registration("o\(n)", token: "t\(n)"), app: "other", at: time(0))
            }
            // Interleave the two apps' events.
            for n in [3, 0, 6, 1, 5, 2, 4] {
                _ = try await store.deactivateToken(app: "demo", token: "t\(n)", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(Int64(10 + n)))
                _ = try await store.deactivateToken(app: "other", token: "t\(n)", reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(Int64(10 + n)))
            }

            var events: [TokenEvent] = []
            var cursor: Int64?
            for _ in 0..<10 {
                let page = try await store.tokenEvents(app: "demo", after: cursor, limit: 3)
                #expect(page.count <= 3)
                guard let last = page.last else { break }
                events += page
                cursor = last.id
            }

            #expect(events.map(\.token) == ["t3", "t0", "t6", "t1", "t5", "t2", "t4"])
            #expect(events.allSatisfy { $0.appID == "demo" })
            #expect(zip(events, events.dropFirst()).allSatisfy { $0.id < $1.id }, "ids increase")
            #expect(try await store.tokenEvents(app: "demo", after: events[4].id, limit: 100).map(\.token) == ["t2", "t4"])
        }
    }

    @Test("several tokens deactivate in one call, each by its own rule, their events in the order given", arguments: StoreFactory.all)
    func severalAtOnce(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for n in 1...4 { _ = try await store.register(registration("d\(n)", token: "t\(n)"), app: "demo", at: time(1_000)) }
            // t3 was registered again after APNs' verdict on it.
            _ = try await store.register(registration("d3", token: "t3"), app: "demo", at: time(2_500))
            let events = try await store.deactivateTokens(app: "demo", [
                TokenDeactivation(token: "t4", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil),
                TokenDeactivation(token: "unknown", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil),
                TokenDeactivation(token: "t3", reason: .apns(.unregistered), invalidSince: time(2_000), apnsTimestamp: time(2_000)),
                TokenDeactivation(token: "t1", reason: .apns(.unregistered), invalidSince: time(2_000), apnsTimestamp: time(2_000)),
            ], at: time(3_000))
            #expect(events.map(\.token) == ["t4", "t1"])
            #expect(events.map(\.deviceID) == ["d4", "d1"])
            #expect(events[0].id < events[1].id)
            #expect(events[1].apnsTimestamp == time(2_000))
            #expect(try await store.device(app: "demo", deviceID: "d3")?.isActive == true)
            #expect(try await store.device(app: "demo", deviceID: "d2")?.isActive == true)
            #expect(try await store.device(app: "demo", deviceID: "d1")?.deactivationReason == .apns(.unregistered))
            #expect(try await store.tokenEvents(app: "demo", after: nil, limit: 10) == events)
            #expect(try await store.deactivateTokens(app: "demo", [], at: time(4_000)).isEmpty)
        }
    }

    /// The webhook follows an app's events by their ids. On PostgreSQL, deactivations run at once, and one numbered 10
    /// could commit after one numbered 11: a reader that had seen 11 passed 10 by, and its event was never posted.
    @Test("a reader following the event cursor while deactivations run at once misses none", arguments: StoreFactory.all)
    func theCursorPassesNoEvent(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let count = 400
            for n in 0..<count {
                _ = try await store.register(registration(numbered("d", n), token: numbered("t", n)), app: "demo", at: time(0))
            }
            let seen = try await readByCursor(whileWriting: count) { n in
                _ = try await store.deactivateToken(
                    app: "demo", token: numbered("t", n), reason: .apns(.unregistered), invalidSince: nil, apnsTimestamp: nil, at: time(1))
            } read: { cursor in
                try await store.tokenEvents(app: "demo", after: cursor, limit: 50).map(\.id)
            }
            let all = try await store.tokenEvents(app: "demo", after: nil, limit: 1_000).map(\.id)
            #expect(all.count == count)
            #expect(seen == all, "the reader missed \(Set(all).subtracting(seen).count) events")
        }
    }
}
