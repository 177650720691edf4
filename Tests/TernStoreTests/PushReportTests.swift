import Foundation
import TernAPNs
import Testing
@testable import TernStore

/// What devices report of pushes that went through APNs (arrived, opened): each counted once per device, and taken
/// only from a device the push was handed out to.
@Suite("Push reports")
struct PushReportTests {
    @Test("a device's report of a push is counted once for each kind, and for that push only", arguments: StoreFactory.all)
    func countedOncePerDeviceAndKind(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            _ = try await store.createPush(makePush("p1", at: time(0)))
            _ = try await store.createPush(makePush("p2", at: time(1)))
            let (one, two) = (numbered("device", 1), numbered("device", 2))

            #expect(try await store.recordPushReport(.opened, pushID: "p1", deviceID: one, at: time(100), openEvent: nil))
            #expect(try await !store.recordPushReport(.opened, pushID: "p1", deviceID: one, at: time(200), openEvent: nil), "reported again")
            // Its arrival, reported after the open (an extension's request can be slower than the tap), counts too.
            #expect(try await store.recordPushReport(.received, pushID: "p1", deviceID: one, at: time(250), openEvent: nil))
            #expect(try await !store.recordPushReport(.received, pushID: "p1", deviceID: one, at: time(260), openEvent: nil))
            #expect(try await store.recordPushReport(.received, pushID: "p1", deviceID: two, at: time(300), openEvent: nil))
            #expect(try await store.pushReportCounts(pushID: "p1") == PushReportCounts(received: 2, opened: 1))
            #expect(try await store.pushReportCounts(pushID: "p2") == PushReportCounts())
            // The same device opening the other push is another open.
            #expect(try await store.recordPushReport(.opened, pushID: "p2", deviceID: one, at: time(400), openEvent: nil))
            #expect(try await store.pushReportCounts(pushID: "p2") == PushReportCounts(received: 0, opened: 1))
        }
    }

    @Test("the devices that reported a push, a page at a time in device id order, with what each reported", arguments: StoreFactory.all)
    func listedByDevice(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            _ = try await store.createPush(makePush("p1", at: time(0)))
            _ = try await store.createPush(makePush("p2", at: time(1)))
            for n in [3, 1, 2] { _ = try await store.recordPushReport(.received, pushID: "p1", deviceID: numbered("device", n), at: time(100), openEvent: nil) }
            _ = try await store.recordPushReport(.opened, pushID: "p1", deviceID: numbered("device", 2), at: time(200), openEvent: nil)
            _ = try await store.recordPushReport(.opened, pushID: "p2", deviceID: numbered("device", 1), at: time(300), openEvent: nil)

            let first = try await store.pushReports(pushID: "p1", after: nil, limit: 2)
            #expect(first.items == [
                PushDeviceReport(deviceID: numbered("device", 1), receivedAt: time(100), openedAt: nil),
                PushDeviceReport(deviceID: numbered("device", 2), receivedAt: time(100), openedAt: time(200)),
            ])
            #expect(first.next == numbered("device", 2))
            let second = try await store.pushReports(pushID: "p1", after: first.next, limit: 2)
            #expect(second.items.map(\.deviceID) == [numbered("device", 3)] && second.next == nil)
            #expect(try await store.pushReports(pushID: "p2", after: nil, limit: 10).items.map(\.deviceID) == [numbered("device", 1)])
            #expect(try await store.pushReports(pushID: "none", after: nil, limit: 10).items.isEmpty)
        }
    }

    @Test("the opens of many pushes at once: a push's devices' reports, or an online push's messages", arguments: StoreFactory.all)
    func openCountsOfManyPushes(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            for id in ["apns", "online", "none"] { _ = try await store.createPush(makePush(id, at: time(0))) }
            for n in 1...2 { _ = try await store.recordPushReport(.opened, pushID: "apns", deviceID: numbered("device", n), at: time(10), openEvent: nil) }
            _ = try await store.recordPushReport(.received, pushID: "apns", deviceID: numbered("device", 3), at: time(10), openEvent: nil)
            let kept = try await store.keepMessages(
                (1...3).map { DeviceMessageDraft(deviceID: numbered("device", $0), id: "online-\($0)", notification: nil, data: nil) },
                app: "demo", pushID: "online", at: time(20), expiresAt: time(99_000))
            #expect(kept.count == 3)
            #expect(try await store.openMessage(app: "demo", deviceID: numbered("device", 1), id: "online-1", at: time(30), openEvent: nil))

            #expect(try await store.openCounts(pushIDs: ["apns", "online", "none", "unknown"]) == ["apns": 2, "online": 1])
            #expect(try await store.openCounts(pushIDs: []) == [:])
        }
    }

    @Test("what a report is checked against: the push as its row keeps it, the app's only", arguments: StoreFactory.all)
    func thePushWithoutItsCounts(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await store.createApp(makeApp("other"))
            try await registerDevices(3, in: store)
            _ = try await store.createPush(makePush("p1", at: time(0)))
            let chunk = try #require(try await store.claimChunk(node: "a", size: 100, leaseUntil: time(60_000), at: time(10)).chunk)
            _ = try await store.recordChunk(
                pushID: "p1", sequence: chunk.sequence, node: "a", PushProgress(accepted: 3, failures: [], pruned: 0), at: time(20))
            let full = try #require(try await store.push(app: "demo", id: "p1"))
            let row = try #require(try await store.pushWithoutCounts(app: "demo", id: "p1"))
            #expect(full.counts.accepted == 3 && row.counts.accepted == 0, "its chunks' counts are not added up")
            #expect(row.status == .completed && row.cursor == full.cursor && row.finishedAt == full.finishedAt && row.audience == full.audience)
            #expect(try await store.pushWithoutCounts(app: "other", id: "p1") == nil)
        }
    }

    @Test("a push was handed out to a device of its audience, up to its cursor, that existed before it finished")
    func handedOutTo() {
        let device = device("d-5", alias: "anna", tags: ["news", "sport"], created: time(0))
        func push(_ audience: Audience, cursor: String? = "z", finished: Date? = nil) -> PushRecord {
            var push = makePush("p", audience: audience, at: time(10))
            push.cursor = cursor
            push.finishedAt = finished
            return push
        }
        // Each kind of audience, with the device and without it.
        let includes: [Audience] = [
            .everyone, .devices(["d-1", "d-5"]), .tokens([device.token]), .aliases(["bob", "anna"]), .tags(["news", "tv"], all: false),
            .tags(["news", "sport"], all: true),
        ]
        for audience in includes {
            #expect(push(audience).wasHandedOut(to: device, at: time(20)), "\(audience)")
        }
        let excludes: [Audience] = [
            .devices(["d-1"]), .tokens(["0a0b"]), .aliases(["bob"]), .tags(["tv"], all: false), .tags(["news", "tv"], all: true),
            .tags([], all: true),
        ]
        for audience in excludes {
            #expect(!push(audience).wasHandedOut(to: device, at: time(20)), "\(audience)")
        }

        // Not handed out yet: a push not begun (no cursor), or whose cursor is before the device's key.
        #expect(!push(.everyone, cursor: nil).wasHandedOut(to: device, at: time(20)))
        #expect(!push(.everyone, cursor: "d-4").wasHandedOut(to: device, at: time(20)))
        #expect(push(.everyone, cursor: "d-5").wasHandedOut(to: device, at: time(20)), "the chunk that ended with it")
        // An alias audience's key is the alias, then the device id.
        #expect(!push(.aliases(["anna"]), cursor: "anna").wasHandedOut(to: device, at: time(20)))
        #expect(push(.aliases(["anna"]), cursor: "anna\u{1F}d-5").wasHandedOut(to: device, at: time(20)))
        #expect(!push(.tokens([device.token]), cursor: "00").wasHandedOut(to: device, at: time(20)), "a tokens audience is keyed by token")

        // A device made after the push finished was not sent it.
        var newer = device
        newer.createdAt = time(500)
        #expect(!push(.everyone, finished: time(400)).wasHandedOut(to: newer, at: time(600)))
        #expect(push(.everyone, finished: time(500)).wasHandedOut(to: newer, at: time(600)))
        // Nor a device whose token was dead before the push was made (no chunk reads it); one that died since was sent it.
        var dead = device
        dead.deactivatedAt = time(5)
        #expect(!push(.everyone).wasHandedOut(to: dead, at: time(20)))
        dead.deactivatedAt = time(15)
        #expect(push(.everyone).wasHandedOut(to: dead, at: time(20)))
        // Nor a device of another app.
        var other = device
        other.appID = "other"
        #expect(!push(.everyone).wasHandedOut(to: other, at: time(20)))
        // Aliases and tags by their bytes, as the database compares them: a KELVIN SIGN is not a K.
        let kelvin = self.device("d-5", alias: "\u{212A}", tags: ["\u{212A}"], created: time(0))
        #expect(!push(.aliases(["K"])).wasHandedOut(to: kelvin, at: time(20)))
        #expect(!push(.tags(["K"], all: false)).wasHandedOut(to: kelvin, at: time(20)))
        #expect(push(.tags(["\u{212A}"], all: true)).wasHandedOut(to: kelvin, at: time(20)))
    }

    private func device(_ id: String, alias: String?, tags: Set<String>, created: Date) -> DeviceRecord {
        DeviceRecord(
            appID: "demo", deviceID: id, token: String(repeating: "ab", count: 32), environment: .production, alias: alias, tags: tags,
            locale: nil, timezone: nil, appVersion: nil, lastRegisteredAt: created, deactivatedAt: nil, deactivationReason: nil,
            createdAt: created)
    }
}
