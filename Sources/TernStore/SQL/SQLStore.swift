import Foundation
import Logging
import SQLKit
import SQLiteKit
import Synchronization
import TernAPNs

/// A ``TernStore`` in SQL that SQLite and PostgreSQL both understand.
///
/// Each call runs on a connection of its own for its duration (``SQLSessions``): on SQLite calls take turns on the
/// one connection; on PostgreSQL they share a pool, and a transaction that conflicts with another runs again.
public final class SQLStore: TernStore {
    let sessions: any SQLSessions
    let flavor: SQLFlavor
    let logger: Logger
    /// Registrations waiting for the next group commit (`SQLStore+Registration.swift`).
    let registrations = GroupCommit<PendingRegistration, DeviceRecord>()
    /// Devices' reports of pushes waiting for the next group commit (`SQLStore+PushReports.swift`).
    let reports = GroupCommit<PendingReport, Bool>()

    init(sessions: any SQLSessions, flavor: SQLFlavor, logger: Logger) {
        self.sessions = sessions
        self.flavor = flavor
        self.logger = logger
    }

    public func ping() async throws {
        try await exclusive { db in try await db.raw("SELECT 1").run() }
    }

    public func databaseTime() async throws -> Date? {
        guard let query = flavor.serverTime else { return nil }
        let microseconds = try await exclusive { db in
            try await db.raw(SQLQueryString(query)).first(decodingColumn: "now", as: Int64.self)
        }
        guard let microseconds else { throw StoreError.unavailable("the database did not say its time") }
        return Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)
    }

    public func run() async {
        await sessions.run()
    }

    /// Closes the connections once every call before it is done.
    public func close() async throws {
        try await sessions.close()
    }

    // MARK: Settings

    public func setting(_ key: String) async throws -> String? {
        try await exclusive { db in
            try await db.raw("SELECT value FROM settings WHERE name = \(bind: key)").first(decodingColumn: "value", as: String.self)
        }
    }

    public func setSetting(_ key: String, to value: String) async throws {
        try await transaction { db in
            try await db.raw("""
                INSERT INTO settings (name, value) VALUES (\(bind: key), \(bind: value))
                ON CONFLICT (name) DO UPDATE SET value = excluded.value
                """).run()
        }
    }

    public func initializeSetting(_ key: String, to value: String) async throws -> String {
        try await transaction { db in
            try await db.raw("INSERT INTO settings (name, value) VALUES (\(bind: key), \(bind: value)) ON CONFLICT (name) DO NOTHING").run()
            guard let current = try await db.raw("SELECT value FROM settings WHERE name = \(bind: key)")
                .first(decodingColumn: "value", as: String.self)
            else { throw StoreError.notFound("setting \(key)") }
            return current
        }
    }

    public func removeSetting(_ key: String, ifItIs value: String) async throws {
        try await transaction { db in
            try await db.raw("DELETE FROM settings WHERE name = \(bind: key) AND value = \(bind: value)").run()
        }
    }

    // MARK: Apps

    public func createApp(_ app: AppRecord) async throws {
        try await transaction { db in
            let endpoint = app.endpoint
            let inserted = try await db.raw("""
                INSERT INTO apps (id, topic, environment, endpoint_host, endpoint_port, endpoint_ca_pem, sealed_credentials,
                    app_key_hash, master_secret_hash, webhook_url, inbox_max_ttl, inbox_cap, transport, endpoint_feedback_port,
                    feedback_interval, user_binding, sealed_identity_secret, webhook_secret_salt, broadcast_rate_per_second, created_at,
                    updated_at, webhook_events)
                VALUES (\(bind: app.id), \(bind: app.topic), \(bind: app.environment.storedWord), \(bind: endpoint?.host),
                    \(bind: endpoint?.port), \(bind: endpoint?.caPEM), \(bind: Data(app.sealedCredentials)),
                    \(bind: Data(app.appKeyHash)), \(bind: Data(app.masterSecretHash)), \(bind: app.webhookURL),
                    \(bind: app.inboxMaxTTL), \(bind: app.inboxCap), \(bind: app.transport), \(bind: endpoint?.feedbackPort),
                    \(bind: app.feedbackInterval), \(bind: app.userBinding.rawValue), \(bind: app.sealedIdentitySecret.map { Data($0) }),
                    \(bind: app.webhookSecretSalt), \(bind: app.broadcastRatePerSecond), \(bind: app.createdAt.milliseconds),
                    \(bind: app.updatedAt.milliseconds), \(bind: app.storedWebhookEvents))
                ON CONFLICT (id) DO NOTHING
                RETURNING id
                """).first()
            guard inserted != nil else { throw StoreError.conflict("app \(app.id)") }
        }
    }

    public func app(_ id: String) async throws -> AppRecord? {
        try await exclusive { db in
            try await db.raw("SELECT \(unsafeRaw: Columns.app) FROM apps WHERE id = \(bind: id)").first().map(AppRecord.init(row:))
        }
    }

    public func apps() async throws -> [AppRecord] {
        try await exclusive { db in
            try await db.raw("SELECT \(unsafeRaw: Columns.app) FROM apps ORDER BY id").all().map(AppRecord.init(row:))
        }
    }

    public func updateApp(_ app: AppRecord) async throws {
        try await transaction { db in
            let endpoint = app.endpoint
            let updated = try await db.raw("""
                UPDATE apps SET topic = \(bind: app.topic), environment = \(bind: app.environment.storedWord),
                    endpoint_host = \(bind: endpoint?.host), endpoint_port = \(bind: endpoint?.port),
                    endpoint_ca_pem = \(bind: endpoint?.caPEM), sealed_credentials = \(bind: Data(app.sealedCredentials)),
                    app_key_hash = \(bind: Data(app.appKeyHash)), master_secret_hash = \(bind: Data(app.masterSecretHash)),
                    webhook_url = \(bind: app.webhookURL), inbox_max_ttl = \(bind: app.inboxMaxTTL), inbox_cap = \(bind: app.inboxCap),
                    transport = \(bind: app.transport), endpoint_feedback_port = \(bind: endpoint?.feedbackPort),
                    feedback_interval = \(bind: app.feedbackInterval), user_binding = \(bind: app.userBinding.rawValue),
                    sealed_identity_secret = \(bind: app.sealedIdentitySecret.map { Data($0) }),
                    webhook_secret_salt = \(bind: app.webhookSecretSalt),
                    broadcast_rate_per_second = \(bind: app.broadcastRatePerSecond),
                    webhook_events = \(bind: app.storedWebhookEvents),
                    updated_at = \(bind: app.updatedAt.milliseconds)
                WHERE id = \(bind: app.id)
                RETURNING id
                """).first()
            guard updated != nil else { throw StoreError.notFound("app \(app.id)") }
        }
    }

    public func recordFeedbackPoll(app: String, at: Date) async throws {
        try await transaction { db in
            try await db.raw("UPDATE apps SET feedback_polled_at = \(bind: at.milliseconds) WHERE id = \(bind: app)").run()
        }
    }

    public func deleteApp(_ id: String) async throws -> Bool {
        // Devices, token history, events, pushes and failures go with it: ON DELETE CASCADE.
        try await transaction { db in
            try await db.raw("DELETE FROM apps WHERE id = \(bind: id) RETURNING id").first() != nil
        }
    }

    // MARK: Device registry

    public func device(app: String, deviceID: String) async throws -> DeviceRecord? {
        try await exclusive { db in try await Self.device(app: app, deviceID: deviceID, db) }
    }

    public func locales(app: String, deviceIDs: [String]) async throws -> [String: String] {
        guard !deviceIDs.isEmpty else { return [:] }
        return try await exclusive { db in
            var locales: [String: String] = [:]
            locales.reserveCapacity(deviceIDs.count)
            for piece in deviceIDs.pieces(of: 1000) {
                let query: SQLQueryString = """
                    SELECT device_id, locale FROM devices
                    WHERE app_id = \(bind: app) AND device_id IN (\(binds: piece)) AND locale IS NOT NULL
                    ORDER BY device_id
                    """
                // Read packed on SQLite (``PackedRows``), as a chunk's recipients are: a push in several languages
                // reads this for every chunk.
                if let session = db as? SQLiteSession {
                    let packed = try await PackedRows.read(Self.localeColumns, of: query, session)
                    for row in 0..<packed.count { locales[packed.key(row)] = try packed.text(row, 1) }
                } else {
                    for row in try await db.raw(query).all() {
                        locales[try row.decode(column: "device_id", as: String.self)] = try row.decode(column: "locale", as: String.self)
                    }
                }
            }
            return locales
        }
    }

    private static let localeColumns = [PackedRows.Column("device_id"), PackedRows.Column("locale")]

    public func deleteDevice(app: String, deviceID: String) async throws -> Bool {
        try await transaction { db in
            // History outlives a device that lost its token to another id, not one deleted on purpose.
            try await db.raw("DELETE FROM token_history WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)").run()
            try await Self.deleteOwnInboxes(app: app, deviceIDs: [deviceID], db)
            return try await db.raw("""
                DELETE FROM devices WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) RETURNING device_id
                """).first() != nil
        }
    }

    public func removeAlias(app: String, deviceID: String, at: Date) async throws -> DeviceRecord? {
        try await transaction { db in
            try await db.raw("""
                UPDATE devices SET alias = NULL, alias_unproven = NULL, updated_at = \(bind: at.milliseconds)
                WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                """).run()
            return try await Self.device(app: app, deviceID: deviceID, db)
        }
    }

    public func unbindUnprovenAliases(app: String, at: Date) async throws -> Int {
        try await transaction { db in
            try await db.raw("""
                UPDATE devices SET alias = NULL, alias_unproven = NULL, updated_at = \(bind: at.milliseconds)
                WHERE app_id = \(bind: app) AND alias_unproven = 1
                RETURNING device_id
                """).all().count
        }
    }

    public func setDeviceSecret(
        app: String, deviceID: String, secretHash: [UInt8], onlyReplacing current: StoredSecret?, at: Date
    ) async throws -> Bool {
        var update: SQLQueryString = """
            UPDATE devices SET secret_hash = \(bind: Data(secretHash)), updated_at = \(bind: at.milliseconds)
            WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
            """
        if let current {
            if let hash = current.hash {
                update += " AND secret_hash = \(bind: Data(hash))"
            } else {
                update += " AND secret_hash IS NULL"
            }
        }
        update += " RETURNING device_id"
        let query = update
        return try await transaction { db in try await db.raw(query).first() != nil }
    }

    public func updateTags(
        app: String, deviceID: String, add: Set<String>, remove: Set<String>, at: Date
    ) async throws -> DeviceRecord? {
        try await transaction { db in
            let touched = try await db.raw("""
                UPDATE devices SET updated_at = \(bind: at.milliseconds)
                WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                RETURNING device_id
                """).first()
            guard touched != nil else { return nil }
            try await Self.insertTags(add, app: app, deviceID: deviceID, db)
            // Removals apply last: a tag both added and removed ends up removed.
            if !remove.isEmpty {
                try await db.raw("""
                    DELETE FROM device_tags
                    WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND tag IN (\(binds: remove.sorted()))
                    """).run()
            }
            // Counted after both, in the transaction: thrown, it undoes them.
            if !add.isEmpty {
                let count = try await db.raw("""
                    SELECT COUNT(*) AS n FROM device_tags WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                    """).first(decodingColumn: "n", as: Int.self) ?? 0
                guard count <= DeviceRecord.maximumTags else { throw StoreError.tooManyTags(count) }
            }
            return try await Self.device(app: app, deviceID: deviceID, db)
        }
    }

    public func devices(app: String, alias: String) async throws -> [DeviceRecord] {
        try await exclusive { db in
            let rows = try await db.raw("""
                SELECT \(unsafeRaw: Columns.device) FROM devices
                WHERE app_id = \(bind: app) AND alias = \(bind: alias)
                ORDER BY device_id
                """).all()
            return try await Self.devices(rows: rows, app: app, db)
        }
    }

    public func devices(app: String, tag: String, after cursor: String?, limit: Int) async throws -> Page<DeviceRecord> {
        let limit = max(limit, 1)
        return try await exclusive { db in
            // Walks the tag's index in device id order: one row past the page says whether there is another.
            let rows = try await db.raw("""
                SELECT \(unsafeRaw: Columns.device(in: "d")) FROM device_tags t
                JOIN devices d ON d.app_id = t.app_id AND d.device_id = t.device_id
                WHERE t.app_id = \(bind: app) AND t.tag = \(bind: tag) AND t.device_id > \(bind: cursor ?? "")
                ORDER BY t.device_id
                LIMIT \(bind: limit + 1)
                """).all()
            let devices = try await Self.devices(rows: rows.prefix(limit), app: app, db)
            return Page(items: devices, next: rows.count > limit ? devices.last?.deviceID : nil)
        }
    }

    public func devices(
        app: String, createdSince since: Date, before: Date?, after cursor: DeviceCreationCursor?, limit: Int
    ) async throws -> Page<DeviceRecord> {
        let limit = max(limit, 1)
        let byCreation = flavor.indexedBy("devices_by_creation")
        return try await exclusive { db in
            // The app's devices in creation order, from the index: a page reads its rows and one more.
            var query: SQLQueryString = """
                SELECT \(unsafeRaw: Columns.device) FROM devices\(unsafeRaw: byCreation)
                WHERE app_id = \(bind: app) AND created_at >= \(bind: since.milliseconds)
                """
            if let before { query += " AND created_at < \(bind: before.milliseconds)" }
            if let cursor { query += " AND (created_at, device_id) > (\(bind: cursor.createdAt), \(bind: cursor.deviceID))" }
            query += " ORDER BY created_at, device_id LIMIT \(bind: limit + 1)"
            let rows = try await db.raw(query).all()
            let devices = try await Self.devices(rows: rows.prefix(limit), app: app, db)
            let next = rows.count > limit ? devices.last.map { DeviceCreationCursor(createdAt: $0.createdAt.milliseconds, deviceID: $0.deviceID) } : nil
            return Page(items: devices, next: next?.description)
        }
    }

    public func tokenHistory(app: String, deviceID: String) async throws -> [TokenHistoryEntry] {
        try await exclusive { db in
            try await db.raw("""
                SELECT token, environment, first_registered_at, replaced_at, reason FROM token_history
                WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                ORDER BY id
                """).all().map(TokenHistoryEntry.init(row:))
        }
    }

    // MARK: Token hygiene

    public func deactivateTokens(app: String, _ tokens: [TokenDeactivation], at: Date) async throws -> [TokenEvent] {
        guard !tokens.isEmpty else { return [] }
        let eventOrderLock = flavor.eventOrderLock
        return try await transaction { db in
            var deactivated: [(TokenDeactivation, deviceID: String)] = []
            for item in tokens {
                var update: SQLQueryString = """
                    UPDATE devices SET deactivated_at = \(bind: at.milliseconds), deactivation_reason = \(bind: item.reason.rawValue),
                        updated_at = \(bind: at.milliseconds)
                    WHERE app_id = \(bind: app) AND token = \(bind: item.token) AND deactivated_at IS NULL
                    """
                if let invalidSince = item.invalidSince {
                    // A registration after APNs' verdict proves the token alive again.
                    update += " AND last_registered_at < \(bind: invalidSince.milliseconds)"
                }
                update += " RETURNING device_id"
                guard let row = try await db.raw(update).first() else { continue }
                deactivated.append((item, try row.decode(column: "device_id", as: String.self)))
            }
            guard !deactivated.isEmpty else { return [] }
            // The events' numbers are taken after the app's other events are committed (on PostgreSQL, where several
            // deactivations run at once): numbered in commit order, none is passed by the webhook's cursor. Held from
            // here to the commit, once for all of them.
            if let lock = eventOrderLock { try await db.raw(lock("token_events", app)).run() }
            var events: [TokenEvent] = []
            for (item, deviceID) in deactivated {
                guard let event = try await db.raw("""
                    INSERT INTO token_events (app_id, device_id, token, reason, apns_timestamp, occurred_at)
                    VALUES (\(bind: app), \(bind: deviceID), \(bind: item.token), \(bind: item.reason.rawValue),
                        \(bind: item.apnsTimestamp?.milliseconds), \(bind: at.milliseconds))
                    RETURNING \(unsafeRaw: Columns.tokenEvent)
                    """).first()
                else { continue }
                events.append(try TokenEvent(row: event))
            }
            return events
        }
    }

    public func tokenEvents(app: String, after: Int64?, limit: Int) async throws -> [TokenEvent] {
        try await exclusive { db in
            try await db.raw("""
                SELECT \(unsafeRaw: Columns.tokenEvent) FROM token_events
                WHERE app_id = \(bind: app) AND id > \(bind: after ?? 0)
                ORDER BY id
                LIMIT \(bind: max(limit, 1))
                """).all().map(TokenEvent.init(row:))
        }
    }

    // MARK: Pushes

    public func createPush(_ push: PushRecord) async throws -> (push: PushRecord, created: Bool) {
        let ordinal = flavor.pushOrdinal.value
        return try await transaction { db in
            try await Self.requireApp(push.appID, db)
            let counts = push.counts
            // DO NOTHING on either key: a reused idempotency key returns the first push, a reused id is a conflict.
            let inserted = try await db.raw("""
                INSERT INTO pushes (id, app_id, idempotency_key, audience, notification, status, targeted, accepted,
                    failed, pruned, failed_by_reason, cursor_key, created_at, finished_at, send_at, rate_per_second, token_kind,
                    handed_out\(unsafeRaw: ordinal == nil ? "" : ", ordinal"))
                VALUES (\(bind: push.id), \(bind: push.appID), \(bind: push.idempotencyKey),
                    \(bind: try StoredAudience.encode(push.audience, filter: push.filter)), \(bind: Data(push.notification)),
                    \(bind: push.status.rawValue), \(bind: counts.targeted), \(bind: counts.accepted), \(bind: counts.failed),
                    \(bind: counts.pruned), \(bind: try JSON.encode(counts.failedByReason)), \(bind: push.cursor),
                    \(bind: push.createdAt.milliseconds), \(bind: push.finishedAt?.milliseconds), \(bind: push.sendAt?.milliseconds),
                    \(bind: push.ratePerSecond), \(bind: push.tokenKind?.rawValue),
                    \(bind: push.status == .scheduled ? 1 : 0)\(unsafeRaw: ordinal.map { ", " + $0 } ?? ""))
                ON CONFLICT DO NOTHING
                RETURNING \(unsafeRaw: Columns.push)
                """).first()
            if let inserted { return (try PushRecord(row: inserted), true) }
            if let key = push.idempotencyKey, let first = try await db.raw("""
                SELECT \(unsafeRaw: Columns.push) FROM pushes
                WHERE app_id = \(bind: push.appID) AND idempotency_key = \(bind: key)
                """).first()
            {
                return (try await Self.withChunkCounts(try PushRecord(row: first), db), false)
            }
            throw StoreError.conflict("push \(push.id)")
        }
    }

    public func push(app: String, id: String) async throws -> PushRecord? {
        try await exclusive { db in
            guard let push = try await Self.pushRow(app: app, id: id, db) else { return nil }
            return try await Self.withChunkCounts(push, db)
        }
    }

    public func pushWithoutCounts(app: String, id: String) async throws -> PushRecord? {
        try await exclusive { db in try await Self.pushRow(app: app, id: id, db) }
    }

    private static func pushRow(app: String, id: String, _ db: any SQLDatabase) async throws -> PushRecord? {
        try await db.raw("SELECT \(unsafeRaw: Columns.push) FROM pushes WHERE app_id = \(bind: app) AND id = \(bind: id)").first()
            .map(PushRecord.init(row:))
    }

    public func cancelPush(app: String, id: String, at now: Date) async throws -> (push: PushRecord, completedNow: Bool)? {
        try await cancelPush(app: app, id: id, at: now, beforeCancelling: nil)
    }

    /// ``cancelPush(app:id:at:)``, with `beforeCancelling` run first in its transaction (a test holds the transaction
    /// there, begun, while chunks are recorded). A push it marks handed out in full without completing it is looked at
    /// again once it has committed (``lookAgainForCompletion(of:at:)``).
    func cancelPush(
        app: String, id: String, at now: Date, beforeCancelling: (@Sendable (any SQLDatabase) async throws -> Void)?
    ) async throws -> (push: PushRecord, completedNow: Bool)? {
        let cancelled = try await transaction { db -> (push: PushRecord, completedNow: Bool)? in
            try await beforeCancelling?(db)
            // The app's own push only, and one not completed: the id alone would let one app complete another's.
            guard let status = try await db.raw("""
                SELECT status FROM pushes WHERE app_id = \(bind: app) AND id = \(bind: id)
                """).first(decodingColumn: "status", as: String.self)
            else { return nil }
            var completedNow = false
            if status != PushRecord.Status.completed.rawValue {
                // Its audience counts as handed out in full from now on: no node claims another chunk of it, and it
                // completes with its last open chunk, or now if none is open.
                try await db.raw("""
                    UPDATE pushes SET handed_out = 1, cancelled_at = COALESCE(cancelled_at, \(bind: now.milliseconds))
                    WHERE id = \(bind: id)
                    """).run()
                completedNow = try await Self.completeIfDone(pushID: id, at: now, db)
            }
            guard let row = try await db.raw("SELECT \(unsafeRaw: Columns.push) FROM pushes WHERE id = \(bind: id)").first() else { return nil }
            return (try await Self.withChunkCounts(try PushRecord(row: row), db), completedNow)
        }
        // Marked handed out in full, it may have had its last chunk closed meanwhile by a node that did not see that.
        guard let cancelled, cancelled.push.status != .completed, await lookAgainForCompletion(of: id, at: now),
            let push = try await push(app: app, id: id)
        else { return cancelled }
        return (push, true)
    }

    public func recipients(app: String, audience: Audience, after cursor: String?, limit: Int) async throws -> Page<Recipient> {
        try await exclusive { db in try await Self.recipients(app: app, audience: audience, after: cursor, limit: limit, db) }
    }

    public func recipients(
        app: String, audience: Audience, filter: AudienceFilter?, after cursor: String?, limit: Int
    ) async throws -> Page<Recipient> {
        try await exclusive { db in
            var page = try await Self.recipients(app: app, audience: audience, after: cursor, limit: limit, db)
            if let filter { page.items = try await Self.admitted(page.items, by: filter, app: app, db) }
            return page
        }
    }

    /// A push's failures, `limit` at a time, in the order they were committed, so a client paging a running push
    /// passes none by. The cursor is a failure's row id ("0" or none: from the start). One that is not ours gives an
    /// empty last page rather than a fresh start, which could loop a client forever. While the push has not completed,
    /// the last page so far has a `next` too (its last failure, or the cursor it was read after): where the failures
    /// still to come begin.
    ///
    /// Where writes overlap (PostgreSQL), chunks record at once, and a failure numbered 6 can commit before one
    /// numbered 1. So the failures go in the order of the transactions that wrote them (`xact`, then id), and while
    /// the push runs only those whose transaction is older than every one still running (`pg_snapshot_xmin`): none
    /// can commit behind them later. A completed push's failures are all committed (it completes with its last
    /// chunk's record), and are read whole, however old a transaction still runs elsewhere.
    public func failures(pushID: String, after cursor: String?, limit: Int) async throws -> Page<PushFailure> {
        let after: Int64
        if let cursor {
            guard let id = Int64(cursor), id >= 0 else { return Page(items: [], next: nil) }
            after = id
        } else {
            after = 0
        }
        let limit = max(limit, 1)
        let overlapping = flavor.overlappingWrites
        return try await exclusive { db in
            // Read first: a push read as completed has every failure committed before the read below begins.
            let status = try await db.raw("SELECT status FROM pushes WHERE id = \(bind: pushID)").first(decodingColumn: "status", as: String.self)
            let running = status != nil && status != PushRecord.Status.completed.rawValue
            var query: SQLQueryString = "SELECT id, device_id, token, status, reason, failed_at FROM push_failures WHERE push_id = \(bind: pushID)"
            if overlapping {
                if after > 0 {
                    query += " AND (xact, id) > (SELECT xact, id FROM push_failures WHERE push_id = \(bind: pushID) AND id = \(bind: after))"
                }
                if running { query += " AND xact < pg_snapshot_xmin(pg_current_snapshot())" }
                query += " ORDER BY xact, id"
            } else {
                query += " AND id > \(bind: after) ORDER BY id"
            }
            query += " LIMIT \(bind: limit + 1)"
            let rows = try await db.raw(query).all()
            let page = rows.prefix(limit)
            let last = try page.last.map { try $0.decode(column: "id", as: Int64.self) }
            let next: Int64? = rows.count > limit ? last : running ? (last ?? after) : nil
            return Page(items: try page.map(PushFailure.init(row:)), next: next.map(String.init))
        }
    }

    public func purgeFinishedPushes(before: Date, limit: Int) async throws -> PushPurge {
        let limit = max(limit, 1)
        // The oldest `limit` pushes past retention (by the index of completed pushes' finish) whose device messages
        // are gone: each call looks at these only, however long the backlog behind them.
        let oldest: SQLQueryString = """
            SELECT p.id FROM pushes p
            WHERE p.status = 'completed' AND p.finished_at < \(bind: before.milliseconds)
                AND NOT EXISTS (SELECT 1 FROM device_messages m WHERE m.push_id = p.id)
            ORDER BY p.finished_at LIMIT \(bind: limit)
            """
        return try await transaction { db in
            // A large push's failures (a row per recipient that failed) take several calls, each a short transaction;
            // the pushes go once their failures are gone.
            let failures = try await db.raw("""
                DELETE FROM push_failures WHERE id IN (SELECT f.id FROM push_failures f WHERE f.push_id IN (\(oldest)) LIMIT \(bind: limit))
                RETURNING id
                """).all().count
            guard failures < limit else { return PushPurge(pushes: 0, failures: failures, more: true) }
            // Its devices' reports likewise (a row per device that reported it).
            let reports = try await db.raw("""
                DELETE FROM push_reports WHERE (push_id, device_id) IN (
                    SELECT r.push_id, r.device_id FROM push_reports r WHERE r.push_id IN (\(oldest)) LIMIT \(bind: limit - failures))
                RETURNING device_id
                """).all().count
            guard failures + reports < limit else { return PushPurge(pushes: 0, failures: failures, reports: reports, more: true) }
            // Their chunks go with them (a push has one per `delivery.chunkSize` recipients: 500 for a million).
            let pushes = try await db.raw("DELETE FROM pushes WHERE id IN (\(oldest)) RETURNING id").all().count
            return PushPurge(pushes: pushes, failures: failures, reports: reports, more: pushes == limit)
        }
    }
}

// MARK: - Sessions and transactions

extension SQLStore {
    /// Runs `body` on a connection no other call uses meanwhile.
    func exclusive<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        try await sessions.withSession(body)
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T {
        let flavor = self.flavor
        return try await exclusive { db in try await Self.inTransaction(db, flavor: flavor, body) }
    }

    /// How often a transaction that keeps conflicting with concurrent ones is tried before its error is thrown.
    static let transactionAttempts = 30

    /// Runs `body` in a transaction on `db`. When it fails because a concurrent transaction got in its way
    /// (PostgreSQL's serialization failures and deadlocks), it is rolled back and run again from the start, so
    /// `body` must only touch the database.
    static func inTransaction<T: Sendable>(
        _ db: any SQLDatabase, flavor: SQLFlavor, _ body: @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        var attempt = 1
        while true {
            try await db.raw(SQLQueryString(flavor.beginTransaction)).run()
            do {
                let result = try await body(db)
                try await end("COMMIT", db)
                return result
            } catch {
                // The original error says what went wrong; a failed rollback (the connection is gone) adds nothing.
                try? await end("ROLLBACK", db)
                guard flavor.isTransient(error), attempt < transactionAttempts else { throw error }
                attempt += 1
                // Random and growing (up to 200 ms), so the transactions that collided do not collide again.
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...min(200, 2 << min(attempt, 7)))))
            }
        }
    }

    /// Ends the transaction on `db` with `statement` even when the caller is cancelled. sqlite-nio's async calls skip
    /// a statement whose task is cancelled before it runs; a COMMIT or ROLLBACK skipped so would leave the one SQLite
    /// connection inside a transaction, where every later BEGIN fails and every later write waits uncommitted. The
    /// future-based call runs whatever the task's state (as PostgreSQL's calls do).
    private static func end(_ statement: String, _ db: any SQLDatabase) async throws {
        try await db.execute(sql: SQLRaw(statement)) { _ in }.get()
    }
}

// MARK: - Queries shared by several calls

extension SQLStore {
    /// A page of the audience after the cursor (see ``TernStore/recipients(app:audience:after:limit:)``).
    static func recipients(
        app: String, audience: Audience, after cursor: String?, limit: Int, _ db: any SQLDatabase
    ) async throws -> Page<Recipient> {
        let limit = max(limit, 1)
        switch audience {
        case .tokens(let tokens):
            return try await Self.pageThroughKeys(tokens, after: cursor, limit: limit) { chunk in
                try await Self.tokenRecipients(chunk, app: app, db)
            }
        case .devices(let deviceIDs):
            return try await Self.pageThroughKeys(deviceIDs, after: cursor, limit: limit) { chunk in
                let found = try await Self.deviceRecipients(
                    app: app, after: nil, limit: chunk.count, where: "device_id IN (\(binds: chunk))", db
                )
                let byKey = Dictionary(uniqueKeysWithValues: found.map { ($0.key, $0) })
                return chunk.compactMap { byKey[$0] }
            }
        case .aliases(let aliases):
            return try await Self.aliasPage(aliases, app: app, after: cursor, limit: limit, db)
        case .tags(let tags, all: false) where Set(tags).count == 1:
            // One tag: its index gives the page in order, with nothing to merge.
            return try await recipients(app: app, audience: .tags(tags, all: true), after: cursor, limit: limit, db)
        case .tags(let tags, all: false):
            // Each tag's first devices after the cursor, from the tag's index; merged, they hold the page.
            var found: [String: Recipient] = [:]
            for tag in Set(tags) {
                for recipient in try await Self.taggedRecipients(app: app, tag: tag, alsoTagged: [], after: cursor, limit: limit + 1, db) {
                    found[recipient.key] = recipient
                }
            }
            return Page(trimming: found.values.sorted { $0.key.precedesByBytes($1.key) }, to: limit)
        case .tags(let tags, all: true):
            // No tags at all would match every device; an empty condition sends to nobody, not to everyone.
            let tags = Set(tags).sorted()
            guard let first = tags.first else { return Page(items: [], next: nil) }
            let found = try await Self.taggedRecipients(
                app: app, tag: first, alsoTagged: Array(tags.dropFirst()), after: cursor, limit: limit + 1, db)
            return Page(trimming: found, to: limit)
        case .everyone:
            return try await Self.devicePage(app: app, after: cursor, limit: limit, where: nil, db)
        case .activity(let activity, let aliases):
            return try await Self.activityPage(activity, aliases: aliases, app: app, after: cursor, limit: limit, db)
        }
    }

    static func requireApp(_ id: String, _ db: any SQLDatabase) async throws {
        guard try await db.raw("SELECT id FROM apps WHERE id = \(bind: id)").first() != nil else {
            throw StoreError.notFound("app \(id)")
        }
    }

    static func device(app: String, deviceID: String, _ db: any SQLDatabase) async throws -> DeviceRecord? {
        let rows = try await db.raw("""
            SELECT \(unsafeRaw: Columns.device) FROM devices WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
            """).all()
        return try await devices(rows: rows, app: app, db).first
    }

    /// Device rows with their tags, fetched in one more query.
    static func devices(rows: some Collection<any SQLRow>, app: String, _ db: any SQLDatabase) async throws -> [DeviceRecord] {
        guard !rows.isEmpty else { return [] }
        let deviceIDs = try rows.map { try $0.decode(column: "device_id", as: String.self) }
        let tags = try await tags(app: app, deviceIDs: deviceIDs, db)
        return try zip(rows, deviceIDs).map { row, deviceID in try DeviceRecord(row: row, tags: tags[deviceID] ?? []) }
    }

    static func tags(app: String, deviceIDs: [String], _ db: any SQLDatabase) async throws -> [String: Set<String>] {
        let rows = try await db.raw("""
            SELECT device_id, tag FROM device_tags WHERE app_id = \(bind: app) AND device_id IN (\(binds: deviceIDs))
            """).all()
        var tags: [String: Set<String>] = [:]
        for row in rows {
            tags[try row.decode(column: "device_id", as: String.self), default: []].insert(try row.decode(column: "tag", as: String.self))
        }
        return tags
    }

    /// Deletes the inboxes of these devices as owners (``InboxOwner/device(_:)``, a device without an alias), with their
    /// badge counters: a device id is the app's to choose, so whoever registers a deleted one afresh must find nothing
    /// of the device that had it. An alias's inbox is its user's, and stays.
    static func deleteOwnInboxes(app: String, deviceIDs: [String], _ db: any SQLDatabase) async throws {
        for piece in deviceIDs.pieces(of: 500) {
            let owners = piece.map { InboxOwner.device($0).key }
            try await db.raw("DELETE FROM inbox_entries WHERE app_id = \(bind: app) AND owner IN (\(binds: owners))").run()
            try await db.raw("DELETE FROM inbox_owners WHERE app_id = \(bind: app) AND owner IN (\(binds: owners))").run()
        }
    }

    static func insertTags(_ tags: Set<String>, app: String, deviceID: String, _ db: any SQLDatabase) async throws {
        guard !tags.isEmpty else { return }
        let rows = tags.sorted().map { tag -> SQLQueryString in "(\(bind: app), \(bind: deviceID), \(bind: tag))" }
        try await db.raw("""
            INSERT INTO device_tags (app_id, device_id, tag) VALUES \(rows.joined(separator: ", ")) ON CONFLICT DO NOTHING
            """).run()
    }

    /// Active devices with `tag` (and every one of `alsoTagged`) after the cursor, by device id. Walks the tag's index,
    /// so a page costs its own rows however many devices the app has.
    static func taggedRecipients(
        app: String, tag: String, alsoTagged: [String], after cursor: String?, limit: Int, _ db: any SQLDatabase
    ) async throws -> [Recipient] {
        // A condition on the tag's row `t`.
        let alsoTaggedCondition: SQLQueryString? =
            alsoTagged.isEmpty
            ? nil
            : """
                 AND (SELECT COUNT(*) FROM device_tags u WHERE u.app_id = t.app_id AND u.device_id = t.device_id
                    AND u.tag IN (\(binds: alsoTagged))) = \(bind: alsoTagged.count)
                """
        if let session = db as? SQLiteSession {
            return try await mergedTaggedRecipients(
                app: app, tag: tag, alsoTagged: alsoTaggedCondition, after: cursor, limit: limit, session)
        }
        var query: SQLQueryString = """
            SELECT d.device_id, d.token, d.environment, d.last_registered_at, d.alias FROM device_tags t
            JOIN devices d ON d.app_id = t.app_id AND d.device_id = t.device_id
            WHERE t.app_id = \(bind: app) AND t.tag = \(bind: tag) AND t.device_id > \(bind: cursor ?? "")
                AND d.deactivated_at IS NULL
            """
        if let alsoTaggedCondition { query += alsoTaggedCondition }
        query += " ORDER BY t.device_id LIMIT \(bind: limit)"
        return try await recipientRows(query, db)
    }

    /// A page of an aliases audience, ordered by alias, then device id, so each alias is read from the alias index.
    /// The key (and cursor) is the alias and the device id joined by ``aliasKeySeparator``.
    static func aliasPage(
        _ aliases: [String], app: String, after cursor: String?, limit: Int, _ db: any SQLDatabase
    ) async throws -> Page<Recipient> {
        // Byte order, as SQL compares them, so the list and the index agree on what comes after the cursor.
        var remaining = Set(aliases).sorted { $0.precedesByBytes($1) }[...]
        var found: [Recipient] = []
        func add(_ rows: [any SQLRow]) throws {
            for row in rows {
                var recipient = try Recipient(deviceRow: row)
                recipient.key = try row.decode(column: "alias", as: String.self) + aliasKeySeparator + recipient.key
                found.append(recipient)
            }
        }
        if let cursor, let split = cursor.lastIndex(of: Character(aliasKeySeparator)) {
            // The rest of the cursor's alias, then the aliases after it.
            let alias = String(cursor[..<split])
            let deviceID = String(cursor[cursor.index(after: split)...])
            remaining = remaining.drop { !alias.precedesByBytes($0) }
            try add(try await db.raw("""
                SELECT device_id, token, environment, last_registered_at, alias FROM devices
                WHERE app_id = \(bind: app) AND alias = \(bind: alias) AND device_id > \(bind: deviceID) AND deactivated_at IS NULL
                ORDER BY device_id LIMIT \(bind: limit + 1)
                """).all())
        }
        while found.count <= limit, !remaining.isEmpty {
            let slice = Array(remaining.prefix(500))
            remaining = remaining.dropFirst(slice.count)
            try add(try await db.raw("""
                SELECT device_id, token, environment, last_registered_at, alias FROM devices
                WHERE app_id = \(bind: app) AND alias IN (\(binds: slice)) AND deactivated_at IS NULL
                ORDER BY alias, device_id LIMIT \(bind: limit + 1 - found.count)
                """).all())
        }
        return Page(trimming: found, to: limit)
    }

    /// Joins an alias and a device id in an aliases audience's keys: a control character, which no alias of a real
    /// app holds (the key is split at its last one, so even such an alias pages correctly).
    static let aliasKeySeparator = "\u{1F}"

    /// A page of active devices matching `condition`, keyed and ordered by device id.
    static func devicePage(
        app: String, after cursor: String?, limit: Int, where condition: SQLQueryString?, _ db: any SQLDatabase
    ) async throws -> Page<Recipient> {
        Page(trimming: try await deviceRecipients(app: app, after: cursor, limit: limit + 1, where: condition, db), to: limit)
    }

    static func deviceRecipients(
        app: String, after cursor: String?, limit: Int, where condition: SQLQueryString?, _ db: any SQLDatabase
    ) async throws -> [Recipient] {
        var query: SQLQueryString = """
            SELECT device_id, token, environment, last_registered_at, alias FROM devices
            WHERE app_id = \(bind: app) AND deactivated_at IS NULL
            """
        if let cursor { query += " AND device_id > \(bind: cursor)" }
        if let condition { query += " AND (\(condition))" }
        query += " ORDER BY device_id LIMIT \(bind: limit)"
        return try await recipientRows(query, db)
    }

    /// The given tokens as recipients: registered ones with their device, unknown ones bare, deactivated ones left out.
    static func tokenRecipients(_ tokens: [String], app: String, _ db: any SQLDatabase) async throws -> [Recipient] {
        let rows = try await db.raw("""
            SELECT device_id, token, environment, last_registered_at, deactivated_at, alias FROM devices
            WHERE app_id = \(bind: app) AND token IN (\(binds: tokens))
            """).all()
        var registered: [String: any SQLRow] = [:]
        for row in rows {
            registered[try row.decode(column: "token", as: String.self)] = row
        }
        return try tokens.compactMap { token in
            guard let row = registered[token] else {
                return Recipient(key: token, deviceID: nil, token: token, environment: nil, lastRegisteredAt: nil)
            }
            guard try row.optionalDate("deactivated_at") == nil else { return nil }
            return Recipient(
                key: token, deviceID: try row.decode(column: "device_id", as: String.self), token: token,
                environment: try row.word("environment", as: APNsEnvironment.self),
                lastRegisteredAt: try row.date("last_registered_at"), alias: try row.decode(column: "alias", as: String?.self)
            )
        }
    }

    /// Pages through an audience given as a list of keys, a slice of the sorted list per query, so a long list is
    /// never one huge statement. `fetch` returns the slice's recipients in the slice's order, skipping keys that have
    /// none. One recipient past the page says whether there is another.
    static func pageThroughKeys(
        _ keys: [String], after cursor: String?, limit: Int, fetch: ([String]) async throws -> [Recipient]
    ) async throws -> Page<Recipient> {
        // Byte order, as SQL compares keys, so the list and the registry agree on what comes after the cursor.
        var remaining = Set(keys).sorted { $0.precedesByBytes($1) }[...]
        if let cursor {
            remaining = remaining.drop { !cursor.precedesByBytes($0) }
        }
        var found: [Recipient] = []
        while found.count <= limit, !remaining.isEmpty {
            let slice = Array(remaining.prefix(500))
            remaining = remaining.dropFirst(slice.count)
            found += try await fetch(slice)
        }
        return Page(trimming: found, to: limit)
    }
}

// MARK: - Rows

/// The column lists the row decoders below expect.
enum Columns {
    static let app = """
        id, topic, environment, endpoint_host, endpoint_port, endpoint_ca_pem, sealed_credentials, app_key_hash, \
        master_secret_hash, webhook_url, inbox_max_ttl, inbox_cap, transport, endpoint_feedback_port, feedback_interval, \
        feedback_polled_at, user_binding, sealed_identity_secret, webhook_secret_salt, broadcast_rate_per_second, created_at, updated_at, \
        webhook_events
        """
    static let deviceNames = [
        "app_id", "device_id", "token", "environment", "alias", "locale", "timezone", "app_version", "last_registered_at",
        "deactivated_at", "deactivation_reason", "created_at", "secret_hash",
    ]
    static let device = deviceNames.joined(separator: ", ")
    static func device(in table: String) -> String { deviceNames.map { "\(table).\($0)" }.joined(separator: ", ") }
    static let tokenEvent = "id, app_id, device_id, token, reason, apns_timestamp, occurred_at"
    static let push = """
        id, app_id, idempotency_key, audience, notification, status, targeted, accepted, failed, pruned, \
        failed_by_reason, inbox_dropped, cursor_key, created_at, finished_at, cancelled_at, send_at, rate_per_second, token_kind
        """
}

extension AppRecord {
    init(row: any SQLRow) throws {
        let endpoint = try row.decode(column: "endpoint_host", as: String?.self).map { host in
            Endpoint(
                host: host, port: try row.decode(column: "endpoint_port", as: Int.self),
                caPEM: try row.decode(column: "endpoint_ca_pem", as: String?.self),
                feedbackPort: try row.decode(column: "endpoint_feedback_port", as: Int?.self)
            )
        }
        self.init(
            id: try row.decode(column: "id", as: String.self), topic: try row.decode(column: "topic", as: String.self),
            environment: try row.word("environment", as: AppEnvironment.self), endpoint: endpoint,
            sealedCredentials: try row.bytes("sealed_credentials"), appKeyHash: try row.bytes("app_key_hash"),
            masterSecretHash: try row.bytes("master_secret_hash"), webhookURL: try row.decode(column: "webhook_url", as: String?.self),
            createdAt: try row.date("created_at"), updatedAt: try row.date("updated_at")
        )
        inboxMaxTTL = try row.decode(column: "inbox_max_ttl", as: Int.self)
        inboxCap = try row.decode(column: "inbox_cap", as: Int.self)
        transport = try row.decode(column: "transport", as: String.self)
        feedbackInterval = try row.decode(column: "feedback_interval", as: Int.self)
        feedbackPolledAt = try row.decode(column: "feedback_polled_at", as: Int64?.self).map {
            Date(timeIntervalSince1970: TimeInterval($0) / 1000)
        }
        let binding = try row.decode(column: "user_binding", as: String.self)
        guard let userBinding = UserBinding(rawValue: binding) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "unknown user binding \(binding)"))
        }
        self.userBinding = userBinding
        sealedIdentitySecret = try row.decode(column: "sealed_identity_secret", as: Data?.self).map { [UInt8]($0) }
        webhookSecretSalt = try row.decode(column: "webhook_secret_salt", as: String?.self)
        broadcastRatePerSecond = try row.decode(column: "broadcast_rate_per_second", as: Int?.self)
        if let events = try row.decode(column: "webhook_events", as: String?.self) {
            // Kinds a later version added are passed over: this one cannot post them.
            webhookEvents = Set(events.split(separator: ",").compactMap { WebhookEventKind(rawValue: String($0)) })
        }
    }

    /// ``webhookEvents`` as `apps.webhook_events` keeps them: their names, comma-separated; NULL for the default.
    var storedWebhookEvents: String? {
        webhookEvents == Self.defaultWebhookEvents ? nil : webhookEvents.sorted().map(\.rawValue).joined(separator: ",")
    }
}

extension SQLStore {
    /// The recipients `query` selects (`device_id, token, environment, last_registered_at, alias`, ordered and keyed
    /// by device id): every chunk of a push reads its recipients here.
    ///
    /// On SQLite the rows come back packed into one value (``PackedRows``): SQLKit's rows decode each column through
    /// Codable, and even SQLite's own rows make an array and a string per text for every recipient.
    static func recipientRows(_ query: SQLQueryString, _ db: any SQLDatabase) async throws -> [Recipient] {
        guard let session = db as? SQLiteSession else { return try await db.raw(query).all().map(Recipient.init(deviceRow:)) }
        return try await PackedRows.recipients(query, session)
    }
}

extension Recipient {
    /// A device row as a recipient keyed by its device id: `device_id, token, environment, last_registered_at, alias`.
    init(deviceRow row: any SQLRow) throws {
        let deviceID = try row.decode(column: "device_id", as: String.self)
        self.init(
            key: deviceID, deviceID: deviceID, token: try row.decode(column: "token", as: String.self),
            environment: try row.word("environment", as: APNsEnvironment.self),
            lastRegisteredAt: try row.date("last_registered_at"), alias: try row.decode(column: "alias", as: String?.self)
        )
    }
}

extension DeviceRecord {
    init(row: any SQLRow, tags: Set<String>) throws {
        self.init(
            appID: try row.decode(column: "app_id", as: String.self), deviceID: try row.decode(column: "device_id", as: String.self),
            token: try row.decode(column: "token", as: String.self), environment: try row.word("environment", as: APNsEnvironment.self),
            alias: try row.decode(column: "alias", as: String?.self), tags: tags,
            locale: try row.decode(column: "locale", as: String?.self), timezone: try row.decode(column: "timezone", as: String?.self),
            appVersion: try row.decode(column: "app_version", as: String?.self), lastRegisteredAt: try row.date("last_registered_at"),
            deactivatedAt: try row.optionalDate("deactivated_at"),
            deactivationReason: try row.decode(column: "deactivation_reason", as: String?.self).map(TokenDeactivationReason.init(rawValue:)),
            createdAt: try row.date("created_at"),
            secretHash: try row.decode(column: "secret_hash", as: Data?.self).map { [UInt8]($0) }
        )
    }
}

extension TokenHistoryEntry {
    init(row: any SQLRow) throws {
        self.init(
            token: try row.decode(column: "token", as: String.self), environment: try row.word("environment", as: APNsEnvironment.self),
            firstRegisteredAt: try row.date("first_registered_at"), replacedAt: try row.date("replaced_at"),
            reason: try row.word("reason", as: TokenReplacementReason.self)
        )
    }
}

extension TokenEvent {
    init(row: any SQLRow) throws {
        self.init(
            id: try row.decode(column: "id", as: Int64.self), appID: try row.decode(column: "app_id", as: String.self),
            deviceID: try row.decode(column: "device_id", as: String.self), token: try row.decode(column: "token", as: String.self),
            reason: TokenDeactivationReason(rawValue: try row.decode(column: "reason", as: String.self)),
            apnsTimestamp: try row.optionalDate("apns_timestamp"),
            occurredAt: try row.date("occurred_at")
        )
    }
}

extension PushRecord {
    init(row: any SQLRow) throws {
        let status = try row.decode(column: "status", as: String.self)
        guard let status = Status(rawValue: status) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "unknown push status \(status)"))
        }
        let (audience, filter) = try StoredAudience.decode(try row.decode(column: "audience", as: String.self))
        self.init(
            id: try row.decode(column: "id", as: String.self), appID: try row.decode(column: "app_id", as: String.self),
            idempotencyKey: try row.decode(column: "idempotency_key", as: String?.self), audience: audience, filter: filter,
            notification: try row.bytes("notification"), status: status,
            counts: PushCounts(
                targeted: try row.decode(column: "targeted", as: Int.self), accepted: try row.decode(column: "accepted", as: Int.self),
                failed: try row.decode(column: "failed", as: Int.self), pruned: try row.decode(column: "pruned", as: Int.self),
                failedByReason: try JSON.decode([String: Int].self, try row.decode(column: "failed_by_reason", as: String.self)),
                inboxDropped: try row.decode(column: "inbox_dropped", as: Int.self)
            ),
            cursor: try row.decode(column: "cursor_key", as: String?.self), createdAt: try row.date("created_at"),
            finishedAt: try row.optionalDate("finished_at"), cancelledAt: try row.optionalDate("cancelled_at"),
            sendAt: try row.optionalDate("send_at"), ratePerSecond: try row.decode(column: "rate_per_second", as: Int?.self),
            tokenKind: try row.optionalWord("token_kind", as: PushTokenKind.self)
        )
    }
}

extension PushFailure {
    init(row: any SQLRow) throws {
        self.init(
            deviceID: try row.decode(column: "device_id", as: String?.self), token: try row.decode(column: "token", as: String.self),
            status: try row.decode(column: "status", as: Int?.self),
            reason: DeliveryFailureReason(rawValue: try row.decode(column: "reason", as: String.self)),
            at: try row.date("failed_at")
        )
    }
}

extension SQLRow {
    func date(_ column: String) throws -> Date {
        Date(milliseconds: try decode(column: column, as: Int64.self))
    }

    func optionalDate(_ column: String) throws -> Date? {
        try decode(column: column, as: Int64?.self).map(Date.init(milliseconds:))
    }

    /// A BLOB (BYTEA) column; SQLite may hand back an empty one as NULL.
    func bytes(_ column: String) throws -> [UInt8] {
        [UInt8](try decode(column: column, as: Data?.self) ?? Data())
    }
}

extension Date {
    /// Milliseconds since 1970, as stored. Rounded to the nearest, so a date read back stores the same again; a date
    /// beyond what 64 bits hold is stored as the nearest end (a conversion that traps would take the node down).
    var milliseconds: Int64 { Int64(clamping: (timeIntervalSince1970 * 1000).rounded()) }

    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

// MARK: - Text columns

/// How an ``Audience`` (with its ``AudienceFilter``) is kept in a TEXT column. A filtered audience's kind is
/// `filtered-` and the audience's own, which a node of a version before filters does not know: it cannot claim while
/// such a push is unfinished (docs/deployment.md), rather than send it to the whole audience.
struct StoredAudience: Codable {
    var kind: String
    var values: [String]?
    var all: Bool?
    var activity: String?
    var filter: Filter?

    struct Filter: Codable {
        var appVersionAtLeast: String?
        var appVersionBelow: String?
        var languages: [String]?
        /// Milliseconds since 1970.
        var registeredSince: Int64?
    }

    static let filteredPrefix = "filtered-"

    static func encode(_ audience: Audience, filter: AudienceFilter? = nil) throws -> String {
        var stored = switch audience {
        case .tokens(let tokens): StoredAudience(kind: "tokens", values: tokens)
        case .devices(let deviceIDs): StoredAudience(kind: "devices", values: deviceIDs)
        case .aliases(let aliases): StoredAudience(kind: "aliases", values: aliases)
        case .tags(let tags, let all): StoredAudience(kind: "tags", values: tags, all: all)
        case .everyone: StoredAudience(kind: "everyone")
        case .activity(let activity, let aliases): StoredAudience(kind: "activity", values: aliases, activity: activity)
        }
        if let filter {
            stored.kind = filteredPrefix + stored.kind
            stored.filter = Filter(
                appVersionAtLeast: filter.appVersions?.atLeast?.description, appVersionBelow: filter.appVersions?.below?.description,
                languages: filter.languages, registeredSince: filter.registeredSince?.milliseconds)
        }
        return try JSON.encode(stored)
    }

    static func decode(_ text: String) throws -> (Audience, AudienceFilter?) {
        var stored = try JSON.decode(StoredAudience.self, text)
        var filter: AudienceFilter?
        if stored.kind.hasPrefix(filteredPrefix), let given = stored.filter {
            stored.kind.removeFirst(filteredPrefix.count)
            filter = try given.decoded()
        }
        switch (stored.kind, stored.values) {
        case ("tokens", let tokens?): return (.tokens(tokens), filter)
        case ("devices", let deviceIDs?): return (.devices(deviceIDs), filter)
        case ("aliases", let aliases?): return (.aliases(aliases), filter)
        case ("tags", let tags?): return (.tags(tags, all: stored.all ?? false), filter)
        case ("everyone", _): return (.everyone, filter)
        case ("activity", let aliases?):
            guard let activity = stored.activity else { break }
            return (.activity(activity, aliases: aliases), filter)
        default: break
        }
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "unknown audience \(text)"))
    }
}

extension StoredAudience.Filter {
    func decoded() throws -> AudienceFilter {
        func version(_ text: String?) throws -> AppVersion? {
            guard let text else { return nil }
            guard let version = AppVersion(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not an app version: \(text)"))
            }
            return version
        }
        let (atLeast, below) = (try version(appVersionAtLeast), try version(appVersionBelow))
        return AudienceFilter(
            appVersions: atLeast == nil && below == nil ? nil : AudienceFilter.VersionRange(atLeast: atLeast, below: below),
            languages: languages, registeredSince: registeredSince.map(Date.init(milliseconds:)))
    }
}

enum JSON {
    static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }
}
