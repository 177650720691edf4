import NIOCore

/// Whether the legacy gateway is known to be unreachable, and when the client next tries it for a caller: the
/// decision to fail a notification at once instead of holding it, and whatever its caller holds for it, through
/// another round of fruitless connects.
///
/// The gateway counts as unreachable once the client gave up on it: ``LegacyClientConfiguration/maxConnectFailures``
/// fruitless connections in a row, or a caller that waited its whole send time for a connection in vain. It counts as
/// reachable again once a connection completes its TLS handshake. While unreachable, a caller is failed at once, and
/// the first caller after each ``probeInterval`` also has one connection tried, so that the client finds the gateway
/// back without connecting in a loop to one that is gone (Apple's, retired in 2021).
struct LegacyReachability: Equatable {
    /// The last problem seen, while the gateway counts as unreachable; nil while it does not.
    private(set) var problem: String?
    /// When a caller may next have a connection tried, while the gateway counts as unreachable.
    private(set) var nextProbe: NIODeadline?
    let probeInterval: TimeAmount

    init(probeInterval: TimeAmount) {
        self.probeInterval = probeInterval
    }

    enum Decision: Equatable {
        /// Go on as usual: write, or wait for the connection under way.
        case proceed
        /// Fail at once with this reason; when `probe`, try one connection too.
        case failAtOnce(reason: String, probe: Bool)
    }

    /// The client gave up on the gateway at `now`: the next connection is tried for a caller a ``probeInterval`` on.
    mutating func gaveUp(_ problem: String, now: NIODeadline) {
        self.problem = problem
        nextProbe = now + probeInterval
    }

    /// A connection tried while unreachable ended without working: keep the newer problem.
    mutating func stillUnreachable(_ problem: String?) {
        guard self.problem != nil, let problem else { return }
        self.problem = problem
    }

    /// A connection completed its handshake: the gateway can be reached.
    mutating func reached() {
        problem = nil
        nextProbe = nil
    }

    /// What to do for a caller that needs the gateway at `now`. `canConnect` says whether a connection could be
    /// tried now (none is open or under way); the probe's turn is used only then.
    mutating func admit(now: NIODeadline, canConnect: Bool) -> Decision {
        guard let problem else { return .proceed }
        let due = nextProbe.map { now >= $0 } ?? true
        guard due, canConnect else { return .failAtOnce(reason: message(problem), probe: false) }
        nextProbe = now + probeInterval
        return .failAtOnce(reason: message(problem), probe: true)
    }

    private func message(_ problem: String) -> String {
        "not sent: the gateway is unreachable (\(problem)); one connection is tried every \(Duration.nanoseconds(probeInterval.nanoseconds)) until one works"
    }
}
