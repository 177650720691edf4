import Logging
import Synchronization
import Testing

@testable import TernServer

/// When a run of failures is logged: decided as a value on given instants, then through a real logger.
struct FailureLogTests {
    @Test func aRunIsSaidWhenItStartsOnceAMinuteWhileItLastsAndWhenItEnds() {
        let start = ContinuousClock.now
        var run = FailureRun()
        #expect(run.succeeded(at: start) == .nothing, "no run, nothing to say")
        #expect(run.failed(at: start) == .started)
        for second in 1...59 { #expect(run.failed(at: start + .seconds(second)) == .nothing) }
        #expect(run.failed(at: start + .seconds(60)) == .stillFailing(count: 60))
        #expect(run.failed(at: start + .seconds(61)) == .nothing)
        // A success within five seconds of the last failure does not end the run; the first after them does.
        #expect(run.succeeded(at: start + .seconds(65)) == .nothing)
        #expect(run.succeeded(at: start + .seconds(66)) == .recovered(count: 62))
        #expect(run.succeeded(at: start + .seconds(67)) == .nothing)
        // The next run starts afresh.
        #expect(run.failed(at: start + .seconds(68)) == .started)
    }

    @Test func successesBetweenFailuresDoNotEndTheRun() {
        // Writes fail (a full disk) while reads succeed: one line when it starts, one a minute, not two per failure.
        let start = ContinuousClock.now
        var run = FailureRun()
        var said: [FailureRun.Say] = []
        for tenth in 0..<1_200 {
            let now = start + .milliseconds(100 * tenth)
            if tenth.isMultiple(of: 2) {
                said.append(run.failed(at: now))
            } else {
                said.append(run.succeeded(at: now))
            }
        }
        #expect(said.filter { $0 != .nothing } == [.started, .stillFailing(count: 300)])
        #expect(run.succeeded(at: start + .seconds(125)) == .recovered(count: 600))
    }

    @Test func aThousandFailuresInARowAreTwoLines() {
        let lines = LineCounter()
        let logger = Logger(label: "test") { _ in lines }
        let clock = Mutex(ContinuousClock.now)
        let log = FailureLog("request failed", logger: logger, now: { clock.withLock { $0 } })
        for _ in 0..<1_000 { log.failed(["error": "the database is away"]) }
        log.succeeded()
        clock.withLock { $0 += .seconds(5) }
        log.succeeded()
        log.succeeded()
        #expect(lines.messages == ["error request failed", "info request failed: working again after 1000 failure(s)"])
    }
}

/// A log handler that keeps each line's level and message.
private struct LineCounter: LogHandler {
    private let box: Box
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    private final class Box: Sendable {
        let lines = Mutex<[String]>([])
    }

    init() { box = Box() }

    var messages: [String] { box.lines.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        box.lines.withLock { $0.append("\(event.level) \(event.message)") }
    }
}
