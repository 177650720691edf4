import Foundation
import Synchronization

/// One provider token per signing key, shared by every connection that uses the key.
///
/// APNs rejects a token older than an hour (`ExpiredProviderToken`) and one that changes on a connection more than
/// once in 20 minutes (`TooManyProviderTokenUpdates`). So the cache renews at ``refreshInterval`` (50 minutes by
/// default, within 20…55) and never sooner than ``minimumRenewalInterval`` after the previous token, even when a
/// caller reports the token rejected.
public final class ProviderTokenCache: Sendable {
    /// APNs' floor between two tokens on one connection.
    public static let minimumRenewalInterval: TimeInterval = 20 * 60
    /// APNs' maximum token age.
    public static let maximumTokenAge: TimeInterval = 60 * 60

    public let key: APNsSigningKey
    public let refreshInterval: TimeInterval
    private let clock: any WallClock
    private let state: Mutex<ProviderToken?>

    /// - Parameter refreshInterval: age at which a token is replaced; clamped to 20…55 minutes.
    public init(key: APNsSigningKey, refreshInterval: TimeInterval = 50 * 60, clock: any WallClock = SystemWallClock()) {
        self.key = key
        self.refreshInterval = min(max(refreshInterval, Self.minimumRenewalInterval), 55 * 60)
        self.clock = clock
        self.state = Mutex(nil)
    }

    /// The current token, signing a new one when there is none or it has reached ``refreshInterval``.
    public func currentToken() throws -> ProviderToken {
        let now = clock.now
        return try state.withLock { current in
            if let token = current, now.timeIntervalSince(token.issuedAt) < refreshInterval {
                return token
            }
            let token = try key.makeToken(issuedAt: now)
            current = token
            return token
        }
    }

    /// Called after APNs answered `ExpiredProviderToken` for `rejected`. Renews if `rejected` is still the current
    /// token and it is at least 20 minutes old; otherwise returns the current token unchanged (another caller
    /// already renewed, or renewing now would trip `TooManyProviderTokenUpdates`).
    public func tokenAfterRejection(of rejected: ProviderToken) throws -> ProviderToken {
        let now = clock.now
        return try state.withLock { current in
            if let token = current, token != rejected { return token }
            if let token = current, now.timeIntervalSince(token.issuedAt) < Self.minimumRenewalInterval {
                return token
            }
            let token = try key.makeToken(issuedAt: now)
            current = token
            return token
        }
    }
}
