#if canImport(Security)
import Foundation
import Security

/// The identity in the keychain (a generic password, this device only, readable after the first unlock so a push
/// that wakes the app in the background can use it). It survives a reinstall of the app. Not compiled on Linux.
public struct KeychainIdentityStore: IdentityStore {
    public let service: String
    public let account: String
    /// A keychain access group the app shares with its Notification Service Extension (for delivery receipts), or
    /// nil for the app's own.
    public let accessGroup: String?

    /// - Parameters:
    ///   - service: e.g. the app's bundle id followed by `.tern`.
    ///   - accessGroup: `TEAMID.com.example.shared`, listed in both targets' Keychain Sharing entitlement.
    public init(service: String, account: String = "identity", accessGroup: String? = nil) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
    }

    private var query: [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: account,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    public func load() throws -> DeviceIdentity? {
        var query = self.query
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = item as? Data else { throw IdentityStoreError("keychain read failed: \(status)") }
        do {
            return try JSONDecoder().decode(DeviceIdentity.self, from: data)
        } catch {
            throw IdentityStoreError("the identity in the keychain cannot be read: \(error)")
        }
    }

    public func save(_ identity: DeviceIdentity) throws {
        let data = try JSONEncoder().encode(identity)
        let attributes: [String: Any] = [
            kSecValueData as String: data, kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        var status = SecItemUpdate(query as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound {
            status = SecItemAdd(query.merging(attributes) { $1 } as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw IdentityStoreError("keychain write failed: \(status)") }
    }

    public func delete() throws {
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw IdentityStoreError("keychain delete failed: \(status)") }
    }
}
#endif
