import Foundation
import Synchronization
import TernAPNs
import TernAPNsClient
import TernStore
import TernWeb

/// An app's APNs credentials, as the API takes them and as they are sealed at rest with the server key.
///
/// JSON: `{"type": "token", "keyPEM": "…", "keyID": "…", "teamID": "…"}`,
/// `{"type": "certificate", "certificatePEM": "…", "privateKeyPEM": "…"}` or
/// `{"type": "pkcs12", "base64": "…", "passphrase": "…"}`.
enum AppCredentials: Codable, Sendable, Equatable {
    case token(keyPEM: String, keyID: String, teamID: String)
    case certificate(certificatePEM: String, privateKeyPEM: String)
    case pkcs12(base64: String, passphrase: String)

    private enum CodingKeys: String, CodingKey {
        case type, keyPEM, keyID, teamID, certificatePEM, privateKeyPEM, base64, passphrase
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "token":
            self = .token(
                keyPEM: try container.decode(String.self, forKey: .keyPEM), keyID: try container.decode(String.self, forKey: .keyID),
                teamID: try container.decode(String.self, forKey: .teamID))
        case "certificate":
            self = .certificate(
                certificatePEM: try container.decode(String.self, forKey: .certificatePEM),
                privateKeyPEM: try container.decode(String.self, forKey: .privateKeyPEM))
        case "pkcs12":
            self = .pkcs12(base64: try container.decode(String.self, forKey: .base64), passphrase: try container.decode(String.self, forKey: .passphrase))
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container, debugDescription: "type must be token, certificate or pkcs12, not '\(type)'")
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .token(let keyPEM, let keyID, let teamID):
            try container.encode("token", forKey: .type)
            try container.encode(keyPEM, forKey: .keyPEM)
            try container.encode(keyID, forKey: .keyID)
            try container.encode(teamID, forKey: .teamID)
        case .certificate(let certificatePEM, let privateKeyPEM):
            try container.encode("certificate", forKey: .type)
            try container.encode(certificatePEM, forKey: .certificatePEM)
            try container.encode(privateKeyPEM, forKey: .privateKeyPEM)
        case .pkcs12(let base64, let passphrase):
            try container.encode("pkcs12", forKey: .type)
            try container.encode(base64, forKey: .base64)
            try container.encode(passphrase, forKey: .passphrase)
        }
    }

    /// What the client needs. - Throws: a 400 naming the field when the key, certificate or bundle is unusable.
    func authentication() throws(JSONAPIError) -> APNsClientConfiguration.Authentication {
        switch self {
        case .token(let keyPEM, let keyID, let teamID):
            guard (1...64).contains(keyID.count), keyID.allSatisfy({ $0.isLetter || $0.isNumber }) else {
                throw .badRequest(field: "credentials.keyID", "keyID must be 1-64 letters or digits (Apple's are 10)")
            }
            guard (1...64).contains(teamID.count), teamID.allSatisfy({ $0.isLetter || $0.isNumber }) else {
                throw .badRequest(field: "credentials.teamID", "teamID must be 1-64 letters or digits (Apple's are 10)")
            }
            do {
                return .token(try APNsSigningKey(pem: keyPEM, keyID: keyID, teamID: teamID))
            } catch {
                throw .badRequest(field: "credentials.keyPEM", "keyPEM is not a PEM P-256 private key (the .p8 file's text)")
            }
        case .certificate(let certificatePEM, let privateKeyPEM):
            return .certificate(chainPEM: certificatePEM, privateKeyPEM: privateKeyPEM)
        case .pkcs12(let base64, let passphrase):
            guard let bytes = Data(base64Encoded: base64) else {
                throw .badRequest(field: "credentials.base64", "base64 is not base64 of a .p12 file")
            }
            return .pkcs12(bytes: Array(bytes), passphrase: passphrase)
        }
    }

    /// What may be shown of them: the type, the key's ids, and a certificate's end of validity and what Apple's
    /// certificate says it is for (its APNs environments and topics); never key material.
    var summary: CredentialsSummary {
        let type: String
        switch self {
        case .token(_, let keyID, let teamID): return CredentialsSummary(type: "token", keyID: keyID, teamID: teamID)
        case .certificate: type = "certificate"
        case .pkcs12: type = "pkcs12"
        }
        let certificate = self.certificate
        // Only Apple's certificates say what they are for; a custom gateway's may not.
        let identity = certificate.flatMap { try? PushCertificateIdentity.apple(derEncoded: $0.der) }
        return CredentialsSummary(
            type: type, certificateExpiresAt: certificate?.notValidAfter,
            certificateEnvironments: identity.map { $0.environments.map(\.rawValue).sorted(by: >) }, certificateTopics: identity?.topics)
    }

    /// A certificate's or bundle's certificate, read once; nil for a token key (not parsed), or for a certificate that
    /// cannot be read (``AppsAPI/check(_:transport:now:)`` refused such credentials before they were kept).
    var certificate: ClientCertificate? {
        if case .token = self { return nil }
        return try? authentication().clientCertificate()
    }

    /// Days before a certificate's end from which the console and the log warn of it (Apple's push certificates last a
    /// year).
    static let certificateWarningDays = 30

    /// The field a problem with the certificate itself (its end, its topics) is named by.
    var certificateField: String {
        if case .pkcs12 = self { "credentials.base64" } else { materialField }
    }

    /// The field a problem with these credentials' key material is named by.
    var materialField: String {
        switch self {
        case .token: "credentials.keyPEM"
        case .certificate: "credentials.certificatePEM"
        case .pkcs12: "credentials.passphrase"
        }
    }
}

/// Credentials as the API shows them.
struct CredentialsSummary: Codable, Sendable, Equatable {
    var type: String
    var keyID: String?
    var teamID: String?
    /// A certificate's end of validity: APNs refuses the certificate after it.
    var certificateExpiresAt: Date?
    /// The APNs environments an Apple push certificate is for (`production`, `development`, or both); APNs refuses it
    /// for a token of another.
    var certificateEnvironments: [String]?
    /// The topics an Apple push certificate may push to: the bundle id, and `.voip` or `.complication` forms of it.
    var certificateTopics: [String]?
}

/// Each app's ``CredentialsSummary`` by the version (`updatedAt`) it was made for: showing an app reads its
/// certificate, and a PKCS#12 bundle is decrypted for that, so it is done once for each change of the app, not for
/// every view. One entry for each app shown; an app's goes when it is deleted, or missing from a listing.
final class CredentialsSummaries: Sendable {
    private let entries = Mutex<[String: (version: Date, summary: CredentialsSummary)]>([:])

    /// The summary of `app`'s credentials at its version, made by `make` if it was not yet.
    func summary(of app: AppRecord, _ make: () throws -> CredentialsSummary) rethrows -> CredentialsSummary {
        if let entry = entries.withLock({ $0[app.id] }), entry.version == app.updatedAt { return entry.summary }
        let summary = try make()
        entries.withLock { $0[app.id] = (app.updatedAt, summary) }
        return summary
    }

    /// Keeps the entries of these apps only (all there are).
    func keep(only apps: Set<String>) {
        entries.withLock { $0 = $0.filter { apps.contains($0.key) } }
    }

    func forget(_ app: String) {
        entries.withLock { _ = $0.removeValue(forKey: app) }
    }
}
