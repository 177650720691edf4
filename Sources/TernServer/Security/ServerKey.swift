import Crypto
import Foundation
import SystemPackage
import TernAPNs
import TernStore

/// The server's own secret: it seals apps' APNs credentials and identity secrets at rest (AES-256-GCM).
///
/// It never goes into the database (a stolen database alone opens nothing): it comes from configuration
/// (`server.key`, base64 of 32 bytes) or from a key file that the first start creates with mode 0600.
struct ServerKey: Sendable {
    /// Raw bytes: this swift-crypto's `SymmetricKey` is not `Sendable`.
    private let bytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: bytes) }

    init(bytes: [UInt8]) throws(ServerKeyError) {
        guard bytes.count == 32 else { throw ServerKeyError("the server key must be 32 bytes, not \(bytes.count)") }
        self.bytes = bytes
    }

    /// The key in `base64`, as configured.
    init(base64: String) throws(ServerKeyError) {
        guard let bytes = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ServerKeyError("the server key is not base64")
        }
        try self.init(bytes: Array(bytes))
    }

    /// The mode of the key file at `file` (octal, "644") when users other than its owner may read or change it; nil
    /// when only its owner may (or there is no file). Whoever reads the key opens every sealed credential that a copy
    /// of the database holds.
    static func exposedMode(of file: URL) -> String? {
        var info = stat()
        guard stat(file.path, &info) == 0, info.st_mode & 0o077 != 0 else { return nil }
        return String(info.st_mode & 0o777, radix: 8)
    }

    /// The key in `file`, created (random, mode 0600) when no file is there. A file that is there and cannot be read
    /// is an error, never replaced: a new key would leave every sealed credential and identity secret unopenable.
    /// - Returns: the key and whether it was created now.
    static func loadOrCreate(file: URL) throws(ServerKeyError) -> (key: ServerKey, created: Bool) {
        let path = FilePath(file.path)
        do {
            let descriptor = try FileDescriptor.open(path, .readOnly)
            // A key file is 45 bytes; what is far beyond that is not one.
            let bytes = try descriptor.closeAfter {
                try [UInt8](unsafeUninitializedCapacity: 4096) { buffer, count in
                    count = try descriptor.read(into: UnsafeMutableRawBufferPointer(buffer))
                }
            }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw ServerKeyError("the file is not text (it should hold base64 of 32 bytes)")
            }
            return (try ServerKey(base64: text), false)
        } catch let error as ServerKeyError {
            throw error
        } catch let error as Errno where error == .noSuchFileOrDirectory {
            // No file: the first start makes one.
        } catch {
            throw ServerKeyError("cannot read the file: \(error)")
        }
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        // Written whole to a file of its own first (owner-only), synced, then linked into place: a disk that fills
        // or a crash midway leaves no half-written key behind to refuse every later start, and the link is made only
        // if no file is there yet (never over a key another process put there meanwhile).
        let temporary = FilePath(file.path + ".new-\(UInt64.random(in: 0...UInt64.max, using: &generator))")
        do {
            let descriptor = try FileDescriptor.open(
                temporary, .writeOnly, options: [.create, .exclusiveCreate], permissions: [.ownerReadWrite])
            try descriptor.closeAfter {
                _ = try descriptor.writeAll(Array((Data(bytes).base64EncodedString() + "\n").utf8))
                guard fsync(descriptor.rawValue) == 0 else { throw Errno(rawValue: errno) }
            }
            guard link(temporary.string, path.string) == 0 else { throw Errno(rawValue: errno) }
            _ = unlink(temporary.string)
        } catch {
            _ = unlink(temporary.string)
            throw ServerKeyError("cannot create the file: \(error)")
        }
        return (try ServerKey(bytes: bytes), true)
    }

    /// `plaintext` sealed: nonce, ciphertext and tag in one blob.
    func seal(_ plaintext: [UInt8]) -> [UInt8] {
        // AES-GCM with a random nonce cannot fail for in-memory data of this size.
        Array(try! AES.GCM.seal(plaintext, using: key).combined!)
    }

    func open(_ sealed: [UInt8]) throws(ServerKeyError) -> [UInt8] {
        do {
            return Array(try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: key))
        } catch {
            throw ServerKeyError("sealed data does not open with this server key (was the key changed?)")
        }
    }

    /// The token key of apps on the built-in simulator: derived from the server key, so the simulator trusts one key
    /// from its start on and apps created later use it too.
    func simulatorSigningKey(keyID: String, teamID: String) -> APNsSigningKey {
        var counter: UInt8 = 0
        while true {
            let seed = HMAC<SHA256>.authenticationCode(for: Array("simulator-key:".utf8) + [counter], using: key)
            // A 256-bit value is a valid P-256 scalar except with probability about 2^-32; try the next one then.
            if let privateKey = try? P256.Signing.PrivateKey(rawRepresentation: Array(seed)) {
                return APNsSigningKey(privateKey: privateKey, keyID: keyID, teamID: teamID)
            }
            counter &+= 1
        }
    }

    /// The key an app's webhook requests are signed with: derived from the server key, the app's id and its
    /// ``AppRecord/webhookSecretSalt`` (new at each creation and rotation), so only the salt is stored. An app from
    /// before the salt (nil) keeps the key derived from its id alone until its key is rotated.
    func webhookSecret(app: AppRecord) -> String {
        let input = app.webhookSecretSalt.map { "webhook:\(app.id):\($0)" } ?? "webhook:\(app.id)"
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: key)
        return "tws_" + Base64URL.encode(Array(mac))
    }

    /// A new ``AppRecord/webhookSecretSalt``: 128 random bits.
    static func webhookSalt() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The secret a device registered before random device secrets was given: derived from the server key and its id.
    /// Such a device (no stored secret hash) still proves itself with it; every device registered since has a random
    /// secret, shown once.
    func legacyDeviceSecret(app: String, deviceID: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("device:\(app):\(deviceID)".utf8), using: key)
        return "tds_" + Base64URL.encode(Array(mac))
    }
}

struct ServerKeyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
