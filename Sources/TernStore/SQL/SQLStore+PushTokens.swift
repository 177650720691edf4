import Foundation
import SQLKit

/// A device's tokens of other kinds than its APNs device token (``PushTokenKind``: PushKit's VoIP token, ActivityKit's
/// push-to-start token), one of each kind at most, and the pushes of those kinds to registered devices, which go to
/// them.
extension SQLStore {
    public func setPushToken(app: String, deviceID: String, kind: PushTokenKind, token: String, at: Date) async throws -> PushTokenRecord? {
        try await transaction { db in
            guard try await db.raw("""
                SELECT device_id FROM devices WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID)
                """).first() != nil
            else { return nil }
            // A token of a kind is one device's: registered under another id (the app lost its id, the phone was
            // restored), it moves here, as a device token does.
            try await db.raw("""
                DELETE FROM device_push_tokens
                WHERE app_id = \(bind: app) AND kind = \(bind: kind.rawValue) AND token = \(bind: token) AND device_id <> \(bind: deviceID)
                """).run()
            // Registered again, a token APNs called dead is alive (the 410 rule compares with `registered_at`).
            guard let row = try await db.raw("""
                INSERT INTO device_push_tokens (app_id, device_id, kind, token, registered_at)
                VALUES (\(bind: app), \(bind: deviceID), \(bind: kind.rawValue), \(bind: token), \(bind: at.milliseconds))
                ON CONFLICT (app_id, device_id, kind) DO UPDATE SET token = excluded.token, registered_at = excluded.registered_at,
                    deactivated_at = NULL, deactivation_reason = NULL
                RETURNING \(unsafeRaw: Self.pushTokenColumns)
                """).first()
            else { return nil }
            return try PushTokenRecord(row: row)
        }
    }

    public func deletePushToken(app: String, deviceID: String, kind: PushTokenKind) async throws -> Bool {
        try await transaction { db in
            try await db.raw("""
                DELETE FROM device_push_tokens WHERE app_id = \(bind: app) AND device_id = \(bind: deviceID) AND kind = \(bind: kind.rawValue)
                RETURNING device_id
                """).first() != nil
        }
    }

    public func pushTokens(app: String, deviceIDs: [String]) async throws -> [String: [PushTokenRecord]] {
        guard !deviceIDs.isEmpty else { return [:] }
        return try await exclusive { db in
            var found: [String: [PushTokenRecord]] = [:]
            for piece in deviceIDs.pieces(of: 500) {
                for row in try await db.raw("""
                    SELECT device_id, \(unsafeRaw: Self.pushTokenColumns) FROM device_push_tokens
                    WHERE app_id = \(bind: app) AND device_id IN (\(binds: piece)) ORDER BY device_id, kind
                    """).all()
                {
                    found[try row.decode(column: "device_id", as: String.self), default: []].append(try PushTokenRecord(row: row))
                }
            }
            return found
        }
    }

    public func deactivatePushTokens(app: String, kind: PushTokenKind, _ tokens: [TokenDeactivation], at: Date) async throws -> [String] {
        guard !tokens.isEmpty else { return [] }
        return try await transaction { db in
            var deactivated: [String] = []
            for item in tokens {
                var update: SQLQueryString = """
                    UPDATE device_push_tokens SET deactivated_at = \(bind: at.milliseconds), deactivation_reason = \(bind: item.reason.rawValue)
                    WHERE app_id = \(bind: app) AND kind = \(bind: kind.rawValue) AND token = \(bind: item.token) AND deactivated_at IS NULL
                    """
                if let invalidSince = item.invalidSince {
                    // Registered again after APNs' verdict: alive.
                    update += " AND registered_at < \(bind: invalidSince.milliseconds)"
                }
                update += " RETURNING token"
                if try await db.raw(update).first() != nil { deactivated.append(item.token) }
            }
            return deactivated
        }
    }

    static let pushTokenColumns = "kind, token, registered_at, deactivated_at, deactivation_reason"

    /// `recipients` (a page of registered devices) with each one's token of `kind` in place of its device token, and
    /// its registration time; a device without an active token of the kind is left out. Keys stay the devices', so
    /// the audience pages as it would for the device tokens.
    static func withPushTokens(_ recipients: [Recipient], kind: PushTokenKind, app: String, _ db: any SQLDatabase) async throws -> [Recipient] {
        let deviceIDs = recipients.compactMap(\.deviceID)
        guard !deviceIDs.isEmpty else { return [] }
        var tokens: [String: (token: String, registeredAt: Date)] = [:]
        for piece in deviceIDs.pieces(of: 500) {
            for row in try await db.raw("""
                SELECT device_id, token, registered_at FROM device_push_tokens
                WHERE app_id = \(bind: app) AND kind = \(bind: kind.rawValue) AND deactivated_at IS NULL AND device_id IN (\(binds: piece))
                """).all()
            {
                tokens[try row.decode(column: "device_id", as: String.self)] = (
                    try row.decode(column: "token", as: String.self), try row.date("registered_at")
                )
            }
        }
        return recipients.compactMap { recipient in
            guard let deviceID = recipient.deviceID, let found = tokens[deviceID] else { return nil }
            var recipient = recipient
            recipient.token = found.token
            recipient.lastRegisteredAt = found.registeredAt
            return recipient
        }
    }
}

extension PushTokenRecord {
    init(row: any SQLRow) throws {
        self.init(
            kind: try row.word("kind", as: PushTokenKind.self), token: try row.decode(column: "token", as: String.self), registeredAt: try row.date("registered_at"),
            deactivatedAt: try row.optionalDate("deactivated_at"),
            deactivationReason: try row.decode(column: "deactivation_reason", as: String?.self).map(TokenDeactivationReason.init(rawValue:)))
    }
}
