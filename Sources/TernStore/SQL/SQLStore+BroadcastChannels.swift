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
}

extension BroadcastChannelRecord {
    init(row: any SQLRow) throws {
        self.init(
            name: try row.decode(column: "name", as: String.self), channelID: try row.decode(column: "channel_id", as: String.self),
            environment: try APNsEnvironment(try row.decode(column: "environment", as: String.self)),
            storesMessages: try row.decode(column: "stores_messages", as: Int.self) != 0, createdAt: try row.date("created_at"))
    }
}
