import Foundation
import SQLKit
import Synchronization
import TernAPNs

/// Device registration with group commit.
///
/// Registrations arriving while the connection is busy queue up; the next caller to get the connection writes all
/// that are queued in one transaction, with a fixed number of multi-row statements whatever their count. A
/// statement costs a thread hand-off on SQLite (and a round trip on PostgreSQL), far more than the rows it writes,
/// so this is what lets registrations scale. The rules are those of ``TernStore/register(_:app:at:)``; they hold
/// as if the registrations ran one after another, in arrival order.
extension SQLStore {
    /// A registration waiting for a group commit.
    struct PendingRegistration: Sendable {
        let registration: DeviceRegistration
        let app: String
        let at: Date
    }

    /// The largest group written in one transaction (bounded binds per statement).
    static let largestRegistrationGroup = 200

    /// Queues the registration; the store's writer writes queued registrations in groups and answers each
    /// (``GroupCommit``). A cancelled caller's registration is written all the same.
    public func register(_ registration: DeviceRegistration, app: String, at: Date) async throws -> DeviceRecord {
        try await registrations.submit(PendingRegistration(registration: registration, app: app, at: at)) { queued in
            do {
                return try await self.exclusive { db in await self.write(queued, db) }
            } catch {
                return Array(repeating: .failure(error), count: queued.count)
            }
        }
    }

    /// Writes queued registrations in groups: consecutive ones for one app that share no device id and no token.
    /// A group that fails is written again one registration at a time, so one bad registration (an unknown app)
    /// fails alone.
    private func write(_ queued: [PendingRegistration], _ db: any SQLDatabase) async -> [Result<DeviceRecord, any Error>] {
        var results: [Result<DeviceRecord, any Error>] = []
        results.reserveCapacity(queued.count)
        var start = 0
        while start < queued.count {
            var end = start
            var deviceIDs: Set<String> = []
            var tokens: Set<String> = []
            while end < queued.count, end - start < Self.largestRegistrationGroup, queued[end].app == queued[start].app,
                !deviceIDs.contains(queued[end].registration.deviceID), !tokens.contains(queued[end].registration.token)
            {
                deviceIDs.insert(queued[end].registration.deviceID)
                tokens.insert(queued[end].registration.token)
                end += 1
            }
            let group = Array(queued[start..<end])
            do {
                results += try await Self.inTransaction(db, flavor: flavor) { db in
                    try await Self.registerGroup(group, db)
                }
            } catch let error where error.isStoreUnavailable {
                // The database, not a registration: each alone would fail the same way, after the same wait.
                results += Array(repeating: .failure(error), count: group.count)
            } catch {
                for pending in group {
                    do {
                        results += try await Self.inTransaction(db, flavor: flavor) { db in
                            try await Self.registerGroup([pending], db)
                        }
                    } catch {
                        results.append(.failure(error))
                    }
                }
            }
            start = end
        }
        return results
    }

    /// One group's statements, inside a transaction. The group is for one app and its device ids and tokens are
    /// distinct. A registration whose caller does not prove what it needs is refused and leaves the rest to go on.
    /// - Returns: each registration's device or refusal, in the group's order.
    private static func registerGroup(_ all: [PendingRegistration], _ db: any SQLDatabase) async throws -> [Result<DeviceRecord, any Error>] {
        let app = all[0].app
        try await requireApp(app, db)
        // Who has these device ids and these tokens now.
        let current = try await currentDevices(
            app: app, deviceIDs: all.map(\.registration.deviceID), tokens: all.map(\.registration.token), db)
        let existing = Dictionary(current.map { ($0.deviceID, $0) }, uniquingKeysWith: { first, _ in first })
        let refusals = all.map { refusal(of: $0.registration, existing: existing[$0.registration.deviceID]) }
        let group = zip(all, refusals).filter { $0.1 == nil }.map(\.0)
        let records = group.isEmpty ? [] : try await write(group, app: app, current: current, db)
        var written = records.makeIterator()
        return refusals.map { refusal in
            if let refusal { return .failure(StoreError.refused(refusal)) }
            return .success(written.next()!)
        }
    }

    /// Why the caller may not make this registration, or nil if it may. - Parameter current: the device's row now.
    static func refusal(of registration: DeviceRegistration, existing current: CurrentDevice?) -> RegistrationRefusal? {
        guard case .device(let presented, let legacy, let proof) = registration.caller else { return nil }
        if let current {
            guard let presented, ConstantTime.equal(presented, current.secretHash ?? legacy) else { return .deviceSecret }
        }
        if let alias = registration.alias, proof == .none {
            // The alias it has already needs no proof, if it was bound with proof: one bound while the app was open
            // is not kept so once the app binds only with tokens. Compared by bytes, as the database keeps it:
            // Swift's `==` takes canonically equivalent texts (a KELVIN SIGN and "K") for the same alias.
            let unchanged = current.map { current in
                !current.aliasUnproven && current.alias.map { alias.utf8.elementsEqual($0.utf8) } == true
            } ?? false
            if !unchanged { return .aliasBinding }
        }
        return nil
    }

    /// What the registration's binding is to be kept as (`devices.alias_unproven`): 1 bound without proof on an open
    /// app, 0 bound with proof (an alias token, or the backend), nil for no change (no alias given, or the same one
    /// kept).
    static func aliasUnproven(_ registration: DeviceRegistration, current: CurrentDevice?) -> Int? {
        guard let alias = registration.alias else { return nil }
        switch registration.caller {
        case .backend: return 0
        case .device(_, _, .token): return 0
        case .device(_, _, .open):
            let unchanged = current?.alias.map { alias.utf8.elementsEqual($0.utf8) } ?? false
            return unchanged ? nil : 1
        case .device(_, _, .none): return nil
        }
    }


    /// The rows of these device ids and these tokens.
    private static func currentDevices(app: String, deviceIDs: [String], tokens: [String], _ db: any SQLDatabase) async throws -> [CurrentDevice] {
        // Two indexed lookups, a row that matches both comes twice (the callers' dictionaries keep one). With OR, or
        // with UNION (which SQLite 3.54 merges in device-id order, reading the token side through the device-id
        // index), SQLite scans the app's devices: registrations then slow down as the registry grows.
        let byToken: SQLQueryString = tokens.isEmpty ? "" : """
            UNION ALL
            SELECT device_id, token, environment, token_registered_at, alias, created_at, secret_hash, alias_unproven FROM devices
            WHERE app_id = \(bind: app) AND token IN (\(binds: tokens))
            """
        let rows = try await db.raw("""
            SELECT device_id, token, environment, token_registered_at, alias, created_at, secret_hash, alias_unproven FROM devices
            WHERE app_id = \(bind: app) AND device_id IN (\(binds: deviceIDs))
            \(byToken)
            """).all()
        return try rows.map { row in
            CurrentDevice(
                deviceID: try row.decode(column: "device_id", as: String.self), token: try row.decode(column: "token", as: String.self),
                environment: try row.word("environment", as: APNsEnvironment.self),
                tokenRegisteredAt: try row.decode(column: "token_registered_at", as: Int64.self),
                alias: try row.decode(column: "alias", as: String?.self), createdAt: try row.decode(column: "created_at", as: Int64.self),
                secretHash: try row.decode(column: "secret_hash", as: Data?.self).map { [UInt8]($0) },
                aliasUnproven: try row.decode(column: "alias_unproven", as: Int?.self) == 1)
        }
    }

    /// Writes registrations the callers may make. - Returns: the devices, in the group's order.
    /// - Parameter current: the rows of the group's device ids and tokens, read in this transaction.
    private static func write(
        _ group: [PendingRegistration], app: String, current: [CurrentDevice], _ db: any SQLDatabase
    ) async throws -> [DeviceRecord] {
        let deviceIDs = group.map(\.registration.deviceID)
        let byDevice = Dictionary(current.map { ($0.deviceID, $0) }, uniquingKeysWith: { first, _ in first })
        let byToken = Dictionary(current.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
        let groupDevices = Set(deviceIDs)

        var history: [SQLQueryString] = []
        var movedAway: [String] = []
        /// The device each registration of the group took its token from, by the registration's device id.
        var takenFrom: [String: String] = [:]
        for pending in group {
            let registration = pending.registration
            let now = pending.at.milliseconds
            // The token moves here: the device that had it lost its id (a cleared keychain), so it goes, tags and
            // alias with it; its history keeps the token, so support can still follow it.
            if let holder = byToken[registration.token], holder.deviceID != registration.deviceID {
                guard !groupDevices.contains(holder.deviceID) else {
                    // The holder registers in this group too: only one-by-one order says what happens.
                    throw GroupConflict()
                }
                movedAway.append(holder.deviceID)
                takenFrom[registration.deviceID] = holder.deviceID
                history.append(historyRow(app: app, holder, replacedAt: now, reason: .moved))
            }
            // This device's old token, if it had another one, goes to its history.
            if let old = byDevice[registration.deviceID], old.token != registration.token {
                history.append(historyRow(app: app, old, replacedAt: now, reason: .replaced))
            }
        }
        if !history.isEmpty {
            try await db.raw("""
                INSERT INTO token_history (app_id, device_id, token, environment, first_registered_at, replaced_at, reason)
                VALUES \(history.joined(separator: ", "))
                """).run()
        }
        if !movedAway.isEmpty {
            try await deleteOwnInboxes(app: app, deviceIDs: movedAway, db)
            try await db.raw("DELETE FROM devices WHERE app_id = \(bind: app) AND device_id IN (\(binds: movedAway))").run()
        }

        let values = group.map { pending -> SQLQueryString in
            let registration = pending.registration
            let now = pending.at.milliseconds
            return """
                (\(bind: app), \(bind: registration.deviceID), \(bind: registration.token), \(bind: registration.environment.storedWord),
                \(bind: registration.alias), \(bind: registration.locale), \(bind: registration.timezone),
                \(bind: registration.appVersion), \(bind: now), \(bind: now), \(bind: now), \(bind: now),
                \(bind: registration.newSecretHash.isEmpty ? nil : Data(registration.newSecretHash)),
                \(bind: aliasUnproven(registration, current: byDevice[registration.deviceID])))
                """
        }
        // No RETURNING: every returned row costs a thread hand-off in SQLiteNIO; the records are known from the
        // rows read above and the registrations.
        try await db.raw("""
            INSERT INTO devices (app_id, device_id, token, environment, alias, locale, timezone, app_version,
                token_registered_at, last_registered_at, created_at, updated_at, secret_hash, alias_unproven)
            VALUES \(values.joined(separator: ", "))
            ON CONFLICT (app_id, device_id) DO UPDATE SET
                token = excluded.token,
                environment = excluded.environment,
                alias = COALESCE(excluded.alias, devices.alias),
                alias_unproven = COALESCE(excluded.alias_unproven, devices.alias_unproven),
                locale = excluded.locale,
                timezone = excluded.timezone,
                app_version = excluded.app_version,
                token_registered_at = CASE WHEN devices.token = excluded.token
                    THEN devices.token_registered_at ELSE excluded.token_registered_at END,
                last_registered_at = excluded.last_registered_at,
                deactivated_at = NULL,
                deactivation_reason = NULL,
                updated_at = excluded.updated_at
            """).run()

        let retagged = group.filter { $0.registration.tags != nil }.map(\.registration)
        if !retagged.isEmpty {
            try await db.raw("""
                DELETE FROM device_tags WHERE app_id = \(bind: app) AND device_id IN (\(binds: retagged.map(\.deviceID)))
                """).run()
            let tagRows = retagged.flatMap { registration in
                (registration.tags ?? []).sorted().map { tag -> SQLQueryString in "(\(bind: app), \(bind: registration.deviceID), \(bind: tag))" }
            }
            if !tagRows.isEmpty {
                try await db.raw("INSERT INTO device_tags (app_id, device_id, tag) VALUES \(tagRows.joined(separator: ", "))").run()
            }
        }
        // Tags kept from before: only for devices that existed and were registered without tags.
        let keptTags = group.filter { $0.registration.tags == nil && byDevice[$0.registration.deviceID] != nil }.map(\.registration.deviceID)
        let oldTags = keptTags.isEmpty ? [:] : try await tags(app: app, deviceIDs: keptTags, db)
        return group.map { pending in
            let registration = pending.registration
            let before = byDevice[registration.deviceID]
            var record = DeviceRecord(
                appID: app, deviceID: registration.deviceID, token: registration.token, environment: registration.environment,
                alias: registration.alias ?? before?.alias, tags: registration.tags ?? oldTags[registration.deviceID] ?? [],
                locale: registration.locale, timezone: registration.timezone, appVersion: registration.appVersion,
                lastRegisteredAt: Date(milliseconds: pending.at.milliseconds), deactivatedAt: nil, deactivationReason: nil,
                createdAt: before.map { Date(milliseconds: $0.createdAt) } ?? Date(milliseconds: pending.at.milliseconds),
                secretHash: before.map(\.secretHash) ?? (registration.newSecretHash.isEmpty ? nil : registration.newSecretHash))
            record.tokenTakenFrom = takenFrom[registration.deviceID]
            return record
        }
    }

    private static func historyRow(app: String, _ entry: CurrentDevice, replacedAt: Int64, reason: TokenReplacementReason) -> SQLQueryString {
        """
        (\(bind: app), \(bind: entry.deviceID), \(bind: entry.token), \(bind: entry.environment.storedWord), \(bind: entry.tokenRegisteredAt),
            \(bind: replacedAt), \(bind: reason.storedWord))
        """
    }

    /// Registrations of one group depend on each other; the group is written one by one instead.
    private struct GroupConflict: Error {}
}

/// A device row's token as it was before a registration, for its history, and what a caller must prove about it.
struct CurrentDevice {
    var deviceID: String
    var token: String
    var environment: APNsEnvironment
    var tokenRegisteredAt: Int64
    var alias: String?
    var createdAt: Int64
    var secretHash: [UInt8]?
    /// Its alias was bound without proof, while the app's binding was open.
    var aliasUnproven = false
}
