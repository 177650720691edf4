/// The `apns-priority` header: 10 (send now), 5 (power-aware), 1 (power first, never wakes the device).
public struct APNsPriority: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    private init(rawValue: Int) { self.rawValue = rawValue }

    /// 10: deliver immediately. Must alert, sound or badge.
    public static let immediate = APNsPriority(rawValue: 10)
    /// 5: deliver at a time that saves power; may be grouped or throttled.
    public static let throttled = APNsPriority(rawValue: 5)
    /// 1: prioritise the device's power over everything; never wakes the device.
    public static let powerConsiderate = APNsPriority(rawValue: 1)

    public var description: String { String(rawValue) }

    public init(_ value: Int) throws {
        switch value {
        case 10: self = .immediate
        case 5: self = .throttled
        case 1: self = .powerConsiderate
        default:
            throw APNsValidationError(.invalidPriority, field: "apns-priority", "priority must be 10, 5 or 1, not \(value)")
        }
    }

    public init(headerValue: some StringProtocol) throws {
        guard let value = DecimalText.parse(headerValue) else {
            throw APNsValidationError(.invalidPriority, field: "apns-priority", "priority must be 10, 5 or 1, not '\(headerValue)'")
        }
        try self.init(Int(value))
    }
}
