import Foundation
import Prometheus
import ServiceLifecycle
import Synchronization
import TernAPNs

/// This node's activity over the last hour, for the console's overview: notifications, pushes and opens per minute,
/// APNs' answers by reason, and connections now.
///
/// The figures are the counters `/metrics` shows (the process's swift-metrics registry), read every few seconds; the
/// difference between two readings is added to the minute it falls in. Sixty minutes are kept, so memory is bounded
/// whatever the traffic; a node's figures are its own (each node of a cluster shows what it sent).
final class ConsoleActivity: Service, Sendable {
    /// One minute's counts.
    struct Minute: Sendable, Equatable {
        /// Minutes since 1970: which minute this is.
        var minute: Int64
        var accepted = 0
        var failed = 0
        var pushesCompleted = 0
        /// Notifications the devices' apps reported opened: pushes through APNs and device messages.
        var opens = 0
        /// APNs' answers: `accepted` and each rejection's reason.
        var answers: [String: Int] = [:]
    }

    /// The series read from the registry.
    enum Series {
        static let accepted = #"tern_push_recipients_total{outcome="accepted"}"#
        static let failed = #"tern_push_recipients_total{outcome="failed"}"#
        static let pushesCompleted = "tern_pushes_completed_total"
        static let pushOpens = "tern_push_opens_total"
        static let messageOpens = "tern_channel_opens_total"
        static let apnsAccepted = "tern_apns_accepted_total"
        static let apnsRejectedPrefix = "tern_apns_rejected_total{reason=\""
        static let apnsConnections = "tern_apns_connections"
    }

    static let keptMinutes = 60

    private let registry: PrometheusCollectorRegistry?
    private let clocks: ServerClocks
    private let interval: Duration
    private let state = Mutex<(last: [String: Double]?, minutes: [Minute], apnsConnections: Int)>((nil, [], 0))

    init(registry: PrometheusCollectorRegistry?, clocks: ServerClocks, interval: Duration = .seconds(5)) {
        self.registry = registry
        self.clocks = clocks
        self.interval = interval
    }

    func run() async throws {
        // Readings until the shutdown; a reading is a walk over the registry, a few hundred lines.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            sample()
            try? await cancelWhenGracefulShutdown { [interval, timer = clocks.timer] in try await timer.sleep(for: interval) }
        }
    }

    /// Reads the registry now and adds what changed since the last reading to the current minute. The reading is
    /// taken under the table's lock, so two readings at once (a sample and an overview's request) are recorded in
    /// the order they were read and nothing is counted twice.
    func sample() {
        guard let registry else { return }
        let now = clocks.wall.now
        state.withLock { state in Self.record(Self.parse(registry.emitToString()), at: now, into: &state) }
    }

    /// Adds the difference between `totals` and the previous reading to the minute of `now`. (The first reading only
    /// sets where counting starts.)
    func record(_ totals: [String: Double], at now: Date) {
        state.withLock { state in Self.record(totals, at: now, into: &state) }
    }

    private static func record(
        _ totals: [String: Double], at now: Date, into state: inout (last: [String: Double]?, minutes: [Minute], apnsConnections: Int)
    ) {
        let minute = Int64((now.timeIntervalSince1970 / 60).rounded(.down))
        defer { state.last = totals }
        state.apnsConnections = Int(totals[Series.apnsConnections] ?? 0)
        guard let last = state.last else { return }
        func delta(_ series: String) -> Int { max(0, Int((totals[series] ?? 0) - (last[series] ?? 0))) }
        if state.minutes.last?.minute != minute { state.minutes.append(Minute(minute: minute)) }
        var current = state.minutes.removeLast()
        current.accepted += delta(Series.accepted)
        current.failed += delta(Series.failed)
        current.pushesCompleted += delta(Series.pushesCompleted)
        current.opens += delta(Series.pushOpens) + delta(Series.messageOpens)
        current.answers["accepted", default: 0] += delta(Series.apnsAccepted)
        for series in totals.keys where series.hasPrefix(Series.apnsRejectedPrefix) {
            let reason = String(series.dropFirst(Series.apnsRejectedPrefix.count).dropLast(2))
            current.answers[reason, default: 0] += delta(series)
        }
        current.answers = current.answers.filter { $0.value > 0 }
        state.minutes.append(current)
        state.minutes.removeAll { $0.minute <= minute - Int64(keptMinutes) }
    }

    /// The last hour, one entry per minute (the oldest first; minutes without a reading count zero), and the APNs
    /// connections open at the last reading.
    func lastHour(now: Date) -> (minutes: [Minute], apnsConnections: Int) {
        let current = Int64((now.timeIntervalSince1970 / 60).rounded(.down))
        return state.withLock { state in
            let byMinute = Dictionary(state.minutes.map { ($0.minute, $0) }, uniquingKeysWith: { $1 })
            let minutes = (current - Int64(Self.keptMinutes) + 1...current).map { byMinute[$0] ?? Minute(minute: $0) }
            return (minutes, state.apnsConnections)
        }
    }

    /// The samples of Prometheus' text format: `name{labels} value` by `name{labels}`; comments and anything
    /// unreadable are skipped.
    static func parse(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return values
    }
}
