import Foundation
import SQLKit
import TernAPNs

/// Broadcast channels (``BroadcastChannelRecord``): kept when APNs made one for the app, read by name, forgotten when
/// the app deletes it.
extension SQLStore {
    public func addBroadcastChannel(app: String, _ channel: BroadcastChannelRecord) async throws -> (channel: BroadcastChannelRecord, added: Bool) {
        try await transaction { db in
            let inserted = try await db.raw("""
                INSERT INTO broadcast_channels (app_id, name, channel_id, environment, stores_messages, created_at)
                VALUES (\(bind: app), \(bind: channel.name), \(bind: channel.channelID), \(bind: channel.environment.rawValue),
                    \(bind: channel.storesMessages ? 1 : 0), \(bind: channel.createdAt.milliseconds))
                ON CONFLICT (app_id, name) DO NOTHING
                RETURNING name
                """).first()
            if inserted != nil { return (channel, true) }
            guard let row = try await db.raw("""
                SELECT \(unsafeRaw: Self.channelColumns) FROM broadcast_channels WHERE app_id = \(bind: app) AND name = \(bind: channel.name)
                """).first()
            else { throw StoreError.conflict("the channel '\(channel.name)' was deleted while it was being made") }
            return (try BroadcastChannelRecord(row: row), false)
        }
    }

    public func broadcastChannel(app: String, name: String) async throws -> BroadcastChannelRecord? {
        try await exclusive { db in
            try await db.raw("""
                SELECT \(unsafeRaw: Self.channelColumns) FROM broadcast_channels WHERE app_id = \(bind: app) AND name = \(bind: name)
                """).first().map(BroadcastChannelRecord.init(row:))
        }
    }

    public func broadcastChannels(app: String, after cursor: String?, limit: Int) async throws -> Page<BroadcastChannelRecord> {
        let limit = max(limit, 1)
        return try await exclusive { db in
            var query: SQLQueryString = "SELECT \(unsafeRaw: Self.channelColumns) FROM broadcast_channels WHERE app_id = \(bind: app)"
            if let cursor { query += " AND name > \(bind: cursor)" }
            query += " ORDER BY name LIMIT \(bind: limit + 1)"
            let rows = try await db.raw(query).all()
            let items = try rows.prefix(limit).map(BroadcastChannelRecord.init(row:))
            return Page(items: items, next: rows.count > limit ? items.last?.name : nil)
        }
    }

    public func deleteBroadcastChannel(app: String, name: String) async throws -> Bool {
        try await transaction { db in
            try await db.raw("""
                DELETE FROM broadcast_channels WHERE app_id = \(bind: app) AND name = \(bind: name) RETURNING name
                """).first() != nil
        }
    }

    static let channelColumns = "name, channel_id, environment, stores_messages, created_at"

    public func recordBroadcast(app: String, _ broadcast: BroadcastRecord) async throws -> BroadcastRecord {
        try await transaction { db in
            // A channel deleted after this read and before the insert is caught by the foreign key.
            guard try await db.raw("""
                SELECT name FROM broadcast_channels WHERE app_id = \(bind: app) AND name = \(bind: broadcast.channel)
                """).first() != nil
            else { throw StoreError.notFound("app \(app) has no broadcast channel '\(broadcast.channel)'") }
            guard let row = try await db.raw("""
                INSERT INTO broadcasts (app_id, channel_name, sent_at, priority, expiration, payload, result, reason, request_id, unique_id, attempts)
                VALUES (\(bind: app), \(bind: broadcast.channel), \(bind: broadcast.sentAt.milliseconds), \(bind: broadcast.priority),
                    \(bind: broadcast.expiration), \(bind: broadcast.payload), \(bind: broadcast.result.rawValue), \(bind: broadcast.reason),
                    \(bind: broadcast.requestID), \(bind: broadcast.uniqueID), \(bind: broadcast.attempts))
                RETURNING id
                """).first()
            else { throw StoreError.conflict("the broadcast was not recorded") }
            var recorded = broadcast
            recorded.id = try row.decode(column: "id", as: Int64.self)
            // The oldest beyond the kept: at most one a broadcast once the channel has its number, found by the index.
            try await db.raw("""
                DELETE FROM broadcasts WHERE app_id = \(bind: app) AND channel_name = \(bind: broadcast.channel)
                    AND id < (
                        SELECT MIN(id) FROM (
                            SELECT id FROM broadcasts WHERE app_id = \(bind: app) AND channel_name = \(bind: broadcast.channel)
                            ORDER BY id DESC LIMIT \(bind: BroadcastRecord.kept)
                        ) AS latest
                    )
                """).run()
            return recorded
        }
    }

    public func broadcasts(app: String, channel: String, before cursor: Int64?, limit: Int) async throws -> Page<BroadcastRecord> {
        let limit = max(limit, 1)
        return try await exclusive { db in
            var query: SQLQueryString = """
                SELECT id, channel_name, sent_at, priority, expiration, payload, result, reason, request_id, unique_id, attempts
                FROM broadcasts WHERE app_id = \(bind: app) AND channel_name = \(bind: channel)
                """
            if let cursor { query += " AND id < \(bind: cursor)" }
            query += " ORDER BY id DESC LIMIT \(bind: limit + 1)"
            let rows = try await db.raw(query).all()
            let items = try rows.prefix(limit).map(BroadcastRecord.init(row:))
            return Page(items: items, next: rows.count > limit ? items.last.map { String($0.id) } : nil)
        }
    }
}

extension SQLStore {
    public func latestBroadcasts(app: String, channels: [String]) async throws -> [String: BroadcastRecord] {
        guard !channels.isEmpty else { return [:] }
        return try await exclusive { db in
            var latest: [String: BroadcastRecord] = [:]
            // A page of channels at a time: each one's newest row, found by the index.
            for names in channels.pieces(of: 100) {
                let rows = try await db.raw("""
                    SELECT id, channel_name, sent_at, priority, expiration, payload, result, reason, request_id, unique_id, attempts
                    FROM broadcasts WHERE id IN (
                        SELECT MAX(id) FROM broadcasts WHERE app_id = \(bind: app) AND channel_name IN (\(binds: names))
                        GROUP BY channel_name
                    )
                    """).all()
                for row in rows {
                    let record = try BroadcastRecord(row: row)
                    latest[record.channel] = record
                }
            }
            return latest
        }
    }
}

extension BroadcastRecord {
    init(row: any SQLRow) throws {
        let resultText = try row.decode(column: "result", as: String.self)
        guard let result = Result(rawValue: resultText) else { throw StoreError.unreadable("broadcasts.result holds '\(resultText)', not delivered, rejected or failed") }
        self.init(
            id: try row.decode(column: "id", as: Int64.self), channel: try row.decode(column: "channel_name", as: String.self),
            sentAt: try row.date("sent_at"), priority: try row.decode(column: "priority", as: Int.self),
            expiration: try row.decode(column: "expiration", as: Int64.self), payload: try row.decode(column: "payload", as: String.self),
            result: result, reason: try row.decode(column: "reason", as: String?.self),
            requestID: try row.decode(column: "request_id", as: String?.self), uniqueID: try row.decode(column: "unique_id", as: String?.self),
            attempts: try row.decode(column: "attempts", as: Int.self))
    }
}

extension BroadcastChannelRecord {
    init(row: any SQLRow) throws {
        self.init(
            name: try row.decode(column: "name", as: String.self), channelID: try row.decode(column: "channel_id", as: String.self),
            environment: try APNsEnvironment(try row.decode(column: "environment", as: String.self)),
            storesMessages: try row.decode(column: "stores_messages", as: Int.self) != 0, createdAt: try row.date("created_at"))
    }
}
