import Foundation
import TernAPNs
import Testing
@testable import TernStore

/// A device's tokens of other kinds than its device token (its VoIP token, its push-to-start token): one of each kind
/// per device, one device per token, gone with the device; a push of the kind to registered devices is handed out to
/// them, and APNs' verdict on one deactivates it by the same rule as a device token.
@Suite("Device push tokens")
struct PushTokenStoreTests {
    static let lease = time(60_000)

    @Test("a device has one token of each kind: set again it is replaced, and registered under another device it moves", arguments: StoreFactory.all)
    func oneOfEachKind(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(2, in: store)
            let (one, two) = (numbered("device", 1), numbered("device", 2))

            let set = try await store.setPushToken(app: "demo", deviceID: one, kind: .voip, token: "voip-a", at: time(10))
            #expect(set == PushTokenRecord(kind: .voip, token: "voip-a", registeredAt: time(10)))
            _ = try await store.setPushToken(app: "demo", deviceID: one, kind: .pushToStart, token: "start-a", at: time(11))
            _ = try await store.setPushToken(app: "demo", deviceID: one, kind: .voip, token: "voip-b", at: time(12))
            #expect(try await store.pushTokens(app: "demo", deviceID: one) == [
                PushTokenRecord(kind: .pushToStart, token: "start-a", registeredAt: time(11)),
                PushTokenRecord(kind: .voip, token: "voip-b", registeredAt: time(12)),
            ])

            // Several devices' at once, each by kind; a device with none is left out.
            try await registerDevices(3, in: store)
            let both = try await store.pushTokens(app: "demo", deviceIDs: [one, two, numbered("device", 3)])
            #expect(both.keys.sorted() == [one] && both[one]?.map(\.kind) == [.pushToStart, .voip])

            // The same token under another device: it is that device's now.
            _ = try await store.setPushToken(app: "demo", deviceID: two, kind: .voip, token: "voip-b", at: time(13))
            #expect(try await store.pushTokens(app: "demo", deviceID: one).map(\.kind) == [.pushToStart])
            #expect(try await store.pushTokens(app: "demo", deviceID: two).map(\.token) == ["voip-b"])
            // The same text as another kind's token is another token.
            _ = try await store.setPushToken(app: "demo", deviceID: two, kind: .pushToStart, token: "voip-b", at: time(14))
            #expect(try await store.pushTokens(app: "demo", deviceID: two).count == 2)

            // None for a device that does not exist, or of another app.
            #expect(try await store.setPushToken(app: "demo", deviceID: "nobody", kind: .voip, token: "x", at: time(15)) == nil)
            try await store.createApp(makeApp("other"))
            #expect(try await store.setPushToken(app: "other", deviceID: one, kind: .voip, token: "x", at: time(15)) == nil)

            #expect(try await store.deletePushToken(app: "demo", deviceID: two, kind: .voip))
            #expect(try await !store.deletePushToken(app: "demo", deviceID: two, kind: .voip))
            #expect(try await store.pushTokens(app: "demo", deviceID: two).map(\.kind) == [.pushToStart])

            // A deleted device's tokens go with it: its id registered afresh has none.
            #expect(try await store.deleteDevice(app: "demo", deviceID: one))
            _ = try await store.register(registration(one, token: numbered("token", 1)), app: "demo", at: time(20))
            #expect(try await store.pushTokens(app: "demo", deviceID: one).isEmpty)
        }
    }

    @Test("a dead token of a kind is deactivated unless registered again after APNs' timestamp; set again, it is active", arguments: StoreFactory.all)
    func deactivatedByTheRule(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(2, in: store)
            let (one, two) = (numbered("device", 1), numbered("device", 2))
            _ = try await store.setPushToken(app: "demo", deviceID: one, kind: .voip, token: "voip-1", at: time(100))
            _ = try await store.setPushToken(app: "demo", deviceID: two, kind: .voip, token: "voip-2", at: time(100))

            let dead = try await store.deactivatePushTokens(app: "demo", kind: .voip, [
                // Dead since after its registration: goes.
                TokenDeactivation(token: "voip-1", reason: .apns(.unregistered), invalidSince: time(150), apnsTimestamp: time(150)),
                // Dead since before it was registered again: stays.
                TokenDeactivation(token: "voip-2", reason: .apns(.unregistered), invalidSince: time(50), apnsTimestamp: time(50)),
                // Another kind's token of the same text, and an unknown one: nothing.
                TokenDeactivation(token: "voip-9", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil),
            ], at: time(200))
            #expect(dead == ["voip-1"])
            #expect(try await store.pushTokens(app: "demo", deviceID: one) == [
                PushTokenRecord(kind: .voip, token: "voip-1", registeredAt: time(100), deactivatedAt: time(200), deactivationReason: .apns(.unregistered)),
            ])
            #expect(try await store.pushTokens(app: "demo", deviceID: two).first?.isActive == true)
            #expect(try await store.deactivatePushTokens(
                app: "demo", kind: .pushToStart,
                [TokenDeactivation(token: "voip-2", reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil)], at: time(200)).isEmpty)

            // The devices keep their device tokens, and no token event is recorded.
            #expect(try await store.device(app: "demo", deviceID: one)?.isActive == true)
            #expect(try await store.tokenEvents(app: "demo", after: nil, limit: 10).isEmpty)

            // Set again (the app registers it on every launch), it is alive.
            _ = try await store.setPushToken(app: "demo", deviceID: one, kind: .voip, token: "voip-1", at: time(300))
            #expect(try await store.pushTokens(app: "demo", deviceID: one) == [PushTokenRecord(kind: .voip, token: "voip-1", registeredAt: time(300))])
        }
    }

    @Test("a push of a kind is handed out to the devices' tokens of that kind, passing over devices without one, in order", arguments: StoreFactory.all)
    func handedOutToTheKindsTokens(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(6, in: store)
            for n in [2, 3, 6] {
                _ = try await store.setPushToken(app: "demo", deviceID: numbered("device", n), kind: .voip, token: numbered("voip", n), at: time(Int64(n) * 10))
            }
            // Device 3's VoIP token is dead; device 5 has only a push-to-start token.
            _ = try await store.deactivatePushTokens(
                app: "demo", kind: .voip, [TokenDeactivation(token: numbered("voip", 3), reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil)],
                at: time(70))
            _ = try await store.setPushToken(app: "demo", deviceID: numbered("device", 5), kind: .pushToStart, token: "start-5", at: time(80))
            var push = makePush("call", at: time(100))
            push.tokenKind = .voip
            let stored = try await store.createPush(push).push
            #expect(stored.tokenKind == .voip)
            #expect(try await store.push(app: "demo", id: "call")?.tokenKind == .voip)

            // Chunks of two devices: the first holds devices 1-2 (one VoIP token), the second 3-4 (none: an empty
            // chunk, which still moves the cursor), the third 5-6.
            var handedOut: [Recipient] = []
            var chunks = 0
            while case .chunk(let chunk) = try await store.claimChunk(node: "a", size: 2, leaseUntil: Self.lease, at: time(200)) {
                chunks += 1
                handedOut += chunk.recipients
                _ = try await store.recordChunk(
                    pushID: "call", sequence: chunk.sequence, node: "a", PushProgress(accepted: chunk.recipients.count, failures: [], pruned: 0),
                    at: time(201))
            }
            #expect(chunks == 3)
            #expect(handedOut.map(\.key) == [numbered("device", 2), numbered("device", 6)])
            #expect(handedOut.map(\.token) == [numbered("voip", 2), numbered("voip", 6)])
            #expect(handedOut.map(\.lastRegisteredAt) == [time(20), time(60)], "the VoIP token's registration, for the 410 rule")
            #expect(try await store.push(app: "demo", id: "call")?.status == .completed)

            // An alert push of the same audience goes to every device token, as before.
            _ = try await store.createPush(makePush("alert", at: time(300)))
            let alert = try #require(try await store.claimChunk(node: "a", size: 10, leaseUntil: Self.lease, at: time(301)).chunk)
            #expect(alert.push.tokenKind == nil)
            #expect(alert.recipients.map(\.token) == (1...6).map { numbered("token", $0) })
            _ = try await store.recordChunk(
                pushID: "alert", sequence: alert.sequence, node: "a", PushProgress(accepted: 6, failures: [], pruned: 0), at: time(302))

            // A device whose device token APNs called dead (the app is gone) is passed over too, VoIP token and all.
            _ = try await store.deactivateTokens(
                app: "demo", [TokenDeactivation(token: numbered("token", 2), reason: .apns(.badDeviceToken), invalidSince: nil, apnsTimestamp: nil)],
                at: time(400))
            var later = makePush("call-2", at: time(500))
            later.tokenKind = .voip
            _ = try await store.createPush(later)
            let next = try #require(try await store.claimChunk(node: "a", size: 10, leaseUntil: Self.lease, at: time(501)).chunk)
            #expect(next.push.id == "call-2")
            #expect(next.recipients.map(\.token) == [numbered("voip", 6)])
        }
    }

    @Test("a chunk taken over holds the tokens of the push's kind as they are then", arguments: StoreFactory.all)
    func takenOver(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            for n in 1...2 {
                _ = try await store.setPushToken(app: "demo", deviceID: numbered("device", n), kind: .voip, token: numbered("voip", n), at: time(10))
            }
            var push = makePush("call", at: time(100))
            push.tokenKind = .voip
            _ = try await store.createPush(push)
            let first = try #require(try await store.claimChunk(node: "a", size: 10, leaseUntil: time(1_000), at: time(200)).chunk)
            #expect(first.recipients.map(\.token) == [numbered("voip", 1), numbered("voip", 2)])
            // Node a dies; meanwhile device 3 registers a VoIP token and device 1 changes its own.
            _ = try await store.setPushToken(app: "demo", deviceID: numbered("device", 3), kind: .voip, token: numbered("voip", 3), at: time(300))
            _ = try await store.setPushToken(app: "demo", deviceID: numbered("device", 1), kind: .voip, token: "voip-new", at: time(300))
            let again = try #require(try await store.claimChunk(node: "b", size: 10, leaseUntil: time(5_000), at: time(2_000)).chunk)
            #expect(again.reclaimed)
            #expect(again.recipients.map(\.token) == ["voip-new", numbered("voip", 2), numbered("voip", 3)])
        }
    }
}
