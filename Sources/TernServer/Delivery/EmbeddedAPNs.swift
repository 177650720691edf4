import Foundation
import ServiceLifecycle
import TernAPNs
import TernAPNsClient

/// An APNs that `tern serve` runs beside itself for apps in the `simulator` environment, so a fresh machine delivers
/// end to end with no Apple credentials. The server does not know what it is: `tern serve` wires in the built-in
/// simulator (`TernEmbeddedSimulator`), tests may wire in another.
///
/// It runs as one of the server's services, started before the dispatcher and stopped after it.
public protocol EmbeddedAPNs: Service {
    /// Returns once it listens, with where.
    func waitUntilReady() async throws -> EmbeddedAPNsAddress
    /// A push certificate for `topic`, for apps on its legacy binary gateway (which takes no provider tokens).
    func issueLegacyCertificate(topic: String) throws -> (certificatePEM: String, privateKeyPEM: String)
}

/// Where an ``EmbeddedAPNs`` listens.
public struct EmbeddedAPNsAddress: Sendable {
    /// The HTTP/2 provider API, with the CA to trust.
    public var endpoint: APNsClientConfiguration.Endpoint
    public var legacyGatewayPort: Int?
    public var feedbackPort: Int?
    /// Its control API, shown in the banner.
    public var controlPort: Int?

    public init(endpoint: APNsClientConfiguration.Endpoint, legacyGatewayPort: Int?, feedbackPort: Int?, controlPort: Int?) {
        self.endpoint = endpoint
        self.legacyGatewayPort = legacyGatewayPort
        self.feedbackPort = feedbackPort
        self.controlPort = controlPort
    }
}

/// Makes the embedded APNs once the server key is known: it must trust `trustedKey`, the provider-token key that
/// apps in the `simulator` environment sign with.
public typealias EmbeddedAPNsFactory = @Sendable (_ trustedKey: ProviderTokenKey) throws -> any EmbeddedAPNs

/// The provider-token identity of apps in the `simulator` environment: a key derived from the server key.
enum SimulatorIdentity {
    static let keyID = "TERNDEMO01"
    static let teamID = "TERNTEAM01"

    static func signingKey(_ serverKey: ServerKey) -> APNsSigningKey {
        serverKey.simulatorSigningKey(keyID: keyID, teamID: teamID)
    }

    /// The credentials of an app on the embedded APNs: the token key it trusts.
    static func credentials(_ serverKey: ServerKey) -> AppCredentials {
        let key = signingKey(serverKey)
        return .token(keyPEM: key.pemRepresentation, keyID: key.keyID, teamID: key.teamID)
    }

    static func trustedKey(_ serverKey: ServerKey) -> ProviderTokenKey {
        let key = signingKey(serverKey)
        return ProviderTokenKey(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey)
    }
}
