/// The `reason` of an APNs error response (spec §1.4), with a fallback for reasons Apple adds later.
public enum APNsReason: Hashable, Sendable, CustomStringConvertible {
    case badCollapseId
    case badDeviceToken
    case badExpirationDate
    case badMessageId
    case badPriority
    case badTopic
    case deviceTokenNotForTopic
    case duplicateHeaders
    case idleTimeout
    case invalidPushType
    case missingDeviceToken
    case missingTopic
    case payloadEmpty
    case topicDisallowed
    case badCertificate
    case badCertificateEnvironment
    case expiredProviderToken
    case forbidden
    case invalidProviderToken
    case missingProviderToken
    case unrelatedKeyIdInToken
    /// Documented as `BadEnvironmentKeyIdInToken`; APNs has also been seen sending `BadEnvironmentKeyInToken`.
    /// Both decode to this case.
    case badEnvironmentKeyIdInToken
    case badPath
    case methodNotAllowed
    case expiredToken
    case unregistered
    case payloadTooLarge
    case tooManyProviderTokenUpdates
    case tooManyRequests
    case internalServerError
    case serviceUnavailable
    case shutdown
    // Broadcasts and channel management (iOS 18, spec §7).
    /// Broadcasts are not enabled for the app's id (on developer.apple.com).
    case featureNotEnabled
    case missingChannelId
    case badChannelId
    /// The channel does not exist (deleted, or never made in this environment).
    case channelNotRegistered
    case badRequestParams
    case badRequestPayload
    case missingPushType
    /// The channel cannot be made: the environment has its 10,000 channels.
    case cannotCreateChannelConfig
    /// The credentials are not for the bundle id in the path.
    case topicMismatch
    /// A reason this version does not know. Classified by its status code.
    case unknown(String)

    /// Every documented reason.
    public static let allKnown: [APNsReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
        .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken,
        .badEnvironmentKeyIdInToken, .badPath, .methodNotAllowed, .expiredToken, .unregistered, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
        .featureNotEnabled, .missingChannelId, .badChannelId, .channelNotRegistered, .badRequestParams, .badRequestPayload,
        .missingPushType, .cannotCreateChannelConfig, .topicMismatch,
    ]

    private static let byName: [String: APNsReason] = {
        var map = Dictionary(uniqueKeysWithValues: allKnown.map { ($0.rawValue, $0) })
        map["BadEnvironmentKeyInToken"] = .badEnvironmentKeyIdInToken
        return map
    }()

    public init(rawValue: String) {
        self = Self.byName[rawValue] ?? .unknown(rawValue)
    }

    /// The string APNs sends (the documented spelling).
    public var rawValue: String {
        switch self {
        case .badCollapseId: return "BadCollapseId"
        case .badDeviceToken: return "BadDeviceToken"
        case .badExpirationDate: return "BadExpirationDate"
        case .badMessageId: return "BadMessageId"
        case .badPriority: return "BadPriority"
        case .badTopic: return "BadTopic"
        case .deviceTokenNotForTopic: return "DeviceTokenNotForTopic"
        case .duplicateHeaders: return "DuplicateHeaders"
        case .idleTimeout: return "IdleTimeout"
        case .invalidPushType: return "InvalidPushType"
        case .missingDeviceToken: return "MissingDeviceToken"
        case .missingTopic: return "MissingTopic"
        case .payloadEmpty: return "PayloadEmpty"
        case .topicDisallowed: return "TopicDisallowed"
        case .badCertificate: return "BadCertificate"
        case .badCertificateEnvironment: return "BadCertificateEnvironment"
        case .expiredProviderToken: return "ExpiredProviderToken"
        case .forbidden: return "Forbidden"
        case .invalidProviderToken: return "InvalidProviderToken"
        case .missingProviderToken: return "MissingProviderToken"
        case .unrelatedKeyIdInToken: return "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: return "BadEnvironmentKeyIdInToken"
        case .badPath: return "BadPath"
        case .methodNotAllowed: return "MethodNotAllowed"
        case .expiredToken: return "ExpiredToken"
        case .unregistered: return "Unregistered"
        case .payloadTooLarge: return "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: return "TooManyProviderTokenUpdates"
        case .tooManyRequests: return "TooManyRequests"
        case .internalServerError: return "InternalServerError"
        case .serviceUnavailable: return "ServiceUnavailable"
        case .shutdown: return "Shutdown"
        case .featureNotEnabled: return "FeatureNotEnabled"
        case .missingChannelId: return "MissingChannelId"
        case .badChannelId: return "BadChannelId"
        case .channelNotRegistered: return "ChannelNotRegistered"
        case .badRequestParams: return "BadRequestParams"
        case .badRequestPayload: return "BadRequestPayload"
        case .missingPushType: return "MissingPushType"
        case .cannotCreateChannelConfig: return "CannotCreateChannelConfig"
        case .topicMismatch: return "TopicMismatch"
        case .unknown(let raw): return raw
        }
    }

    public var description: String { rawValue }

    /// The reason as a metric's label: its documented spelling, or `unknown` for one this version does not know, so
    /// an endpoint sending made-up reasons cannot grow a metric without bound.
    public var metricLabel: String {
        if case .unknown = self { "unknown" } else { rawValue }
    }

    /// The HTTP status APNs answers with this reason (nil for an unknown reason).
    public var status: Int? {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed, .featureNotEnabled, .missingChannelId, .badChannelId,
            .channelNotRegistered, .badRequestParams, .badRequestPayload, .missingPushType, .cannotCreateChannelConfig:
            return 400
        case .topicMismatch: return 403
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken:
            return 403
        case .badPath: return 404
        case .methodNotAllowed: return 405
        case .expiredToken, .unregistered: return 410
        case .payloadTooLarge: return 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: return 429
        case .internalServerError: return 500
        case .serviceUnavailable, .shutdown: return 503
        case .unknown: return nil
        }
    }
}
