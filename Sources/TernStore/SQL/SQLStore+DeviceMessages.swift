import Foundation
import SQLKit
import SQLiteKit

/// The online channel's messages and presence (see ``TernStore`` and ``DeviceMessage`` for the rules).
extension SQLStore {
    /// Devices (or ids) per statement. A message row has 9 bound parameters, so 9,000 a statement: under SQLite's
    /// limit (32,766 since 3.32) and PostgreSQL's (65,535). Fewer, larger statements matter on SQLite's one
    /// connection: each is a hop to its thread and back, and a chunk of 2,000 messages took 30 of them with 200 a
    /// statement.
    private static let messageSlice = 1000

    public func keepMessages(
        _ drafts: [DeviceMessageDraft], app: String, pushID: String, at: Date, expiresAt: Date
    ) async throws -> [DeviceMessage] {
        guard !drafts.isEmpty else { return [] }
        return try await transaction { db in
            if let sqlite = db as? SQLiteSession {
                return try await Self.keepMessages(drafts, app: app, pushID: pushID, at: at, expiresAt: expiresAt, on: sqlite)
            }
            var kept: [String: DeviceMessage] = [:]
            for slice in drafts.pieces(of: Self.messageSlice) {
                // Those kept before (a chunk sent again) stay as they are.
                for row in try await db.raw("""
                    SELECT * FROM device_messages WHERE app_id = \(bind: app) AND id IN (\(binds: slice.map(\.id)))
                    """).all()
                {
                    let message = try DeviceMessage(row: row)
                    kept[message.id] = message
                }
                let fresh = Dictionary(slice.filter { kept[$0.id] == nil }.map { ($0.deviceID, $0) }, uniquingKeysWith: { first, _ in first })
                guard !fresh.isEmpty else { continue }
                // The devices' next numbers; on PostgreSQL the row lock makes a device's numbers commit in order.
                let counters = fresh.keys.sorted().map { device -> SQLQueryString in "(\(bind: app), \(bind: device), 1)" }
                var sequences: [String: Int64] = [:]
                for row in try await db.raw("""
                    INSERT INTO device_channels (app_id, device_id, last_sequence) VALUES \(counters.joined(separator: ", "))
                    ON CONFLICT (app_id, device_id) DO UPDATE SET last_sequence = device_channels.last_sequence + 1
                    RETURNING device_id, last_sequence
                    """).all()
                {
                    sequences[try row.decode(column: "device_id", as: String.self)] = try row.decode(column: "last_sequence", as: Int64.self)
                }
                var rows: [SQLQueryString] = []
                for draft in fresh.values {
                    guard let sequence = sequences[draft.deviceID] else { continue }
                    let message = draft.message(app: app, sequence: sequence, pushID: pushID, at: at, expiresAt: expiresAt)
                    kept[message.id] = message
                    rows.append("""
                        (\(bind: app), \(bind: message.deviceID), \(bind: sequence), \(bind: message.id), \(bind: pushID),
                        \(bind: message.notification), \(bind: message.data), \(bind: at.milliseconds), \(bind: expiresAt.milliseconds))
                        """)
                }
                guard !rows.isEmpty else { continue }
                try await db.raw("""
                    INSERT INTO device_messages (app_id, device_id, sequence, id, push_id, notification, data, created_at, expires_at)
                    VALUES \(rows.joined(separator: ", "))
                    """).run()
            }
            return drafts.compactMap { kept[$0.id] }
        }
    }

    /// ``keepMessages(_:app:pushID:at:expiresAt:)`` on SQLite, the same statements with their values bound as
    /// SQLite's own: a push to 10,000 online devices keeps 10,000 rows, and SQLKit's query building and Codable
    /// encoding of 9 values a row held SQLite's one connection longer than SQLite's own work did, while the devices'
    /// acknowledgements waited for it.
    private static func keepMessages(
        _ drafts: [DeviceMessageDraft], app: String, pushID: String, at: Date, expiresAt: Date, on sqlite: SQLiteSession
    ) async throws -> [DeviceMessage] {
        var kept: [String: DeviceMessage] = [:]
        for slice in drafts.pieces(of: Self.messageSlice) {
            // Those kept before (a chunk sent again) stay as they are.
            let existing = try await sqlite.sqliteRows(
                "SELECT id FROM device_messages WHERE app_id = ? AND id IN (\([String].sqliteRows("?", count: slice.count)))",
                [.text(app)] + slice.map { .text($0.id) })
            if !existing.isEmpty {
                let ids = existing.compactMap { row -> String? in if case .text(let id)? = row.column("id") { id } else { nil } }
                for row in try await sqlite.raw("SELECT * FROM device_messages WHERE app_id = \(bind: app) AND id IN (\(binds: ids))").all() {
                    let message = try DeviceMessage(row: row)
                    kept[message.id] = message
                }
            }
            let fresh = Dictionary(slice.filter { kept[$0.id] == nil }.map { ($0.deviceID, $0) }, uniquingKeysWith: { first, _ in first })
            guard !fresh.isEmpty else { continue }
            let devices = fresh.keys.sorted()
            var sequences: [String: Int64] = [:]
            for row in try await sqlite.sqliteRows(
                """
                INSERT INTO device_channels (app_id, device_id, last_sequence) VALUES \([String].sqliteRows("(?, ?, 1)", count: devices.count))
                ON CONFLICT (app_id, device_id) DO UPDATE SET last_sequence = device_channels.last_sequence + 1
                RETURNING device_id, last_sequence
                """, devices.flatMap { [.text(app), .text($0)] })
            {
                guard case .text(let device)? = row.column("device_id"), case .integer(let sequence)? = row.column("last_sequence") else {
                    throw StoreError.unreadable("a device's message counter")
                }
                sequences[device] = Int64(sequence)
            }
            var values: [SQLiteData] = []
            values.reserveCapacity(fresh.count * 9)
            var rows = 0
            for draft in fresh.values {
                guard let sequence = sequences[draft.deviceID] else { continue }
                let message = draft.message(app: app, sequence: sequence, pushID: pushID, at: at, expiresAt: expiresAt)
                kept[message.id] = message
                values += [
                    .text(app), .text(message.deviceID), .integer(Int(sequence)), .text(message.id), .text(pushID),
                    message.notification.map { .text($0) } ?? .null, message.data.map { .text($0) } ?? .null,
                    .integer(Int(at.milliseconds)), .integer(Int(expiresAt.milliseconds)),
                ]
                rows += 1
            }
            guard rows > 0 else { continue }
            _ = try await sqlite.sqliteRows(
                """
                INSERT INTO device_messages (app_id, device_id, sequence, id, push_id, notification, data, created_at, expires_at)
                VALUES \([String].sqliteRows("(?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows))
                """, values)
        }
        return drafts.compactMap { kept[$0.id] }
    }

    public func pendingMessages(app: String, deviceID: String, after sequence: Int64, limit: Int, at: Date) async throws -> [DeviceMessage] {
        try await exclusive { db in
            try await db.raw("""
                SELECT * FROM device_messages
                WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND sequence > \(bind: sequence)
                    AND acked_at IS NULL AND expires_at > \(bind: at.milliseconds)
                ORDER BY sequence LIMIT \(bind: max(1, limit))
                """).all().map(DeviceMessage.init(row:))
        }
    }

    public func recordChannel(
        delivered: [(app: String, deviceID: String, sequence: Int64)], acks: [(app: String, deviceID: String, id: String)],
        deliveredAndAcked: [(app: String, deviceID: String, id: String)], at: Date
    ) async throws -> (acked: Int, afterFallback: Int) {
        guard !delivered.isEmpty || !acks.isEmpty || !deliveredAndAcked.isEmpty else { return (0, 0) }
        return try await transaction { db in
            if let sqlite = db as? SQLiteSession {
                return try await Self.recordChannel(delivered: delivered, acks: acks, deliveredAndAcked: deliveredAndAcked, at: at, on: sqlite)
            }
            for piece in delivered.pieces(of: Self.messageSlice) {
                let rows = piece.map { entry -> SQLQueryString in
                    "(\(bind: entry.app), \(bind: entry.deviceID), \(bind: entry.sequence))"
                }
                try await db.raw("""
                    UPDATE device_messages SET delivered_at = \(bind: at.milliseconds)
                    WHERE delivered_at IS NULL AND (app_id, device_id, sequence) IN (VALUES \(rows.joined(separator: ", ")))
                    """).run()
            }
            var acked = 0
            var afterFallback = 0
            for (entries, alsoDelivered) in [(acks, false), (deliveredAndAcked, true)] {
                let delivered: SQLQueryString = alsoDelivered ? ", delivered_at = COALESCE(delivered_at, \(bind: at.milliseconds))" : ""
                for piece in entries.pieces(of: Self.messageSlice) {
                    let rows = piece.map { entry -> SQLQueryString in
                        "(\(bind: entry.app), \(bind: entry.deviceID), \(bind: entry.id))"
                    }
                    for row in try await db.raw("""
                        UPDATE device_messages SET acked_at = \(bind: at.milliseconds)\(delivered)
                        WHERE acked_at IS NULL AND (app_id, device_id, id) IN (VALUES \(rows.joined(separator: ", ")))
                        RETURNING fallback_at
                        """).all()
                    {
                        acked += 1
                        if try row.decode(column: "fallback_at", as: Int64?.self) != nil { afterFallback += 1 }
                    }
                }
            }
            return (acked, afterFallback)
        }
    }

    /// ``recordChannel(delivered:acks:deliveredAndAcked:at:)`` on SQLite, its values bound as SQLite's own (see
    /// ``keepMessages(_:app:pushID:at:expiresAt:on:)``): the acknowledgements of a push to 10,000 online devices are
    /// 10,000 rows.
    private static func recordChannel(
        delivered: [(app: String, deviceID: String, sequence: Int64)], acks: [(app: String, deviceID: String, id: String)],
        deliveredAndAcked: [(app: String, deviceID: String, id: String)], at: Date, on sqlite: SQLiteSession
    ) async throws -> (acked: Int, afterFallback: Int) {
        let now = SQLiteData.integer(Int(at.milliseconds))
        for piece in delivered.pieces(of: Self.messageSlice) {
            _ = try await sqlite.sqliteRows(
                """
                UPDATE device_messages SET delivered_at = ?
                WHERE delivered_at IS NULL AND (app_id, device_id, sequence) IN (VALUES \([String].sqliteRows("(?, ?, ?)", count: piece.count)))
                """, [now] + piece.flatMap { [.text($0.app), .text($0.deviceID), .integer(Int($0.sequence))] })
        }
        var acked = 0
        var afterFallback = 0
        for (entries, alsoDelivered) in [(acks, false), (deliveredAndAcked, true)] {
            for piece in entries.pieces(of: Self.messageSlice) {
                for row in try await sqlite.sqliteRows(
                    """
                    UPDATE device_messages SET acked_at = ?\(alsoDelivered ? ", delivered_at = COALESCE(delivered_at, ?)" : "")
                    WHERE acked_at IS NULL AND (app_id, device_id, id) IN (VALUES \([String].sqliteRows("(?, ?, ?)", count: piece.count)))
                    RETURNING fallback_at
                    """, (alsoDelivered ? [now, now] : [now]) + piece.flatMap { [.text($0.app), .text($0.deviceID), .text($0.id)] })
                {
                    acked += 1
                    if case .integer? = row.column("fallback_at") { afterFallback += 1 }
                }
            }
        }
        return (acked, afterFallback)
    }

    public func fallBack(app: String, ids: [String], at: Date) async throws -> Set<String> {
        let ids = Array(Set(ids))
        guard !ids.isEmpty else { return [] }
        return try await transaction { db in
            var marked: Set<String> = []
            for slice in ids.pieces(of: Self.messageSlice) {
                marked.formUnion(try await db.raw("""
                    UPDATE device_messages SET fallback_at = \(bind: at.milliseconds)
                    WHERE app_id = \(bind: app) AND id IN (\(binds: slice)) AND acked_at IS NULL AND fallback_at IS NULL
                    RETURNING id
                    """).all(decodingColumn: "id", as: String.self))
            }
            return marked
        }
    }

    public func unacknowledged(app: String, ids: [String]) async throws -> Set<String> {
        let ids = Array(Set(ids))
        guard !ids.isEmpty else { return [] }
        return try await exclusive { db in
            var waiting: Set<String> = []
            for slice in ids.pieces(of: Self.messageSlice) {
                waiting.formUnion(try await db.raw("""
                    SELECT id FROM device_messages WHERE app_id = \(bind: app) AND id IN (\(binds: slice)) AND acked_at IS NULL
                    """).all(decodingColumn: "id", as: String.self))
            }
            return waiting
        }
    }

    public func openMessage(app: String, deviceID: String, id: String, at: Date, openEvent: OpenEventSubject?) async throws -> Bool {
        guard let openEvent else {
            return try await exclusive { db in
                // The first open counts; reporting it again is not an error.
                try await db.raw("""
                    UPDATE device_messages SET opened_at = COALESCE(opened_at, \(bind: at.milliseconds))
                    WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND id = \(bind: id)
                    RETURNING id
                    """).first() != nil
            }
        }
        let eventOrderLock = flavor.eventOrderLock
        return try await transaction { db in
            // The first open counts, and only it has an event; reporting it again is not an error.
            if let first = try await db.raw("""
                UPDATE device_messages SET opened_at = \(bind: at.milliseconds)
                WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND id = \(bind: id) AND opened_at IS NULL
                RETURNING push_id
                """).first() {
                let pushID = try first.decode(column: "push_id", as: String.self)
                try await Self.recordOpenEvents(
                    [PendingReport(report: .opened, pushID: pushID, deviceID: deviceID, at: at, openEvent: openEvent)], lock: eventOrderLock, db)
                return true
            }
            return try await db.raw("""
                SELECT id FROM device_messages WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND id = \(bind: id)
                """).first() != nil
        }
    }

    public func messageCounts(pushID: String) async throws -> DeviceMessageCounts {
        try await exclusive { db in
            var counts = DeviceMessageCounts()
            guard let row = try await db.raw("""
                SELECT COUNT(delivered_at) AS delivered, COUNT(acked_at) AS acked, COUNT(fallback_at) AS fell_back,
                    COUNT(opened_at) AS opened,
                    SUM(CASE WHEN acked_at IS NOT NULL AND fallback_at IS NOT NULL AND acked_at >= fallback_at THEN 1 ELSE 0 END) AS late
                FROM device_messages WHERE push_id = \(bind: pushID)
                """).first()
            else { return counts }
            counts.deliveredOnline = try row.decode(column: "delivered", as: Int.self)
            counts.acked = try row.decode(column: "acked", as: Int.self)
            counts.fellBackToAPNs = try row.decode(column: "fell_back", as: Int.self)
            counts.opened = try row.decode(column: "opened", as: Int.self)
            counts.ackedAfterFallback = try row.decode(column: "late", as: Int?.self) ?? 0
            return counts
        }
    }

    public func purgeExpiredMessages(before: Date, limit: Int) async throws -> Int {
        try await exclusive { db in
            try await db.raw("""
                DELETE FROM device_messages WHERE (app_id, device_id, sequence) IN (
                    SELECT app_id, device_id, sequence FROM device_messages WHERE expires_at < \(bind: before.milliseconds)
                    ORDER BY expires_at LIMIT \(bind: max(limit, 1)))
                RETURNING sequence
                """).all().count
        }
    }

    // MARK: Presence

    @discardableResult
    public func setPresence(_ entries: [PresenceEntry], at: Date) async throws -> [PresenceEntry] {
        // One entry per device: the last one given wins, as it would one after another.
        let latest = Dictionary(entries.map { (PresenceKey(app: $0.app, deviceID: $0.deviceID), $0) }, uniquingKeysWith: { _, last in last })
        let unique = Array(latest.values)
        guard !unique.isEmpty else { return [] }
        return try await transaction { db in
            var replaced: [PresenceEntry] = []
            for piece in unique.pieces(of: Self.messageSlice) {
                // Read in the transaction that replaces them (serializable on PostgreSQL, SQLite's one writer), so no
                // other connection's entry goes unseen between the read and the write.
                let keys = piece.map { entry -> SQLQueryString in "(\(bind: entry.app), \(bind: entry.deviceID))" }
                for row in try await db.raw("""
                    SELECT app_id, device_id, node, connection FROM device_presence
                    WHERE (app_id, device_id) IN (VALUES \(keys.joined(separator: ", ")))
                    """).all()
                {
                    let earlier = PresenceEntry(
                        app: try row.decode(column: "app_id", as: String.self), deviceID: try row.decode(column: "device_id", as: String.self),
                        node: try row.decode(column: "node", as: String.self), connection: try row.decode(column: "connection", as: String.self))
                    if latest[PresenceKey(app: earlier.app, deviceID: earlier.deviceID)]?.connection != earlier.connection {
                        replaced.append(earlier)
                    }
                }
                try await Self.insertPresence(piece, at: at, onConflict: """
                    DO UPDATE SET node = excluded.node, connection = excluded.connection, connected_at = excluded.connected_at
                    """, db)
            }
            return replaced
        }
    }

    /// Writes `entries`' rows; a device that has one already gets `onConflict` (replaced, or kept).
    private static func insertPresence(
        _ entries: some Collection<PresenceEntry>, at: Date, onConflict: SQLQueryString, _ db: any SQLDatabase
    ) async throws {
        let rows = entries.map { entry -> SQLQueryString in
            "(\(bind: entry.app), \(bind: entry.deviceID), \(bind: entry.node), \(bind: entry.connection), \(bind: at.milliseconds))"
        }
        try await db.raw("""
            INSERT INTO device_presence (app_id, device_id, node, connection, connected_at) VALUES \(rows.joined(separator: ", "))
            ON CONFLICT (app_id, device_id) \(onConflict)
            """).run()
    }

    private struct PresenceKey: Hashable {
        var app: String
        var deviceID: String
    }

    public func restorePresence(_ entries: [PresenceEntry], at: Date) async throws {
        guard !entries.isEmpty else { return }
        try await transaction { db in
            for piece in entries.pieces(of: Self.messageSlice) { try await Self.insertPresence(piece, at: at, onConflict: "DO NOTHING", db) }
        }
    }

    public func nodeSeen(_ node: String, at: Date) async throws -> Bool {
        try await transaction { db in
            let known = try await db.raw("""
                UPDATE nodes SET seen_at = \(bind: at.milliseconds) WHERE node = \(bind: node) RETURNING node
                """).all().count > 0
            if !known {
                try await db.raw("INSERT INTO nodes (node, seen_at) VALUES (\(bind: node), \(bind: at.milliseconds))").run()
            }
            return known
        }
    }

    public func clearPresenceOfUnseenNodes(since: Date) async throws -> Int {
        try await transaction { db in
            try await db.raw("DELETE FROM nodes WHERE seen_at < \(bind: since.milliseconds)").run()
            return try await db.raw("""
                DELETE FROM device_presence WHERE node NOT IN (SELECT node FROM nodes) RETURNING device_id
                """).all().count
        }
    }

    public func clearPresence(_ entries: [PresenceEntry]) async throws {
        guard !entries.isEmpty else { return }
        try await transaction { db in
            for piece in entries.pieces(of: Self.messageSlice) {
                let rows = piece.map { entry -> SQLQueryString in
                    "(\(bind: entry.app), \(bind: entry.deviceID), \(bind: entry.connection))"
                }
                try await db.raw("""
                    DELETE FROM device_presence WHERE (app_id, device_id, connection) IN (VALUES \(rows.joined(separator: ", ")))
                    """).run()
            }
        }
    }

    public func devicesWithMessages(app: String, deviceIDs: [String], at: Date) async throws -> Set<String> {
        let ids = Array(Set(deviceIDs))
        guard !ids.isEmpty else { return [] }
        return try await exclusive { db in
            var waiting: Set<String> = []
            for slice in ids.pieces(of: Self.messageSlice) {
                waiting.formUnion(try await db.raw("""
                    SELECT DISTINCT device_id FROM device_messages
                    WHERE app_id = \(bind: app) AND device_id IN (\(binds: slice)) AND acked_at IS NULL AND expires_at > \(bind: at.milliseconds)
                    """).all(decodingColumn: "device_id", as: String.self))
            }
            return waiting
        }
    }

    public func clearPresence(node: String?) async throws -> Int {
        try await exclusive { db in
            if let node {
                try await db.raw("DELETE FROM device_presence WHERE node = \(bind: node) RETURNING device_id").all().count
            } else {
                try await db.raw("DELETE FROM device_presence RETURNING device_id").all().count
            }
        }
    }

    public func presence(app: String, deviceIDs: [String]) async throws -> [DevicePresence] {
        let ids = Array(Set(deviceIDs))
        guard !ids.isEmpty else { return [] }
        return try await exclusive { db in
            var found: [DevicePresence] = []
            for slice in ids.pieces(of: Self.messageSlice) {
                for row in try await db.raw("""
                    SELECT device_id, node, connection FROM device_presence WHERE app_id = \(bind: app) AND device_id IN (\(binds: slice))
                    """).all()
                {
                    found.append(DevicePresence(
                        deviceID: try row.decode(column: "device_id", as: String.self), node: try row.decode(column: "node", as: String.self),
                        connection: try row.decode(column: "connection", as: String.self)))
                }
            }
            return found
        }
    }
}

extension DeviceMessage {
    init(row: any SQLRow) throws {
        self.init(
            appID: try row.decode(column: "app_id", as: String.self), deviceID: try row.decode(column: "device_id", as: String.self),
            sequence: try row.decode(column: "sequence", as: Int64.self), id: try row.decode(column: "id", as: String.self),
            pushID: try row.decode(column: "push_id", as: String.self),
            notification: try row.decode(column: "notification", as: String?.self), data: try row.decode(column: "data", as: String?.self),
            createdAt: try row.date("created_at"), expiresAt: try row.date("expires_at"))
    }
}

extension DeviceMessageDraft {
    /// The message this draft becomes when kept as the device's `sequence`-th.
    func message(app: String, sequence: Int64, pushID: String, at: Date, expiresAt: Date) -> DeviceMessage {
        DeviceMessage(
            appID: app, deviceID: deviceID, sequence: sequence, id: id, pushID: pushID, notification: notification, data: data,
            createdAt: at, expiresAt: expiresAt)
    }
}
