import Foundation
import Logging
import SQLKit
import Testing
import TernTestSupport
@testable import TernStore

/// Job leases and announcements between nodes on one PostgreSQL database (``PostgresCoordinator``), and the
/// single-node stand-in (``LocalCoordinator``).
@Suite("Node coordination")
struct CoordinatorTests {
    @Test("alone on SQLite, a node holds every lease and has no one to announce to")
    func localCoordinator() async throws {
        let coordinator = LocalCoordinator()
        #expect(coordinator.lease("feedback-poller").isHeld)
        #expect(coordinator.lease("feedback-poller") === coordinator.lease("feedback-poller"), "one lease per job")
        coordinator.announce("push")
        var events: [String] = []
        for await event in coordinator.events() { events.append(event) }
        #expect(events.isEmpty)
    }

    @Test("each job is held by one node at a time; when its holder leaves, another takes it",
          .enabled(if: PostgresTestServer.url != nil))
    func oneHolderAtATime() async throws {
        try await PostgresTestServer.withDatabase { url in try await oneHolderAtATime(url: url) }
    }

    private func oneHolderAtATime(url: String) async throws {
        let nodes = try (0..<3).map { _ in
            try PostgresCoordinator(url: url, checkInterval: .milliseconds(100), logger: Logger(label: "test"))
        }
        let leases = nodes.map { ($0.lease("inbox-sweeper"), $0.lease("feedback-poller")) }
        var running = nodes.map { node in Task { await node.run() } }
        defer { for task in running { task.cancel() } }

        try await waitUntil("every job to have a holder") { leases.filter(\.0.isHeld).count == 1 && leases.filter(\.1.isHeld).count == 1 }
        // Stay so: nobody takes a job that is held, however often the others try.
        let triedBefore = leases.map { $0.0.refusals }
        try await waitUntil("each other node to try for the sweeper three more times") {
            zip(leases, triedBefore).allSatisfy { lease, before in lease.0.isHeld || lease.0.refusals >= before + 3 }
        }
        #expect(leases.filter(\.0.isHeld).count == 1)
        #expect(leases.filter(\.1.isHeld).count == 1)

        // The sweeper's holder leaves: another node has the job within a few checks, and still only one.
        let holder = try #require(leases.firstIndex { $0.0.isHeld })
        running[holder].cancel()
        await running[holder].value
        #expect(!leases[holder].0.isHeld && !leases[holder].1.isHeld, "a node that stopped holds nothing")
        try await waitUntil("another node to take the sweeper") { leases.filter(\.0.isHeld).count == 1 }
        #expect(!leases[holder].0.isHeld)
        // The feedback poller too, if the node that left held it.
        try await waitUntil("one holder of the feedback poller") { leases.filter(\.1.isHeld).count == 1 }
        running[holder] = Task {}
    }

    @Test("a holder whose connection the server drops lets go at once, reconnects, and one node holds the job again",
          .enabled(if: PostgresTestServer.url != nil))
    func droppedConnection() async throws {
        try await PostgresTestServer.withDatabase { url in try await droppedConnection(url: url) }
    }

    private func droppedConnection(url: String) async throws {
        let database = try #require(URLComponents(string: url)?.path.dropFirst()).description
        let nodes = try (0..<2).map { _ in
            try PostgresCoordinator(url: url, checkInterval: .milliseconds(100), logger: Logger(label: "test"))
        }
        let leases = nodes.map { $0.lease("feedback-poller") }
        let running = nodes.map { node in Task { await node.run() } }
        defer { for task in running { task.cancel() } }
        try await waitUntil("a holder") { leases.filter(\.isHeld).count == 1 }
        let holder = try #require(leases.firstIndex { $0.isHeld })

        // The server ends the nodes' sessions (as a restart or a network cut would).
        try await PostgresTestServer.administer(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid()")
        try await waitUntil("the old holder to let go") { !leases[holder].isHeld }
        try await waitUntil("exactly one holder again") { leases.filter(\.isHeld).count == 1 }

        // Announcements still reach the other node after the reconnect, and not the one that made them.
        let heardBy = nodes.map { $0.events() }
        try await waitUntil("both nodes to be connected again") { nodes.allSatisfy(\.isConnected) }
        // The connection is back before its LISTEN is: announce until the other node hears.
        #expect(try await Self.firstEvent(of: heardBy[1], "node 1 to hear node 0") { nodes[0].announce("push") } == "push")
        #expect(try await Self.firstEvent(of: heardBy[0], "node 0 to hear node 1") { nodes[1].announce("wake") } == "wake", "not its own push")
    }

    @Test("a connection cut without a word (no FIN, no RST) is given up; the node ends its old session, so the job has a holder again, its announcements go out on the new connection, and its subscribers are told it listens again",
          .enabled(if: PostgresTestServer.url != nil))
    func silentlyCutConnection() async throws {
        try await PostgresTestServer.withDatabase { url in try await silentlyCutConnection(url: url) }
    }

    private func silentlyCutConnection(url: String) async throws {
        let (relay, relayed) = try await TCPRelay.relaying(url)
        let nodes = try [relayed, url].map {
            try PostgresCoordinator(url: $0, checkInterval: .milliseconds(100), logger: Logger(label: "test"))
        }
        let leases = nodes.map { $0.lease("feedback-poller") }
        let heardBy = nodes.map { $0.events() }
        // Node 0 (through the relay) first, so that it holds the job when its connection is cut.
        var running = [Task { await nodes[0].run() }]
        defer {
            for task in running { task.cancel() }
        }
        try await waitUntil("node 0 to hold the job") { leases[0].isHeld }
        running.append(Task { await nodes[1].run() })
        #expect(try await Self.firstEvent(of: heardBy[1], "node 1 to hear node 0") { nodes[0].announce("push") } == "push")

        relay.freeze()
        // An announcement made now is sent on the cut connection: it must not hold up those that come after it.
        nodes[0].announce("lost")
        try await waitUntil("node 0 to let go of the job") { !leases[0].isHeld }
        // The server still has node 0's old session, and its lock, until node 0 ends it from its new connection.
        try await waitUntil("one node to hold the job again") { leases.filter(\.isHeld).count == 1 }
        // (Node 1 may still have a few of the first pushes buffered; "lost" went out on the cut connection, or not at all.)
        #expect(try await Self.firstEvent(of: heardBy[1], "node 1 to hear node 0 after the cut", skipping: ["push", "lost", CoordinationEvent.resumed]) {
            nodes[0].announce("wake")
        } == "wake")
        // Node 0 listened twice (at the start, and on its new connection), and says so each time: its subscribers
        // look for what they may have missed while it was cut off.
        let resumed = try await withTimeout(30, "node 0 to report its subscription resumed twice") {
            var count = 0
            for await event in heardBy[0] where event == CoordinationEvent.resumed {
                count += 1
                if count == 2 { break }
            }
            return count
        }
        #expect(resumed == 2)
        await relay.close()
    }

    /// The first event of `events` not in `skipping`, calling `announce` every 100 ms until it comes (at most 30 s).
    private static func firstEvent(
        of events: AsyncStream<String>, _ what: String, skipping: Set<String> = [CoordinationEvent.resumed],
        announcing announce: @escaping @Sendable () -> Void
    ) async throws -> String? {
        // Generous: after the server ends the sessions, a busy machine (the whole suite in parallel) may take a while to
        // see it, reconnect and LISTEN again; the point is that it does.
        try await withTimeout(30, what) {
            await withTaskGroup(of: String?.self) { group in
                group.addTask {
                    for await event in events where !skipping.contains(event) { return event }
                    return nil
                }
                group.addTask {
                    while !Task.isCancelled {
                        announce()
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                    return nil
                }
                defer { group.cancelAll() }
                return await group.next() ?? nil
            }
        }
    }
}
