/// A value that breaks one of APNs' rules, found before anything is sent.
///
/// `field` names the offending input (`"deviceToken"`, `"apns-priority"`, `"aps.badge"` …) so an HTTP API can
/// answer `{"error": code, "field": field, "message": message}` and a CLI can print one clear line.
public struct APNsValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of rule was broken. An open set: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidDeviceToken = Code("invalidDeviceToken")
        public static let invalidPushType = Code("invalidPushType")
        public static let invalidPriority = Code("invalidPriority")
        public static let invalidExpiration = Code("invalidExpiration")
        public static let invalidCollapseID = Code("invalidCollapseID")
        public static let invalidMessageID = Code("invalidMessageID")
        public static let invalidTopic = Code("invalidTopic")
        public static let invalidPayload = Code("invalidPayload")
        public static let payloadTooLarge = Code("payloadTooLarge")
        public static let payloadEmpty = Code("payloadEmpty")
        public static let invalidEnvironment = Code("invalidEnvironment")
    }

    public let code: Code
    public let field: String
    public let message: String

    public init(_ code: Code, field: String, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}
