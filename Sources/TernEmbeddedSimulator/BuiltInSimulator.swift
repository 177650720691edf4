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

    public init(trustedKey: ProviderTokenKey, stateDirectory: URL, logger: Logger) throws {
        try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var configuration = APNsSimulator.Configuration(
            certificateAuthority: try SimulatorCertificateAuthority.loadOrCreate(in: stateDirectory))
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.controlPort = 0
        configuration.environment = .production
        configuration.tokenKeys = [trustedKey]
        // It stops with the server, after the dispatcher: streams it still holds then are the server's own, which
        // gave up on them already.
        configuration.shutdownGracePeriod = .seconds(1)
        simulator = APNsSimulator(configuration: configuration, logger: logger)
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
