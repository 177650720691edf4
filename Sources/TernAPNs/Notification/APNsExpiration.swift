import Foundation

/// The `apns-expiration` header.
public enum APNsExpiration: Hashable, Sendable {
    /// No header: APNs applies its own storage policy (up to 30 days).
    case none
    /// `0`: try once, do not store.
    case immediately
    /// Store and retry until this moment (whole UNIX seconds).
    case at(Date)

    /// The header value, or nil when no header is sent.
    public var headerValue: String? {
        switch self {
        case .none: return nil
        case .immediately: return "0"
        // A moment must not render as "0", which means "do not store".
        case .at(let date): return String(Self.wholeSeconds(date))
        }
    }

    /// `date` in whole UNIX seconds, at least 1 and at most `Int64.max`: a moment beyond what an integer holds (a
    /// stored value from before the API capped it, a far-future `Date`) is clamped, never a trap.
    public static func wholeSeconds(_ date: Date) -> Int64 {
        max(1, Int64(clamping: date.timeIntervalSince1970.rounded(.down)))
    }

    /// The moment after which retrying is pointless, if any. `.immediately` means "no retry after the first try".
    public var deadline: Date? {
        switch self {
        case .none: return nil
        case .immediately: return Date(timeIntervalSince1970: 0)
        case .at(let date): return date
        }
    }

    /// Parses a header value: a non-negative whole number of UNIX seconds.
    public init(headerValue: some StringProtocol) throws {
        guard let seconds = DecimalText.parse(headerValue) else {
            throw APNsValidationError(
                .invalidExpiration, field: "apns-expiration",
                "expiration must be a whole number of UNIX seconds (0 = do not store), not '\(headerValue)'")
        }
        self = seconds == 0 ? .immediately : .at(Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
