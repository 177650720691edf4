import SQLKit
import SQLiteNIO

extension SQLStore {
    /// ``taggedRecipients(app:tag:alsoTagged:after:limit:_:)`` on SQLite, without a join.
    ///
    /// SQLite joins the tag's rows to the devices by looking each device up in the devices' key from its root: about
    /// half a microsecond a recipient, the largest part of a fan-out's reads. The tag's index and the devices' key
    /// are both in device id order, so this reads them side by side instead: the page's device ids from the tag's
    /// index, then the devices from the first of those ids to the last, in order, keeping the tagged and active ones.
    ///
    /// A sparse tag would make that range long, so at most twice as many active devices as ids are read; the tagged
    /// devices past them are then looked up by id, as the join would. Rounds go on until `limit` are found or the tag
    /// has no more (a round's devices can all be deactivated).
    ///
    /// - Parameter condition: more conditions on the tag's row `t` (every one of the other tags of a `match: all`).
    static func mergedTaggedRecipients(
        app: String, tag: String, alsoTagged condition: SQLQueryString?, after cursor: String?, limit: Int, _ session: SQLiteSession
    ) async throws -> [Recipient] {
        var found: [Recipient] = []
        var cursor = cursor ?? ""
        while found.count < limit {
            let wanted = limit - found.count
            var idQuery: SQLQueryString = """
                SELECT t.device_id FROM device_tags t
                WHERE t.app_id = \(bind: app) AND t.tag = \(bind: tag) AND t.device_id > \(bind: cursor)
                """
            if let condition { idQuery += condition }
            idQuery += " ORDER BY t.device_id LIMIT \(bind: wanted)"
            // Both read packed (``PackedRows``): only the recipients kept become strings.
            let ids = try await PackedRows.read([PackedRows.Column("device_id")], of: idQuery, session)
            guard ids.count > 0 else { break }
            let first = ids.key(0)
            let last = ids.key(ids.count - 1)

            // Active devices only: a deactivated one that is tagged finds no row here, and is passed over like an
            // untagged device between them.
            let rangeLimit = 2 * ids.count
            let range = try await PackedRows.read(PackedRows.recipientColumns, of: """
                SELECT device_id, token, environment, last_registered_at, alias FROM devices
                WHERE app_id = \(bind: app) AND device_id >= \(bind: first) AND device_id <= \(bind: last)
                    AND deactivated_at IS NULL
                ORDER BY device_id LIMIT \(bind: rangeLimit)
                """, session)
            // Both in SQLite's order for text, by the UTF-8 bytes.
            var next = 0
            for row in 0..<range.count {
                var order = 1
                while next < ids.count {
                    order = ids.compareKey(next, with: range, row)
                    guard order < 0 else { break }
                    next += 1
                }
                guard next < ids.count, order == 0 else { continue }  // not tagged
                next += 1
                found.append(try range.recipient(row))
            }
            // The range was cut short: the ids after its last device, by id.
            if range.count == rangeLimit, next < ids.count {
                for piece in (next..<ids.count).map(ids.key).pieces(of: 500) {
                    found += try await recipientRows("""
                        SELECT device_id, token, environment, last_registered_at, alias FROM devices
                        WHERE app_id = \(bind: app) AND device_id IN (\(binds: piece)) AND deactivated_at IS NULL
                        ORDER BY device_id
                        """, session)
                }
            }
            guard ids.count == wanted else { break }
            cursor = last
        }
        return found
    }
}
