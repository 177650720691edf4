import Foundation
import SQLKit

// What the operator's console reads besides what the API does: a device by its token, the latest pushes, a device's
// token events. Reads only, each bounded by a limit.
extension SQLStore {
    public func device(app: String, token: String) async throws -> DeviceRecord? {
        try await exclusive { db in
            let rows = try await db.raw("""
                SELECT \(unsafeRaw: Columns.device) FROM devices WHERE app_id = \(bind: app) AND token = \(bind: token)
                """).all()
            return try await Self.devices(rows: rows, app: app, db).first
        }
    }

    public func recentPushes(app: String, limit: Int) async throws -> [PushRecord] {
        try await exclusive { db in
            // The order pushes are sent in, the newest first (`ordinal` is the database's, not a node's clock).
            let rows = try await db.raw("""
                SELECT \(unsafeRaw: Columns.push) FROM pushes WHERE app_id = \(bind: app)
                ORDER BY ordinal DESC
                LIMIT \(bind: max(limit, 1))
                """).all()
            var pushes: [PushRecord] = []
            for row in rows { pushes.append(try await Self.withChunkCounts(try PushRecord(row: row), db)) }
            return pushes
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
