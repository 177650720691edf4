import Foundation

/// What TernKit remembers between launches beside the identity: what it last registered (so a launch with nothing
/// new sends nothing) and the user the device is bound to. No secret is in it. It is kept in a plain file that a
/// reinstall removes, unlike the identity: after a reinstall the app registers again, which it must (a new token).
public struct TernState: Codable, Sendable, Equatable {
    /// The device id this state is about; state about another id (the identity was replaced) is ignored.
    public var deviceID: String
    public var lastRegistration: RegistrationPolicy.Record?
    /// The user the server said the device is bound to.
    public var alias: String?

    public init(deviceID: String, lastRegistration: RegistrationPolicy.Record? = nil, alias: String? = nil) {
        self.deviceID = deviceID
        self.lastRegistration = lastRegistration
        self.alias = alias
    }
}

/// Where ``TernState`` is kept.
public protocol StateStore: Sendable {
    func load() throws -> TernState?
    func save(_ state: TernState) throws
}

/// ``TernState`` in a JSON file, written atomically; by default `Application Support/Tern/state.json`.
public struct FileStateStore: StateStore {
    public let url: URL

    public init(url: URL) {
        self.url = url
    }

    /// `Tern/state.json` in the app's Application Support folder.
    public static func applicationSupport() -> FileStateStore {
        let folder =
            FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return FileStateStore(url: folder.appendingPathComponent("Tern/state.json"))
    }

    public func load() throws -> TernState? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try JSONDecoder().decode(TernState.self, from: Data(contentsOf: url))
        } catch {
            throw IdentityStoreError("the state in \(url.path) cannot be read: \(error)")
        }
    }

    public func save(_ state: TernState) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try JSONEncoder.tern.encode(state).write(to: url, options: .atomic)
    }
}
