import Crypto
import Foundation

/// A provider-token signing key: the `.p8` key (PKCS#8 EC P-256) with its 10-character key id and the team id.
///
/// Its description never shows the key material.
public struct APNsSigningKey: Sendable, CustomStringConvertible {
    public let keyID: String
    public let teamID: String
    // swift-crypto 3's key types are not Sendable; the raw scalar is, and rebuilding the key for a signature every
    // 50 minutes costs nothing.
    private let privateKeyBytes: Data
    var privateKey: P256.Signing.PrivateKey {
        // The bytes came from a valid key, so this cannot fail.
        try! P256.Signing.PrivateKey(rawRepresentation: privateKeyBytes)
    }

    /// - Parameter pem: the contents of the `.p8` file (`-----BEGIN PRIVATE KEY-----`…), or a SEC1 EC key.
    public init(pem: String, keyID: String, teamID: String) throws {
        guard !keyID.isEmpty, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw APNsCredentialError("key id must be letters and digits (10 characters from the developer portal)")
        }
        guard !teamID.isEmpty, teamID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw APNsCredentialError("team id must be letters and digits (10 characters from the developer portal)")
        }
        do {
            self.privateKeyBytes = try P256.Signing.PrivateKey(pemRepresentation: pem).rawRepresentation
        } catch {
            throw APNsCredentialError("the key is not a PEM-encoded P-256 private key (.p8)")
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) {
        self.privateKeyBytes = privateKey.rawRepresentation
        self.keyID = keyID
        self.teamID = teamID
    }

    /// A new random key, for the simulator's demo credentials and tests.
    public static func generate(keyID: String, teamID: String) -> APNsSigningKey {
        APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: keyID, teamID: teamID)
    }

    /// The PKCS#8 PEM form, to write a `.p8` file.
    public var pemRepresentation: String { privateKey.pemRepresentation }

    public var publicKey: P256.Signing.PublicKey { privateKey.publicKey }

    public var description: String { "APNsSigningKey(keyID: \(keyID), teamID: \(teamID))" }

    /// Signs a provider token issued at `issuedAt`: `{"alg":"ES256","kid":…}.{"iss":…,"iat":…}` with a raw 64-byte
    /// R‖S signature, all base64url.
    public func makeToken(issuedAt: Date) throws -> ProviderToken {
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        // Rendered by the JSON writer, so an odd character in an id cannot break the JSON. Fixed key order
        // (`alg` before `kid`, `iss` before `iat`) keeps tokens byte-identical to what other providers send.
        var header = JSONWriter()
        try header.writeObject([("alg", "ES256"), ("kid", .string(keyID))])
        var claims = JSONWriter()
        try claims.writeObject([("iss", .string(teamID)), ("iat", .int(Int(iat)))])
        let signingInput = Base64URL.encode(header.bytes) + "." + Base64URL.encode(claims.bytes)
        let signature = try privateKey.signature(for: Data(signingInput.utf8))
        let value = signingInput + "." + Base64URL.encode(signature.rawRepresentation)
        return ProviderToken(value: value, keyID: keyID, issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)))
    }
}

/// A credential that cannot be used: an unreadable key, a certificate that does not parse.
/// The message never contains key material.
public struct APNsCredentialError: Error, Hashable, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A signed provider token (JWT) ready for `authorization: bearer …`.
public struct ProviderToken: Hashable, Sendable, CustomStringConvertible {
    public let value: String
    public let keyID: String
    /// The `iat` claim.
    public let issuedAt: Date

    /// Without the signature, so a token in a log cannot be replayed.
    public var description: String { "ProviderToken(kid: \(keyID), iat: \(Int64(issuedAt.timeIntervalSince1970)))" }

    /// `bearer <value>`, made once: every request carries it, and the token lasts tens of minutes.
    public let authorizationHeader: String

    init(value: String, keyID: String, issuedAt: Date) {
        self.value = value
        self.keyID = keyID
        self.issuedAt = issuedAt
        self.authorizationHeader = "bearer " + value
    }
}
