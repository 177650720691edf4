import Metrics
import TernAPNs

/// The client's swift-metrics instruments (exported by whatever metrics backend the process bootstraps,
/// Prometheus in `tern serve`). A class, since every send reads it: a struct of eight instruments was copied, eight
/// retains, each time a notification was counted.
final class APNsClientMetrics: Sendable {
    private let sent = Counter(label: "tern_apns_requests_total")
    private let accepted = Counter(label: "tern_apns_accepted_total")
    private let retried = Counter(label: "tern_apns_retries_total")
    private let failed = Counter(label: "tern_apns_send_errors_total")
    private let connects = Counter(label: "tern_apns_connects_total")
    private let connectFailures = Counter(label: "tern_apns_connect_failures_total")
    private let connections = Meter(label: "tern_apns_connections")
    private let latency = Timer(label: "tern_apns_send_duration_seconds")

    func attempt() { sent.increment() }
    func retry() { retried.increment() }
    func error() { failed.increment() }
    func connectionOpened() {
        connects.increment()
        connections.increment()
    }
    func connectionClosed() { connections.decrement() }
    func connectFailed() { connectFailures.increment() }

    func finished(_ response: APNsResponse, after duration: Duration) {
        latency.recordNanoseconds(duration.nanoseconds)
        if response.isSuccess {
            accepted.increment()
        } else {
            Counter(label: "tern_apns_rejected_total", dimensions: [("reason", response.reason?.metricLabel ?? "\(response.status)")]).increment()
        }
    }
}
