import Foundation
import TernKit
import Testing

/// The identity kept in a file (as on Linux and in tests; the keychain store is its Apple-platform twin).
struct IdentityTests {
    private func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ternkit-\(UUID().uuidString)/identity.json")
    }

    @Test func aNewInstallationMakesOneIdentityAndKeepsIt() throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        let store = FileIdentityStore(url: url)
        #expect(try store.load() == nil)
        let first = try store.loadOrCreate()
        #expect(UUID(uuidString: first.deviceID) != nil)
        #expect(first.deviceID == first.deviceID.lowercased())
        // The next launch (or a reinstall, where the keychain survives) finds the same one.
        #expect(try FileIdentityStore(url: url).loadOrCreate() == first)
    }

    @Test func theSecretIsKeptOwnerOnly() throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        let store = FileIdentityStore(url: url)
        var identity = try store.loadOrCreate()
        identity.deviceSecret = "tds_secret"
        try store.save(identity)
        #expect(try store.load()?.deviceSecret == "tds_secret")
        let permissions = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber
        #expect(permissions?.intValue == 0o600)
        // No temporary file left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path) == ["identity.json"])
        try store.delete()
        #expect(try store.load() == nil)
    }

    @Test func anUnreadableIdentityIsAClearErrorNotANewDevice() throws {
        let url = temporaryFile()
        defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("not json".utf8).write(to: url)
        #expect(throws: IdentityStoreError.self) { try FileIdentityStore(url: url).loadOrCreate() }
    }
}
