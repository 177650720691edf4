import Foundation
import SQLKit

/// The message inbox and stored badge counters (see ``TernStore`` for the rules).
extension SQLStore {
    /// Owners per statement: well under the databases' limits on bound parameters.
    private static let ownerSlice = 200

    public func deliverToInbox(_ message: InboxMessage, owners: [InboxOwner], cap: Int, at: Date) async throws -> Int {
        let keys = Array(Set(owners.map(\.key))).sorted()
        guard !keys.isEmpty else { return 0 }
        return try await transaction { db in
            try await db.raw("""
                INSERT INTO inbox_messages (id, app_id, title, body, data, created_at, expires_at, localizations)
                VALUES (\(bind: message.id), \(bind: message.appID), \(bind: message.title), \(bind: message.body),
                    \(bind: message.data), \(bind: message.createdAt.milliseconds), \(bind: message.expiresAt.milliseconds),
                    \(bind: message.localizations))
                ON CONFLICT (id) DO NOTHING
                """).run()
            var dropped = 0
            for slice in keys.pieces(of: Self.ownerSlice) {
                // Owners that hold it already (a page sent again) are left alone.
                let holding = Set(try await db.raw("""
                    SELECT owner FROM inbox_entries
                    WHERE app_id = \(bind: message.appID) AND owner IN (\(binds: slice)) AND message_id = \(bind: message.id)
                    """).all(decodingColumn: "owner", as: String.self))
                let newOwners = slice.filter { !holding.contains($0) }
                guard !newOwners.isEmpty else { continue }
                let sequences = try await Self.nextSequences(app: message.appID, owners: newOwners, db)
                let entries = newOwners.map { owner -> SQLQueryString in
                    """
                    (\(bind: message.appID), \(bind: owner), \(bind: sequences[owner] ?? 1), \(bind: message.id),
                    \(bind: message.expiresAt.milliseconds), NULL)
                    """
                }
                try await db.raw("""
                    INSERT INTO inbox_entries (app_id, owner, sequence, message_id, expires_at, read_at)
                    VALUES \(entries.joined(separator: ", "))
                    """).run()
                dropped += try await Self.enforceCap(cap, app: message.appID, owners: newOwners, at: at, db)
            }
            return dropped
        }
    }

    /// Gives each owner its next sequence (creating its row at 1). - Returns: the sequences by owner key.
    private static func nextSequences(app: String, owners: [String], _ db: any SQLDatabase) async throws -> [String: Int64] {
        let rows = owners.map { owner -> SQLQueryString in "(\(bind: app), \(bind: owner), 1, 0)" }
        let returned = try await db.raw("""
            INSERT INTO inbox_owners (app_id, owner, last_sequence, badge) VALUES \(rows.joined(separator: ", "))
            ON CONFLICT (app_id, owner) DO UPDATE SET last_sequence = inbox_owners.last_sequence + 1
            RETURNING owner, last_sequence
            """).all()
        var sequences: [String: Int64] = [:]
        for row in returned {
            sequences[try row.decode(column: "owner", as: String.self)] = try row.decode(column: "last_sequence", as: Int64.self)
        }
        return sequences
    }

    /// Deletes the oldest unexpired entries of owners holding more than `cap`. - Returns: how many.
    private static func enforceCap(_ cap: Int, app: String, owners: [String], at: Date, _ db: any SQLDatabase) async throws -> Int {
        let over = try await db.raw("""
            SELECT owner, COUNT(*) AS held FROM inbox_entries
            WHERE app_id = \(bind: app) AND owner IN (\(binds: owners)) AND expires_at > \(bind: at.milliseconds)
            GROUP BY owner HAVING COUNT(*) > \(bind: cap)
            """).all()
        var dropped = 0
        for row in over {
            let owner = try row.decode(column: "owner", as: String.self)
            let excess = try row.decode(column: "held", as: Int.self) - cap
            try await db.raw("""
                DELETE FROM inbox_entries WHERE app_id = \(bind: app) AND owner = \(bind: owner) AND sequence IN (
                    SELECT sequence FROM inbox_entries
                    WHERE app_id = \(bind: app) AND owner = \(bind: owner) AND expires_at > \(bind: at.milliseconds)
                    ORDER BY sequence LIMIT \(bind: excess))
                """).run()
            dropped += excess
        }
        return dropped
    }

    public func badges(app: String, owners: [InboxOwner], pushID: String, change: BadgeChange, at: Date) async throws -> [InboxOwner: Int] {
        let keys = Array(Set(owners.map(\.key))).sorted()
        guard !keys.isEmpty else { return [:] }
        let values = try await transaction { db -> [String: Int] in
            var values: [String: Int] = [:]
            for slice in keys.pieces(of: Self.ownerSlice) {
                switch change {
                case .unread:
                    for owner in slice { values[owner] = 0 }
                    for row in try await db.raw("""
                        SELECT owner, COUNT(*) AS unread FROM inbox_entries
                        WHERE app_id = \(bind: app) AND owner IN (\(binds: slice)) AND read_at IS NULL
                            AND expires_at > \(bind: at.milliseconds)
                        GROUP BY owner
                        """).all()
                    {
                        // An inbox can hold more unread messages than a badge shows (`inboxCap` up to 100,000).
                        values[try row.decode(column: "owner", as: String.self)] = min(
                            try row.decode(column: "unread", as: Int.self), BadgeChange.largest)
                    }
                    // The stored counter is what the devices were last given: `"+N"` counts on from the unread count
                    // they show, as from a number set.
                    let rows = slice.map { owner -> SQLQueryString in "(\(bind: app), \(bind: owner), 0, \(bind: values[owner] ?? 0))" }
                    try await db.raw("""
                        INSERT INTO inbox_owners (app_id, owner, last_sequence, badge) VALUES \(rows.joined(separator: ", "))
                        ON CONFLICT (app_id, owner) DO UPDATE SET badge = excluded.badge
                        """).run()
                case .increment(let step):
                    // Counted already for this push (a page sent again): the same value.
                    for row in try await db.raw("""
                        SELECT owner, value FROM push_badges WHERE push_id = \(bind: pushID) AND owner IN (\(binds: slice))
                        """).all()
                    {
                        values[try row.decode(column: "owner", as: String.self)] = try row.decode(column: "value", as: Int.self)
                    }
                    let fresh = slice.filter { values[$0] == nil }
                    guard !fresh.isEmpty else { continue }
                    let rows = fresh.map { owner -> SQLQueryString in "(\(bind: app), \(bind: owner), 0, \(bind: step))" }
                    let counted = try await db.raw("""
                        INSERT INTO inbox_owners (app_id, owner, last_sequence, badge) VALUES \(rows.joined(separator: ", "))
                        ON CONFLICT (app_id, owner) DO UPDATE SET badge = CASE
                            WHEN inbox_owners.badge + \(bind: step) > \(bind: BadgeChange.largest) THEN \(bind: BadgeChange.largest)
                            ELSE inbox_owners.badge + \(bind: step) END
                        RETURNING owner, badge
                        """).all()
                    var recorded: [SQLQueryString] = []
                    for row in counted {
                        let owner = try row.decode(column: "owner", as: String.self)
                        let badge = try row.decode(column: "badge", as: Int.self)
                        values[owner] = badge
                        recorded.append("(\(bind: pushID), \(bind: owner), \(bind: badge))")
                    }
                    try await db.raw("INSERT INTO push_badges (push_id, owner, value) VALUES \(recorded.joined(separator: ", "))").run()
                case .set(let badge):
                    let rows = slice.map { owner -> SQLQueryString in "(\(bind: app), \(bind: owner), 0, \(bind: badge))" }
                    try await db.raw("""
                        INSERT INTO inbox_owners (app_id, owner, last_sequence, badge) VALUES \(rows.joined(separator: ", "))
                        ON CONFLICT (app_id, owner) DO UPDATE SET badge = excluded.badge
                        """).run()
                    for owner in slice { values[owner] = badge }
                }
            }
            return values
        }
        var byOwner: [InboxOwner: Int] = [:]
        for (key, value) in values {
            if let owner = InboxOwner(key: key) { byOwner[owner] = value }
        }
        return byOwner
    }

    public func inbox(app: String, owner: InboxOwner, after cursor: Int64?, limit: Int, at: Date) async throws -> Page<InboxItem> {
        let limit = max(limit, 1)
        return try await exclusive { db in
            let rows = try await db.raw("""
                SELECT e.sequence, e.read_at, m.id, m.title, m.body, m.data, m.created_at, m.expires_at, m.localizations
                FROM inbox_entries e JOIN inbox_messages m ON m.id = e.message_id
                WHERE e.app_id = \(bind: app) AND e.owner = \(bind: owner.key) AND e.sequence > \(bind: cursor ?? 0)
                    AND e.expires_at > \(bind: at.milliseconds)
                ORDER BY e.sequence
                LIMIT \(bind: limit + 1)
                """).all()
            let items = try rows.prefix(limit).map { row in
                InboxItem(
                    sequence: try row.decode(column: "sequence", as: Int64.self),
                    message: InboxMessage(
                        id: try row.decode(column: "id", as: String.self), appID: app,
                        title: try row.decode(column: "title", as: String?.self), body: try row.decode(column: "body", as: String?.self),
                        data: try row.decode(column: "data", as: String?.self), createdAt: try row.date("created_at"),
                        expiresAt: try row.date("expires_at"), localizations: try row.decode(column: "localizations", as: String?.self)),
                    readAt: try row.optionalDate("read_at"))
            }
            return Page(items: Array(items), next: rows.count > limit ? items.last.map { String($0.sequence) } : nil)
        }
    }

    public func unreadCount(app: String, owner: InboxOwner, at: Date) async throws -> Int {
        try await exclusive { db in
            try await db.raw("""
                SELECT COUNT(*) AS unread FROM inbox_entries
                WHERE app_id = \(bind: app) AND owner = \(bind: owner.key) AND read_at IS NULL AND expires_at > \(bind: at.milliseconds)
                """).first(decodingColumn: "unread", as: Int.self) ?? 0
        }
    }

    public func markRead(app: String, owner: InboxOwner, upTo: String?, ids: [String], at: Date) async throws -> Int {
        try await transaction { db in
            var marked = 0
            if let upTo {
                marked += try await db.raw("""
                    UPDATE inbox_entries SET read_at = \(bind: at.milliseconds)
                    WHERE app_id = \(bind: app) AND owner = \(bind: owner.key) AND read_at IS NULL AND sequence <= (
                        SELECT sequence FROM inbox_entries
                        WHERE app_id = \(bind: app) AND owner = \(bind: owner.key) AND message_id = \(bind: upTo))
                    RETURNING sequence
                    """).all().count
            }
            for slice in ids.pieces(of: Self.ownerSlice) {
                marked += try await db.raw("""
                    UPDATE inbox_entries SET read_at = \(bind: at.milliseconds)
                    WHERE app_id = \(bind: app) AND owner = \(bind: owner.key) AND read_at IS NULL AND message_id IN (\(binds: slice))
                    RETURNING sequence
                    """).all().count
            }
            return marked
        }
    }

    public func deleteFromInbox(app: String, owner: InboxOwner, messageID: String) async throws -> Bool {
        try await transaction { db in
            try await db.raw("""
                DELETE FROM inbox_entries WHERE app_id = \(bind: app) AND owner = \(bind: owner.key) AND message_id = \(bind: messageID)
                RETURNING sequence
                """).first() != nil
        }
    }

    public func purgeExpiredInbox(before: Date, limit: Int) async throws -> Int {
        try await transaction { db in
            let deleted = try await db.raw("""
                DELETE FROM inbox_entries WHERE (app_id, owner, sequence) IN (
                    SELECT app_id, owner, sequence FROM inbox_entries WHERE expires_at < \(bind: before.milliseconds)
                    ORDER BY expires_at LIMIT \(bind: max(limit, 1)))
                RETURNING sequence
                """).all().count
            try await db.raw("""
                DELETE FROM inbox_messages WHERE expires_at < \(bind: before.milliseconds)
                    AND NOT EXISTS (SELECT 1 FROM inbox_entries e WHERE e.message_id = inbox_messages.id)
                """).run()
            return deleted
        }
    }
}
