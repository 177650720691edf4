import Foundation

/// What a registration tells Tern about this installation. Sent on every launch that needs it (seed 004: the token
/// may have changed), and only then.
public struct RegistrationFacts: Codable, Sendable, Equatable {
    /// The APNs token, lowercase hex.
    public var token: String
    /// `production` or `development` (from how the app was built: a debug build gets sandbox tokens).
    public var environment: String
    public var appVersion: String?
    public var locale: String?
    /// The device's time zone identifier (`Asia/Seoul`), so the backend can send at a local hour.
    public var timezone: String?

    public init(token: String, environment: String, appVersion: String? = nil, locale: String? = nil, timezone: String? = nil) {
        self.token = token
        self.environment = environment
        self.appVersion = appVersion
        self.locale = locale
        self.timezone = timezone
    }

    /// The hex of a token as `didRegisterForRemoteNotificationsWithDeviceToken` hands it over.
    public static func hex(_ token: Data) -> String {
        token.map { String(format: "%02x", $0) }.joined()
    }
}

/// When to talk to the server: when something it knows changed (token, environment, version, locale, time zone), or
/// once a day (so a device that was pruned by mistake, or whose record was deleted, comes back), never on every launch
/// otherwise.
public struct RegistrationPolicy: Sendable {
    /// How long a registration stays good when nothing changed.
    public var refreshAfter: TimeInterval

    public init(refreshAfter: TimeInterval = 24 * 3600) {
        self.refreshAfter = refreshAfter
    }

    /// What was last registered, and when.
    public struct Record: Codable, Sendable, Equatable {
        public var facts: RegistrationFacts
        public var at: Date

        public init(facts: RegistrationFacts, at: Date) {
            self.facts = facts
            self.at = at
        }
    }

    public func needsRegistration(_ facts: RegistrationFacts, last: Record?, now: Date) -> Bool {
        guard let last else { return true }
        if last.facts != facts { return true }
        // A clock set back counts as time passed: better one registration too many than a device that goes quiet.
        return now.timeIntervalSince(last.at) >= refreshAfter || now < last.at
    }
}

/// How long to wait before the next try after `failures` failed ones: doubling from `initial` to `maximum`, each
/// wait drawn at random between half and all of it, so devices that failed together do not retry together.
public struct RetryBackoff: Sendable {
    public var initial: TimeInterval
    public var maximum: TimeInterval

    public init(initial: TimeInterval = 1, maximum: TimeInterval = 300) {
        self.initial = initial
        self.maximum = maximum
    }

    /// - Parameter unit: a random number in 0...1 (injected in tests).
    public func delay(afterFailures failures: Int, unit: Double = Double.random(in: 0...1)) -> TimeInterval {
        let ceiling = min(maximum, initial * pow(2, Double(max(0, failures - 1))))
        return ceiling / 2 + ceiling / 2 * min(max(unit, 0), 1)
    }
}
