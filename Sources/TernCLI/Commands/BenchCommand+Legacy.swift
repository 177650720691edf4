import ArgumentParser
import Foundation
import Logging
import TernAPNs
import TernAPNsClient
import TernSimulator

/// `tern bench --legacy`: the legacy binary gateway client against the in-process simulator's gateway port.
extension BenchCommand {
    /// Notifications handed to a gateway client at a time, and how many such chunks are in flight. Together they
    /// bound the bench's memory; 8 × 10,000 is more than a replay window's worth at the target rate, so the client
    /// is never idle waiting for earlier chunks to settle.
    private static let chunkSize = 10_000
    private static let chunksInFlight = 8

    func measureLegacy(format: LegacyCommand, payload: [UInt8], stats: BenchStats) async throws -> String {
        var configuration = try APNsSimulator.Configuration()
        configuration.port = 0
        configuration.controlPort = nil
        configuration.legacyGatewayPort = 0
        configuration.feedbackPort = nil
        configuration.environment = .production
        configuration.logCapacity = 10_000
        let count = self.count
        let connections = self.connections
        let topic = self.topic

        return try await APNsSimulator.withRunning(configuration, logger: Logger(label: "tern.simulator")) { simulator in
            guard let gatewayPort = simulator.legacyGatewayPort else {
                throw ValidationError("the simulator did not open its legacy gateway port")
            }
            let certificate = try simulator.certificateAuthority.issuePushCertificate(bundleID: topic, environments: [.production])
            var client = LegacyClientConfiguration(
                authentication: .certificate(chainPEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM),
                endpoint: APNsClientConfiguration.Endpoint(
                    host: "127.0.0.1", port: gatewayPort, trustRootsPEM: simulator.certificateAuthority.certificatePEM))
            client.format = format
            let clients = try (0..<connections).map { _ in
                try LegacyGatewayClient(configuration: client, logger: Logger(label: "tern.bench"))
            }

            let started = ContinuousClock.now
            // The simulator's count of accepted notifications, read every 10 ms: when the gateway had them all.
            let arrivals = Task { () -> Duration? in
                var last = (done: 0, at: started)
                var nextReport = started + .seconds(1)
                while !Task.isCancelled {
                    let accepted = simulator.state.stats().legacyAccepted
                    let now = ContinuousClock.now
                    if accepted >= count { return now - started }
                    if now >= nextReport {
                        let rate = Double(accepted - last.done) / (now - last.at).seconds
                        printError("gateway took \(grouped(accepted)) / \(grouped(count))  \(grouped(Int(rate)))/s")
                        last = (accepted, now)
                        nextReport = now + .seconds(1)
                    }
                    try? await Task.sleep(for: .milliseconds(10))
                }
                return nil
            }

            await withTaskGroup(of: Void.self) { group in
                var chunk = 0
                var start = 0
                while start < count {
                    if chunk >= Self.chunksInFlight { await group.next() }
                    let range = start..<min(count, start + Self.chunkSize)
                    let gateway = clients[chunk % clients.count]
                    group.addTask {
                        let (stream, input) = AsyncStream.makeStream(of: APNsNotification.self)
                        for index in range {
                            let metadata = APNsRequestMetadata(topic: topic, pushType: .alert, apnsID: BenchNotifications.apnsID(index))
                            input.yield(APNsNotification(unchecked: BenchNotifications.token(index), metadata: metadata, payload: payload))
                        }
                        input.finish()
                        await gateway.sendAll(stream) { stats.record($0) }
                    }
                    chunk += 1
                    start = range.upperBound
                }
            }
            let settled = ContinuousClock.now - started
            // Every notification is settled, so the gateway has had all it will get; a short grace covers the last poll.
            try? await Task.sleep(for: .milliseconds(50))
            arrivals.cancel()
            let arrived = await arrivals.value
            for gateway in clients { await gateway.shutdown() }

            let final = stats.snapshot()
            let gatewayStats = simulator.state.stats()
            var lines = [
                "tern bench --legacy: \(grouped(count)) notifications, \(connections) gateway connection(s), \(format) format, "
                    + "\(payload.count)-byte payload, in-process simulator (production) on 127.0.0.1:\(gatewayPort), TLS with a client certificate",
                "throughput  \(grouped(Int((Double(final.completed) / settled.seconds).rounded()))) notifications/s settled  "
                    + "(\(grouped(final.completed)) in \(String(format: "%.2f", settled.seconds)) s, the last "
                    + "\(Int(client.replayWindow.seconds * 1000)) ms replay window included)",
            ]
            if let arrived {
                lines.append(
                    "gateway     \(grouped(Int((Double(count) / arrived.seconds).rounded()))) notifications/s taken by the simulator  "
                        + "(all \(grouped(count)) in \(String(format: "%.2f", arrived.seconds)) s)")
            } else {
                lines.append("gateway     took \(grouped(gatewayStats.legacyAccepted)) of \(grouped(count))")
            }
            let rss = peakRSSBytes().map { String(format: "%.1f MiB", Double($0) / 1_048_576) } ?? "unknown"
            lines.append("peak RSS    \(rss)  (client and in-process simulator)")
            lines.append(
                "result      delivered \(grouped(final.delivered))  rejected \(grouped(final.rejected))  errors \(grouped(final.errors))"
                    + "  connections opened \(gatewayStats.legacyConnectionsOpened)")
            for (problem, times) in final.problems.sorted(by: { $0.value > $1.value }).prefix(5) {
                lines.append("  \(grouped(times)) × \(problem)")
            }
            return lines.joined(separator: "\n")
        }
    }
}
