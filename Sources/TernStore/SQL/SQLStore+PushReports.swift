import Foundation
import SQLKit

/// What devices report of pushes that came through APNs to them: that one arrived (a Notification Service Extension's
/// receipt) and that the user opened it. A row per push and device, so each is counted once per device. Also the opens
/// of many pushes at once, the online channel's messages' included (the console's list of pushes).
extension SQLStore {
    /// A device's report waiting for a group commit.
    struct PendingReport: Sendable {
        let report: PushReport
        let pushID: String
        let deviceID: String
        let at: Date
        /// Whose open event to write, if this is the device's first open of the push.
        let openEvent: OpenEventSubject?
    }

    /// Queued and written with the reports that arrive meanwhile (``GroupCommit``): after a broadcast, its audience's
    /// taps come by the thousand a second, and each written alone would cost its statements' hand-offs.
    public func recordPushReport(
        _ report: PushReport, pushID: String, deviceID: String, at: Date, openEvent: OpenEventSubject?
    ) async throws -> Bool {
        let pending = PendingReport(report: report, pushID: pushID, deviceID: deviceID, at: at, openEvent: report == .opened ? openEvent : nil)
        return try await reports.submit(pending) { queued in await self.write(queued) }
    }

    /// Writes a group of reports, at most ``largestReportGroup`` at a time; a piece that fails is written again one
    /// report at a time, so that one report that cannot be written (its push deleted meanwhile) fails alone.
    private func write(_ queued: [PendingReport]) async -> [Result<Bool, any Error>] {
        var results: [Result<Bool, any Error>] = []
        results.reserveCapacity(queued.count)
        for piece in queued.pieces(of: Self.largestReportGroup) {
            do {
                results += try await writeGroup(Array(piece)).map { .success($0) }
            } catch let error where error.isStoreUnavailable {
                results += Array(repeating: .failure(error), count: piece.count)
            } catch {
                for pending in piece {
                    do {
                        results.append(.success(try await writeGroup([pending])[0]))
                    } catch {
                        results.append(.failure(error))
                    }
                }
            }
        }
        return results
    }

    /// The largest group of reports written in one transaction (three bound values each).
    static let largestReportGroup = 500

    /// Writes a group of reports as if one after another, in their order. - Returns: whether each was the first of
    /// its kind for its push and device.
    private func writeGroup(_ group: [PendingReport]) async throws -> [Bool] {
        // A report repeated within the group is not the first: the one before it is, or neither.
        var seen: Set<ReportKey> = []
        let distinct = group.map { seen.insert(ReportKey($0)).inserted }
        let kinds = [PushReport.received, .opened].filter { kind in group.indices.contains { distinct[$0] && group[$0].report == kind } }
        let writesEvents = group.contains { $0.openEvent != nil }
        let eventOrderLock = flavor.eventOrderLock
        let write: @Sendable (any SQLDatabase) async throws -> [Bool] = { db in
            var firsts: Set<ReportKey> = []
            for kind in kinds {
                let rows = group.indices.filter { distinct[$0] && group[$0].report == kind }.map { index -> SQLQueryString in
                    "(\(bind: group[index].pushID), \(bind: group[index].deviceID), \(bind: group[index].at.milliseconds))"
                }
                // The first report of each kind counts; reporting it again is not an error. A row comes back only for
                // a report that was the first (inserted, or its column still empty).
                let column = kind.column
                let returned = try await db.raw("""
                    INSERT INTO push_reports (push_id, device_id, \(unsafeRaw: column)) VALUES \(rows.joined(separator: ", "))
                    ON CONFLICT (push_id, device_id) DO UPDATE SET \(unsafeRaw: column) = excluded.\(unsafeRaw: column)
                        WHERE push_reports.\(unsafeRaw: column) IS NULL
                    RETURNING push_id, device_id
                    """).all()
                for row in returned {
                    firsts.insert(ReportKey(
                        kind: kind, pushID: try row.decode(column: "push_id", as: String.self),
                        deviceID: try row.decode(column: "device_id", as: String.self)))
                }
            }
            let answers = group.indices.map { distinct[$0] && firsts.contains(ReportKey(group[$0])) }
            let events = group.indices.filter { answers[$0] && group[$0].openEvent != nil }
            if !events.isEmpty {
                try await Self.recordOpenEvents(events.map { group[$0] }, lock: eventOrderLock, db)
            }
            return answers
        }
        // One statement needs no transaction of its own.
        return kinds.count == 1 && !writesEvents ? try await exclusive(write) : try await transaction(write)
    }

    /// Which report of which device of which push: a group writes each once.
    private struct ReportKey: Hashable {
        let kind: PushReport
        let pushID: String
        let deviceID: String

        init(kind: PushReport, pushID: String, deviceID: String) {
            self.kind = kind
            self.pushID = pushID
            self.deviceID = deviceID
        }

        init(_ pending: PendingReport) {
            self.init(kind: pending.report, pushID: pending.pushID, deviceID: pending.deviceID)
        }
    }

    /// Writes the events of first opens, in their order, in the opens' transaction.
    static func recordOpenEvents(
        _ opens: [PendingReport], lock: (@Sendable (_ table: String, _ app: String) -> SQLQueryString)?, _ db: any SQLDatabase
    ) async throws {
        // Numbered after the apps' other open events are committed, as token events are (``SQLFlavor/eventOrderLock``);
        // the apps in one order, so that two nodes' groups never wait for each other's locks.
        if let lock {
            for app in Set(opens.compactMap(\.openEvent?.app)).sorted() { try await db.raw(lock("open_events", app)).run() }
        }
        let rows = opens.compactMap { open -> SQLQueryString? in
            guard let event = open.openEvent else { return nil }
            return "(\(bind: event.app), \(bind: open.pushID), \(bind: open.deviceID), \(bind: event.alias), \(bind: open.at.milliseconds))"
        }
        try await db.raw("""
            INSERT INTO open_events (app_id, push_id, device_id, alias, occurred_at) VALUES \(rows.joined(separator: ", "))
            """).run()
    }

    public func pushReportCounts(pushID: String) async throws -> PushReportCounts {
        try await exclusive { db in
            guard let row = try await db.raw("""
                SELECT COUNT(received_at) AS received, COUNT(opened_at) AS opened FROM push_reports WHERE push_id = \(bind: pushID)
                """).first()
            else { return PushReportCounts() }
            return PushReportCounts(
                received: try row.decode(column: "received", as: Int.self), opened: try row.decode(column: "opened", as: Int.self))
        }
    }

    public func pushReports(pushID: String, after: String?, limit: Int) async throws -> Page<PushDeviceReport> {
        let limit = max(limit, 1)
        return try await exclusive { db in
            var query: SQLQueryString = "SELECT device_id, received_at, opened_at FROM push_reports WHERE push_id = \(bind: pushID)"
            if let after { query += " AND device_id > \(bind: after)" }
            query += " ORDER BY device_id LIMIT \(bind: limit + 1)"
            let rows = try await db.raw(query).all()
            let reports = try rows.prefix(limit).map { row in
                PushDeviceReport(
                    deviceID: try row.decode(column: "device_id", as: String.self), receivedAt: try row.optionalDate("received_at"),
                    openedAt: try row.optionalDate("opened_at"))
            }
            return Page(items: reports, next: rows.count > limit ? reports.last?.deviceID : nil)
        }
    }

    public func openCounts(pushIDs: [String]) async throws -> [String: Int] {
        guard !pushIDs.isEmpty else { return [:] }
        return try await exclusive { db in
            var counts: [String: Int] = [:]
            for piece in pushIDs.pieces(of: 500) {
                let rows = try await db.raw("""
                    SELECT push_id, COUNT(opened_at) AS opened FROM push_reports WHERE push_id IN (\(binds: piece)) GROUP BY push_id
                    UNION ALL
                    SELECT push_id, COUNT(opened_at) AS opened FROM device_messages WHERE push_id IN (\(binds: piece)) GROUP BY push_id
                    """).all()
                for row in rows {
                    let opened = try row.decode(column: "opened", as: Int.self)
                    if opened > 0 { counts[try row.decode(column: "push_id", as: String.self), default: 0] += opened }
                }
            }
            return counts
        }
    }
}

// MARK: - Open events

extension SQLStore {
    public func openEvents(app: String, after: Int64?, limit: Int) async throws -> [OpenEvent] {
        try await exclusive { db in
            try await db.raw("""
                SELECT id, app_id, push_id, device_id, alias, occurred_at FROM open_events
                WHERE app_id = \(bind: app) AND id > \(bind: after ?? 0)
                ORDER BY id
                LIMIT \(bind: max(limit, 1))
                """).all().map { row in
                    OpenEvent(
                        id: try row.decode(column: "id", as: Int64.self), appID: try row.decode(column: "app_id", as: String.self),
                        pushID: try row.decode(column: "push_id", as: String.self), deviceID: try row.decode(column: "device_id", as: String.self),
                        alias: try row.decode(column: "alias", as: String?.self), occurredAt: try row.date("occurred_at"))
                }
        }
    }

    public func purgeOpenEvents(before: Date, limit: Int) async throws -> Int {
        try await exclusive { db in
            try await db.raw("""
                DELETE FROM open_events WHERE id IN (
                    SELECT id FROM open_events WHERE occurred_at < \(bind: before.milliseconds) ORDER BY occurred_at LIMIT \(bind: max(limit, 1)))
                RETURNING id
                """).all().count
        }
    }
}
