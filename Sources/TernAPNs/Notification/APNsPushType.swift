/// The `apns-push-type` header. An open set of values: Apple adds types from time to time.
public struct APNsPushType: Hashable, Sendable, CustomStringConvertible {
    /// The header value, e.g. `alert`.
    public let rawValue: String
    /// What APNs expects after the bundle id in `apns-topic` for this type (`.voip`, `.push-type.liveactivity` …),
    /// or nil where the topic is not derived from the bundle id (`mdm` uses the MDM certificate's UID).
    public let topicSuffix: String?

    private init(_ rawValue: String, topicSuffix: String?) {
        self.rawValue = rawValue
        self.topicSuffix = topicSuffix
    }

    public var description: String { rawValue }

    public static let alert = APNsPushType("alert", topicSuffix: "")
    public static let background = APNsPushType("background", topicSuffix: "")
    public static let voip = APNsPushType("voip", topicSuffix: ".voip")
    public static let complication = APNsPushType("complication", topicSuffix: ".complication")
    public static let fileprovider = APNsPushType("fileprovider", topicSuffix: ".pushkit.fileprovider")
    public static let mdm = APNsPushType("mdm", topicSuffix: nil)
    public static let location = APNsPushType("location", topicSuffix: ".location-query")
    public static let liveactivity = APNsPushType("liveactivity", topicSuffix: ".push-type.liveactivity")
    public static let pushtotalk = APNsPushType("pushtotalk", topicSuffix: ".voip-ptt")
    public static let widgets = APNsPushType("widgets", topicSuffix: ".push-type.widgets")
    public static let controls = APNsPushType("controls", topicSuffix: ".push-type.controls")

    /// Every push type APNs documents.
    public static let allKnown: [APNsPushType] = [
        .alert, .background, .voip, .complication, .fileprovider, .mdm,
        .location, .liveactivity, .pushtotalk, .widgets, .controls,
    ]

    /// Parses a header value. Values are case-sensitive, as APNs treats them.
    /// - Throws: `invalidPushType` for a value APNs does not document.
    public init(headerValue: some StringProtocol) throws {
        guard let known = Self.allKnown.first(where: { $0.rawValue == headerValue }) else {
            throw APNsValidationError(
                .invalidPushType, field: "apns-push-type",
                "unknown push type '\(headerValue)'; expected one of \(Self.allKnown.map(\.rawValue).joined(separator: ", "))")
        }
        self = known
    }

    /// The `apns-topic` for an app's bundle id: `com.example.app` → `com.example.app.voip` for VoIP.
    /// For `mdm`, the bundle id is returned as is (the caller passes the MDM UID).
    public func topic(forBundleID bundleID: String) -> String {
        bundleID + (topicSuffix ?? "")
    }

    /// The bundle id a topic names for this push type, or nil if the topic lacks the type's suffix.
    public func bundleID(fromTopic topic: String) -> String? {
        guard let suffix = topicSuffix, !suffix.isEmpty else { return topic.isEmpty ? nil : topic }
        guard topic.hasSuffix(suffix), topic.count > suffix.count else { return nil }
        return String(topic.dropLast(suffix.count))
    }

    /// Where this type's tokens come from, when they are not the device token `registerForRemoteNotifications` gives
    /// (spec §6): PushKit's for VoIP, an activity's for Live Activities… nil for `alert` and `background`, which go
    /// to the device token. APNs refuses a device token on such a type's topic (`DeviceTokenNotForTopic`), and that
    /// says nothing about the device token itself.
    public var tokenSource: String? {
        switch self {
        case .alert, .background: nil
        case .voip, .complication, .fileprovider: "PushKit"
        case .liveactivity: "ActivityKit (an activity's push token, or the push-to-start token)"
        case .location: "Core Location's location push service"
        case .pushtotalk: "the Push to Talk framework"
        case .widgets, .controls: "WidgetKit"
        case .mdm: "the device's MDM enrollment"
        default: "the framework of its own"
        }
    }

    /// The largest payload APNs accepts for this type, in bytes.
    public var maximumPayloadSize: Int { self == .voip ? 5120 : 4096 }

    /// Priorities APNs allows for this type.
    public var allowedPriorities: Set<APNsPriority> {
        switch self {
        case .background: return [.throttled]
        case .location, .liveactivity: return [.immediate, .throttled]
        default: return [.immediate, .throttled, .powerConsiderate]
        }
    }
}
