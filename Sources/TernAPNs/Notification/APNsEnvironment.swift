/// Which APNs environment a token, certificate or key belongs to. Sandbox tokens do not work in production and
/// the other way round (APNs answers `BadDeviceToken`).
public struct APNsEnvironment: Hashable, Sendable, CustomStringConvertible, Codable {
    public let rawValue: String
    private init(rawValue: String) { self.rawValue = rawValue }

    public static let production = APNsEnvironment(rawValue: "production")
    /// The sandbox, for development builds of an app.
    public static let development = APNsEnvironment(rawValue: "development")

    public var description: String { rawValue }

    /// Apple's host for this environment.
    public var host: String { self == .production ? "api.push.apple.com" : "api.sandbox.push.apple.com" }

    /// Parses `production` or `development` (`sandbox` is accepted as a synonym).
    public init(_ value: String, field: String = "environment") throws {
        switch value.lowercased() {
        case "production": self = .production
        case "development", "sandbox": self = .development
        default:
            throw APNsValidationError(.invalidEnvironment, field: field, "environment must be production or development, not '\(value)'")
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        try self.init(try container.decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
