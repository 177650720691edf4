import ArgumentParser
import Foundation
import Logging
import Metrics
import Synchronization
import TernAPNs
import TernAPNsClient
import TernSimulator

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the APNs client: send N notifications to a simulator over real TLS and report the rate.",
        discussion: """
            By default it starts an APNs simulator in this process (production \
            environment, a demo token key made in memory, a free port on 127.0.0.1) \
            and sends it N alert notifications, each to its own device token, \
            through Tern's APNs client: `sendAll` over a lazy sequence, over \
            --connections HTTP/2 connections with at most --concurrency sends in \
            flight (default 100 per connection, the streams h2load -m 100 keeps \
            open, so the two rates compare). With --host/--port/--ca-file/--key-file/--key-id/--team-id it \
            sends to a simulator running elsewhere (`tern simulator`) instead, so \
            the client has the process to itself.

            While it runs it prints progress to stderr about once a second. At the \
            end it prints:
              throughput  notifications per second, start to last answer
              latency     p50, p99, p99.9 and max of each send (the time spent in
                          `client.send`), from a fixed log-linear histogram
                          (buckets at most 1/64 of their value wide)
              peak RSS    VmHWM of this process (client plus the in-process
                          simulator, if any)
              result      delivered, rejected, errors and retries
            The exit status is 0 only if every notification was delivered.

            Examples:
              tern bench                      # 1,000,000 notifications, 4 connections
              tern bench -n 100000 --connections 1
              tern bench --host 127.0.0.1 --port 2197 \\
                --ca-file .tern/simulator/ca.pem \\
                --key-file .tern/simulator/SIMKEY0001.p8 \\
                --key-id SIMKEY0001 --team-id SIMTEAM001
            """
    )

    @Option(name: [.customShort("n"), .customLong("count")], help: "Notifications to send.")
    var count = 1_000_000

    @Option(name: .long, help: "HTTP/2 connections the client opens (1…64).")
    var connections = 4

    @Option(name: .long, help: "Sends in flight at once (default: 100 per connection).")
    var concurrency: Int?

    private var inFlight: Int { concurrency ?? 100 * connections }

    @Option(name: .long, help: "apns-topic of every notification.")
    var topic = "com.example.app"

    @Option(name: .long, help: "A running simulator's host (default: start one in this process).")
    var host: String?

    @Option(name: .long, help: "Its HTTP/2 port.")
    var port: Int?

    @Option(name: .long, help: ArgumentHelp("Its CA certificate (PEM), e.g. .tern/simulator/ca.pem.", valueName: "pem"))
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("A token key it trusts (.p8), e.g. .tern/simulator/SIMKEY0001.p8.", valueName: "file"))
    var keyFile: String?

    @Option(name: .long, help: "The key's id.")
    var keyID: String?

    @Option(name: .long, help: "The key's team id.")
    var teamID: String?

    @Option(name: .long, help: "Log level (trace … critical).")
    var logLevel = Logger.Level.error

    @Flag(name: .long, help: "Measure the legacy binary gateway client instead (in-process simulator only; one gateway connection per --connections).")
    var legacy = false

    @Option(name: .long, help: ArgumentHelp("With --legacy: frame (command 2), enhanced (1) or simple (0).", valueName: "format"))
    var legacyFormat = "frame"

    func validate() throws {
        guard count >= 1 else { throw ValidationError("-n/--count must be 1 or more") }
        if legacy {
            guard host == nil else { throw ValidationError("--legacy measures against the in-process simulator; --host goes without it") }
            guard concurrency == nil else { throw ValidationError("--concurrency goes without --legacy (the binary protocol has no streams)") }
            guard LegacyCommand(name: legacyFormat) != nil else {
                throw ValidationError("--legacy-format must be frame, enhanced or simple, not '\(legacyFormat)'")
            }
        } else if legacyFormat != "frame" {
            throw ValidationError("--legacy-format goes with --legacy")
        }
        guard (1...64).contains(connections) else { throw ValidationError("--connections must be 1…64") }
        if let concurrency, !(1...1_000_000).contains(concurrency) {
            throw ValidationError("--concurrency must be 1…1000000")
        }
        if host == nil {
            for (option, value) in [("--port", port as Any?), ("--ca-file", caFile), ("--key-file", keyFile), ("--key-id", keyID), ("--team-id", teamID)]
            where value != nil {
                throw ValidationError("\(option) goes with --host (without --host the simulator runs in this process)")
            }
        } else {
            for (option, value) in [("--port", port as Any?), ("--key-file", keyFile), ("--key-id", keyID), ("--team-id", teamID)]
            where value == nil {
                throw ValidationError("\(option) is needed with --host")
            }
            if let port, !(1...65_535).contains(port) { throw ValidationError("--port must be 1…65535") }
        }
    }

    func run() async throws {
        // The payload of scripts/bench-simulator.sh, so rates compare with h2load's.
        let payload = APNsPayload(alert: APNsAlert(title: "Tern", body: "Benchmark notification"), badge: 1)
        let sample = try APNsNotification(
            deviceToken: BenchNotifications.token(0), metadata: APNsRequestMetadata(topic: topic), payload: payload)

        var key: APNsSigningKey?
        var trustRoots: String?
        if host != nil {
            do {
                key = try loadSigningKey(file: keyFile!, keyID: keyID!, teamID: teamID!)
            } catch {
                throw ValidationError(error.description)
            }
            trustRoots = try caFile.map { try readTextFile($0, option: "--ca-file") }
        }

        bootstrapLogging(logLevel)
        let stats = BenchStats()
        // The client reports each send's duration to swift-metrics; the bench keeps it in its histogram.
        MetricsSystem.bootstrap(BenchMetricsFactory(stats: stats))

        let summary: String
        if legacy, let format = LegacyCommand(name: legacyFormat) {
            summary = try await measureLegacy(format: format, payload: sample.payload, stats: stats)
        } else if let host, let port, let key {
            let endpoint = APNsClientConfiguration.Endpoint(host: host, port: port, trustRootsPEM: trustRoots)
            summary = try await measure(
                endpoint: endpoint, key: key, payload: sample.payload, stats: stats, target: "simulator at \(host):\(port)")
        } else {
            let demoKey = APNsSigningKey.generate(keyID: "SIMKEY0001", teamID: "SIMTEAM001")
            var configuration = try APNsSimulator.Configuration()
            configuration.port = 0
            configuration.controlPort = nil
            configuration.environment = .production
            configuration.logCapacity = 10_000
            configuration.tokenKeys = [ProviderTokenKey(keyID: demoKey.keyID, teamID: demoKey.teamID, publicKey: demoKey.publicKey)]
            summary = try await APNsSimulator.withRunning(configuration, logger: Logger(label: "tern.simulator")) { simulator in
                let endpoint = APNsClientConfiguration.Endpoint(
                    host: "127.0.0.1", port: simulator.port, trustRootsPEM: simulator.certificateAuthority.certificatePEM)
                return try await measure(
                    endpoint: endpoint, key: demoKey, payload: sample.payload, stats: stats,
                    target: "in-process simulator (production) on 127.0.0.1:\(simulator.port)")
            }
        }
        print(summary)
        let final = stats.snapshot()
        if final.delivered != count || final.rejected != 0 || final.errors != 0 {
            throw ExitCode(1)
        }
    }

    private func measure(
        endpoint: APNsClientConfiguration.Endpoint, key: APNsSigningKey, payload: [UInt8], stats: BenchStats, target: String
    ) async throws -> String {
        var configuration = APNsClientConfiguration(authentication: .token(key), endpoint: endpoint)
        configuration.connections = connections
        let count = self.count
        let sequence = BenchNotifications(count: count, topic: topic, payload: payload)

        let started = ContinuousClock.now
        let progress = Task {
            var last = (done: 0, at: ContinuousClock.now)
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                if Task.isCancelled { break }
                let done = stats.snapshot().completed
                let now = ContinuousClock.now
                let rate = Double(done - last.done) / (now - last.at).seconds
                printError("sent \(grouped(done)) / \(grouped(count))  \(grouped(Int(rate)))/s")
                last = (done, now)
            }
        }
        try await APNsClient.withClient(configuration, logger: Logger(label: "tern.bench")) { client in
            try await client.sendAll(sequence, concurrency: inFlight) { result in
                stats.record(result)
            }
        }
        let elapsed = (ContinuousClock.now - started).seconds
        progress.cancel()
        _ = await progress.value

        let final = stats.snapshot()
        let histogram = stats.histogram()
        func ms(_ nanoseconds: UInt64) -> String { String(format: "%.2f ms", Double(nanoseconds) / 1e6) }
        var lines = [
            "tern bench: \(grouped(count)) notifications, \(connections) connection(s), \(grouped(inFlight)) in flight, "
                + "\(payload.count)-byte payload, \(target), TLS",
            "throughput  \(grouped(Int((Double(final.completed) / elapsed).rounded()))) notifications/s  "
                + "(\(grouped(final.completed)) in \(String(format: "%.2f", elapsed)) s)",
        ]
        if histogram.total > 0 {
            lines.append(
                "latency     p50 \(ms(histogram.value(at: 0.5)))  p99 \(ms(histogram.value(at: 0.99)))  "
                    + "p99.9 \(ms(histogram.value(at: 0.999)))  max \(ms(histogram.max))")
        } else {
            lines.append("latency     not recorded (the client reported no send durations)")
        }
        let rss = peakRSSBytes().map { String(format: "%.1f MiB", Double($0) / 1_048_576) } ?? "unknown"
        lines.append("peak RSS    \(rss)" + (host == nil ? "  (client and in-process simulator)" : ""))
        lines.append(
            "result      delivered \(grouped(final.delivered))  rejected \(grouped(final.rejected))  errors \(grouped(final.errors))"
                + "  retries \(grouped(final.retries))")
        for (problem, times) in final.problems.sorted(by: { $0.value > $1.value }).prefix(5) {
            lines.append("  \(grouped(times)) × \(problem)")
        }
        if final.completed != count {
            lines.append("  \(grouped(count - final.completed)) notification(s) never finished")
        }
        return lines.joined(separator: "\n")
    }
}

// MARK: The notifications

/// `count` alert notifications made on demand, each to its own device token (the index, as 32 bytes of hex) and with
/// its own `apns-id` (also from the index, so no random source is read per notification). The payload bytes are
/// shared.
struct BenchNotifications: AsyncSequence {
    typealias Element = APNsNotification
    let count: Int
    let topic: String
    let payload: [UInt8]

    struct AsyncIterator: AsyncIteratorProtocol {
        let sequence: BenchNotifications
        var index = 0

        mutating func next() async -> APNsNotification? {
            guard index < sequence.count else { return nil }
            defer { index += 1 }
            let metadata = APNsRequestMetadata(topic: sequence.topic, pushType: .alert, apnsID: BenchNotifications.apnsID(index))
            return APNsNotification(unchecked: BenchNotifications.token(index), metadata: metadata, payload: sequence.payload)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(sequence: self) }

    static func token(_ index: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0, count: 32)
        var value = UInt64(index)
        for position in (24..<32).reversed() {
            bytes[position] = UInt8(value & 0xff)
            value >>= 8
        }
        return try! DeviceToken(bytes: bytes)
    }

    /// A version-4-shaped UUID whose last 6 bytes are the index.
    static func apnsID(_ index: Int) -> UUID {
        let i = UInt64(index)
        func byte(_ shift: UInt64) -> UInt8 { UInt8((i >> shift) & 0xff) }
        return UUID(uuid: (0x7e, 0x72, 0x6e, 0xbe, 0x6e, 0x0c, 0x40, 0x00, 0x80, 0x00, byte(40), byte(32), byte(24), byte(16), byte(8), byte(0)))
    }
}

// MARK: Results

/// Counts and the latency histogram, shared by every send's completion.
final class BenchStats: Sendable {
    struct Snapshot {
        var delivered = 0
        var rejected = 0
        var errors = 0
        var retries = 0
        /// Rejection reasons and error codes, with how often each happened.
        var problems: [String: Int] = [:]
        var completed: Int { delivered + rejected + errors }
    }

    private let counts = Mutex(Snapshot())
    private let latencies = Mutex(LatencyHistogram())

    func record(_ result: APNsBatchResult) {
        counts.withLock { counts in
            switch result.result {
            case .success(let delivery) where delivery.isDelivered:
                counts.delivered += 1
            case .success(let delivery):
                counts.rejected += 1
                counts.problems["\(delivery.response.status) \(delivery.response.reason?.rawValue ?? "")", default: 0] += 1
            case .failure(let error):
                counts.errors += 1
                if counts.problems.count < 100 { counts.problems["\(error)", default: 0] += 1 }
            }
        }
    }

    func recordLatency(nanoseconds: Int64) {
        latencies.withLock { $0.record(UInt64(max(0, nanoseconds))) }
    }

    func recordRetry(_ amount: Int64) {
        counts.withLock { $0.retries += Int(amount) }
    }

    func snapshot() -> Snapshot { counts.withLock { $0 } }
    func histogram() -> LatencyHistogram { latencies.withLock { $0 } }
}

/// A fixed-size log-linear histogram (HdrHistogram's layout with 64 sub-buckets per power of two): values below 128
/// are exact, larger ones fall in buckets at most 1/64 of their value wide. About 30 KB for the whole UInt64 range.
struct LatencyHistogram {
    private var counts = [UInt64](repeating: 0, count: 128 + 64 * 57)
    private(set) var total: UInt64 = 0
    private(set) var max: UInt64 = 0

    mutating func record(_ value: UInt64) {
        counts[Self.index(value)] += 1
        total += 1
        if value > max { max = value }
    }

    /// The smallest value v such that a fraction `quantile` of the samples are at most v (the bucket's upper
    /// end, never above the largest sample).
    func value(at quantile: Double) -> UInt64 {
        guard total > 0 else { return 0 }
        let rank = Swift.max(1, UInt64((quantile * Double(total)).rounded(.up)))
        var seen: UInt64 = 0
        for (index, count) in counts.enumerated() where count > 0 {
            seen += count
            if seen >= rank { return Swift.min(Self.upperBound(index), max) }
        }
        return max
    }

    static func index(_ value: UInt64) -> Int {
        if value < 128 { return Int(value) }
        let shift = (63 - value.leadingZeroBitCount) - 6  // value >> shift is in 64..<128
        return 128 + (shift - 1) * 64 + Int(value >> UInt64(shift)) - 64
    }

    static func upperBound(_ index: Int) -> UInt64 {
        if index < 128 { return UInt64(index) }
        let shift = (index - 128) / 64 + 1
        let sub = UInt64((index - 128) % 64 + 64)
        return ((sub + 1) << UInt64(shift)) - 1
    }
}

/// Sends the client's `tern_apns_send_duration_seconds` timer (each `send`, start to answer) and retry counter to
/// ``BenchStats``; every other metric goes nowhere.
struct BenchMetricsFactory: MetricsFactory {
    let stats: BenchStats

    final class Durations: TimerHandler {
        let stats: BenchStats
        init(stats: BenchStats) { self.stats = stats }
        func recordNanoseconds(_ duration: Int64) { stats.recordLatency(nanoseconds: duration) }
    }

    final class Retries: CounterHandler {
        let stats: BenchStats
        init(stats: BenchStats) { self.stats = stats }
        func increment(by amount: Int64) { stats.recordRetry(amount) }
        func reset() {}
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        label == "tern_apns_retries_total" ? Retries(stats: stats) : NOOPMetricsHandler.instance
    }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        NOOPMetricsHandler.instance
    }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { NOOPMetricsHandler.instance }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        label == "tern_apns_send_duration_seconds" ? Durations(stats: stats) : NOOPMetricsHandler.instance
    }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

// MARK: Helpers

/// 1234567 → "1,234,567".
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var out = ""
    for (offset, character) in digits.enumerated() {
        if offset > 0, (digits.count - offset) % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return value < 0 ? "-" + out : out
}

/// The process's peak resident set size: VmHWM on Linux, ru_maxrss elsewhere.
func peakRSSBytes() -> Int? {
    #if os(Linux)
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
        let kilobytes = Int(line.dropFirst("VmHWM:".count).filter(\.isNumber))
    else { return nil }
    return kilobytes * 1024
    #else
    var usage = rusage()
    guard getrusage(RUSAGE_SELF, &usage) == 0 else { return nil }
    return Int(usage.ru_maxrss)
    #endif
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
