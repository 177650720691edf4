import Foundation
import SQLKit

/// Where SQLite and PostgreSQL spell the store's SQL differently; everything else is shared.
struct SQLFlavor: Sendable {
    /// The column type for byte arrays.
    var bytes: String
    /// An increasing 64-bit key, never reused, so an id is a cursor.
    var serialPrimaryKey: String
    /// Starts a transaction that will write.
    var beginTransaction: String
    /// Rewrites a schema statement for the database: see ``postgres``.
    var adapt: @Sendable (String) -> String = { $0 }
    /// Whether a transaction that failed with this error should simply run again (a conflict with a concurrent one).
    var isTransient: @Sendable (any Error) -> Bool = { _ in false }
    /// Statements that make schema migrations from several processes take turns, if the database needs them.
    var schemaLock: (acquire: String, release: String)?
    /// Appended to a SELECT whose rows the transaction will update: locks them, and leaves out rows another
    /// transaction has locked, so nodes claiming work pass each other by. Empty where transactions never overlap.
    var lockSkippingLocked = ""
    /// `pushes.ordinal`, a push's place in the order pushes are sent, given by the database (never a node's clock):
    /// the column's type, and the value a new push gets (nil where the database makes it by itself).
    var pushOrdinal: (type: String, value: String?)
    /// A query of the database server's time in microseconds since 1970 (column `now`), where the database has a
    /// clock of its own that several nodes share; nil where its time is the node's (SQLite, a file of this node's).
    var serverTime: String? = nil
    /// A statement that makes the transactions recording an app's events in one table (token events, open events)
    /// take turns, from it to their commit, where transactions may overlap: so events are numbered in the order they
    /// become visible, and a reader past event N never later finds an N - 1 committed behind it (the webhook's cursor
    /// would pass it by). Nil where writes take turns anyway (SQLite).
    var eventOrderLock: (@Sendable (_ table: String, _ app: String) -> SQLQueryString)? = nil
    /// Whether a query may name the index it reads (`INDEXED BY`): SQLite keeps no statistics unless asked, and
    /// without them may read an app's whole history through a wide index where a partial one holds the few rows
    /// wanted. PostgreSQL plans from its statistics, and has no such clause.
    var namesIndexes = false

    /// Whether transactions that write run at once (PostgreSQL), so a row numbered N can commit after one numbered
    /// N + 1, rather than one after another (SQLite), where rows are numbered in the order they commit: where the
    /// token events need their lock. A push's failures, which its chunks record at once, are then read in the order of
    /// the transactions that wrote them (`push_failures.xact`); see ``SQLStore/failures(pushID:after:limit:)``.
    var overlappingWrites: Bool { eventOrderLock != nil }

    /// ` INDEXED BY index` where the database takes it, else nothing.
    func indexedBy(_ index: String) -> String { namesIndexes ? " INDEXED BY \(index)" : "" }

    static let sqlite = SQLFlavor(
        bytes: "BLOB",
        serialPrimaryKey: "INTEGER PRIMARY KEY AUTOINCREMENT",
        // Takes the write lock up front, so a transaction never fails halfway on another process's lock.
        beginTransaction: "BEGIN IMMEDIATE",
        // Writes take turns, so the next number is simply one more than the last.
        pushOrdinal: ("INTEGER", "(SELECT COALESCE(MAX(ordinal), 0) + 1 FROM pushes)"),
        namesIndexes: true
    )
}

/// One step of the schema. Never edit a step that has shipped: add one.
struct Migration: Sendable {
    var version: Int
    var name: String
    var statements: [String]
}

extension SQLStore {
    /// Brings the schema up to date, each missing step in its own transaction, recorded in `schema_migrations`.
    /// On PostgreSQL, nodes starting together take turns (an advisory lock), so each step runs once.
    public func migrate() async throws {
        try await migrate(through: nil)
    }

    /// Brings the schema up to `last` (every step when nil). Upgrade tests make an older database with it.
    ///
    /// It is one session, since the lock is the session's: with a call's time for each step and for the steps'
    /// table, and as much again for waiting while another node applies them. One call's time for all of them was too
    /// little on a busy server (a fresh schema took 10 s of the 15 with the test suite running).
    func migrate(through last: Int?) async throws {
        let flavor = self.flavor
        let logger = self.logger
        let steps = Self.migrations(flavor).filter { $0.version <= last ?? .max }
        try await sessions.withSession(calls: 2 * (steps.count + 1)) { db in
            if let lock = flavor.schemaLock { try await db.raw(SQLQueryString(lock.acquire)).run() }
            do {
                try await db.raw(SQLQueryString(flavor.adapt("""
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version INTEGER PRIMARY KEY,
                        name TEXT NOT NULL,
                        applied_at BIGINT NOT NULL
                    )
                    """))).run()
                let applied = Set(try await db.raw("SELECT version FROM schema_migrations").all(decodingColumn: "version", as: Int.self))
                for migration in steps where !applied.contains(migration.version) {
                    try await Self.inTransaction(db, flavor: flavor) { db in
                        for statement in migration.statements {
                            try await db.raw(SQLQueryString(flavor.adapt(statement))).run()
                        }
                        try await db.raw("""
                            INSERT INTO schema_migrations (version, name, applied_at)
                            VALUES (\(bind: migration.version), \(bind: migration.name), \(bind: Date().milliseconds))
                            """).run()
                    }
                    logger.debug("applied schema migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
                }
            } catch {
                if let lock = flavor.schemaLock { try? await db.raw(SQLQueryString(lock.release)).run() }
                throw error
            }
            if let lock = flavor.schemaLock { try await db.raw(SQLQueryString(lock.release)).run() }
        }
    }

    /// The schema's steps, in order.
    ///
    /// Dates are BIGINT milliseconds since 1970. Byte columns may hold NULL for an empty array: SQLite binds an empty
    /// blob as NULL. Tags live in their own table, indexed, so a tag's devices page without scanning the registry.
    static func migrations(_ flavor: SQLFlavor) -> [Migration] {
        [
            Migration(version: 1, name: "settings, registry and pushes", statements: [
                "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
                """
                CREATE TABLE apps (
                    id TEXT PRIMARY KEY,
                    topic TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    endpoint_host TEXT,
                    endpoint_port INTEGER,
                    endpoint_ca_pem TEXT,
                    sealed_credentials \(flavor.bytes),
                    app_key_hash \(flavor.bytes),
                    master_secret_hash \(flavor.bytes),
                    webhook_url TEXT,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE devices (
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    device_id TEXT NOT NULL,
                    token TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    alias TEXT,
                    locale TEXT,
                    timezone TEXT,
                    app_version TEXT,
                    token_registered_at BIGINT NOT NULL,
                    last_registered_at BIGINT NOT NULL,
                    deactivated_at BIGINT,
                    deactivation_reason TEXT,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, device_id),
                    UNIQUE (app_id, token)
                )
                """,
                "CREATE INDEX devices_by_alias ON devices (app_id, alias, device_id) WHERE alias IS NOT NULL",
                """
                CREATE TABLE device_tags (
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    tag TEXT NOT NULL,
                    PRIMARY KEY (app_id, device_id, tag),
                    FOREIGN KEY (app_id, device_id) REFERENCES devices (app_id, device_id) ON DELETE CASCADE
                )
                """,
                "CREATE INDEX device_tags_by_tag ON device_tags (app_id, tag, device_id)",
                // Keyed by device id, not tied to a device row: a device that lost its token to another id is gone,
                // but its history says where the token went.
                """
                CREATE TABLE token_history (
                    id \(flavor.serialPrimaryKey),
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    device_id TEXT NOT NULL,
                    token TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    first_registered_at BIGINT NOT NULL,
                    replaced_at BIGINT NOT NULL,
                    reason TEXT NOT NULL
                )
                """,
                "CREATE INDEX token_history_by_device ON token_history (app_id, device_id, id)",
                """
                CREATE TABLE token_events (
                    id \(flavor.serialPrimaryKey),
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    device_id TEXT NOT NULL,
                    token TEXT NOT NULL,
                    reason TEXT NOT NULL,
                    apns_timestamp BIGINT,
                    occurred_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX token_events_by_app ON token_events (app_id, id)",
                """
                CREATE TABLE pushes (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    idempotency_key TEXT,
                    audience TEXT NOT NULL,
                    notification \(flavor.bytes),
                    status TEXT NOT NULL,
                    targeted INTEGER NOT NULL,
                    accepted INTEGER NOT NULL,
                    failed INTEGER NOT NULL,
                    pruned INTEGER NOT NULL,
                    failed_by_reason TEXT NOT NULL,
                    cursor_key TEXT,
                    created_at BIGINT NOT NULL,
                    started_at BIGINT,
                    finished_at BIGINT,
                    UNIQUE (app_id, idempotency_key)
                )
                """,
                "CREATE INDEX pushes_unfinished ON pushes (created_at, id) WHERE status <> 'completed'",
                """
                CREATE TABLE push_failures (
                    id \(flavor.serialPrimaryKey),
                    push_id TEXT NOT NULL REFERENCES pushes (id) ON DELETE CASCADE,
                    device_id TEXT,
                    token TEXT NOT NULL,
                    status INTEGER,
                    reason TEXT NOT NULL,
                    failed_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX push_failures_by_push ON push_failures (push_id, id)",
            ]),
            // An owner is a user (`a:` and the alias) or an alias-less device (`d:` and its id). A message is stored
            // once per push; each inbox holding it has an entry with its own sequence (the listing's cursor) and a
            // copy of the expiry, so listing and sweeping need no join.
            Migration(version: 2, name: "inbox and badges", statements: [
                """
                CREATE TABLE inbox_messages (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    title TEXT,
                    body TEXT,
                    data TEXT,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE inbox_entries (
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    owner TEXT NOT NULL,
                    sequence BIGINT NOT NULL,
                    message_id TEXT NOT NULL REFERENCES inbox_messages (id) ON DELETE CASCADE,
                    expires_at BIGINT NOT NULL,
                    read_at BIGINT,
                    PRIMARY KEY (app_id, owner, sequence),
                    UNIQUE (app_id, owner, message_id)
                )
                """,
                "CREATE INDEX inbox_entries_by_expiry ON inbox_entries (expires_at)",
                "CREATE INDEX inbox_entries_by_message ON inbox_entries (message_id)",
                // The last sequence given out (never reused) and the stored badge counter.
                """
                CREATE TABLE inbox_owners (
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    owner TEXT NOT NULL,
                    last_sequence BIGINT NOT NULL,
                    badge BIGINT NOT NULL,
                    PRIMARY KEY (app_id, owner)
                )
                """,
                // A `+N` badge counted once per push and owner, so a page sent again counts nothing twice.
                """
                CREATE TABLE push_badges (
                    push_id TEXT NOT NULL REFERENCES pushes (id) ON DELETE CASCADE,
                    owner TEXT NOT NULL,
                    value BIGINT NOT NULL,
                    PRIMARY KEY (push_id, owner)
                )
                """,
                "ALTER TABLE apps ADD COLUMN inbox_max_ttl BIGINT NOT NULL DEFAULT \(AppRecord.defaultInboxMaxTTL)",
                "ALTER TABLE apps ADD COLUMN inbox_cap BIGINT NOT NULL DEFAULT \(AppRecord.defaultInboxCap)",
                "ALTER TABLE pushes ADD COLUMN inbox_dropped BIGINT NOT NULL DEFAULT 0",
            ]),
            Migration(version: 3, name: "legacy transport and feedback", statements: [
                "ALTER TABLE apps ADD COLUMN transport TEXT NOT NULL DEFAULT '\(AppRecord.http2)'",
                "ALTER TABLE apps ADD COLUMN endpoint_feedback_port INTEGER",
                "ALTER TABLE apps ADD COLUMN feedback_interval BIGINT NOT NULL DEFAULT \(AppRecord.defaultFeedbackInterval)",
                "ALTER TABLE apps ADD COLUMN feedback_polled_at BIGINT",
            ]),
            // A push is delivered in chunks of consecutive recipients, each claimed by one node under a lease it
            // renews, and holding its own results: a push's counts are its row's (from before chunks) plus its done
            // chunks', so nodes recording chunks of one push at once never write the same row. `cursor_key` is now
            // where the next chunk starts; `chunks` counts the chunks handed out, and `handed_out` is 1 once the
            // whole audience is in chunks.
            Migration(version: 4, name: "push chunks", statements: [
                """
                CREATE TABLE push_chunks (
                    push_id TEXT NOT NULL REFERENCES pushes (id) ON DELETE CASCADE,
                    sequence INTEGER NOT NULL,
                    after_key TEXT,
                    last_key TEXT NOT NULL,
                    status TEXT NOT NULL,
                    owner TEXT NOT NULL,
                    lease_until BIGINT NOT NULL,
                    claimed_at BIGINT NOT NULL,
                    accepted INTEGER NOT NULL DEFAULT 0,
                    failed INTEGER NOT NULL DEFAULT 0,
                    pruned INTEGER NOT NULL DEFAULT 0,
                    inbox_dropped INTEGER NOT NULL DEFAULT 0,
                    failed_by_reason TEXT,
                    PRIMARY KEY (push_id, sequence)
                )
                """,
                "CREATE INDEX push_chunks_open ON push_chunks (push_id, owner) WHERE status = 'claimed'",
                "ALTER TABLE pushes ADD COLUMN chunks INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE pushes ADD COLUMN handed_out INTEGER NOT NULL DEFAULT 0",
                // Pushes go out in the order they were stored; creation times from different nodes' clocks can't
                // say which came first. PostgreSQL numbers the existing rows itself; on SQLite they keep their
                // insertion order (rowid).
                "ALTER TABLE pushes ADD COLUMN ordinal \(flavor.pushOrdinal.type)",
            ] + (flavor.pushOrdinal.value == nil ? [] : ["UPDATE pushes SET ordinal = rowid"]) + [
                "CREATE INDEX pushes_by_ordinal ON pushes (ordinal)",
                "CREATE INDEX pushes_unfinished_by_ordinal ON pushes (ordinal) WHERE status <> 'completed'",
            ]),
            // Devices get random secrets, kept as their SHA-256; a device from before has NULL and keeps its derived
            // secret. Apps made before signed user binding keep binding aliases as they did ('open'), so devices
            // in the field keep working; new apps are made 'signed'.
            Migration(version: 5, name: "device secrets and signed user binding", statements: [
                "ALTER TABLE devices ADD COLUMN secret_hash \(flavor.bytes)",
                "ALTER TABLE apps ADD COLUMN user_binding TEXT NOT NULL DEFAULT '\(UserBinding.open.rawValue)'",
                "ALTER TABLE apps ADD COLUMN sealed_identity_secret \(flavor.bytes)",
            ]),
            // A chunk records its results while it is sent: `progress_key` is the last recipient whose result is in
            // the chunk's counts, and a node that takes the chunk over starts after it.
            Migration(version: 6, name: "chunk progress", statements: [
                "ALTER TABLE push_chunks ADD COLUMN progress_key TEXT",
            ]),
            // And the recipients after `progress_key` recorded out of order, as runs of keys (JSON, ChunkMark.Run):
            // a node taking the chunk over skips them too.
            Migration(version: 7, name: "chunk progress runs", statements: [
                "ALTER TABLE push_chunks ADD COLUMN progress_runs TEXT",
            ]),
            // The online channel: each device's messages in its own order (`device_channels` holds the last number
            // given), their acknowledgements and fallbacks, and which node holds each device's connection.
            Migration(version: 8, name: "online channel", statements: [
                """
                CREATE TABLE device_channels (
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    last_sequence BIGINT NOT NULL,
                    PRIMARY KEY (app_id, device_id),
                    FOREIGN KEY (app_id, device_id) REFERENCES devices (app_id, device_id) ON DELETE CASCADE
                )
                """,
                """
                CREATE TABLE device_messages (
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    sequence BIGINT NOT NULL,
                    id TEXT NOT NULL,
                    push_id TEXT NOT NULL REFERENCES pushes (id) ON DELETE CASCADE,
                    notification TEXT,
                    data TEXT,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    delivered_at BIGINT,
                    acked_at BIGINT,
                    fallback_at BIGINT,
                    opened_at BIGINT,
                    PRIMARY KEY (app_id, device_id, sequence),
                    FOREIGN KEY (app_id, device_id) REFERENCES devices (app_id, device_id) ON DELETE CASCADE
                )
                """,
                "CREATE UNIQUE INDEX device_messages_by_id ON device_messages (app_id, id)",
                "CREATE INDEX device_messages_by_push ON device_messages (push_id)",
                "CREATE INDEX device_messages_by_expiry ON device_messages (expires_at)",
                """
                CREATE TABLE device_presence (
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    node TEXT NOT NULL,
                    connection TEXT NOT NULL,
                    connected_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, device_id)
                )
                """,
                "CREATE INDEX device_presence_by_node ON device_presence (node)",
            ]),
            // Versions before this one left a deleted device's own inbox (owner `d:` and its id) behind, for whoever
            // registered that id again to read. Deleting a device now deletes it; this clears what is left.
            Migration(version: 9, name: "inboxes of deleted devices", statements: [
                """
                DELETE FROM inbox_entries WHERE owner LIKE 'd:%' AND NOT EXISTS (
                    SELECT 1 FROM devices d WHERE d.app_id = inbox_entries.app_id AND d.device_id = substr(inbox_entries.owner, 3))
                """,
                """
                DELETE FROM inbox_owners WHERE owner LIKE 'd:%' AND NOT EXISTS (
                    SELECT 1 FROM devices d WHERE d.app_id = inbox_owners.app_id AND d.device_id = substr(inbox_owners.owner, 3))
                """,
            ]),
            // What an app's webhook signing key is derived with besides the server key and the app id (ServerKey), new
            // at each creation and rotation; NULL for the apps from before, whose key stays as it was.
            Migration(version: 10, name: "webhook secret salt", statements: [
                "ALTER TABLE apps ADD COLUMN webhook_secret_salt TEXT",
            ]),
            // When each node sharing the database last said it runs: the presence entries of a node long unseen (it
            // crashed, or its stop was cut short) are removed, so its devices count as offline, not as connected to it.
            Migration(version: 11, name: "nodes", statements: [
                "CREATE TABLE nodes (node TEXT PRIMARY KEY, seen_at BIGINT NOT NULL)",
            ]),
            // Completed pushes are deleted once `delivery.pushRetention` has passed since they finished, oldest first.
            Migration(version: 12, name: "push retention", statements: [
                "CREATE INDEX pushes_finished ON pushes (finished_at) WHERE status = 'completed'",
            ]),
            // A push can be cancelled: its audience is handed out no further.
            Migration(version: 13, name: "push cancellation", statements: [
                "ALTER TABLE pushes ADD COLUMN cancelled_at BIGINT",
            ]),
            // A push can be stored to be sent later: status `scheduled` until `send_at`, with its audience counted as
            // handed out, so a node of an older version (during a rolling upgrade) never claims it. Claims look among
            // pending and sending pushes only, through indexes of those alone: pushes waiting for their time cost a
            // claim nothing however many there are, and neither do completed ones (SQLite looked for an app's earlier
            // unfinished pushes among all of the app's pushes: 40 ms a claim with 300,000 kept).
            // `pushes_scheduled` finds the scheduled pushes whose time has come. `pushes_by_app` gives an app's latest
            // pushes (the console's list sorted all of the app's: 110 ms with 300,000 kept).
            Migration(version: 14, name: "scheduled pushes", statements: [
                "ALTER TABLE pushes ADD COLUMN send_at BIGINT",
                "CREATE INDEX pushes_scheduled ON pushes (send_at) WHERE status = 'scheduled'",
                "CREATE INDEX pushes_due_by_ordinal ON pushes (ordinal) WHERE status IN ('pending', 'sending')",
                "CREATE INDEX pushes_due_by_app ON pushes (app_id, ordinal) WHERE status IN ('pending', 'sending')",
                "CREATE INDEX pushes_by_app ON pushes (app_id, ordinal)",
            ]),
            // A chunk keeps, beside its failures' count by reason, the first failure's detail for each reason that
            // came with one (`{"connectionFailed": "no connection to APNs…"}`): the cause a reason alone does not
            // say. Null for a chunk with none, and for those an older node records during a rolling upgrade.
            Migration(version: 15, name: "failure details", statements: [
                "ALTER TABLE push_chunks ADD COLUMN failure_details TEXT",
            ]),
            // Where writes overlap (PostgreSQL), each failure keeps the transaction that wrote it: a push's failures
            // are paged in the order of those transactions, and while the push runs only those written by
            // transactions older than every one still running, so a client paging a running push passes none by.
            // The rows from before get 0 (their transactions ended long ago: the ALTER waits for any still writing),
            // the rows after their transaction's id, also when a node of the previous version writes them during a
            // rolling upgrade. Both ALTERs change no row. Nothing on SQLite, whose rows are numbered in commit order.
            // Needs PostgreSQL 13 or later (`xid8`).
            Migration(version: 16, name: "failures in commit order", statements: flavor.overlappingWrites ? [
                "ALTER TABLE push_failures ADD COLUMN xact xid8 NOT NULL DEFAULT '0'",
                "ALTER TABLE push_failures ALTER COLUMN xact SET DEFAULT pg_current_xact_id()",
                "CREATE INDEX push_failures_in_commit_order ON push_failures (push_id, xact, id)",
            ] : []),
            // An app's devices in the order they were created (`GET …/devices?createdSince=`): an operator finds what
            // a flood of made-up registrations left, and deletes it.
            Migration(version: 17, name: "devices by creation", statements: [
                "CREATE INDEX devices_by_creation ON devices (app_id, created_at, device_id)",
            ]),
            // A push can be throttled: `rate_per_second` recipients handed out a second at most, one chunk at a time,
            // the next not before `next_chunk_at`. A node of the previous version (during a rolling upgrade) sends
            // its chunks unthrottled.
            Migration(version: 18, name: "throttled pushes", statements: [
                "ALTER TABLE pushes ADD COLUMN rate_per_second INTEGER",
                "ALTER TABLE pushes ADD COLUMN next_chunk_at BIGINT",
            ]),
            // What the devices a push went through APNs to report of it: that it arrived (a Notification Service
            // Extension's receipt) and that the user opened it. One row per device, so a device that reports again is
            // counted once. Deleted with the push, a batch at a time as its failures are.
            Migration(version: 19, name: "push reports", statements: [
                """
                CREATE TABLE push_reports (
                    push_id TEXT NOT NULL REFERENCES pushes (id) ON DELETE CASCADE,
                    device_id TEXT NOT NULL,
                    received_at BIGINT,
                    opened_at BIGINT,
                    PRIMARY KEY (push_id, device_id)
                )
                """,
            ]),
            // An app can throttle its broadcasts (pushes to tags or to everyone) by default: `broadcast_rate_per_second`
            // is the rate a push takes when it gives none. A node of the previous version stores such pushes unthrottled.
            Migration(version: 20, name: "app broadcast rate", statements: [
                "ALTER TABLE apps ADD COLUMN broadcast_rate_per_second INTEGER",
            ]),
            // A device's tokens other than its APNs device token (PushKit's VoIP token, ActivityKit's push-to-start
            // token), at most one of each kind, gone with the device; a token of a kind belongs to one device of the
            // app. A push of such a type to registered devices names the kind (`pushes.token_kind`) and goes to these.
            // A node of the previous version (during a rolling upgrade) would send such a push to the device tokens,
            // where APNs refuses each one (`DeviceTokenNotForTopic`) and nothing is deactivated.
            Migration(version: 21, name: "device push tokens", statements: [
                """
                CREATE TABLE device_push_tokens (
                    app_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    token TEXT NOT NULL,
                    registered_at BIGINT NOT NULL,
                    deactivated_at BIGINT,
                    deactivation_reason TEXT,
                    PRIMARY KEY (app_id, device_id, kind),
                    UNIQUE (app_id, kind, token),
                    FOREIGN KEY (app_id, device_id) REFERENCES devices (app_id, device_id) ON DELETE CASCADE
                )
                """,
                "ALTER TABLE pushes ADD COLUMN token_kind TEXT",
            ]),
            // Live Activities' update tokens, one per activity a device runs, by the activity's id: a push to an
            // activity pages them in device id order from the key. A node of the version before reads a push to
            // `audience.activity` as an unknown audience, and cannot claim while one is unfinished (docs/deployment.md).
            Migration(version: 22, name: "activity tokens", statements: [
                """
                CREATE TABLE activity_tokens (
                    app_id TEXT NOT NULL,
                    activity_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    token TEXT NOT NULL,
                    started_at BIGINT NOT NULL,
                    registered_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, activity_id, device_id),
                    UNIQUE (app_id, token),
                    FOREIGN KEY (app_id, device_id) REFERENCES devices (app_id, device_id) ON DELETE CASCADE
                )
                """,
                "CREATE INDEX activity_tokens_by_device ON activity_tokens (app_id, device_id)",
                "CREATE INDEX activity_tokens_by_start ON activity_tokens (started_at)",
            ]),
            // Whether each device's alias was bound without proof (1), while its app's binding was open, so that
            // switching the app to `signed` unbinds those. The bindings of apps open now were all made so.
            Migration(version: 23, name: "unproven alias bindings", statements: [
                "ALTER TABLE devices ADD COLUMN alias_unproven INTEGER",
                """
                UPDATE devices SET alias_unproven = 1
                WHERE alias IS NOT NULL AND app_id IN (SELECT id FROM apps WHERE user_binding = '\(UserBinding.open.rawValue)')
                """,
            ]),
            // The opens of pushes, for the webhooks of apps that ask for them (`apps.webhook_events`: the kinds they
            // post, comma-separated; NULL, token deactivations alone), in the order they were recorded, as
            // token_events. A node of the version before records opens without their event: their webhook misses
            // those until every node is upgraded (docs/deployment.md).
            Migration(version: 24, name: "open events", statements: [
                "ALTER TABLE apps ADD COLUMN webhook_events TEXT",
                """
                CREATE TABLE open_events (
                    id \(flavor.serialPrimaryKey),
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    push_id TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    alias TEXT,
                    occurred_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX open_events_by_app ON open_events (app_id, id)",
                "CREATE INDEX open_events_by_time ON open_events (occurred_at)",
            ]),
            // Broadcast channels (iOS 18) the app made through Tern, by the name its backend gave each: APNs' id, the
            // environment it belongs to and its storage policy. A node of the version before has no channel API.
            Migration(version: 25, name: "broadcast channels", statements: [
                """
                CREATE TABLE broadcast_channels (
                    app_id TEXT NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    channel_id TEXT NOT NULL,
                    environment TEXT NOT NULL,
                    stores_messages INTEGER NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (app_id, name)
                )
                """,
            ]),
            // The latest broadcasts to each channel, with APNs' answer: what a channel was last told, and whether APNs
            // took it. Gone with their channel. A node of the version before records none.
            Migration(version: 26, name: "broadcasts", statements: [
                """
                CREATE TABLE broadcasts (
                    id \(flavor.serialPrimaryKey),
                    app_id TEXT NOT NULL,
                    channel_name TEXT NOT NULL,
                    sent_at BIGINT NOT NULL,
                    priority INTEGER NOT NULL,
                    expiration BIGINT NOT NULL,
                    payload TEXT NOT NULL,
                    result TEXT NOT NULL,
                    reason TEXT,
                    request_id TEXT,
                    unique_id TEXT,
                    attempts INTEGER NOT NULL,
                    FOREIGN KEY (app_id, channel_name) REFERENCES broadcast_channels (app_id, name) ON DELETE CASCADE
                )
                """,
                "CREATE INDEX broadcasts_by_channel ON broadcasts (app_id, channel_name, id)",
            ]),
            // An inbox message's title and body in the push's other languages (`notification.localizations`), for each
            // reader's device to get its own. A node of the version before keeps and shows only the push's own texts.
            Migration(version: 27, name: "localized inbox messages", statements: [
                "ALTER TABLE inbox_messages ADD COLUMN localizations TEXT",
            ]),
        ]
    }
}
