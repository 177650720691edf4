import Crypto
import Foundation
import Synchronization
import TernAPNs

/// The console's signed-in sessions, kept on this node, in memory.
///
/// A session id is 256 random bits, given to the browser once in its cookie; only its SHA-256 is kept, so a look at
/// this table (a heap dump) gives no usable cookie. A session ends after `idleTimeout` without a request of the user's
/// (a page's own polling does not count), after `lifetime` however busy, at sign-out, and when the secret it was signed
/// in with is no longer the principal's: each session keeps that secret's hash, which ``ConsoleRoutes`` compares with
/// the app's current one on every request, so a rotation or a deletion through the API, or on another node, ends it
/// too, and an app made again under the same id is not the one signed in to. At most `capacity`
/// sessions are kept: past that, the expired go, then the least recently used of whoever holds the most, so memory
/// stays bounded whoever signs in how often, and one principal's sign-ins never sign out another.
///
/// Why in memory rather than in the store: a session is worth only a sign-in, and keeping it off the database keeps
/// the schema (shared with the other nodes' migrations) as it is. Behind a load balancer with several nodes, route
/// `/console` to one node or make it sticky (docs/deployment.md); a restart signs everyone out.
final class ConsoleSessions: Sendable {
    struct Session: Sendable, Equatable {
        let principal: ConsolePrincipal
        /// The SHA-256 of the secret signed in with (``Secrets/hash(_:)``): the session holds while it is the
        /// principal's.
        let credential: [UInt8]
        /// Sent back with every form and `fetch` POST (``ConsoleRoutes``); compared in constant time.
        let csrfToken: String
        let createdAt: Date
        var lastUsedAt: Date
    }

    let idleTimeout: TimeInterval
    let lifetime: TimeInterval
    let capacity: Int
    private let clock: any WallClock
    /// By the SHA-256 of the session id.
    private let sessions = Mutex<[[UInt8]: Session]>([:])

    init(idleTimeout: Duration, lifetime: Duration, capacity: Int = 10_000, clock: any WallClock) {
        self.idleTimeout = idleTimeout.seconds
        self.lifetime = lifetime.seconds
        self.capacity = capacity
        self.clock = clock
    }

    /// Starts a session for `principal`, signed in with the secret whose hash is `credential`; the id goes into the
    /// cookie and nowhere else.
    func start(_ principal: ConsolePrincipal, credential: [UInt8]) -> (id: String, session: Session) {
        let id = Self.randomToken()
        let now = clock.now
        let session = Session(principal: principal, credential: credential, csrfToken: Self.randomToken(), createdAt: now, lastUsedAt: now)
        sessions.withLock { sessions in
            if sessions.count >= capacity { Self.makeRoom(&sessions, capacity: capacity, isLive: { self.isLive($0, at: now) }) }
            sessions[Self.key(id)] = session
        }
        return (id, session)
    }

    /// The live session with this id, marked used now unless `touch` is false (a page polling by itself); nil for an
    /// unknown, expired or ended one.
    func session(id: String, touch: Bool = true) -> Session? {
        let key = Self.key(id)
        let now = clock.now
        return sessions.withLock { sessions in
            guard var session = sessions[key] else { return nil }
            guard isLive(session, at: now) else {
                sessions[key] = nil
                return nil
            }
            if touch {
                session.lastUsedAt = now
                sessions[key] = session
            }
            return session
        }
    }

    /// Ends the session with this id (sign-out, or a sign-in replacing it).
    func end(id: String) {
        let key = Self.key(id)
        sessions.withLock { _ = $0.removeValue(forKey: key) }
    }

    /// Sessions kept now (expired ones included until they are next looked at or make room).
    var count: Int { sessions.withLock { $0.count } }

    private func isLive(_ session: Session, at now: Date) -> Bool {
        now.timeIntervalSince(session.lastUsedAt) < idleTimeout && now.timeIntervalSince(session.createdAt) < lifetime
    }

    /// The expired go first; then the principal holding the most sessions gives up its least recently used. Evicting
    /// the least recently used of all let one app's master secret, signed in ten thousand times in twenty seconds,
    /// sign out the admin and every other app; now whoever signs in that often pushes out only its own sessions.
    private static func makeRoom(_ sessions: inout [[UInt8]: Session], capacity: Int, isLive: (Session) -> Bool) {
        sessions = sessions.filter { isLive($0.value) }
        while sessions.count >= capacity {
            let held = sessions.values.reduce(into: [ConsolePrincipal: Int]()) { $0[$1.principal, default: 0] += 1 }
            guard let busiest = held.max(by: { $0.value < $1.value })?.key,
                let oldest = sessions.filter({ $0.value.principal == busiest }).min(by: { $0.value.lastUsedAt < $1.value.lastUsedAt })?.key
            else { return }
            sessions[oldest] = nil
        }
    }

    static func key(_ id: String) -> [UInt8] { Array(SHA256.hash(data: Array(id.utf8))) }

    /// 256 random bits in base64url: a session id or a CSRF token.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}

extension Duration {
    /// In seconds, with the fraction.
    var seconds: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
