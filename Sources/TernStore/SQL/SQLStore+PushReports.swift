import Foundation
import SQLKit

/// What devices report of pushes that came through APNs to them: that one arrived (a Notification Service Extension's
/// receipt) and that the user opened it. A row per push and device, so each is counted once per device.
extension SQLStore {
    public func recordPushReport(_ report: PushReport, pushID: String, deviceID: String, at: Date) async throws -> Bool {
        let column = report.column
        return try await exclusive { db in
            // The first report of each kind counts; reporting it again is not an error. A row comes back only when
            // this one was the first (inserted, or its column still empty).
            try await db.raw("""
                INSERT INTO push_reports (push_id, device_id, \(unsafeRaw: column)) VALUES (\(bind: pushID), \(bind: deviceID), \(bind: at.milliseconds))
                ON CONFLICT (push_id, device_id) DO UPDATE SET \(unsafeRaw: column) = excluded.\(unsafeRaw: column)
                    WHERE push_reports.\(unsafeRaw: column) IS NULL
                RETURNING device_id
                """).first() != nil
        }
    }

    public func pushReportCounts(pushID: String) async throws -> PushReportCounts {
        try await exclusive { db in
            guard let row = try await db.raw("""
                SELECT COUNT(received_at) AS received, COUNT(opened_at) AS opened FROM push_reports WHERE push_id = \(bind: pushID)
                """).first()
            else { return PushReportCounts() }
            return PushReportCounts(
                received: try row.decode(column: "received", as: Int.self), opened: try row.decode(column: "opened", as: Int.self))
        }
    }
}
