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
        // "10", "5" or "1", as every request carries one, told from its bytes: the generic check and `Int` parse
        // below are not specialized across modules and cost a simulator 2% of its CPU.
        let known = headerValue.utf8.withContiguousStorageIfAvailable { bytes -> APNsPriority? in
            switch (bytes.count, bytes.first) {
            case (2, UInt8(ascii: "1")) where bytes[1] == UInt8(ascii: "0"): .immediate
            case (1, UInt8(ascii: "5")): .throttled
            case (1, UInt8(ascii: "1")): .powerConsiderate
            default: nil
            }
        }
        if let known = known ?? nil {
            self = known
            return
        }
        guard headerValue.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let value = Int(headerValue) else {
            throw APNsValidationError(.invalidPriority, field: "apns-priority", "priority must be 10, 5 or 1, not '\(headerValue)'")
        }
        try self.init(value)
    }
}
