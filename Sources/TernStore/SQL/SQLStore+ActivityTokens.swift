import Foundation
import SQLKit

/// Live Activities' update tokens (``ActivityTokenRecord``): registered by the device for each activity it runs,
/// paged by a push to the activity, removed when APNs calls them dead, and forgotten when the activity cannot run
/// any more.
extension SQLStore {
    public func setActivityToken(
        app: String, deviceID: String, activity: String, token: String, at: Date
    ) async throws -> ActivityTokenRecord? {
        try await transaction { db in
            guard try await db.raw("""
                SELECT device_id FROM devices WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                """).first() != nil
            else { return nil }
            // A token is one activity's on one device: registered under another id or activity, it moves here.
            try await db.raw("""
                DELETE FROM activity_tokens
                WHERE app_id = \(bind: app) AND token = \(bind: token)
                    AND NOT (activity_id = \(bind: activity) AND device_id = \(bind: deviceID))
                """).run()
            // A new token for a running activity (ActivityKit can change it) keeps the activity's start.
            guard let row = try await db.raw("""
                INSERT INTO activity_tokens (app_id, activity_id, device_id, token, started_at, registered_at)
                VALUES (\(bind: app), \(bind: activity), \(bind: deviceID), \(bind: token), \(bind: at.milliseconds), \(bind: at.milliseconds))
                ON CONFLICT (app_id, activity_id, device_id) DO UPDATE SET token = excluded.token, registered_at = excluded.registered_at
                RETURNING \(unsafeRaw: Self.activityTokenColumns)
                """).first()
            else { return nil }
            // The device's activities past the most it keeps: the oldest go.
            let kept = try await db.raw("""
                SELECT activity_id FROM activity_tokens WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                ORDER BY started_at DESC, activity_id DESC
                """).all(decodingColumn: "activity_id", as: String.self)
            let dropped = kept.dropFirst(ActivityTokenRecord.maximumPerDevice)
            if !dropped.isEmpty {
                try await db.raw("""
                    DELETE FROM activity_tokens
                    WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND activity_id IN (\(binds: Array(dropped)))
                    """).run()
            }
            return try ActivityTokenRecord(row: row)
        }
    }

    public func deleteActivityToken(app: String, deviceID: String, activity: String) async throws -> Bool {
        try await transaction { db in
            try await db.raw("""
                DELETE FROM activity_tokens
                WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND activity_id = \(bind: activity)
                RETURNING device_id
                """).first() != nil
        }
    }

    public func activityTokens(app: String, deviceIDs: [String]) async throws -> [String: [ActivityTokenRecord]] {
        guard !deviceIDs.isEmpty else { return [:] }
        return try await exclusive { db in
            var found: [String: [ActivityTokenRecord]] = [:]
            for piece in deviceIDs.pieces(of: 500) {
                for row in try await db.raw("""
                    SELECT device_id, \(unsafeRaw: Self.activityTokenColumns) FROM activity_tokens
                    WHERE app_id = \(bind: app) AND device_id IN (\(binds: piece)) ORDER BY device_id, started_at, activity_id
                    """).all()
                {
                    found[try row.decode(column: "device_id", as: String.self), default: []].append(try ActivityTokenRecord(row: row))
                }
            }
            return found
        }
    }

    public func removeDeadActivityTokens(app: String, _ tokens: [TokenDeactivation]) async throws -> [String] {
        guard !tokens.isEmpty else { return [] }
        return try await transaction { db in
            var removed: [String] = []
            for item in tokens {
                var delete: SQLQueryString = "DELETE FROM activity_tokens WHERE app_id = \(bind: app) AND token = \(bind: item.token)"
                if let invalidSince = item.invalidSince {
                    // Registered again after APNs' verdict: alive.
                    delete += " AND registered_at < \(bind: invalidSince.milliseconds)"
                }
                delete += " RETURNING token"
                if try await db.raw(delete).first() != nil { removed.append(item.token) }
            }
            return removed
        }
    }

    public func purgeEndedActivities(startedBefore before: Date, limit: Int) async throws -> Int {
        try await exclusive { db in
            try await db.raw("""
                DELETE FROM activity_tokens WHERE (app_id, activity_id, device_id) IN (
                    SELECT app_id, activity_id, device_id FROM activity_tokens WHERE started_at < \(bind: before.milliseconds)
                    ORDER BY started_at LIMIT \(bind: max(limit, 1)))
                RETURNING token
                """).all().count
        }
    }

    public func endActivity(app: String, activity: String, aliases: [String], registeredBy: Date, limit: Int) async throws -> Int {
        try await exclusive { db in
            // At most `limit` at a time, as the purge takes them: an activity a million phones follow is not one
            // statement that holds the writer and reads a million tokens back.
            var chosen: SQLQueryString = """
                SELECT device_id FROM activity_tokens
                WHERE app_id = \(bind: app) AND activity_id = \(bind: activity) AND registered_at <= \(bind: registeredBy.milliseconds)
                """
            if !aliases.isEmpty {
                chosen += " AND device_id IN (SELECT device_id FROM devices WHERE app_id = \(bind: app) AND alias IN (\(binds: aliases)))"
            }
            chosen += " LIMIT \(bind: max(limit, 1))"
            return try await db.raw("""
                DELETE FROM activity_tokens WHERE app_id = \(bind: app) AND activity_id = \(bind: activity) AND device_id IN (\(chosen))
                RETURNING device_id
                """).all().count
        }
    }

    static let activityTokenColumns = "activity_id, token, started_at, registered_at"

    /// A page of an activity's audience: the active devices with a token for it (of the aliases, if any), by device
    /// id, each with that token in place of its device token.
    static func activityPage(
        _ activity: String, aliases: [String], app: String, after cursor: String?, limit: Int, _ db: any SQLDatabase
    ) async throws -> Page<Recipient> {
        // The columns of a recipient, in their order (``PackedRows/recipientColumns``).
        var query: SQLQueryString = """
            SELECT d.device_id, a.token, d.environment, a.registered_at AS last_registered_at, d.alias FROM activity_tokens a
            JOIN devices d ON d.app_id = a.app_id AND d.device_id = a.device_id
            WHERE a.app_id = \(bind: app) AND a.activity_id = \(bind: activity) AND d.deactivated_at IS NULL
            """
        if let cursor { query += " AND a.device_id > \(bind: cursor)" }
        if !aliases.isEmpty { query += " AND d.alias IN (\(binds: aliases))" }
        query += " ORDER BY a.device_id LIMIT \(bind: limit + 1)"
        return Page(trimming: try await recipientRows(query, db), to: limit)
    }
}

extension ActivityTokenRecord {
    init(row: any SQLRow) throws {
        self.init(
            activityID: try row.decode(column: "activity_id", as: String.self), token: try row.decode(column: "token", as: String.self),
            startedAt: try row.date("started_at"), registeredAt: try row.date("registered_at"))
    }
}

// MARK: - The app's activities

extension SQLStore {
    public func activities(app: String, after cursor: String?, limit: Int) async throws -> Page<ActivitySummary> {
        let limit = max(limit, 1)
        return try await exclusive { db in
            // Grouped along the primary key, in its order: a page reads its activities' rows and no others.
            var query: SQLQueryString = """
                SELECT activity_id, COUNT(*) AS devices, MIN(started_at) AS started_at, MAX(registered_at) AS registered_at
                FROM activity_tokens WHERE app_id = \(bind: app)
                """
            if let cursor { query += " AND activity_id > \(bind: cursor)" }
            query += " GROUP BY activity_id ORDER BY activity_id LIMIT \(bind: limit + 1)"
            let rows = try await db.raw(query).all()
            let items = try rows.prefix(limit).map(ActivitySummary.init(row:))
            return Page(items: items, next: rows.count > limit ? items.last?.activityID : nil)
        }
    }

    public func activity(app: String, id: String) async throws -> ActivitySummary? {
        try await exclusive { db in
            try await db.raw("""
                SELECT activity_id, COUNT(*) AS devices, MIN(started_at) AS started_at, MAX(registered_at) AS registered_at
                FROM activity_tokens WHERE app_id = \(bind: app) AND activity_id = \(bind: id)
                GROUP BY activity_id
                """).first().map(ActivitySummary.init(row:))
        }
    }
}

extension ActivitySummary {
    init(row: any SQLRow) throws {
        self.init(
            activityID: try row.decode(column: "activity_id", as: String.self), devices: try row.decode(column: "devices", as: Int.self),
            firstStartedAt: try row.date("started_at"), lastRegisteredAt: try row.date("registered_at"))
    }
}
