import Foundation
import SQLKit

// What the operator's console reads besides what the API does: the devices that hold a token (of any kind), an app's pushes (the API lists
// them too), a device's token events. Reads only, each bounded by a limit.
extension SQLStore {
    public func devices(app: String, token: String) async throws -> [DeviceRecord] {
        try await exclusive { db in
            // Each from its unique index: the device token's, then each kind's.
            var rows = try await db.raw("""
                SELECT \(unsafeRaw: Columns.device) FROM devices WHERE app_id = \(bind: app) AND token = \(bind: token)
                """).all()
            rows += try await db.raw("""
                SELECT \(unsafeRaw: Columns.device) FROM devices WHERE app_id = \(bind: app) AND device_id IN (
                    SELECT device_id FROM device_push_tokens WHERE app_id = \(bind: app) AND kind IN (\(binds: PushTokenKind.allCases.map(\.rawValue)))
                        AND token = \(bind: token))
                ORDER BY device_id
                """).all()
            // A Live Activity's (the token a failed update's record names), from its unique index.
            rows += try await db.raw("""
                SELECT \(unsafeRaw: Columns.device) FROM devices WHERE app_id = \(bind: app) AND device_id IN (
                    SELECT device_id FROM activity_tokens WHERE app_id = \(bind: app) AND token = \(bind: token))
                """).all()
            var seen = Set<String>()
            return try await Self.devices(rows: rows, app: app, db).filter { seen.insert($0.deviceID).inserted }
        }
    }

    public func pushes(app: String, status: PushRecord.Status?, after cursor: String?, limit: Int) async throws -> Page<PushRecord> {
        // The cursor is the last push's ordinal. One that is not a number gives an empty last page rather than a fresh
        // start, which could loop a client forever.
        var before: SQLQueryString = ""
        if let cursor {
            guard let ordinal = Int64(cursor) else { return Page(items: [], next: nil) }
            before = " AND ordinal < \(bind: ordinal)"
        }
        // The status as a literal, with the condition of its partial index, and the index named where the database
        // takes it: an app's few scheduled or unfinished pushes are found without reading its history (SQLite, left
        // to itself, read them all through `pushes_by_app`: 0.2 s with 300,000 kept).
        var only: SQLQueryString = ""
        var index = flavor.indexedBy("pushes_by_app")
        switch status {
        case nil: break
        case .scheduled?:
            only = " AND status = 'scheduled'"
            index = flavor.indexedBy("pushes_scheduled")
        case .pending?:
            only = " AND status IN ('pending', 'sending') AND status = 'pending'"
            index = flavor.indexedBy("pushes_due_by_app")
        case .sending?:
            only = " AND status IN ('pending', 'sending') AND status = 'sending'"
            index = flavor.indexedBy("pushes_due_by_app")
        case .completed?: only = " AND status = 'completed'"
        }
        let limit = max(limit, 1)
        return try await exclusive { [only, before, index] db in
            // The order pushes are sent in, the newest first (`ordinal` is the database's, not a node's clock).
            let rows = try await db.raw("""
                SELECT \(unsafeRaw: Columns.push), ordinal FROM pushes\(unsafeRaw: index) WHERE app_id = \(bind: app)\(only)\(before)
                ORDER BY ordinal DESC
                LIMIT \(bind: limit + 1)
                """).all()
            var pushes: [PushRecord] = []
            for row in rows.prefix(limit) { pushes.append(try await Self.withChunkCounts(try PushRecord(row: row), db)) }
            let next = rows.count > limit ? try rows[limit - 1].decode(column: "ordinal", as: Int64.self) : nil
            return Page(items: pushes, next: next.map(String.init))
        }
    }

    public func tokenEvents(app: String, deviceID: String, limit: Int) async throws -> [TokenEvent] {
        try await exclusive { db in
            try await db.raw("""
                SELECT \(unsafeRaw: Columns.tokenEvent) FROM token_events
                WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                ORDER BY id DESC
                LIMIT \(bind: max(limit, 1))
                """).all().map(TokenEvent.init(row:))
        }
    }
}
