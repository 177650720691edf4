import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernStore

/// The wall clock of a node that shares its database with others: its own clock, set by how far it is from the
/// database server's.
///
/// The nodes of one PostgreSQL database compare the dates they store with each other's: a chunk's lease runs out by
/// the clock of the node that looks at it, and so do inbox expiry and the online channel's acknowledgement deadlines
/// (the periodic jobs take turns by advisory locks, with no clock). A node whose clock ran ahead of another's by more
/// than a lease's margin (ten seconds, with the default 15 s lease renewed every 5 s) took over the chunks that node
/// was still sending, and their devices got the push twice. Read through this clock, every node dates by the
/// database's time, give or take a few milliseconds, whatever its own clock says. (On SQLite the database is a file
/// of this node's, and its time is the node's: the clock is the node's own.)
final class DatabaseAlignedClock: WallClock {
    private let base: any WallClock
    /// What is added to `base`, in microseconds.
    private let offset = Atomic<Int64>(0)

    init(base: any WallClock) {
        self.base = base
    }

    var now: Date { base.now.addingTimeInterval(offsetSeconds) }

    /// The node's own time, to time a question to the database by.
    var nodeTime: Date { base.now }

    var offsetSeconds: TimeInterval { Double(offset.load(ordering: .relaxed)) / 1_000_000 }

    func set(offset seconds: TimeInterval) {
        offset.store(Int64((seconds * 1_000_000).rounded()), ordering: .relaxed)
    }
}

/// How far a node's clock is from the database's, worked out from a few timed questions, and when to say so.
///
/// A question asked at `asked` and answered at `answered` (the node's time) got the database's time somewhere in
/// between: taken as the midpoint, it is off by at most half the round trip. Of a round's answers, the one with the
/// shortest round trip counts; answers slower than ``maximumRoundTrip`` say too little and are left out.
struct ClockOffset: Sendable, Equatable {
    struct Sample: Sendable, Equatable {
        /// The node's time when it asked, and when it had the answer.
        var asked: Date
        var answered: Date
        /// What the database said.
        var database: Date

        var roundTrip: TimeInterval { answered.timeIntervalSince(asked) }
        /// Database time minus node time.
        var offset: TimeInterval { database.timeIntervalSince(asked) - roundTrip / 2 }
    }

    /// What the node should say about its clock.
    enum Report: Sendable, Equatable {
        case none
        /// The node's clock is off by more than ``tolerance`` (the database's time minus the node's), first or by
        /// another second.
        case off(by: TimeInterval)
        /// It was off, and is within half the tolerance again.
        case inStep(by: TimeInterval)
    }

    /// An answer slower than this says too little about when the database read its clock.
    static let maximumRoundTrip: TimeInterval = 0.5
    /// A node whose clock is this far off says so (dates are the database's either way).
    static let tolerance: TimeInterval = 1

    /// How far a node's clock may move against the steady clock between two looks before it counts as stepped
    /// (set by NTP, or after the machine was suspended): far beyond what NTP's slewing does, 0.5 ms a second at most.
    static let stepTolerance: TimeInterval = 0.5

    /// Whether the node's clock was stepped between two looks: it moved `node` seconds while the steady clock moved
    /// `steady`.
    static func stepped(node: TimeInterval, steady: Duration) -> Bool {
        abs(node - Double(steady.components.seconds) - Double(steady.components.attoseconds) / 1e18) > stepTolerance
    }

    /// The offset in force: nil until a round had an answer that counts.
    private(set) var current: TimeInterval?
    /// The offset last reported as off; nil while in step.
    private var reported: TimeInterval?

    /// Takes a round of answers. - Returns: what to log. The offset stays as it was when no answer counts.
    mutating func update(with samples: [Sample]) -> Report {
        let usable = samples.filter { (0...Self.maximumRoundTrip).contains($0.roundTrip) }
        guard let best = usable.min(by: { $0.roundTrip < $1.roundTrip }) else { return .none }
        current = best.offset
        if abs(best.offset) >= Self.tolerance {
            if let reported, abs(best.offset - reported) < Self.tolerance { return .none }
            reported = best.offset
            return .off(by: best.offset)
        }
        if reported != nil, abs(best.offset) < Self.tolerance / 2 {
            reported = nil
            return .inStep(by: best.offset)
        }
        return .none
    }
}

/// Keeps a ``DatabaseAlignedClock`` set: a round of questions at the start, before anything is dated, one every
/// ``interval`` after (a node's clock drifts), and one as soon as the node's clock is seen stepped (by NTP, or after
/// the machine was suspended), which it looks for every ``stepCheckInterval``.
final class DatabaseClockAlignment: Service {
    /// Questions a round.
    static let questions = 5
    static let interval = Duration.seconds(60)
    static let stepCheckInterval = Duration.seconds(1)

    let clock: DatabaseAlignedClock
    private let store: any TernStore
    private let timer: any Clock<Duration>
    private let logger: Logger
    private let offset = Mutex(ClockOffset())
    /// The node's clock and the steady clock at the last round's end (or the last look for a step since).
    private let lastLook: Mutex<(node: Date, steady: ContinuousClock.Instant)>

    private init(clock: DatabaseAlignedClock, store: any TernStore, timer: any Clock<Duration>, logger: Logger) {
        self.clock = clock
        self.store = store
        self.timer = timer
        self.logger = logger
        lastLook = Mutex((clock.nodeTime, ContinuousClock.now))
    }

    /// The clocks a node dates by, on `store`: `clocks` themselves when the database's time is the node's (SQLite),
    /// else a clock set by the database's (first set here) and the service that keeps it set.
    static func start(store: any TernStore, clocks: ServerClocks, logger: Logger) async -> (clocks: ServerClocks, service: DatabaseClockAlignment?) {
        do {
            guard try await store.databaseTime() != nil else { return (clocks, nil) }
        } catch {
            // It answered migrations a moment ago: say so, and date by the node's clock until the next round.
            logger.warning("cannot read the database's time; dates follow this node's clock until it can", metadata: ["reason": "\(error)"])
        }
        let alignment = DatabaseClockAlignment(
            clock: DatabaseAlignedClock(base: clocks.wall), store: store, timer: clocks.timer, logger: logger)
        await alignment.align()
        var aligned = clocks
        aligned.wall = alignment.clock
        return (aligned, alignment)
    }

    /// One round: asks the database its time ``questions`` times and sets the clock by the best answer.
    func align() async {
        var samples: [ClockOffset.Sample] = []
        for _ in 0..<Self.questions {
            let asked = clock.nodeTime
            guard let database = try? await store.databaseTime() else { continue }
            samples.append(.init(asked: asked, answered: clock.nodeTime, database: database))
        }
        let (report, current) = offset.withLock { offset in (offset.update(with: samples), offset.current) }
        if let current { clock.set(offset: current) }
        lastLook.withLock { $0 = (clock.nodeTime, ContinuousClock.now) }
        switch report {
        case .none:
            break
        case .off(let seconds):
            logger.warning(
                "this node's clock is \(Self.describe(seconds)) the database's; it dates what it stores by the database's clock (check the node's time synchronisation)")
        case .inStep(let seconds):
            logger.notice(
                "this node's clock is in step with the database's again", metadata: ["offset": "\(String(format: "%+.3f s", seconds))"])
        }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var sinceRound = Duration.zero
            while true {
                do { try await self.timer.sleep(for: Self.stepCheckInterval) } catch { return }
                sinceRound += Self.stepCheckInterval
                // Against real elapsed time (the system's steady clock, not the injected timer, which a test may
                // move by hand): that is what a node's wall clock keeps pace with unless it is stepped.
                let now = (node: self.clock.nodeTime, steady: ContinuousClock.now)
                let last = self.lastLook.withLock { last in
                    defer { last = now }
                    return last
                }
                let stepped = ClockOffset.stepped(node: now.node.timeIntervalSince(last.node), steady: now.steady - last.steady)
                guard stepped || sinceRound >= Self.interval else { continue }
                if stepped { self.logger.debug("this node's clock was stepped; asking the database's time again") }
                sinceRound = .zero
                await self.align()
            }
        }
    }

    /// "12.3 s behind", "2.0 s ahead of": how the node's clock stands against the database's.
    static func describe(_ offset: TimeInterval) -> String {
        let seconds = String(format: "%.1f s", abs(offset))
        return offset > 0 ? "\(seconds) behind" : "\(seconds) ahead of"
    }
}
