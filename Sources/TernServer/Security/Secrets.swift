import Crypto
import Foundation
import TernAPNs
import TernStore

/// Random bearer secrets (admin token, app keys, master secrets, device secrets) and how they are kept: only their
/// SHA-256 is stored, and presented secrets are compared with it in constant time. (Identity secrets are the
/// exception: Tern must sign-check with them, so they are sealed with the server key instead.)
enum Secrets {
    static let devicePrefix = "tds_"
    static let identityPrefix = "tis_"

    /// A new secret: `prefix` then 32 random bytes in base64url (256 bits; a hash of it cannot be brute-forced).
    static func generate(prefix: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return prefix + Base64URL.encode(bytes)
    }

    static func hash(_ secret: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(secret.utf8)))
    }

    /// Whether `secret` hashes to `storedHash`, in time that does not depend on where they differ.
    static func matches(_ secret: String, storedHash: [UInt8]) -> Bool {
        sameHash(hash(secret), storedHash)
    }

    /// Whether two hashes are equal, in time that does not depend on where they differ (the store's comparison, which
    /// also checks a registration's device secret).
    static func sameHash(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        ConstantTime.equal(a, b)
    }
}
