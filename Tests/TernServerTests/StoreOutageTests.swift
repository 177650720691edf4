import Foundation
import Logging
import SQLKit
import TernTestSupport
import Testing

@testable import TernStore

/// The API while its SQLite file cannot be written: a clear 503 to try again, not a 500, and back once it can.
@Suite struct StoreOutageTests {
    @Test func aDatabaseFileLockedByAnotherProcessIsA503ToTryAgainAndTheServerGoesOnOnceItIsFree() async throws {
        try await RouterHarness.withServer { server in
            let body = #"{"token": "\#(String(repeating: "ab", count: 32))", "environment": "production"}"#
            let before = try await server.device.put("/v1/apps/demo/devices/\(UUID().uuidString.lowercased())", body)
            #expect(before.status == 200, "\(before.text)")

            // Another process (a backup, an operator's sqlite3) holds the file's write lock past the busy timeout.
            let other = try await SQLStore.openSQLite(path: server.folder.appendingPathComponent("tern.db").path, logger: Logger(label: "test"))
            do {
                try await other.exclusive { db in try await db.raw("BEGIN EXCLUSIVE").run() }
                // It waits for SQLite's busy timeout (5 s), then answers.
                let during = try await server.device.send(
                    .PUT, "/v1/apps/demo/devices/\(UUID().uuidString.lowercased())",
                    body: #"{"token": "\#(String(repeating: "cd", count: 32))", "environment": "production"}"#, timeout: 60)
                #expect(during.status == 503, "\(during.text)")
                #expect(try during.json()["error"] == .string("unavailable"), "\(during.text)")
                #expect(during.headers.first(name: "Retry-After") == "1")
                try await other.exclusive { db in try await db.raw("ROLLBACK").run() }
            } catch {
                try? await other.close()
                throw error
            }
            try await other.close()
            let after = try await server.device.put(
                "/v1/apps/demo/devices/\(UUID().uuidString.lowercased())", #"{"token": "\#(String(repeating: "ef", count: 32))", "environment": "production"}"#)
            #expect(after.status == 200, "\(after.text)")
        }
    }
}
