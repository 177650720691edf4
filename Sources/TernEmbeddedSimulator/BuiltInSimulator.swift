import Foundation
import Logging
import TernAPNs
import TernServer
import TernSimulator

/// The built-in APNs simulator as `tern serve`'s ``EmbeddedAPNs``: on a free loopback port, trusting the server's
/// simulator key, its CA kept in a state directory (owner-only).
public struct BuiltInSimulator: EmbeddedAPNs {
    public let simulator: APNsSimulator

    /// The factory `tern serve` is given: a simulator keeping its CA in `stateDirectory`, logging warnings and worse.
    public static func factory(stateDirectory: URL, logger: Logger) -> EmbeddedAPNsFactory {
        { trustedKey in
            var simulatorLogger = logger
            simulatorLogger.logLevel = max(logger.logLevel, .warning)
            return try BuiltInSimulator(trustedKey: trustedKey, stateDirectory: stateDirectory, logger: simulatorLogger)
        }
    }

    /// - Throws: ``StateDirectoryError`` when the folder or the certificate authority in it cannot be made or read,
    ///   ``ChannelJournalError`` when the channels file there cannot be read or written.
    public init(trustedKey: ProviderTokenKey, stateDirectory: URL, logger: Logger) throws {
        let authority: SimulatorCertificateAuthority
        do {
            try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            authority = try SimulatorCertificateAuthority.loadOrCreate(in: stateDirectory)
        } catch {
            throw StateDirectoryError(path: stateDirectory.path, reason: (error as NSError).localizedDescription)
        }
        var configuration = APNsSimulator.Configuration(certificateAuthority: authority)
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.controlPort = 0
        configuration.environment = .production
        configuration.tokenKeys = [trustedKey]
        // Apple keeps an app's broadcast channels; so does the built-in simulator, or a channel Tern keeps would be
        // unknown to it after a restart. A file of its own: a `tern simulator` may share the folder (and its CA).
        configuration.channelsFile = stateDirectory.appendingPathComponent("built-in-channels.jsonl")
        // It stops with the server, after the dispatcher: streams it still holds then are the server's own, which
        // gave up on them already.
        configuration.shutdownGracePeriod = .seconds(1)
        simulator = APNsSimulator(configuration: configuration, logger: logger)
        // Now, so a file that cannot be kept stops `tern serve` before it listens.
        try simulator.openChannelsFile()
    }

    public func run() async throws {
        try await simulator.run()
    }

    public func waitUntilReady() async throws -> EmbeddedAPNsAddress {
        try await simulator.waitUntilReady()
        return EmbeddedAPNsAddress(
            endpoint: .init(host: "127.0.0.1", port: simulator.port, trustRootsPEM: simulator.certificateAuthority.certificatePEM),
            legacyGatewayPort: simulator.legacyGatewayPort, feedbackPort: simulator.feedbackPort, controlPort: simulator.controlPort)
    }

    public func issueLegacyCertificate(topic: String) throws -> (certificatePEM: String, privateKeyPEM: String) {
        let certificate = try simulator.certificateAuthority.issuePushCertificate(bundleID: topic, environments: [.production])
        return (certificate.certificatePEM, certificate.privateKeyPEM)
    }
}

extension BuiltInSimulator {
    /// The simulator's folder (`simulator.stateDirectory`) or its certificate authority there cannot be made or read.
    public struct StateDirectoryError: Error, CustomStringConvertible {
        public var path: String
        /// The system's words ("You don't have permission."), never a stack of error domains.
        public var reason: String

        public var description: String {
            "simulator.stateDirectory \(path): cannot keep the simulator's certificate authority there: \(reason)"
        }
    }
}
