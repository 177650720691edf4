import Foundation
import Logging
import TernAPNs
import Testing

@testable import TernServer
@testable import TernStore

/// The channel's recorder against a real SQLite file: how its batches end when the node stops.
struct ChannelRecorderTests {
    private static func withStore(_ body: (SQLStore) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tern-recorder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try await SQLStore.openSQLite(path: folder.appendingPathComponent("tern.db").path, logger: Logger(label: "test"))
        do {
            try await store.migrate()
            try await body(store)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    /// The node stops: its connections close (each reports its goodbye, as its acknowledgements before) and the
    /// recorder is finished. What they reported last is written, not skipped: a cancelled recorder's last batch fails
    /// on SQLite, whose statements a cancelled task skips, and a lost acknowledgement sends its message again (through
    /// APNs, for an `auto` push, after the restart).
    @Test(arguments: [false, true])
    func whatIsReportedBeforeTheRecorderFinishesIsWritten(runningAlready: Bool) async throws {
        try await Self.withStore { store in
            let entries = (1...3).map { PresenceEntry(app: "demo", deviceID: "d\($0)", node: "n1", connection: "c\($0)") }
            try await store.setPresence(entries, at: Date())
            let recorder = ChannelRecorder(store: store, clock: SystemWallClock(), logger: Logger(label: "test"))
            let running = runningAlready ? Task { await recorder.run() } : nil
            for entry in entries.prefix(2) { recorder.departed(entry) }
            recorder.finish()
            if let running { await running.value } else { await recorder.run() }
            let left = try await store.presence(app: "demo", deviceIDs: entries.map(\.deviceID))
            #expect(left.map(\.deviceID) == ["d3"], "the goodbyes reported before the finish are written")
        }
    }
}
