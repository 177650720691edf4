import Foundation

/// Who this installation is to Tern: the device id it registers under and the secret Tern answered the first
/// registration with. Kept where it survives a reinstall (the keychain), so one phone stays one device and keeps
/// one current token (seed 001: `identifierForVendor` changes on reinstall, the keychain does not).
public struct DeviceIdentity: Codable, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// A UUID, lowercase, made on first launch.
    public var deviceID: String
    /// `tds_…`, from the first registration's answer; nil until then.
    public var deviceSecret: String?

    public init(deviceID: String, deviceSecret: String? = nil) {
        self.deviceID = deviceID
        self.deviceSecret = deviceSecret
    }

    /// Without the secret: an app that logs its identity logs no credential.
    public var description: String { "device \(deviceID) (secret \(deviceSecret == nil ? "not yet given" : "withheld"))" }
    public var debugDescription: String { description }

    /// A new identity with a random device id.
    public static func generate() -> DeviceIdentity {
        DeviceIdentity(deviceID: UUID().uuidString.lowercased())
    }
}

/// Where the identity is kept: the keychain on Apple platforms (``KeychainIdentityStore``), a file for Linux and
/// tests (``FileIdentityStore``).
public protocol IdentityStore: Sendable {
    /// The identity kept, or nil if there is none yet.
    /// - Throws: ``IdentityStoreError`` if one is kept but cannot be read.
    func load() throws -> DeviceIdentity?
    func save(_ identity: DeviceIdentity) throws
    func delete() throws
}

public struct IdentityStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

extension IdentityStore {
    /// The identity kept, or a new one, saved before it is returned (so a crash right after cannot make a second).
    public func loadOrCreate() throws -> DeviceIdentity {
        if let identity = try load() { return identity }
        let identity = DeviceIdentity.generate()
        try save(identity)
        return identity
    }
}

/// The identity in a JSON file only its owner can read (0600), written atomically.
public struct FileIdentityStore: IdentityStore {
    public let url: URL

    public init(url: URL) {
        self.url = url
    }

    public func load() throws -> DeviceIdentity? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            let data = try Data(contentsOf: url)
            return try JSONDecoder().decode(DeviceIdentity.self, from: data)
        } catch {
            throw IdentityStoreError("the identity in \(url.path) cannot be read: \(error)")
        }
    }

    public func save(_ identity: DeviceIdentity) throws {
        let data = try JSONEncoder().encode(identity)
        let folder = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // Written beside it with owner-only permissions, then moved over it: never half a file, never readable by others.
        let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw IdentityStoreError("cannot write \(temporary.path)")
        }
        // rename(2) replaces the old file in one step.
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(at: temporary)
            throw IdentityStoreError("cannot write \(url.path): errno \(code)")
        }
    }

    public func delete() throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }
}
