/// The `aps.alert` value: a plain string (shown as the body) or a dictionary with localisation keys.
public struct APNsAlert: Hashable, Sendable {
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var launchImage: String?
    public var titleLocKey: String?
    public var titleLocArgs: [String]?
    public var subtitleLocKey: String?
    public var subtitleLocArgs: [String]?
    public var locKey: String?
    public var locArgs: [String]?
    /// Render as the plain-string form when only a body is set. Apple treats both forms alike.
    public var preferStringForm: Bool

    public init(
        title: String? = nil, subtitle: String? = nil, body: String? = nil, launchImage: String? = nil,
        titleLocKey: String? = nil, titleLocArgs: [String]? = nil,
        subtitleLocKey: String? = nil, subtitleLocArgs: [String]? = nil,
        locKey: String? = nil, locArgs: [String]? = nil
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.launchImage = launchImage
        self.titleLocKey = titleLocKey
        self.titleLocArgs = titleLocArgs
        self.subtitleLocKey = subtitleLocKey
        self.subtitleLocArgs = subtitleLocArgs
        self.locKey = locKey
        self.locArgs = locArgs
        self.preferStringForm = false
    }

    /// The string form: `"alert": "Hello"`.
    public static func string(_ body: String) -> APNsAlert {
        var alert = APNsAlert(body: body)
        alert.preferStringForm = true
        return alert
    }

    var jsonValue: JSONValue {
        var object: [String: JSONValue] = [:]
        func put(_ key: String, _ value: String?) { if let value { object[key] = .string(value) } }
        func put(_ key: String, _ value: [String]?) { if let value { object[key] = .array(value.map(JSONValue.string)) } }
        put("title", title)
        put("subtitle", subtitle)
        put("body", body)
        put("launch-image", launchImage)
        put("title-loc-key", titleLocKey)
        put("title-loc-args", titleLocArgs)
        put("subtitle-loc-key", subtitleLocKey)
        put("subtitle-loc-args", subtitleLocArgs)
        put("loc-key", locKey)
        put("loc-args", locArgs)
        if preferStringForm, object.count == 1, let body { return .string(body) }
        return .object(object)
    }
}

/// The `aps.sound` value: a file name (or `"default"`), or the critical-alert dictionary.
public enum APNsSound: Hashable, Sendable {
    case named(String)
    case critical(name: String, volume: Double)

    public static let `default` = APNsSound.named("default")

    var jsonValue: JSONValue {
        switch self {
        case .named(let name): return .string(name)
        case .critical(let name, let volume): return ["critical": 1, "name": .string(name), "volume": .double(volume)]
        }
    }
}

/// `aps.interruption-level`.
public struct APNsInterruptionLevel: Hashable, Sendable {
    public let rawValue: String
    private init(rawValue: String) { self.rawValue = rawValue }
    public static let passive = APNsInterruptionLevel(rawValue: "passive")
    public static let active = APNsInterruptionLevel(rawValue: "active")
    public static let timeSensitive = APNsInterruptionLevel(rawValue: "time-sensitive")
    public static let critical = APNsInterruptionLevel(rawValue: "critical")
    public static let all: [APNsInterruptionLevel] = [.passive, .active, .timeSensitive, .critical]

    public init(_ value: String) throws {
        guard let level = Self.all.first(where: { $0.rawValue == value }) else {
            throw APNsValidationError(
                .invalidPayload, field: "aps.interruption-level",
                "interruption level must be passive, active, time-sensitive or critical, not '\(value)'")
        }
        self = level
    }
}

/// `aps.event` of a Live Activity push.
public struct APNsLiveActivityEvent: Hashable, Sendable {
    public let rawValue: String
    private init(rawValue: String) { self.rawValue = rawValue }
    public static let start = APNsLiveActivityEvent(rawValue: "start")
    public static let update = APNsLiveActivityEvent(rawValue: "update")
    public static let end = APNsLiveActivityEvent(rawValue: "end")

    public init(_ value: String) throws {
        switch value {
        case "start": self = .start
        case "update": self = .update
        case "end": self = .end
        default:
            throw APNsValidationError(.invalidPayload, field: "aps.event", "event must be start, update or end, not '\(value)'")
        }
    }
}
