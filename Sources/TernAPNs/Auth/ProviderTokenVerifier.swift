import Crypto
import Foundation

/// A public key a verifier trusts, with the team it belongs to.
public struct ProviderTokenKey: Sendable {
    public let keyID: String
    public let teamID: String
    // Stored as bytes: swift-crypto 3's key types are not Sendable.
    private let publicKeyBytes: Data
    public var publicKey: P256.Signing.PublicKey {
        // The bytes came from a valid key, so this cannot fail.
        try! P256.Signing.PublicKey(x963Representation: publicKeyBytes)
    }
    /// Bundle ids the key may push to; nil for a team-scoped key (any topic of the team).
    public let bundleIDs: Set<String>?
    /// The one environment the key works in; nil for a key valid in both.
    public let environment: APNsEnvironment?

    public init(
        keyID: String, teamID: String, publicKey: P256.Signing.PublicKey, bundleIDs: Set<String>? = nil,
        environment: APNsEnvironment? = nil
    ) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKeyBytes = publicKey.x963Representation
        self.bundleIDs = bundleIDs
        self.environment = environment
    }

    /// - Parameter pem: a PEM public key, or a `.p8` private key (its public half is used).
    public init(
        keyID: String, teamID: String, pem: String, bundleIDs: Set<String>? = nil, environment: APNsEnvironment? = nil
    ) throws {
        let publicKey: P256.Signing.PublicKey
        if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) {
            publicKey = key
        } else if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
            publicKey = key.publicKey
        } else {
            throw APNsCredentialError("key \(keyID) is not a PEM P-256 public or private key")
        }
        self.init(keyID: keyID, teamID: teamID, publicKey: publicKey, bundleIDs: bundleIDs, environment: environment)
    }
}

/// A provider token whose signature checked out.
public struct VerifiedProviderToken: Hashable, Sendable {
    public let keyID: String
    public let teamID: String
    public let issuedAt: Date
}

/// Which rule a provider token broke.
public struct ProviderTokenVerificationError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Rule: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Not three base64url parts of JSON.
        public static let malformed = Rule("malformed")
        /// `alg` is not ES256.
        public static let unsupportedAlgorithm = Rule("unsupportedAlgorithm")
        /// No `kid` in the header.
        public static let missingKeyID = Rule("missingKeyID")
        /// `kid` names no known key.
        public static let unknownKeyID = Rule("unknownKeyID")
        /// The signature (raw R‖S or DER) does not verify with the key.
        public static let badSignature = Rule("badSignature")
        /// `iss` is missing or is not the key's team.
        public static let teamMismatch = Rule("teamMismatch")
        /// `iat` is missing or not a number.
        public static let missingIssuedAt = Rule("missingIssuedAt")
        /// `iat` is more than an hour old.
        public static let expired = Rule("expired")
        /// `iat` is further in the future than clock skew explains.
        public static let issuedInFuture = Rule("issuedInFuture")
    }

    public let rule: Rule
    public let detail: String

    public var description: String { "\(rule): \(detail)" }
}

/// Checks provider tokens the way APNs does: ES256 only, a known `kid`, the key's team as `iss`, a signature in
/// either the JWS raw form or DER (Pushy's Java signer emits DER and APNs accepts it), and `iat` no older than an hour.
public struct ProviderTokenVerifier: Sendable {
    public var keys: [String: ProviderTokenKey]
    /// How far in the future `iat` may be before it counts as wrong (clock skew between provider and APNs).
    public var allowedClockSkew: TimeInterval = 5 * 60

    public init(keys: [ProviderTokenKey]) {
        self.keys = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// Verifies format, algorithm, key and signature. Does not look at the token's age: see ``checkAge(_:now:)``.
    public func verifySignature(_ token: some StringProtocol) throws(ProviderTokenVerificationError) -> VerifiedProviderToken {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2]),
            case .object(let header)? = try? JSONValue(parsing: Data(headerBytes)),
            case .object(let claims)? = try? JSONValue(parsing: Data(claimBytes))
        else {
            throw fail(.malformed, "not a JWT of three base64url JSON parts")
        }
        guard case .string("ES256")? = header["alg"] else {
            throw fail(.unsupportedAlgorithm, "alg must be ES256")
        }
        guard case .string(let keyID)? = header["kid"] else {
            throw fail(.missingKeyID, "header has no kid")
        }
        guard let key = keys[keyID] else {
            throw fail(.unknownKeyID, "no key with id \(keyID)")
        }
        let signature: P256.Signing.ECDSASignature
        do {
            signature = signatureBytes.count == 64
                ? try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
                : try P256.Signing.ECDSASignature(derRepresentation: signatureBytes)
        } catch {
            throw fail(.badSignature, "signature is neither 64 raw bytes nor DER")
        }
        let signingInput = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard key.publicKey.isValidSignature(signature, for: signingInput) else {
            throw fail(.badSignature, "signature does not verify with key \(keyID)")
        }
        guard case .string(let issuer)? = claims["iss"], issuer == key.teamID else {
            throw fail(.teamMismatch, "iss must be team \(key.teamID)")
        }
        let issuedAt: Date
        switch claims["iat"] {
        case .int(let seconds)?: issuedAt = Date(timeIntervalSince1970: TimeInterval(seconds))
        case .double(let seconds)?: issuedAt = Date(timeIntervalSince1970: seconds)
        default: throw fail(.missingIssuedAt, "claims have no numeric iat")
        }
        return VerifiedProviderToken(keyID: keyID, teamID: issuer, issuedAt: issuedAt)
    }

    /// Checks the token's age at `now`: older than an hour is expired.
    public func checkAge(_ token: VerifiedProviderToken, now: Date) throws(ProviderTokenVerificationError) {
        let age = now.timeIntervalSince(token.issuedAt)
        if age > ProviderTokenCache.maximumTokenAge {
            throw fail(.expired, "issued \(Int(age)) s ago; the limit is \(Int(ProviderTokenCache.maximumTokenAge)) s")
        }
        if -age > allowedClockSkew {
            throw fail(.issuedInFuture, "issued \(Int(-age)) s in the future")
        }
    }

    /// Signature and age together.
    public func verify(_ token: some StringProtocol, now: Date) throws(ProviderTokenVerificationError) -> VerifiedProviderToken {
        let verified = try verifySignature(token)
        try checkAge(verified, now: now)
        return verified
    }

    private func fail(_ rule: ProviderTokenVerificationError.Rule, _ detail: String) -> ProviderTokenVerificationError {
        ProviderTokenVerificationError(rule: rule, detail: detail)
    }
}
