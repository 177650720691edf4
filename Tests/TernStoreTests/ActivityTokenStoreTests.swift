import Foundation
import TernAPNs
import Testing
@testable import TernStore

/// Live Activities' update tokens: one per activity a device runs, one activity and device per token, at most
/// ``ActivityTokenRecord/maximumPerDevice`` per device, gone with the device or when APNs calls them dead or when the
/// activity can no longer run; a push to an activity is handed out to the active devices' tokens for it.
@Suite("Live Activity tokens")
struct ActivityTokenStoreTests {
    static let lease = time(60_000)

    /// A token record for `activity`, started and registered at these offsets (``time(_:)``).
    static func record(_ activity: String, _ token: String, started: Int64, registered: Int64) -> ActivityTokenRecord {
        ActivityTokenRecord(activityID: activity, token: token, startedAt: time(started), registeredAt: time(registered))
    }

    @Test("an ended activity's tokens go: those of the aliases' devices when named, and none registered after the end", arguments: StoreFactory.all)
    func endingAnActivity(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            for n in 1...4 {
                _ = try await store.register(
                    registration(numbered("device", n), token: numbered("token", n), alias: n <= 2 ? "ana" : "bo"), app: "demo", at: time(0))
            }
            let devices = (1...4).map { numbered("device", $0) }
            for (n, device) in devices.enumerated() {
                _ = try await store.setActivityToken(app: "demo", deviceID: device, activity: "match", token: "m-\(n)", at: time(10))
            }
            _ = try await store.setActivityToken(app: "demo", deviceID: devices[0], activity: "order", token: "o-0", at: time(10))
            // Device 2 registers its token again after the end was made: it stays.
            _ = try await store.setActivityToken(app: "demo", deviceID: devices[1], activity: "match", token: "m-1", at: time(30))

            #expect(try await store.endActivity(app: "demo", activity: "match", aliases: ["ana"], registeredBy: time(20), limit: 10) == 1)
            #expect(try await store.activity(app: "demo", id: "match")?.devices == 3, "ana's second device and bo's two")
            // A batch at a time: one, then the other, then none left.
            #expect(try await store.endActivity(app: "demo", activity: "match", aliases: [], registeredBy: time(20), limit: 1) == 1)
            #expect(try await store.activity(app: "demo", id: "match")?.devices == 2, "one of bo's, and ana's token registered again")
            #expect(try await store.endActivity(app: "demo", activity: "match", aliases: [], registeredBy: time(20), limit: 1) == 1, "bo's other")
            #expect(try await store.endActivity(app: "demo", activity: "match", aliases: [], registeredBy: time(20), limit: 1) == 0)
            #expect(try await store.activityTokens(app: "demo", deviceIDs: devices).mapValues { $0.map(\.activityID) } == [
                devices[0]: ["order"], devices[1]: ["match"],
            ])
            #expect(try await store.endActivity(app: "demo", activity: "match", aliases: ["nobody"], registeredBy: time(40), limit: 10) == 0)
        }
    }

    @Test("an activity's token reads back; set again it keeps the start, and set for another device or activity it moves", arguments: StoreFactory.all)
    func setReplaceMove(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            let (one, two, three) = (numbered("device", 1), numbered("device", 2), numbered("device", 3))

            let set = try await store.setActivityToken(app: "demo", deviceID: one, activity: "match", token: "a-1", at: time(10))
            #expect(set == Self.record("match", "a-1", started: 10, registered: 10))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one]) == [one: [Self.record("match", "a-1", started: 10, registered: 10)]])

            // A new token for the running activity replaces the old one: the start stays, the registration is new.
            let replaced = try await store.setActivityToken(app: "demo", deviceID: one, activity: "match", token: "a-2", at: time(20))
            #expect(replaced == Self.record("match", "a-2", started: 10, registered: 20))
            // The same token again (the app registers it on every launch): only the registration moves.
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "match", token: "a-2", at: time(25))
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "order", token: "b-1", at: time(30))
            // Several devices' at once, each device's oldest first; a device with none is left out.
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two, three]) == [
                one: [Self.record("match", "a-2", started: 10, registered: 25), Self.record("order", "b-1", started: 30, registered: 30)],
            ])

            // The same token under another device: it is that device's now, started afresh.
            let moved = try await store.setActivityToken(app: "demo", deviceID: two, activity: "match", token: "a-2", at: time(40))
            #expect(moved == Self.record("match", "a-2", started: 40, registered: 40))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two]) == [
                one: [Self.record("order", "b-1", started: 30, registered: 30)],
                two: [Self.record("match", "a-2", started: 40, registered: 40)],
            ])
            // The same token for another activity of the same device: it moves there.
            _ = try await store.setActivityToken(app: "demo", deviceID: two, activity: "race", token: "a-2", at: time(50))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [two]) == [two: [Self.record("race", "a-2", started: 50, registered: 50)]])
            // And for another device's activity of the same id.
            _ = try await store.setActivityToken(app: "demo", deviceID: three, activity: "order", token: "a-2", at: time(60))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two, three]) == [
                one: [Self.record("order", "b-1", started: 30, registered: 30)],
                three: [Self.record("order", "a-2", started: 60, registered: 60)],
            ])

            // None for a device that does not exist, or of another app; nothing is written for either.
            #expect(try await store.setActivityToken(app: "demo", deviceID: "nobody", activity: "match", token: "x-1", at: time(70)) == nil)
            try await store.createApp(makeApp("other"))
            #expect(try await store.setActivityToken(app: "other", deviceID: one, activity: "match", token: "x-2", at: time(70)) == nil)
            #expect(try await store.activityTokens(app: "demo", deviceIDs: ["nobody"]).isEmpty)
            #expect(try await store.activityTokens(app: "other", deviceIDs: [one]).isEmpty)

            // Another app's token of the same text is another token: it takes nothing from this app.
            _ = try await store.register(registration(one, token: "other-token"), app: "other", at: time(80))
            #expect(try await store.setActivityToken(app: "other", deviceID: one, activity: "order", token: "b-1", at: time(80)) != nil)
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one]) == [one: [Self.record("order", "b-1", started: 30, registered: 30)]])
        }
    }

    @Test("the seventeenth activity on a device forgets its activity started first, and only that, on that device only", arguments: StoreFactory.all)
    func capPerDevice(_ factory: StoreFactory) async throws {
        #expect(ActivityTokenRecord.maximumPerDevice == 16)
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(2, in: store)
            let (one, two) = (numbered("device", 1), numbered("device", 2))
            // Device two's sixteen, started before all of device one's.
            for n in 1...16 {
                _ = try await store.setActivityToken(app: "demo", deviceID: two, activity: numbered("other", n), token: numbered("two", n), at: time(Int64(n)))
            }
            // Device one's sixteen, started in the reverse of their ids' order: act-0016 first, act-0001 last.
            for n in 1...16 {
                _ = try await store.setActivityToken(
                    app: "demo", deviceID: one, activity: numbered("act", 17 - n), token: numbered("one", 17 - n), at: time(Int64(n) * 10))
            }
            // Set again, with a new token or the same one, an activity takes no other place and keeps its start.
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: numbered("act", 16), token: "one-new", at: time(500))
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: numbered("act", 1), token: numbered("one", 1), at: time(510))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one])[one]?.count == 16)

            // The seventeenth: the activity started first goes, though its token was set last.
            let added = try await store.setActivityToken(app: "demo", deviceID: one, activity: "latest", token: "one-latest", at: time(600))
            #expect(added == Self.record("latest", "one-latest", started: 600, registered: 600))
            let kept = try await store.activityTokens(app: "demo", deviceIDs: [one, two])
            #expect(kept[one]?.map(\.activityID) == (1...15).reversed().map { numbered("act", $0) } + ["latest"])
            #expect(kept[one]?.first(where: { $0.activityID == numbered("act", 1) }) == Self.record(numbered("act", 1), numbered("one", 1), started: 160, registered: 510))
            #expect(kept[two]?.map(\.activityID) == (1...16).map { numbered("other", $0) }, "another device's activities are not counted, nor dropped")
            // Its token is gone with it: APNs' verdict on it finds nothing.
            #expect(try await store.removeDeadActivityTokens(
                app: "demo", [TokenDeactivation(token: "one-new", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil)]).isEmpty)
        }
    }

    @Test("an activity's token is deleted once; a deleted device's tokens go with it and do not come back with its id", arguments: StoreFactory.all)
    func deleted(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(2, in: store)
            let (one, two) = (numbered("device", 1), numbered("device", 2))
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "match", token: "a-1", at: time(10))
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "order", token: "b-1", at: time(20))
            _ = try await store.setActivityToken(app: "demo", deviceID: two, activity: "match", token: "a-2", at: time(30))

            #expect(try await store.deleteActivityToken(app: "demo", deviceID: one, activity: "match"))
            #expect(try await !store.deleteActivityToken(app: "demo", deviceID: one, activity: "match"))
            #expect(try await !store.deleteActivityToken(app: "demo", deviceID: one, activity: "race"))
            #expect(try await !store.deleteActivityToken(app: "demo", deviceID: "nobody", activity: "order"))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two]) == [
                one: [Self.record("order", "b-1", started: 20, registered: 20)],
                two: [Self.record("match", "a-2", started: 30, registered: 30)],
            ])

            // Set again after its deletion, the activity starts afresh.
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "match", token: "a-1", at: time(40))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one])[one]?.map(\.activityID) == ["order", "match"])

            // A deleted device's tokens go with it (and another device's stay): its id registered afresh has none.
            #expect(try await store.deleteDevice(app: "demo", deviceID: one))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two]) == [
                two: [Self.record("match", "a-2", started: 30, registered: 30)],
            ])
            _ = try await store.register(registration(one, token: numbered("token", 1)), app: "demo", at: time(50))
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one]).isEmpty)
            #expect(try await store.recipients(app: "demo", audience: .activity("order", aliases: []), after: nil, limit: 10).items.isEmpty)
            // Its tokens are free for another device.
            #expect(try await store.setActivityToken(app: "demo", deviceID: two, activity: "order", token: "b-1", at: time(60)) != nil)
        }
    }

    @Test("a dead activity token is removed unless registered again after APNs' timestamp; without one, at once", arguments: StoreFactory.all)
    func removedWhenDead(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            let (one, two, three) = (numbered("device", 1), numbered("device", 2), numbered("device", 3))
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "match", token: "a-1", at: time(100))
            _ = try await store.setActivityToken(app: "demo", deviceID: two, activity: "match", token: "a-2", at: time(100))
            _ = try await store.setActivityToken(app: "demo", deviceID: three, activity: "match", token: "a-3", at: time(100))

            // Dead since before it was registered (or since the very moment): it stays. Unknown: nothing.
            #expect(try await store.removeDeadActivityTokens(app: "demo", [
                TokenDeactivation(token: "a-1", reason: .apns(.unregistered), invalidSince: time(50), apnsTimestamp: time(50)),
                TokenDeactivation(token: "a-3", reason: .apns(.unregistered), invalidSince: time(100), apnsTimestamp: time(100)),
                TokenDeactivation(token: "unknown", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil),
            ]).isEmpty)
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two, three]).count == 3)

            // Dead since after its registration: it goes; without a timestamp: it goes at once.
            let removed = try await store.removeDeadActivityTokens(app: "demo", [
                TokenDeactivation(token: "a-1", reason: .apns(.unregistered), invalidSince: time(150), apnsTimestamp: time(150)),
                TokenDeactivation(token: "a-2", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil),
            ])
            #expect(removed == ["a-1", "a-2"])
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two, three]) == [
                three: [Self.record("match", "a-3", started: 100, registered: 100)],
            ])
            // Removed, not kept deactivated: a second verdict finds nothing.
            #expect(try await store.removeDeadActivityTokens(
                app: "demo", [TokenDeactivation(token: "a-2", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil)]).isEmpty)
            // Another app's verdict does not touch this app's token.
            try await store.createApp(makeApp("other"))
            #expect(try await store.removeDeadActivityTokens(
                app: "other", [TokenDeactivation(token: "a-3", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil)]).isEmpty)
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [three])[three]?.count == 1)

            // The devices stay active, with their device tokens, and no token event is recorded.
            #expect(try await store.device(app: "demo", deviceID: one)?.isActive == true)
            #expect(try await store.device(app: "demo", deviceID: two)?.token == numbered("token", 2))
            #expect(try await store.tokenEvents(app: "demo", after: nil, limit: 10).isEmpty)
        }
    }

    @Test("ended activities are purged by start, at most the limit at a time, the rest by the next call", arguments: StoreFactory.all)
    func purged(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            try await registerDevices(2, in: store)
            _ = try await store.register(registration(numbered("device", 1), token: "other-token"), app: "other", at: time(0))
            let (one, two) = (numbered("device", 1), numbered("device", 2))
            // Started at 10 (set again with a new token at 100: its start stays), 20 (of another app), 30 and 40.
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "early", token: "t-10", at: time(10))
            _ = try await store.setActivityToken(app: "other", deviceID: one, activity: "early", token: "t-20", at: time(20))
            _ = try await store.setActivityToken(app: "demo", deviceID: two, activity: "cutoff", token: "t-30", at: time(30))
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "late", token: "t-40", at: time(40))
            _ = try await store.setActivityToken(app: "demo", deviceID: one, activity: "early", token: "t-10-new", at: time(100))

            // Nothing started before the first.
            #expect(try await store.purgeEndedActivities(startedBefore: time(10), limit: 10) == 0)
            // Two started before 30; one at a time.
            #expect(try await store.purgeEndedActivities(startedBefore: time(30), limit: 1) == 1)
            let afterOne = try await store.activityTokens(app: "demo", deviceIDs: [one, two]).values.joined().count
                + store.activityTokens(app: "other", deviceIDs: [one]).values.joined().count
            #expect(afterOne == 3)
            #expect(try await store.purgeEndedActivities(startedBefore: time(30), limit: 10) == 1)
            #expect(try await store.purgeEndedActivities(startedBefore: time(30), limit: 10) == 0)

            // What started at the cutoff or after stays.
            #expect(try await store.activityTokens(app: "demo", deviceIDs: [one, two]) == [
                one: [Self.record("late", "t-40", started: 40, registered: 40)],
                two: [Self.record("cutoff", "t-30", started: 30, registered: 30)],
            ])
            #expect(try await store.activityTokens(app: "other", deviceIDs: [one]).isEmpty)
        }
    }

    @Test("a push to an activity is handed out to the active devices' tokens for it, by device id, of the aliases if any", arguments: StoreFactory.all)
    func handedOutToTheActivitysTokens(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            // Aliases in another order than the devices' ids, so that the chunks' order shows.
            let aliases: [Int: String] = [1: "carol", 2: "bob", 3: "bob", 4: "alice", 6: "alice"]
            for n in 1...7 {
                _ = try await store.register(
                    registration(numbered("device", n), token: numbered("token", n), alias: aliases[n]), app: "demo", at: time(0))
            }
            // Devices 1, 3, 4, 5 and 6 run the activity (set out of order); device 2 runs another one, device 7 none.
            for n in [6, 3, 5, 1, 4] {
                _ = try await store.setActivityToken(
                    app: "demo", deviceID: numbered("device", n), activity: "m", token: numbered("m", n), at: time(Int64(n) * 10))
            }
            _ = try await store.setActivityToken(app: "demo", deviceID: numbered("device", 2), activity: "n", token: "n-2", at: time(20))
            // Device 3 registers its token again: the chunk carries this registration, for the 410 rule.
            _ = try await store.setActivityToken(app: "demo", deviceID: numbered("device", 3), activity: "m", token: numbered("m", 3), at: time(70))
            // Device 4's device token is dead (the app is gone): it is passed over, activity token and all.
            _ = try await store.deactivateTokens(
                app: "demo", [TokenDeactivation(token: numbered("token", 4), reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil)],
                at: time(80))
            // Another app's device of the same id as device 2, running the activity of the same id.
            _ = try await store.register(registration(numbered("device", 2), token: "other-token"), app: "other", at: time(0))
            _ = try await store.setActivityToken(app: "other", deviceID: numbered("device", 2), activity: "m", token: "other-m", at: time(90))

            func recipient(_ n: Int, registered: Int64) -> Recipient {
                Recipient(
                    key: numbered("device", n), deviceID: numbered("device", n), token: numbered("m", n), environment: .production,
                    lastRegisteredAt: time(registered), alias: aliases[n])
            }
            let everyone = [recipient(1, registered: 10), recipient(3, registered: 70), recipient(5, registered: 50), recipient(6, registered: 60)]
            #expect(try await allRecipients(store, .activity("m", aliases: []), limit: 1) == everyone)

            let stored = try await store.createPush(makePush("update", audience: .activity("m", aliases: []), at: time(100))).push
            #expect(stored.audience == .activity("m", aliases: []))
            #expect(stored.recipientTokens == .activity)
            #expect(try await store.push(app: "demo", id: "update")?.audience == .activity("m", aliases: []))

            // Chunks of two: devices 1 and 3, then 5 and 6.
            var handedOut: [Recipient] = []
            var chunks = 0
            while case .chunk(let chunk) = try await store.claimChunk(node: "a", size: 2, leaseUntil: Self.lease, at: time(200)) {
                chunks += 1
                #expect(chunk.push.audience == .activity("m", aliases: []))
                handedOut += chunk.recipients
                _ = try await store.recordChunk(
                    pushID: "update", sequence: chunk.sequence, node: "a", PushProgress(accepted: chunk.recipients.count, failures: [], pruned: 0),
                    at: time(201))
            }
            #expect(chunks == 2)
            #expect(handedOut == everyone)
            #expect(try await store.push(app: "demo", id: "update")?.status == .completed)

            // With aliases: only their devices', still by device id (not by alias), device 4 still passed over.
            let audience = Audience.activity("m", aliases: ["alice", "carol"])
            _ = try await store.createPush(makePush("update-2", audience: audience, at: time(300)))
            #expect(try await store.push(app: "demo", id: "update-2")?.audience == audience)
            let chunk = try #require(try await store.claimChunk(node: "a", size: 10, leaseUntil: Self.lease, at: time(301)).chunk)
            #expect(chunk.push.id == "update-2" && chunk.push.audience == audience)
            #expect(chunk.recipients == [recipient(1, registered: 10), recipient(6, registered: 60)])
        }
    }

    @Test("the app's activities list by id, a page at a time, each with its devices, first start and last registration", arguments: StoreFactory.all)
    func listedActivities(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            try await registerDevices(3, in: store)
            for number in 1...3 {
                _ = try await store.setActivityToken(
                    app: "demo", deviceID: numbered("device", number), activity: "b-match", token: "b-\(number)", at: time(Int64(10 * number)))
            }
            _ = try await store.setActivityToken(app: "demo", deviceID: numbered("device", 1), activity: "a-order", token: "a-1", at: time(5))
            _ = try await store.setActivityToken(app: "demo", deviceID: numbered("device", 2), activity: "c-ride", token: "c-2", at: time(7))

            let first = try await store.activities(app: "demo", after: nil, limit: 2)
            #expect(first.items == [
                ActivitySummary(activityID: "a-order", devices: 1, firstStartedAt: time(5), lastRegisteredAt: time(5)),
                ActivitySummary(activityID: "b-match", devices: 3, firstStartedAt: time(10), lastRegisteredAt: time(30)),
            ])
            #expect(first.next == "b-match")
            let second = try await store.activities(app: "demo", after: first.next, limit: 2)
            #expect(second.items.map(\.activityID) == ["c-ride"] && second.next == nil)
            #expect(try await store.activity(app: "demo", id: "b-match")?.devices == 3)
            #expect(try await store.activity(app: "demo", id: "none") == nil)
            #expect(try await store.activities(app: "other", after: nil, limit: 10).items.isEmpty)
        }
    }

}
