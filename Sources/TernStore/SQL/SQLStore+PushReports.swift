import Foundation
import SQLKit

/// What devices report of pushes that came through APNs to them: that one arrived (a Notification Service Extension's
/// receipt) and that the user opened it. A row per push and device, so each is counted once per device. Also the opens
/// of many pushes at once, the online channel's messages' included (the console's list of pushes).
extension SQLStore {
    public func recordPushReport(
        _ report: PushReport, pushID: String, deviceID: String, at: Date, openEvent: OpenEventSubject?
    ) async throws -> Bool {
        let column = report.column
        let event = report == .opened ? openEvent : nil
        let eventOrderLock = flavor.eventOrderLock
        let record: @Sendable (any SQLDatabase) async throws -> Bool = { db in
            // The first report of each kind counts; reporting it again is not an error. A row comes back only when
            // this one was the first (inserted, or its column still empty).
            let first = try await db.raw("""
                INSERT INTO push_reports (push_id, device_id, \(unsafeRaw: column)) VALUES (\(bind: pushID), \(bind: deviceID), \(bind: at.milliseconds))
                ON CONFLICT (push_id, device_id) DO UPDATE SET \(unsafeRaw: column) = excluded.\(unsafeRaw: column)
                    WHERE push_reports.\(unsafeRaw: column) IS NULL
                RETURNING device_id
                """).first() != nil
            if first, let event {
                try await Self.recordOpenEvent(event, pushID: pushID, deviceID: deviceID, at: at, lock: eventOrderLock, db)
            }
            return first
        }
        return event == nil ? try await exclusive(record) : try await transaction(record)
    }

    /// Writes the event of a first open, in the open's transaction.
    static func recordOpenEvent(
        _ event: OpenEventSubject, pushID: String, deviceID: String, at: Date,
        lock: (@Sendable (_ table: String, _ app: String) -> SQLQueryString)?, _ db: any SQLDatabase
    ) async throws {
        // Numbered after the app's other open events are committed, as token events are (``SQLFlavor/eventOrderLock``).
        if let lock { try await db.raw(lock("open_events", event.app)).run() }
        try await db.raw("""
            INSERT INTO open_events (app_id, push_id, device_id, alias, occurred_at)
            VALUES (\(bind: event.app), \(bind: pushID), \(bind: deviceID), \(bind: event.alias), \(bind: at.milliseconds))
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
