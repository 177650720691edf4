import Foundation
import SQLKit
import TernAPNs

/// Delivery in chunks: nodes claim runs of a push's recipients under leases they renew, so any number of nodes share
/// one push, and a node that stops renewing (it died, or lost the database) leaves its chunks to the others.
extension SQLStore {
    /// How many unfinished pushes one claim looks at, in the order they were stored.
    static let claimScan = 64

    public func claimChunk(
        node: String, size: Int, leaseUntil: Date, at now: Date, passingOver: Set<String>
    ) async throws -> ChunkClaim {
        try await claimChunk(node: node, size: size, leaseUntil: leaseUntil, at: now, passingOver: passingOver, beforeClaiming: nil)
    }

    /// ``claimChunk(node:size:leaseUntil:at:passingOver:)``, with `beforeClaiming` run first in its transaction (a
    /// test holds the transaction there, begun, while chunks are recorded). A push it finds handed out in full without
    /// completing it is looked at again once it has committed (``lookAgainForCompletion(of:at:)``).
    func claimChunk(
        node: String, size: Int, leaseUntil: Date, at now: Date, passingOver: Set<String>,
        beforeClaiming: (@Sendable (any SQLDatabase) async throws -> Void)?
    ) async throws -> ChunkClaim {
        let lock = flavor.lockSkippingLocked
        let size = max(size, 1)
        let nextOrdinal = flavor.pushOrdinal.value ?? "DEFAULT"
        let (byOrdinal, byApp) = (flavor.indexedBy("pushes_due_by_ordinal"), flavor.indexedBy("pushes_due_by_app"))
        let (claim, handedOutNow) = try await transaction { db -> (ChunkClaim, [String]) in
            // Pushes this claim marked handed out in full without completing them: looked at again once it commits.
            var handedOutNow: [String] = []
            try await beforeClaiming?(db)
            try await Self.releaseDuePushes(at: now, nextOrdinal: nextOrdinal, lock: lock, db)
            // Pushes with audience left to hand out (a throttled one only when its next chunk is due), or with a chunk
            // whose lease ran out, with how many of their chunks are being sent now. Throttled pushes waiting for
            // their time are left out here, so however many there are, they take no room in the scan.
            let stored = try await db.raw("""
                SELECT \(unsafeRaw: Columns.push), ordinal, chunks, handed_out,
                    (SELECT COUNT(*) FROM push_chunks k WHERE k.push_id = p.id AND k.status = 'claimed') AS open_chunks
                FROM pushes p\(unsafeRaw: byOrdinal)
                WHERE status IN ('pending', 'sending') AND ((handed_out = 0 AND (rate_per_second IS NULL OR (
                    COALESCE(next_chunk_at, 0) <= \(bind: now.milliseconds)
                    AND NOT EXISTS (SELECT 1 FROM push_chunks k WHERE k.push_id = p.id AND k.status = 'claimed')))) OR EXISTS (
                    SELECT 1 FROM push_chunks k WHERE k.push_id = p.id AND k.status = 'claimed'
                        AND k.lease_until < \(bind: now.milliseconds)))
                ORDER BY ordinal
                LIMIT \(bind: Self.claimScan)
                """).all()
            let candidates = try Self.fairly(stored)
            var looked = Set<String>()
            var retrySoon = false
            for row in candidates {
                var push = try PushRecord(row: row)
                let rate = push.ratePerSecond
                if rate == nil {
                    // An app's first candidate only: a later one waits at least until this one is handed out in full.
                    guard looked.insert(push.appID).inserted, !passingOver.contains(push.appID) else { continue }
                    let ordinal = try row.decode(column: "ordinal", as: Int64.self)
                    guard try await !Self.waitsForEarlierPushes(push, ordinal: ordinal, node: node, indexedBy: byApp, db) else { continue }
                } else {
                    // A throttled push is out of its app's order: it waits for no earlier push, and holds no later one back.
                    guard !passingOver.contains(push.appID) else { continue }
                }

                // A chunk whose lease ran out (its node died, lost the database, or gave it up): taken over as it was.
                if let open = try await db.raw("""
                    SELECT sequence, COALESCE(progress_key, after_key) AS after_key, last_key, progress_runs FROM push_chunks
                    WHERE push_id = \(bind: push.id) AND status = 'claimed' AND lease_until < \(bind: now.milliseconds)
                    ORDER BY sequence
                    LIMIT 1\(unsafeRaw: lock)
                    """).first()
                {
                    let sequence = try open.decode(column: "sequence", as: Int.self)
                    try await db.raw("""
                        UPDATE push_chunks SET owner = \(bind: node), lease_until = \(bind: leaseUntil.milliseconds),
                            claimed_at = \(bind: now.milliseconds)
                        WHERE push_id = \(bind: push.id) AND sequence = \(bind: sequence)
                        """).run()
                    let recipients = try await Self.recipients(
                        of: push, after: try open.decode(column: "after_key", as: String?.self),
                        through: try open.decode(column: "last_key", as: String.self), pageSize: size, db)
                    let runs = try open.decode(column: "progress_runs", as: String?.self).map { try JSON.decode([ChunkMark.Run].self, $0) } ?? []
                    let mark = ChunkMark(through: nil, runs: runs)
                    let recorded = runs.isEmpty ? [] : Set(recipients.lazy.map(\.key).filter(mark.inRun))
                    return (.chunk(PushChunk(push: push, sequence: sequence, recipients: recipients, reclaimed: true, recorded: recorded)), handedOutNow)
                }
                guard try row.decode(column: "handed_out", as: Int.self) == 0 else {
                    // Its expired chunk is being taken over by another node right now.
                    retrySoon = true
                    continue
                }
                var size = size
                if let rate {
                    // One chunk at a time (the scan found none open), of a second's worth at most, each in its turn.
                    guard try row.decode(column: "open_chunks", as: Int.self) == 0 else { continue }
                    size = min(size, rate)
                }
                // The next run of the audience. Another node handing out from this push now has its row locked.
                guard try await db.raw("SELECT id FROM pushes WHERE id = \(bind: push.id)\(unsafeRaw: lock)").first() != nil else {
                    retrySoon = true
                    continue
                }
                let page = try await Self.recipients(app: push.appID, audience: push.audience, after: push.cursor, limit: size, db)
                // The page's last device is the chunk's end whether or not it has a token of the push's kind.
                guard let last = page.items.last else {
                    // The previous chunk ended exactly at the end of the audience (or it is empty).
                    try await db.raw("UPDATE pushes SET handed_out = 1 WHERE id = \(bind: push.id)").run()
                    // Completed, it no longer holds the app's later pushes back.
                    if try await Self.completeIfDone(pushID: push.id, at: now, db) {
                        looked.remove(push.appID)
                    } else {
                        handedOutNow.append(push.id)
                    }
                    retrySoon = true
                    continue
                }
                let sequence = try row.decode(column: "chunks", as: Int.self)
                try await db.raw("""
                    INSERT INTO push_chunks (push_id, sequence, after_key, last_key, status, owner, lease_until, claimed_at)
                    VALUES (\(bind: push.id), \(bind: sequence), \(bind: push.cursor), \(bind: last.key), 'claimed', \(bind: node),
                        \(bind: leaseUntil.milliseconds), \(bind: now.milliseconds))
                    """).run()
                // What the chunk sends: the page's devices that the push's filter admits, with their tokens.
                let recipients = try await Self.withTokens(of: push, page.items, db)
                // A throttled push's next chunk is due when this one's recipients have had their time at the rate.
                let nextChunkAt = rate.map { now.milliseconds + Int64((Double(recipients.count) * 1000 / Double($0)).rounded(.up)) }
                try await db.raw("""
                    UPDATE pushes SET cursor_key = \(bind: last.key), chunks = chunks + 1, handed_out = \(bind: page.next == nil ? 1 : 0),
                        status = 'sending', started_at = COALESCE(started_at, \(bind: now.milliseconds)),
                        next_chunk_at = \(bind: nextChunkAt)
                    WHERE id = \(bind: push.id)
                    """).run()
                push.status = .sending
                push.cursor = last.key
                return (.chunk(PushChunk(push: push, sequence: sequence, recipients: recipients, reclaimed: false)), handedOutNow)
            }
            if retrySoon { return (.retrySoon, handedOutNow) }
            // Nothing to claim: when the next chunk of a throttled push is due, if one waits for its time.
            let due = try await db.raw("""
                SELECT MIN(next_chunk_at) AS due FROM pushes p\(unsafeRaw: byOrdinal)
                WHERE status IN ('pending', 'sending') AND handed_out = 0 AND rate_per_second IS NOT NULL
                    AND next_chunk_at > \(bind: now.milliseconds)
                """).first()?.decode(column: "due", as: Int64?.self)
            return (due.map { .notBefore(Date(milliseconds: $0)) } ?? .idle, handedOutNow)
        }
        for pushID in handedOutNow { _ = await lookAgainForCompletion(of: pushID, at: now) }
        return claim
    }

    /// How many scheduled pushes one claim makes pending at most: the rest, the next.
    static let releaseLimit = 100

    /// Makes the scheduled pushes whose time has come pending, earliest first, each with the next ordinal: a scheduled
    /// push takes its place in its app's order when it is due, after the pushes stored before then, and its audience
    /// is handed out from then on. One cancelled meanwhile is completed, and stays so.
    static func releaseDuePushes(at now: Date, nextOrdinal: String, lock: String, _ db: any SQLDatabase) async throws {
        let due = try await db.raw("""
            SELECT id FROM pushes WHERE status = 'scheduled' AND send_at <= \(bind: now.milliseconds)
            ORDER BY send_at, ordinal
            LIMIT \(bind: releaseLimit)\(unsafeRaw: lock)
            """).all(decodingColumn: "id", as: String.self)
        // One at a time, so pushes due together keep their order: each statement takes the next ordinal.
        for id in due {
            try await db.raw("""
                UPDATE pushes SET status = 'pending', handed_out = 0, ordinal = \(unsafeRaw: nextOrdinal)
                WHERE id = \(bind: id) AND status = 'scheduled'
                """).run()
        }
    }

    /// The candidates in the order they are looked at: each app's pushes together, in the order they were made, and
    /// the apps by how many chunks their first push has being sent now, fewest first (then by age). A small push of
    /// one app is claimed as soon as a chunk's room frees up, not after a large push of another app has been handed
    /// out in full; two large pushes of different apps take turns. An app's own pushes keep their order.
    static func fairly(_ rows: [any SQLRow]) throws -> [any SQLRow] {
        var firstOfApp: [String: (open: Int, ordinal: Int64)] = [:]
        var keyed: [(app: (open: Int, ordinal: Int64), ordinal: Int64, row: any SQLRow)] = []
        keyed.reserveCapacity(rows.count)
        for row in rows {
            let app = try row.decode(column: "app_id", as: String.self)
            let ordinal = try row.decode(column: "ordinal", as: Int64.self)
            if firstOfApp[app] == nil { firstOfApp[app] = (try row.decode(column: "open_chunks", as: Int.self), ordinal) }
            keyed.append((firstOfApp[app]!, ordinal, row))
        }
        return keyed.sorted { ($0.app.open, $0.app.ordinal, $0.ordinal) < ($1.app.open, $1.app.ordinal, $1.ordinal) }.map(\.row)
    }

    @discardableResult
    public func renewChunks(node: String, _ chunks: [ChunkID], until: Date) async throws -> Int {
        guard !chunks.isEmpty else { return 0 }
        return try await transaction { db in
            var renewed = 0
            // In slices, to stay well under the database's limit on bound parameters.
            for piece in chunks.pieces(of: 100) {
                let named = piece.map { chunk -> SQLQueryString in
                    "(push_id = \(bind: chunk.pushID) AND sequence = \(bind: chunk.sequence))"
                }
                renewed += try await db.raw("""
                    UPDATE push_chunks SET lease_until = \(bind: until.milliseconds)
                    WHERE owner = \(bind: node) AND status = 'claimed' AND (\(named.joined(separator: " OR ")))
                    RETURNING sequence
                    """).all().count
            }
            return renewed
        }
    }

    public func recordChunkProgress(
        pushID: String, sequence: Int, node: String, _ progress: PushProgress, mark: ChunkMark
    ) async throws -> Bool {
        // Without failures the record is one UPDATE, which the database applies whole by itself: no transaction
        // around it, two statements fewer each time (a fan-out records a few thousand times per million devices).
        // On PostgreSQL it runs at READ COMMITTED, where SERIALIZABLE's checks do not follow it: nothing may count
        // on them to see a chunk's progress records (see ``recordChunk(pushID:sequence:node:_:at:beforeClosing:)``).
        let record: @Sendable (any SQLDatabase) async throws -> Bool = { db in
            try await Self.addToChunk(pushID: pushID, sequence: sequence, node: node, progress, mark: mark, then: .keep, db)
        }
        return try await progress.failures.isEmpty ? exclusive(record) : transaction(record)
    }

    public func giveUpChunk(pushID: String, sequence: Int, node: String, _ progress: PushProgress, mark: ChunkMark) async throws -> Bool {
        try await transaction { db in
            try await Self.addToChunk(pushID: pushID, sequence: sequence, node: node, progress, mark: mark, then: .giveUp, db)
        }
    }

    /// What becomes of a chunk once a record is added to it.
    enum ChunkAfterRecord {
        /// Still held, still being sent.
        case keep
        /// Open, and its lease ended: any node may claim it now.
        case giveUp
        /// Done: every recipient has its result. Its mark is not needed any more.
        case close
    }

    /// Adds `progress` to a chunk `node` holds (its counts, failure reasons and failures), replaces its mark if one is
    /// given, and keeps, gives up or closes the chunk. - Returns: false if `node` no longer holds it (nothing written).
    static func addToChunk(
        pushID: String, sequence: Int, node: String, _ progress: PushProgress, mark: ChunkMark?, then after: ChunkAfterRecord,
        _ db: any SQLDatabase
    ) async throws -> Bool {
        let held: SQLQueryString = "push_id = \(bind: pushID) AND sequence = \(bind: sequence) AND owner = \(bind: node) AND status = 'claimed'"
        // Failure reasons and details are merged into the chunk's; with no failure (the usual record), one statement
        // does it all.
        var reasons: SQLQueryString = "failed_by_reason"
        var details: SQLQueryString = "failure_details"
        if !progress.failures.isEmpty {
            guard let row = try await db.raw("SELECT failed_by_reason, failure_details FROM push_chunks WHERE \(held)").first() else { return false }
            var failedByReason = try row.decode(column: "failed_by_reason", as: String?.self).map { try JSON.decode([String: Int].self, $0) } ?? [:]
            let known = try row.decode(column: "failure_details", as: String?.self).map { try JSON.decode([String: String].self, $0) } ?? [:]
            var failureDetails = known
            for failure in progress.failures {
                failedByReason[failure.reason.rawValue, default: 0] += 1
                if let detail = failure.detail, failureDetails[failure.reason.rawValue] == nil {
                    failureDetails[failure.reason.rawValue] = PushFailure.storedDetail(detail)
                }
            }
            reasons = "\(bind: try JSON.encode(failedByReason))"
            if failureDetails != known { details = "\(bind: try JSON.encode(failureDetails))" }
        }
        // A new mark replaces the runs; a closed chunk keeps none (they could run to kilobytes, and only a node taking
        // over an open chunk reads them).
        var runs: SQLQueryString = "progress_runs"
        if let mark { runs = mark.runs.isEmpty ? "NULL" : "\(bind: ChunkMark.Run.json(mark.runs))" }
        if after == .close { runs = "NULL" }
        let lease: SQLQueryString = after == .giveUp ? "0" : "lease_until"
        guard try await db.raw("""
            UPDATE push_chunks SET status = \(bind: after == .close ? "done" : "claimed"), lease_until = \(lease),
                accepted = accepted + \(bind: progress.accepted),
                failed = failed + \(bind: progress.failures.count), pruned = pruned + \(bind: progress.pruned),
                inbox_dropped = inbox_dropped + \(bind: progress.inboxDropped), failed_by_reason = \(reasons),
                failure_details = \(details),
                progress_key = COALESCE(\(bind: mark?.through), progress_key),
                progress_runs = \(runs)
            WHERE \(held)
            RETURNING sequence
            """).first() != nil
        else { return false }
        try await insertFailures(progress.failures, pushID: pushID, db)
        return true
    }

    public func recordChunk(
        pushID: String, sequence: Int, node: String, _ progress: PushProgress, at now: Date
    ) async throws -> ChunkRecording {
        try await recordChunk(pushID: pushID, sequence: sequence, node: node, progress, at: now, beforeClosing: nil)
    }

    /// ``recordChunk(pushID:sequence:node:_:at:)``, with `beforeClosing` run first in the closing transaction (a test
    /// holds the transaction there, begun, while other chunks are recorded). A close that did not complete the push
    /// looks again once it has committed (``lookAgainForCompletion(of:at:)``).
    func recordChunk(
        pushID: String, sequence: Int, node: String, _ progress: PushProgress, at now: Date,
        beforeClosing: (@Sendable (any SQLDatabase) async throws -> Void)?
    ) async throws -> ChunkRecording {
        let recording = try await transaction { db -> ChunkRecording in
            try await beforeClosing?(db)
            guard try await Self.addToChunk(pushID: pushID, sequence: sequence, node: node, progress, mark: nil, then: .close, db) else {
                return .lost
            }
            // Only a push handed out in full can be complete; until then the push's row is not read, so recording
            // chunks does not conflict with nodes claiming from it.
            let handedOut = try await db.raw("SELECT handed_out FROM pushes WHERE id = \(bind: pushID)").first()?
                .decode(column: "handed_out", as: Int.self)
            guard handedOut == 1 else { return .recorded(pushCompleted: false) }
            return .recorded(pushCompleted: try await Self.completeIfDone(pushID: pushID, at: now, db))
        }
        guard recording == .recorded(pushCompleted: false) else { return recording }
        return .recorded(pushCompleted: await lookAgainForCompletion(of: pushID, at: now))
    }

    /// Completes the push if it is done, in a transaction of its own: for a write that moved it towards completion
    /// (closed a chunk, or marked its audience handed out in full), once that write has committed, when its own look
    /// in its transaction found it not done. Never throws: the write is committed, and a push left so is completed
    /// by the next retention sweep (``completeStrandedPushes(at:limit:)``). - Returns: whether it completed it.
    ///
    /// Why twice: on PostgreSQL two nodes may close a push's last two chunks at once, each seeing the other's still
    /// open. SERIALIZABLE runs one of them again when that is all they did, but not when a progress record of the
    /// other chunk (a statement outside a transaction, which its checks do not follow) came between the first
    /// close's beginning and its look: then neither was run again, and the push stayed `sending` for ever, every
    /// result recorded (`PushChunkTests.lastTwoChunksClosedAtOnce`). This look needs no such check: of all the writes
    /// that move a push towards completion, the last to commit looks after every other has committed.
    func lookAgainForCompletion(of pushID: String, at now: Date) async -> Bool {
        // SQLite's writes take turns: the look in the write's own transaction saw every other write.
        guard flavor.overlappingWrites else { return false }
        do {
            return try await transaction { db in try await Self.completeIfDone(pushID: pushID, at: now, db) }
        } catch {
            logger.warning(
                "cannot check whether a push is complete; the next retention sweep does it", metadata: ["push": "\(pushID)", "error": "\(error)"])
            return false
        }
    }

    public func completeStrandedPushes(at now: Date, limit: Int) async throws -> [String] {
        let byOrdinal = flavor.indexedBy("pushes_due_by_ordinal")
        return try await transaction { db in
            let stranded = try await db.raw("""
                SELECT p.id FROM pushes p\(unsafeRaw: byOrdinal)
                WHERE p.status IN ('pending', 'sending') AND p.handed_out = 1
                    AND NOT EXISTS (SELECT 1 FROM push_chunks k WHERE k.push_id = p.id AND k.status = 'claimed')
                ORDER BY p.ordinal
                LIMIT \(bind: max(limit, 1))
                """).all(decodingColumn: "id", as: String.self)
            var completed: [String] = []
            for id in stranded where try await Self.completeIfDone(pushID: id, at: now, db) { completed.append(id) }
            return completed
        }
    }

    @discardableResult
    public func releaseChunks() async throws -> Int {
        try await transaction { db in
            try await db.raw("UPDATE push_chunks SET lease_until = 0 WHERE status = 'claimed' RETURNING sequence").all().count
        }
    }

    /// Whether an earlier unfinished push of the same app still has audience to hand out, or open chunks held by
    /// another node: until neither is so, `push` waits, so no device gets it before the earlier ones.
    /// `indexedBy` names the index of pending and sending pushes by app where the database takes it: with the wide
    /// ones, SQLite read all of the app's pushes (40 ms a claim with 300,000 kept).
    static func waitsForEarlierPushes(
        _ push: PushRecord, ordinal: Int64, node: String, indexedBy: String, _ db: any SQLDatabase
    ) async throws -> Bool {
        try await db.raw("""
            SELECT 1 AS waits FROM pushes e\(unsafeRaw: indexedBy)
            WHERE e.app_id = \(bind: push.appID) AND e.status IN ('pending', 'sending')
                AND e.ordinal < \(bind: ordinal) AND e.rate_per_second IS NULL
                AND (e.handed_out = 0 OR EXISTS (
                    SELECT 1 FROM push_chunks k WHERE k.push_id = e.id AND k.status = 'claimed' AND k.owner <> \(bind: node)))
            LIMIT 1
            """).first() != nil
    }

    /// The audience's recipients after `after` up to and including `last`, read a page at a time: a chunk taken over
    /// holds what its range holds now (devices registered since included, deactivated ones left out).
    static func recipients(
        of push: PushRecord, after: String?, through last: String, pageSize: Int, _ db: any SQLDatabase
    ) async throws -> [Recipient] {
        var found: [Recipient] = []
        var cursor = after
        while true {
            let page = try await recipients(app: push.appID, audience: push.audience, after: cursor, limit: pageSize, db)
            for recipient in page.items {
                guard !last.precedesByBytes(recipient.key) else { return try await withTokens(of: push, found, db) }
                found.append(recipient)
            }
            guard let next = page.next else { return try await withTokens(of: push, found, db) }
            cursor = next
        }
    }

    /// A chunk's recipients that the push's filter admits (``PushRecord/filter``), with the tokens the push goes to: the
    /// devices' tokens of its kind, for a push that names one (``PushRecord/tokenKind``); else as read.
    static func withTokens(of push: PushRecord, _ recipients: [Recipient], _ db: any SQLDatabase) async throws -> [Recipient] {
        var recipients = recipients
        if let filter = push.filter { recipients = try await admitted(recipients, by: filter, app: push.appID, db) }
        guard let kind = push.tokenKind else { return recipients }
        return try await withPushTokens(recipients, kind: kind, app: push.appID, db)
    }

    /// The recipients whose devices `filter` admits, as they are registered now: the time of their last registration
    /// as the recipients were read, and their app version and locale read here (packed on SQLite, as the recipients
    /// are), each pair of them judged once a chunk, since a push's audience has few of each.
    static func admitted(_ recipients: [Recipient], by filter: AudienceFilter, app: String, _ db: any SQLDatabase) async throws -> [Recipient] {
        var recipients = recipients
        if filter.registeredSince != nil { recipients.removeAll { !filter.admits(lastRegisteredAt: $0.lastRegisteredAt) } }
        guard filter.looksAtVersionOrLanguage else { return recipients }
        struct Registered: Hashable {
            var locale: String?
            var appVersion: String?
        }
        var verdicts: [Registered: Bool] = [:]
        var admitted = Set<String>()
        func judge(_ deviceID: String, _ registered: Registered) {
            let verdict = verdicts[registered] ?? filter.admits(locale: registered.locale, appVersion: registered.appVersion)
            verdicts[registered] = verdict
            if verdict { admitted.insert(deviceID) }
        }
        for piece in recipients.compactMap(\.deviceID).pieces(of: 1000) {
            let query: SQLQueryString = """
                SELECT device_id, locale, app_version FROM devices
                WHERE app_id = \(bind: app) AND device_id IN (\(binds: piece))
                ORDER BY device_id
                """
            if let session = db as? SQLiteSession {
                let packed = try await PackedRows.read(Self.registrationColumns, of: query, session)
                for row in 0..<packed.count { judge(packed.key(row), Registered(locale: packed[row, 1], appVersion: packed[row, 2])) }
            } else {
                for row in try await db.raw(query).all() {
                    judge(
                        try row.decode(column: "device_id", as: String.self),
                        Registered(locale: try row.decode(column: "locale", as: String?.self), appVersion: try row.decode(column: "app_version", as: String?.self)))
                }
            }
        }
        return recipients.filter { $0.deviceID.map(admitted.contains) ?? false }
    }

    private static let registrationColumns = [
        PackedRows.Column("device_id"), PackedRows.Column("locale", nullable: true), PackedRows.Column("app_version", nullable: true),
    ]

    /// Completes the push if its audience is handed out in full and no chunk is open. - Returns: whether it did.
    static func completeIfDone(pushID: String, at now: Date, _ db: any SQLDatabase) async throws -> Bool {
        guard try await db.raw("""
            UPDATE pushes SET status = 'completed', finished_at = \(bind: now.milliseconds)
            WHERE id = \(bind: pushID) AND handed_out = 1 AND status <> 'completed'
                AND NOT EXISTS (SELECT 1 FROM push_chunks k WHERE k.push_id = \(bind: pushID) AND k.status = 'claimed')
            RETURNING id
            """).first() != nil
        else { return false }
        // Each owner's counted `+N` badge is kept so a chunk sent again counts nothing twice: with no chunk left to
        // send, it is a row per recipient kept for nothing.
        try await db.raw("DELETE FROM push_badges WHERE push_id = \(bind: pushID)").run()
        return true
    }

    /// Stores a chunk's failures.
    static func insertFailures(_ failures: [PushFailure], pushID: String, _ db: any SQLDatabase) async throws {
        // In slices, to stay well under the database's limit on bound parameters.
        for piece in failures.pieces(of: 100) {
            let rows = piece.map { failure -> SQLQueryString in
                """
                (\(bind: pushID), \(bind: failure.deviceID), \(bind: failure.token), \(bind: failure.status),
                    \(bind: failure.reason.rawValue), \(bind: failure.at.milliseconds))
                """
            }
            try await db.raw("""
                INSERT INTO push_failures (push_id, device_id, token, status, reason, failed_at)
                VALUES \(rows.joined(separator: ", "))
                """).run()
        }
    }

    /// The push with its done chunks' results added to the counts its row holds: the sums from the database, and
    /// the failure reasons of only the chunks that had failures (`?wait=` asks this every 20 ms while a push runs;
    /// SUM of a BIGINT is NUMERIC on PostgreSQL, hence the casts).
    static func withChunkCounts(_ push: PushRecord, _ db: any SQLDatabase) async throws -> PushRecord {
        var push = push
        if let sums = try await db.raw("""
            SELECT COUNT(*) AS chunks, CAST(COALESCE(SUM(accepted), 0) AS BIGINT) AS accepted,
                CAST(COALESCE(SUM(failed), 0) AS BIGINT) AS failed, CAST(COALESCE(SUM(pruned), 0) AS BIGINT) AS pruned,
                CAST(COALESCE(SUM(inbox_dropped), 0) AS BIGINT) AS inbox_dropped
            FROM push_chunks WHERE push_id = \(bind: push.id) AND status = 'done'
            """).first(), try sums.decode(column: "chunks", as: Int.self) > 0
        {
            let accepted = try sums.decode(column: "accepted", as: Int.self)
            let failed = try sums.decode(column: "failed", as: Int.self)
            push.counts.targeted += accepted + failed
            push.counts.accepted += accepted
            push.counts.failed += failed
            push.counts.pruned += try sums.decode(column: "pruned", as: Int.self)
            push.counts.inboxDropped += try sums.decode(column: "inbox_dropped", as: Int.self)
        }
        guard push.counts.failed > 0 else { return push }
        let chunks = try await db.raw("""
            SELECT failed_by_reason, failure_details FROM push_chunks
            WHERE push_id = \(bind: push.id) AND status = 'done' AND failed_by_reason IS NOT NULL
            ORDER BY sequence
            """).all()
        for chunk in chunks {
            push.counts.failedByReason.merge(
                try JSON.decode([String: Int].self, try chunk.decode(column: "failed_by_reason", as: String.self)), uniquingKeysWith: +)
            if let details = try chunk.decode(column: "failure_details", as: String?.self) {
                push.counts.failureDetails.merge(try JSON.decode([String: String].self, details)) { first, _ in first }
            }
        }
        return push
    }
}

extension ChunkMark.Run {
    /// The runs as the JSON array `progress_runs` keeps (`[{"first":…,"last":…}]`, read back with `JSONDecoder`),
    /// written by hand: a chunk's progress is recorded every few hundred answers, and `JSONEncoder` cost more than
    /// the record's statement.
    static func json(_ runs: [ChunkMark.Run]) -> String {
        var text = "["
        text.reserveCapacity(2 + runs.count * 100)
        for (position, run) in runs.enumerated() {
            text += position == 0 ? #"{"first":"# : #",{"first":"#
            JSONValue.appendQuoted(run.first, to: &text)
            text += #","last":"#
            JSONValue.appendQuoted(run.last, to: &text)
            text += "}"
        }
        text += "]"
        return text
    }
}
