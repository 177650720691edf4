import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Nodes on one PostgreSQL database: a lease is a session-level advisory lock held on a connection of the
/// coordinator's own, and announcements are NOTIFY on one channel, which every node LISTENs to (each payload
/// names its sender, so a node skips its own).
///
/// The connection is checked every `checkInterval`; when it breaks, every lease is dropped at once (the server
/// releases the locks with the session, so another node may take the jobs over) and the coordinator reconnects,
/// with backoff, and takes whatever is free again.
public final class PostgresCoordinator: NodeCoordinator {
    static let channel = "tern_events"

    private let location: PostgresURL
    private let checkInterval: Duration
    /// How long a check, an announcement or the start of a session may take before the connection counts as lost.
    private var checkTimeout: Duration { max(checkInterval * 5, .seconds(2)) }
    private let logger: Logger
    private let leases = Mutex<[String: JobLease]>([:])
    private let subscribers = Mutex<[AsyncStream<String>.Continuation]>([])
    private let connection = Mutex<PostgresConnection?>(nil)
    /// This process, in the payloads it sends.
    private let node = UUID.random().uuidString
    /// Events to announce, sent one after another by ``run()``; a burst beyond 64 keeps the newest (the others
    /// look for work on their own anyway).
    private let announcements = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(64))

    /// - Parameter url: the database's URL, as for ``SQLStore/openPostgres(url:maximumConnections:logger:)``.
    public init(url: String, checkInterval: Duration = .seconds(1), logger: Logger) throws {
        self.location = try PostgresURL(url)
        self.checkInterval = checkInterval
        self.logger = logger
    }

    public var isSoleNode: Bool { false }

    public func lease(_ job: String) -> JobLease {
        leases.withLock { leases in
            if let lease = leases[job] { return lease }
            let lease = JobLease(job: job)
            leases[job] = lease
            return lease
        }
    }

    public func announce(_ event: String) {
        announcements.continuation.yield(event)
    }

    /// Sends the announcements on the coordination connection while there is one, until cancelled.
    private func sendAnnouncements() async {
        for await event in announcements.stream {
            guard let connection = connection.withLock({ $0 }) else { continue }
            await Self.notify(connection, "\(node) \(event)", within: checkTimeout, logger: logger)
        }
    }

    /// Sends one announcement. A cut connection can leave a query unanswered for ever, and the announcements that
    /// follow would wait behind it even after the coordinator reconnected: each gets `timeout`.
    private static func notify(_ connection: PostgresConnection, _ payload: String, within timeout: Duration, logger: Logger) async {
        do {
            _ = try await withDeadline(timeout) {
                try await connection.query("SELECT pg_notify(\(Self.channel), \(payload))", logger: logger)
            }
        } catch {
            // The others look for work on their own every second or so; a lost wake-up only delays it.
            logger.debug("cannot announce to the other nodes", metadata: ["event": "\(payload)", "error": "\(PostgresSessions.describe(error))"])
        }
    }

    /// Whether the coordination connection is up (for tests and readiness).
    public var isConnected: Bool { connection.withLock { $0 != nil } }

    public func events() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(64))
        subscribers.withLock { $0.append(continuation) }
        return stream
    }

    public func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.sendAnnouncements() }
            await keepConnected()
            group.cancelAll()
        }
        for subscriber in subscribers.withLock({ $0 }) { subscriber.finish() }
    }

    /// Connects, listens and keeps the leases until cancelled, reconnecting with back-off.
    ///
    /// A connection can break without the server noticing (a network cut sends neither FIN nor RST): its session,
    /// and the advisory locks it holds, would then outlive it until TCP keepalives give up, which takes hours by
    /// default, and no node could run those jobs meanwhile. So once reconnected, the coordinator ends its previous
    /// session if the server still has it (a role may end its own sessions), named by process id and start time
    /// so that a reused process id is never taken for it.
    private func keepConnected() async {
        var failures = 0
        var previous: Session?
        while !Task.isCancelled {
            do {
                let opened = try await PostgresConnection.connect(
                    configuration: try location.connectionConfiguration(), id: 1, logger: logger)
                connection.withLock { $0 = opened }
                if failures > 0 { logger.info("coordination connection restored") }
                failures = 0
                try await withThrowingTaskGroup(of: Void.self) { group in
                    let session = try await self.session(of: opened, ending: previous)
                    previous = session
                    group.addTask { try await self.listen(on: opened) }
                    group.addTask { try await self.keepLeases(on: opened) }
                    let ended: Result<Void, any Error>
                    do {
                        _ = try await group.next()
                        ended = .success(())
                    } catch {
                        ended = .failure(error)
                    }
                    // Closing fails whatever still waits on the connection (LISTEN's end, on a cut connection, would
                    // wait for ever), so the group can finish.
                    try? await opened.close()
                    group.cancelAll()
                    try ended.get()
                }
            } catch {
                if !Task.isCancelled {
                    failures += 1
                    logger.warning("coordination connection lost; this node holds no job until it is back", metadata: [
                        "error": "\(PostgresSessions.describe(error))",
                    ])
                }
            }
            dropLeases()
            let closing = connection.withLock { current -> PostgresConnection? in
                defer { current = nil }
                return current
            }
            try? await closing?.close()
            if Task.isCancelled { break }
            // 0.5 s, 1 s, 2 s … at most 10 s between attempts.
            try? await Task.sleep(for: .milliseconds(min(10_000, 250 << min(failures, 6))))
        }
    }

    /// A session on the server: its process id and its start (microseconds since 1970, as the server reports it).
    struct Session: Sendable, Equatable {
        var processID: Int32
        var started: Int64
    }

    /// Which session `connection` is, after ending `previous` if the server still has it.
    private func session(of connection: PostgresConnection, ending previous: Session?) async throws -> Session {
        let logger = self.logger
        return try await withDeadline(checkTimeout) {
            if let previous {
                let rows = try await connection.query("""
                    SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
                    WHERE pid = \(previous.processID) AND (extract(epoch FROM backend_start) * 1000000)::int8 = \(previous.started)
                    """, logger: logger)
                for try await ended in rows.decode(Bool.self) where ended {
                    logger.info("ended this node's previous coordination session, which the server still had", metadata: [
                        "pid": "\(previous.processID)",
                    ])
                }
            }
            let rows = try await connection.query("""
                SELECT pid, (extract(epoch FROM backend_start) * 1000000)::int8 FROM pg_stat_activity WHERE pid = pg_backend_pid()
                """, logger: logger)
            for try await (pid, started) in rows.decode((Int32, Int64).self) {
                return Session(processID: pid, started: started)
            }
            throw StoreError.unavailable("the server does not list the coordination session")
        }
    }

    private func listen(on connection: PostgresConnection) async throws {
        try await connection.listen(on: Self.channel) { notifications in
            // Listening (again): what was announced before is not coming.
            for subscriber in subscribers.withLock({ $0 }) { subscriber.yield(CoordinationEvent.resumed) }
            for try await notification in notifications {
                // "<sender> <event>"
                let payload = notification.payload
                guard let space = payload.firstIndex(of: " "), payload[..<space] != node else { continue }
                let event = String(payload[payload.index(after: space)...])
                for subscriber in subscribers.withLock({ $0 }) { subscriber.yield(event) }
            }
        }
    }

    /// Takes every free lease, and checks the connection, every `checkInterval`. A check that takes longer than
    /// five intervals (at least 2 s) counts as a lost connection: a query can hang when the server ends the session,
    /// and a node that waited on it would go on believing it holds jobs whose locks went with that session.
    private func keepLeases(on connection: PostgresConnection) async throws {
        while !Task.isCancelled {
            let free = leases.withLock { $0.values.filter { !$0.isHeld } }
            let (jobs, logger) = (free.map(\.job), self.logger)
            // Decided here, after the deadline: a check that finished late must not mark anything held.
            let taken = try await withDeadline(checkTimeout) {
                var taken: Set<String> = []
                for job in jobs {
                    let rows = try await connection.query("SELECT pg_try_advisory_lock(\(Self.lockKey(job))) AS held", logger: logger)
                    for try await held in rows.decode(Bool.self) where held { taken.insert(job) }
                }
                _ = try await connection.query("SELECT 1", logger: logger)
                return taken
            }
            for lease in free {
                if taken.contains(lease.job) {
                    lease.set(true)
                    logger.info("this node runs a job now", metadata: ["job": "\(lease.job)"])
                } else {
                    lease.refused()
                }
            }
            try await Task.sleep(for: checkInterval)
        }
    }

    private func dropLeases() {
        for lease in leases.withLock({ Array($0.values) }) where lease.isHeld {
            lease.set(false)
            logger.info("this node no longer runs a job", metadata: ["job": "\(lease.job)"])
        }
    }

    /// The advisory lock's key for a job: 64-bit FNV-1a of `tern:` and its name, the same on every node.
    static func lockKey(_ job: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in ("tern:" + job).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }
}

