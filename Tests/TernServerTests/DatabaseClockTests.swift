import Foundation
import Logging
import Synchronization
import TernAPNs
import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// How a node works out its clock's offset from the database's, as values; and the clock that applies it.
@Suite("Database clock")
struct DatabaseClockTests {
    let start = Date(timeIntervalSince1970: 1_700_000_000)

    /// A question asked at `asked` (seconds after `start`, the node's time) and answered `roundTrip` later, the database
    /// reading its clock at the midpoint, `offset` away from the node's.
    func sample(asked: TimeInterval, roundTrip: TimeInterval, offset: TimeInterval, readAt: Double = 0.5) -> ClockOffset.Sample {
        .init(
            asked: start + asked, answered: start + asked + roundTrip,
            database: start + asked + roundTrip * readAt + offset)
    }

    /// The same report, give or take a microsecond (dates are doubles).
    static func same(_ report: ClockOffset.Report, _ expected: ClockOffset.Report) -> Bool {
        switch (report, expected) {
        case (.off(let a), .off(let b)), (.inStep(let a), .inStep(let b)): abs(a - b) < 0.000_001
        default: report == expected
        }
    }

    @Test("the offset is the database's time at the midpoint of the quickest answer, minus the node's")
    func quickestAnswerCounts() {
        var offset = ClockOffset()
        // The slow answer was read late in its round trip: taken at its midpoint, it is 40 ms off.
        let samples = [
            sample(asked: 0, roundTrip: 0.100, offset: -60, readAt: 0.9),
            sample(asked: 1, roundTrip: 0.002, offset: -60),
            sample(asked: 2, roundTrip: 0.050, offset: -60, readAt: 0.1),
        ]
        #expect(Self.same(offset.update(with: samples), .off(by: -60)))
        #expect(abs(offset.current! - -60) < 0.000_001)
    }

    @Test("answers slower than half a second, or none, leave the offset as it was")
    func slowAnswersSayNothing() {
        var offset = ClockOffset()
        #expect(offset.update(with: [sample(asked: 0, roundTrip: 0.6, offset: 30)]) == .none)
        #expect(offset.current == nil)
        _ = offset.update(with: [sample(asked: 0, roundTrip: 0.01, offset: 0.2)])
        #expect(offset.update(with: []) == .none)
        #expect(abs(offset.current! - 0.2) < 0.000_001)
    }

    @Test("a clock a second or more off is reported once, again when it moves by another second, and once when it is back in step")
    func reports() {
        var offset = ClockOffset()
        #expect(offset.update(with: [sample(asked: 0, roundTrip: 0.01, offset: 0.3)]) == .none)
        #expect(Self.same(offset.update(with: [sample(asked: 60, roundTrip: 0.01, offset: 12)]), .off(by: 12)))
        #expect(offset.update(with: [sample(asked: 120, roundTrip: 0.01, offset: 12.5)]) == .none)
        #expect(Self.same(offset.update(with: [sample(asked: 180, roundTrip: 0.01, offset: 13.2)]), .off(by: 13.2)))
        // Under the tolerance but not by half: still reported as off, nothing new to say.
        #expect(offset.update(with: [sample(asked: 240, roundTrip: 0.01, offset: 0.7)]) == .none)
        #expect(Self.same(offset.update(with: [sample(asked: 300, roundTrip: 0.01, offset: 0.1)]), .inStep(by: 0.1)))
        #expect(offset.update(with: [sample(asked: 360, roundTrip: 0.01, offset: 0.1)]) == .none)
        #expect(Self.same(offset.update(with: [sample(asked: 420, roundTrip: 0.01, offset: -2)]), .off(by: -2)))
    }

    @Test("the aligned clock is its base plus the offset set last")
    func alignedClock() {
        let base = ManualWallClock(start)
        let clock = DatabaseAlignedClock(base: base)
        #expect(clock.now == start)
        clock.set(offset: -60.25)
        #expect(clock.now == start - 60.25)
        #expect(clock.nodeTime == start)
        base.advance(by: 10)
        #expect(clock.now == start - 50.25)
    }

    @Test("a node's clock that moves half a second more or less than the steady clock between two looks was stepped; NTP's slewing is not a step")
    func steps() {
        #expect(!ClockOffset.stepped(node: 1.0005, steady: .seconds(1)))
        #expect(!ClockOffset.stepped(node: 1.4, steady: .seconds(1)))
        #expect(ClockOffset.stepped(node: 61, steady: .seconds(1)))
        #expect(ClockOffset.stepped(node: -3, steady: .milliseconds(1_002)))
        #expect(!ClockOffset.stepped(node: 5, steady: .milliseconds(5_300)))
    }

    @Test("on PostgreSQL a node dates by the database's time, and follows within seconds when its own clock is stepped",
          .enabled(if: PostgresTestServer.url != nil))
    func followsTheDatabase() async throws {
        try await PostgresTestServer.withDatabase { url in
            let store = try await SQLStore.openPostgres(url: url, logger: Logger(label: "test"))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { await store.run() }
                defer { tasks.cancelAll() }
                let base = SteppedClock(ahead: 90)
                let (clocks, alignment) = await DatabaseClockAlignment.start(
                    store: store, clocks: ServerClocks(wall: base), logger: Logger(label: "test"))
                let service = try #require(alignment)
                // How far the node's dates are from the database's now, in seconds.
                let off = { () async throws -> TimeInterval in
                    let database = try #require(try await store.databaseTime())
                    return clocks.wall.now.timeIntervalSince(database)
                }
                #expect(abs(try await off()) < 0.5, "dates by the database's time from the start")

                tasks.addTask { try await service.run() }
                base.step(to: -45)
                try await waitUntil("the node's dates to follow the step", within: 10) { abs(try await off()) < 0.5 }
            }
            try await store.close()
        }
    }

    @Test("how a node's clock stands is said in words")
    func description() {
        #expect(DatabaseClockAlignment.describe(12.34) == "12.3 s behind")
        #expect(DatabaseClockAlignment.describe(-2) == "2.0 s ahead of")
    }
}

/// The system's time, some seconds off, by as much as the test says.
private final class SteppedClock: WallClock {
    private let seconds: Mutex<TimeInterval>
    init(ahead seconds: TimeInterval) { self.seconds = Mutex(seconds) }
    var now: Date { Date().addingTimeInterval(seconds.withLock { $0 }) }
    func step(to seconds: TimeInterval) { self.seconds.withLock { $0 = seconds } }
}
