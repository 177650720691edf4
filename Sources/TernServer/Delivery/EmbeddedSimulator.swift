import Foundation
import Logging
import TernAPNs
import TernAPNsClient
import TernSimulator

/// The APNs simulator `tern serve` runs in its own process for apps in the `simulator` environment (the demo app
/// first of all), so a fresh machine delivers end to end with no Apple credentials.
enum EmbeddedSimulator {
    static let demoKeyID = "TERNDEMO01"
    static let demoTeamID = "TERNTEAM01"

    /// The credentials of an app on the built-in simulator: the token key it trusts.
    static func credentials(_ serverKey: ServerKey) -> AppCredentials {
        let key = serverKey.simulatorSigningKey(keyID: demoKeyID, teamID: demoTeamID)
        return .token(keyPEM: key.pemRepresentation, keyID: key.keyID, teamID: key.teamID)
    }

    /// A simulator on a free loopback port that trusts the simulator key of `serverKey`, with its CA kept in
    /// `stateDirectory`.
    static func configuration(serverKey: ServerKey, stateDirectory: URL) throws -> APNsSimulator.Configuration {
        try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var configuration = APNsSimulator.Configuration(
            certificateAuthority: try SimulatorCertificateAuthority.loadOrCreate(in: stateDirectory))
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.controlPort = 0
        configuration.environment = .production
        let key = serverKey.simulatorSigningKey(keyID: demoKeyID, teamID: demoTeamID)
        configuration.tokenKeys = [ProviderTokenKey(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey)]
        // It stops with the server, after the dispatcher: streams it still holds then are the server's own, which
        // gave up on them already.
        configuration.shutdownGracePeriod = .seconds(1)
        return configuration
    }

    static func ports(of simulator: APNsSimulator) -> ClientDirectory.SimulatorPorts {
        ClientDirectory.SimulatorPorts(
            endpoint: .init(host: "127.0.0.1", port: simulator.port, trustRootsPEM: simulator.certificateAuthority.certificatePEM),
            legacyGatewayPort: simulator.legacyGatewayPort, feedbackPort: simulator.feedbackPort)
    }

    /// Credentials for an app on the built-in simulator's legacy gateway: a push certificate for `topic` from the
    /// simulator's CA (the binary protocol takes no provider tokens).
    static func legacyCredentials(_ authority: SimulatorCertificateAuthority, topic: String) throws -> AppCredentials {
        let certificate = try authority.issuePushCertificate(bundleID: topic, environments: [.production])
        return .certificate(certificatePEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM)
    }
}
