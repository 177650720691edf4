import Foundation
import Testing
@testable import TernStore
import TernTestSupport

/// The opens an app's webhook posts (`webhookEvents` with `push.opened`): a device's first open of a push, through
/// APNs or over its connection, with the user it was bound to, written in the open's own transaction and read in
/// order; kept until the pushes' retention.
@Suite("Open events")
struct OpenEventTests {
    static let subject = OpenEventSubject(app: "demo", alias: "ana")

    @Test("an app's webhook events are kept with it: token deactivations unless it asks for more", arguments: StoreFactory.all)
    func appKeepsItsWebhookEvents(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            #expect(try await store.app("demo")?.webhookEvents == [.tokenDeactivated])
            var app = try #require(try await store.app("demo"))
            app.webhookEvents = [.tokenDeactivated, .pushOpened]
            try await store.updateApp(app)
            #expect(try await store.app("demo")?.webhookEvents == [.tokenDeactivated, .pushOpened])
            app.webhookEvents = [.pushOpened]
            try await store.updateApp(app)
            #expect(try await store.apps().first?.webhookEvents == [.pushOpened])
            var other = makeApp("other")
            other.webhookEvents = [.pushOpened, .tokenDeactivated]
            try await store.createApp(other)
            #expect(try await store.app("other")?.webhookEvents == [.tokenDeactivated, .pushOpened])
        }
    }

    @Test("a device's first open of a push is an event with its user, when asked for; a second open, an arrival or an open not asked for is none", arguments: StoreFactory.all)
    func firstOpensThroughAPNs(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            for id in ["p1", "p2"] { _ = try await store.createPush(makePush(id, at: time(0))) }
            let (one, two, three) = (numbered("device", 1), numbered("device", 2), numbered("device", 3))

            #expect(try await store.recordPushReport(.opened, pushID: "p1", deviceID: one, at: time(100), openEvent: Self.subject))
            #expect(try await !store.recordPushReport(.opened, pushID: "p1", deviceID: one, at: time(110), openEvent: Self.subject), "opened again")
            #expect(try await store.recordPushReport(.received, pushID: "p1", deviceID: two, at: time(120), openEvent: Self.subject), "an arrival")
            #expect(try await store.recordPushReport(.opened, pushID: "p1", deviceID: three, at: time(130), openEvent: nil), "not asked for")
            #expect(try await store.recordPushReport(
                .opened, pushID: "p2", deviceID: two, at: time(140), openEvent: OpenEventSubject(app: "demo", alias: nil)))

            let events = try await store.openEvents(app: "demo", after: nil, limit: 10)
            #expect(events.map(\.pushID) == ["p1", "p2"])
            #expect(events.map(\.deviceID) == [one, two])
            #expect(events.map(\.alias) == ["ana", nil])
            #expect(events.map(\.occurredAt) == [time(100), time(140)])
            #expect(events[0].id < events[1].id)
            // The cursor: events after the one acknowledged, and a page at a time.
            #expect(try await store.openEvents(app: "demo", after: events[0].id, limit: 10) == [events[1]])
            #expect(try await store.openEvents(app: "demo", after: nil, limit: 1) == [events[0]])
            #expect(try await store.openEvents(app: "other", after: nil, limit: 10).isEmpty)
            // The counts are those of before: every open counts, with an event or not.
            #expect(try await store.pushReportCounts(pushID: "p1") == PushReportCounts(received: 1, opened: 2))
        }
    }

    @Test("the first open of a device message is an event naming its push; a second open is none, and another device's message is not found", arguments: StoreFactory.all)
    func firstOpensOfMessages(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(2, in: store)
            _ = try await store.createPush(makePush("online", at: time(0)))
            _ = try await store.keepMessages(
                (1...2).map { DeviceMessageDraft(deviceID: numbered("device", $0), id: "m-\($0)", notification: nil, data: nil) },
                app: "demo", pushID: "online", at: time(10), expiresAt: time(99_000))

            #expect(try await store.openMessage(app: "demo", deviceID: numbered("device", 1), id: "m-1", at: time(20), openEvent: Self.subject))
            #expect(try await store.openMessage(app: "demo", deviceID: numbered("device", 1), id: "m-1", at: time(30), openEvent: Self.subject))
            #expect(try await !store.openMessage(app: "demo", deviceID: numbered("device", 2), id: "m-1", at: time(40), openEvent: Self.subject))
            let events = try await store.openEvents(app: "demo", after: nil, limit: 10)
            #expect(events.map { [$0.pushID, $0.deviceID, $0.alias ?? "-"] } == [["online", numbered("device", 1), "ana"]])
            #expect(events.first?.occurredAt == time(20), "the first open's time")
            #expect(try await store.messageCounts(pushID: "online").opened == 1)
        }
    }

    @Test("open events older than a time are deleted, oldest first, a batch at a time; they go with their app", arguments: StoreFactory.all)
    func purged(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            try await registerDevices(3, in: store)
            for n in 1...3 {
                _ = try await store.createPush(makePush("p\(n)", at: time(0)))
                _ = try await store.recordPushReport(
                    .opened, pushID: "p\(n)", deviceID: numbered("device", n), at: time(Int64(n * 100)), openEvent: Self.subject)
            }
            #expect(try await store.purgeOpenEvents(before: time(250), limit: 1) == 1)
            #expect(try await store.purgeOpenEvents(before: time(250), limit: 10) == 1)
            #expect(try await store.purgeOpenEvents(before: time(250), limit: 10) == 0)
            #expect(try await store.openEvents(app: "demo", after: nil, limit: 10).map(\.pushID) == ["p3"])
            #expect(try await store.deleteApp("demo"))
            try await store.createApp(makeApp())
            #expect(try await store.openEvents(app: "demo", after: nil, limit: 10).isEmpty)
        }
    }

    /// The webhook follows an app's opens by their ids, as it does token events: on PostgreSQL, opens are recorded at
    /// once on every connection, and one numbered 10 committed after one numbered 11 would be passed by a reader that
    /// had read 11, and never posted.
    @Test("a reader following the open events' cursor while opens are recorded at once misses none", arguments: StoreFactory.all)
    func theCursorPassesNoOpen(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            let count = 400
            _ = try await store.createPush(makePush("p", at: time(0)))
            let seen = try await readByCursor(whileWriting: count) { n in
                _ = try await store.recordPushReport(.opened, pushID: "p", deviceID: numbered("d", n), at: time(1), openEvent: Self.subject)
            } read: { cursor in
                try await store.openEvents(app: "demo", after: cursor, limit: 50).map(\.id)
            }
            let all = try await store.openEvents(app: "demo", after: nil, limit: 1_000).map(\.id)
            #expect(all.count == count)
            #expect(seen == all, "the reader missed \(Set(all).subtracting(seen).count) opens")
        }
    }

    /// Reports are written in groups (a broadcast's taps come by the thousand a second): the answers are those of one
    /// report after another, and one that cannot be written fails alone.
    @Test("reports made at once are each the first once per device and kind, with one event per first open; one for no push fails alone", arguments: StoreFactory.all)
    func reportsAtOnce(_ factory: StoreFactory) async throws {
        try await factory.withStore { store in
            try await store.createApp(makeApp())
            _ = try await store.createPush(makePush("p", at: time(0)))
            let devices = (0..<60).map { numbered("d", $0) }
            struct Answer: Sendable {
                var device: String
                var report: PushReport
                var first: Result<Bool, StoreError>
            }
            let answers = try await withThrowingTaskGroup(of: Answer.self) { group in
                for device in devices {
                    for report in [PushReport.opened, .received, .opened] {
                        group.addTask {
                            do {
                                let first = try await store.recordPushReport(report, pushID: "p", deviceID: device, at: time(5), openEvent: Self.subject)
                                return Answer(device: device, report: report, first: .success(first))
                            } catch let error as StoreError {
                                return Answer(device: device, report: report, first: .failure(error))
                            }
                        }
                    }
                }
                group.addTask {
                    do {
                        _ = try await store.recordPushReport(.opened, pushID: "no-such-push", deviceID: "d", at: time(5), openEvent: Self.subject)
                        return Answer(device: "d", report: .opened, first: .success(true))
                    } catch {
                        return Answer(device: "d", report: .opened, first: .failure(.invalidInput("\(error)")))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let failed = answers.filter { (try? $0.first.get()) == nil }
            #expect(failed.map(\.device) == ["d"], "only the report of no push fails")
            for device in devices {
                for report in [PushReport.opened, .received] {
                    let firsts = answers.filter { $0.device == device && $0.report == report && (try? $0.first.get()) == true }
                    #expect(firsts.count == 1, "\(device) \(report)")
                }
            }
            #expect(try await store.pushReportCounts(pushID: "p") == PushReportCounts(received: 60, opened: 60))
            let events = try await store.openEvents(app: "demo", after: nil, limit: 1_000)
            #expect(events.map(\.deviceID).sorted() == devices, "one event per device's first open")
        }
    }
}
