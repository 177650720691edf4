import Foundation
import TernAPNs
import TernAPNsClient
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

    /// What may be shown of them: the type, the key's ids and a certificate's end of validity, never key material.
    var summary: CredentialsSummary {
        switch self {
        case .token(_, let keyID, let teamID): CredentialsSummary(type: "token", keyID: keyID, teamID: teamID)
        case .certificate: CredentialsSummary(type: "certificate", certificateExpiresAt: certificate?.notValidAfter)
        case .pkcs12: CredentialsSummary(type: "pkcs12", certificateExpiresAt: certificate?.notValidAfter)
        }
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
}
