/// What APNs takes in a broadcast and in a channel's management (iOS 18, spec §7): one set of rules for the client
/// that sends them, the simulator that judges them and the API that takes them from a backend.
public enum APNsBroadcastRules {
    /// The most bytes a broadcast's payload may have.
    public static let maximumPayloadSize = 5120
    /// The most channels an app has in one environment.
    public static let maximumChannels = 10_000

    /// Whether `id` can be a channel's id: 1-256 characters of base64, as APNs makes them (`+`, `/` and `=`
    /// included). It travels in the `apns-channel-id` header, never in a path.
    public static func isValidChannelID(_ id: some StringProtocol) -> Bool {
        (1...256).contains(id.utf8.count)
            && id.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "=") }
    }

    /// Whether `id` can be the bundle id in a broadcast's or a channel request's path: 1-155 letters, digits, `.` and
    /// `-`.
    public static func isValidBundleID(_ id: some StringProtocol) -> Bool {
        (1...155).contains(id.utf8.count) && id.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: false
        }
    }
}
