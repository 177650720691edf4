import Foundation
import TernAPNs

/// An app: one bundle id with its APNs credentials and the two secrets that guard its API.
public struct AppRecord: Sendable, Equatable {
    /// The app's name in URLs: lowercase letters, digits and `-`, 1-64 characters.
    public var id: String
    /// The bundle id (`apns-topic` base).
    public var topic: String
    /// Where its notifications go; for ``AppEnvironment/custom``, ``endpoint`` says where.
    public var environment: AppEnvironment
    public var endpoint: Endpoint?
    /// The APNs credentials, sealed (AES-GCM) with the server key; the store never sees them in clear.
    public var sealedCredentials: [UInt8]
    /// SHA-256 of the app key (shipped inside the mobile app: registration, its own inbox).
    public var appKeyHash: [UInt8]
    /// SHA-256 of the master secret (the app's backend: sending, reading everything).
    public var masterSecretHash: [UInt8]
    /// Where token events (and the other ``webhookEvents``) are POSTed, if anywhere.
    public var webhookURL: String?
    /// The kinds of events POSTed to ``webhookURL``: token deactivations unless the app asked for others too.
    public var webhookEvents: Set<WebhookEventKind> = AppRecord.defaultWebhookEvents
    /// The longest a push may keep its message in the inbox, in seconds.
    public var inboxMaxTTL: Int = AppRecord.defaultInboxMaxTTL
    /// The most unexpired messages one user's (or alias-less device's) inbox keeps; the oldest go first.
    public var inboxCap: Int = AppRecord.defaultInboxCap
    /// How notifications go out: `http2` (the provider API) or `legacy` (the binary gateway, with its feedback
    /// service polled for dead tokens).
    public var transport: String = AppRecord.http2
    /// For `legacy`: seconds between two reads of the feedback service.
    public var feedbackInterval: Int = AppRecord.defaultFeedbackInterval
    /// When the feedback service was last read for this app (by any node).
    public var feedbackPolledAt: Date?
    /// Whether a device (app key) may bind itself to a user only with a token signed by the app's backend.
    public var userBinding: UserBinding = .signed
    /// The rate a broadcast (a push to tags or to everyone) is throttled to when it gives none of its own
    /// (``PushRecord/ratePerSecond``): recipients a second at most. Nil: broadcasts go as fast as the nodes do.
    public var broadcastRatePerSecond: Int?
    /// The key the app's backend signs alias tokens with (HS256), sealed with the server key; nil until one is made.
    public var sealedIdentitySecret: [UInt8]?
    /// What the app's webhook signing key is derived with, besides the server key and the id: random, new when the
    /// app is made and when the key is rotated. Nil for an app from before, whose key is derived from its id alone.
    public var webhookSecretSalt: String?
    public var createdAt: Date
    public var updatedAt: Date

    /// How long a push's inbox message stays when the push does not say: 72 hours.
    public static let defaultInboxTTL = 72 * 3600
    /// The app-level maximum unless set: 30 days, also the highest it can be set to.
    public static let defaultInboxMaxTTL = 30 * 24 * 3600
    public static let defaultInboxCap = 1000
    /// What an app's webhook posts unless it asks for more: what it posted before there was a choice.
    public static let defaultWebhookEvents: Set<WebhookEventKind> = [.tokenDeactivated]
    public static let http2 = "http2"
    public static let legacy = "legacy"
    /// Apple asked providers to read the feedback service about once a day; twice a day is the usual choice.
    public static let defaultFeedbackInterval = 12 * 3600
    /// More often than this looks like an attack to a gateway (and finds nothing new).
    public static let minimumFeedbackInterval = 300

    /// A custom APNs endpoint (such as a simulator).
    public struct Endpoint: Sendable, Equatable {
        public var host: String
        public var port: Int
        /// PEM of the CA to trust for it, if not the system's.
        public var caPEM: String?
        /// For the legacy transport: the feedback service's port on the same host (``port`` is the gateway's).
        public var feedbackPort: Int?

        public init(host: String, port: Int, caPEM: String?, feedbackPort: Int? = nil) {
            self.host = host
            self.port = port
            self.caPEM = caPEM
            self.feedbackPort = feedbackPort
        }
    }

    public init(
        id: String, topic: String, environment: AppEnvironment, endpoint: Endpoint?, sealedCredentials: [UInt8], appKeyHash: [UInt8],
        masterSecretHash: [UInt8], webhookURL: String?, createdAt: Date, updatedAt: Date
    ) {
        self.id = id
        self.topic = topic
        self.environment = environment
        self.endpoint = endpoint
        self.sealedCredentials = sealedCredentials
        self.appKeyHash = appKeyHash
        self.masterSecretHash = masterSecretHash
        self.webhookURL = webhookURL
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// Where an app's notifications go: its `environment` in the API and in the `apps` table, as the case's name.
public enum AppEnvironment: String, Sendable, Equatable, CaseIterable {
    /// Apple's APNs; each token goes to the APNs environment it was registered with, `production` when none says.
    case production
    /// Apple's APNs; each token goes to the APNs environment it was registered with, `development` when none says.
    case development
    /// The APNs simulator `tern serve` runs in its own process.
    case simulator
    /// A host and port of the app's choosing (a simulator elsewhere, a test rig): ``AppRecord/endpoint``.
    case custom

    /// Apple's APNs environment for a token that does not say which it belongs to (one given directly in a push);
    /// nil for an app that delivers elsewhere, where a token's environment does not matter.
    public var apnsEnvironment: APNsEnvironment? {
        switch self {
        case .production: .production
        case .development: .development
        case .simulator, .custom: nil
        }
    }
}

/// How a device may bind itself to a user (an alias) with the app key.
public enum UserBinding: String, Sendable, Equatable, CaseIterable {
    /// Only with an `aliasToken` the app's backend signed with the app's identity secret (the default).
    case signed
    /// With any alias: for apps with nothing private per user. Apps made before signed binding existed start here.
    case open
}

/// Who makes a registration, and what it proved; the store checks it against the device's row in the same
/// transaction that writes it, so no other registration can come between the check and the write.
public enum RegistrationCaller: Sendable, Equatable {
    /// The app's backend (master secret): may register any device id and bind any alias.
    case backend
    /// The device itself (app key).
    /// - presentedSecretHash: SHA-256 of the `X-Tern-Device-Secret` it sent, if any. An existing device's row must
    ///   hold the same hash (or, for a device from before random secrets, `legacySecretHash`).
    /// - legacySecretHash: SHA-256 of the secret the server derived for this id before random secrets.
    /// - aliasProof: what it showed for the alias in the registration. Without a token or an open app, it may only
    ///   keep the alias it has, and only one bound with proof.
    case device(presentedSecretHash: [UInt8]?, legacySecretHash: [UInt8], aliasProof: AliasProof)
}

/// What a device showed for the alias in its registration.
public enum AliasProof: Sendable, Equatable {
    /// A valid alias token the app's backend signed.
    case token
    /// Nothing, on an app whose binding is open: any alias is bound, and the binding is kept as unproven, so that
    /// switching the app to `signed` unbinds it (``TernStore/unbindUnprovenAliases(app:at:)``).
    case open
    /// Nothing: only the alias the device has may be kept, and only if it was bound with proof.
    case none
}

/// Why the store refused a registration. Nothing was written.
public enum RegistrationRefusal: String, Sendable, Equatable {
    /// The device exists and the caller did not present its secret.
    case deviceSecret
    /// A device tried to bind an alias it has not proven.
    case aliasBinding
}

/// What a device sends when it registers (`PUT /v1/apps/{app}/devices/{deviceId}`), already validated.
public struct DeviceRegistration: Sendable, Equatable {
    /// A UUID the app keeps in the keychain, lowercase.
    public var deviceID: String
    /// The APNs device token, lowercase hex.
    public var token: String
    /// Which APNs environment issued the token.
    public var environment: APNsEnvironment
    /// The app's user id. nil leaves the device's alias as it is; use ``TernStore/removeAlias(app:deviceID:at:)``
    /// to log out.
    public var alias: String?
    /// nil leaves the tags as they are; a set replaces them.
    public var tags: Set<String>?
    public var locale: String?
    public var timezone: String?
    public var appVersion: String?
    /// Who registers; the store refuses a device that does not prove what the caller needs.
    public var caller: RegistrationCaller = .backend
    /// SHA-256 of the secret the device gets if this registration creates it (ignored for an existing device).
    public var newSecretHash: [UInt8] = []

    public init(
        deviceID: String, token: String, environment: APNsEnvironment, alias: String? = nil, tags: Set<String>? = nil, locale: String? = nil,
        timezone: String? = nil, appVersion: String? = nil
    ) {
        self.deviceID = deviceID
        self.token = token
        self.environment = environment
        self.alias = alias
        self.tags = tags
        self.locale = locale
        self.timezone = timezone
        self.appVersion = appVersion
    }
}

/// A device as the registry keeps it: exactly one current token.
public struct DeviceRecord: Sendable, Equatable {
    /// How many tags a device may have.
    public static let maximumTags = 100

    public var appID: String
    public var deviceID: String
    public var token: String
    public var environment: APNsEnvironment
    public var alias: String?
    public var tags: Set<String>
    public var locale: String?
    public var timezone: String?
    public var appVersion: String?
    /// The last time the device registered this token (the pruning rule compares APNs' timestamps with it).
    public var lastRegisteredAt: Date
    /// nil while the token is live; set when APNs (or the feedback service) reported it dead.
    public var deactivatedAt: Date?
    public var deactivationReason: TokenDeactivationReason?
    public var createdAt: Date
    /// SHA-256 of the device's secret; nil for a device registered before random secrets (its secret is derived).
    public var secretHash: [UInt8]?
    /// Only on what ``TernStore/register(_:app:at:)`` returns: the device this registration took its token from, which
    /// it deleted (its open connection must end, as any deleted device's does). Never stored.
    public var tokenTakenFrom: String?

    public var isActive: Bool { deactivatedAt == nil }

    public init(
        appID: String, deviceID: String, token: String, environment: APNsEnvironment, alias: String?, tags: Set<String>, locale: String?,
        timezone: String?, appVersion: String?, lastRegisteredAt: Date, deactivatedAt: Date?, deactivationReason: TokenDeactivationReason?,
        createdAt: Date, secretHash: [UInt8]? = nil
    ) {
        self.appID = appID
        self.deviceID = deviceID
        self.token = token
        self.environment = environment
        self.alias = alias
        self.tags = tags
        self.locale = locale
        self.timezone = timezone
        self.appVersion = appVersion
        self.lastRegisteredAt = lastRegisteredAt
        self.deactivatedAt = deactivatedAt
        self.deactivationReason = deactivationReason
        self.createdAt = createdAt
        self.secretHash = secretHash
    }
}

/// A token a device had before its current one.
public struct TokenHistoryEntry: Sendable, Equatable {
    public var token: String
    public var environment: APNsEnvironment
    public var firstRegisteredAt: Date
    public var replacedAt: Date
    /// Why it stopped being the device's token.
    public var reason: TokenReplacementReason

    public init(token: String, environment: APNsEnvironment, firstRegisteredAt: Date, replacedAt: Date, reason: TokenReplacementReason) {
        self.token = token
        self.environment = environment
        self.firstRegisteredAt = firstRegisteredAt
        self.replacedAt = replacedAt
        self.reason = reason
    }
}

/// Why a token stopped being its device's current one (``TokenHistoryEntry/reason``). The API and the
/// `token_history` table show it as the case's name.
public enum TokenReplacementReason: String, Sendable, Equatable, CaseIterable {
    /// The device registered a new token.
    case replaced
    /// Another device id registered the token (the device that had it lost its id, e.g. a cleared keychain).
    case moved
}

/// A token of a device's other than its APNs device token, which Apple's frameworks give the app for push types
/// of their own (``APNsPushType/tokenSource``). A device has at most one of each kind; a push of the kind's type to
/// devices, aliases, tags or everyone goes to these instead of the device tokens.
public enum PushTokenKind: String, Sendable, Equatable, CaseIterable {
    /// PushKit's VoIP token (`PKPushRegistry`, `.voIP`): a `voip` push, an incoming call.
    case voip
    /// ActivityKit's push-to-start token (`Activity<…>.pushToStartTokenUpdates`, iOS 17.2+): a `liveactivity` push
    /// whose event is `start`. An activity's own update token belongs to that activity, not to the device.
    case pushToStart

    /// The kind of token a push of `pushType` goes to when sent to registered devices; nil for the device token's
    /// types (`alert`, `background`) and for types whose tokens Tern does not keep (given in `audience.tokens`).
    public static func of(_ pushType: APNsPushType) -> PushTokenKind? {
        switch pushType {
        case .voip: .voip
        case .liveactivity: .pushToStart
        default: nil
        }
    }
}

/// A device's token of a ``PushTokenKind``, as the registry keeps it.
public struct PushTokenRecord: Sendable, Equatable {
    public var kind: PushTokenKind
    public var token: String
    /// When the device last registered it: a 410 older than this does not deactivate it.
    public var registeredAt: Date
    /// Set when APNs called it dead; registering it again clears it.
    public var deactivatedAt: Date?
    public var deactivationReason: TokenDeactivationReason?

    public var isActive: Bool { deactivatedAt == nil }

    public init(
        kind: PushTokenKind, token: String, registeredAt: Date, deactivatedAt: Date? = nil, deactivationReason: TokenDeactivationReason? = nil
    ) {
        self.kind = kind
        self.token = token
        self.registeredAt = registeredAt
        self.deactivatedAt = deactivatedAt
        self.deactivationReason = deactivationReason
    }
}

/// A Live Activity's update token on one device (ActivityKit's `Activity.pushTokenUpdates`), registered under the
/// activity's id, which the app chooses (a match, an order): a `liveactivity` push to `audience.activity` goes to
/// every device's token for that id. A device runs a few activities at a time and each ends within hours, so the
/// registry keeps at most ``maximumPerDevice`` per device and forgets them ``lifetime`` after they started.
public struct ActivityTokenRecord: Sendable, Equatable {
    /// At most this many activities per device: registering one more forgets the device's oldest.
    public static let maximumPerDevice = 16
    /// An activity runs at most 8 hours and stays on the Lock Screen at most 4 more (ActivityKit): after that no
    /// update can reach it, and its token is forgotten.
    public static let lifetime: TimeInterval = 12 * 3600

    public var activityID: String
    public var token: String
    /// When the device first registered a token for this activity: its lifetime counts from here.
    public var startedAt: Date
    /// When the device last registered this token: a 410 older than this does not remove it.
    public var registeredAt: Date

    public init(activityID: String, token: String, startedAt: Date, registeredAt: Date) {
        self.activityID = activityID
        self.token = token
        self.startedAt = startedAt
        self.registeredAt = registeredAt
    }

    /// Whether `text` can name an activity: 1-128 letters, digits, `.`, `_`, `:` and `-` (it is a part of a URL path),
    /// and not `.` or `..`, which clients and proxies resolve as a path's steps.
    public static func isValidID(_ text: String) -> Bool {
        (1...128).contains(text.utf8.count) && text != "." && text != ".."
            && text.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
            }
    }
}

/// A Live Activity as the registry knows it: how many devices follow it now.
public struct ActivitySummary: Sendable, Equatable {
    public var activityID: String
    /// Devices with a token for it (active or not: a push passes over a deactivated device).
    public var devices: Int
    /// When the first of them registered a token for it.
    public var firstStartedAt: Date
    /// When one last registered a token for it.
    public var lastRegisteredAt: Date

    public init(activityID: String, devices: Int, firstStartedAt: Date, lastRegisteredAt: Date) {
        self.activityID = activityID
        self.devices = devices
        self.firstStartedAt = firstStartedAt
        self.lastRegisteredAt = lastRegisteredAt
    }
}

/// Whose tokens a push's recipients hold, so that APNs' verdict on a dead one removes the right thing.
public enum RecipientTokens: Sendable, Equatable {
    /// The devices' APNs device tokens, or the tokens the audience lists.
    case device
    /// The devices' tokens of a kind (``PushRecord/tokenKind``).
    case kind(PushTokenKind)
    /// The update tokens of the activity the audience names (``Audience/activity(_:aliases:)``).
    case activity
}

/// A token to deactivate (``TernStore/deactivateTokens(app:_:at:)``), with why and since when.
public struct TokenDeactivation: Sendable, Equatable {
    public var token: String
    public var reason: TokenDeactivationReason
    /// With a 410 or feedback timestamp: only a token last registered before it is deactivated.
    public var invalidSince: Date?
    /// APNs' timestamp, kept in the event.
    public var apnsTimestamp: Date?

    public init(token: String, reason: TokenDeactivationReason, invalidSince: Date?, apnsTimestamp: Date?) {
        self.token = token
        self.reason = reason
        self.invalidSince = invalidSince
        self.apnsTimestamp = apnsTimestamp
    }
}

/// A kind of event an app's webhook posts: its ``rawValue`` is the `type` of the posts that carry it, and its name in
/// the app's `webhookEvents`.
public enum WebhookEventKind: String, Sendable, Hashable, CaseIterable, Comparable {
    /// A device's token was deactivated (``TokenEvent``).
    case tokenDeactivated = "token.deactivated"
    /// A user opened a push on one of their devices, as the app reported it (``OpenEvent``).
    case pushOpened = "push.opened"

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A push the app reported its user opened on a device, for the webhooks of apps that ask for opens: the first
/// open of the push (or of its message over the devices' connections) on that device.
public struct OpenEvent: Sendable, Equatable {
    /// Increasing per store, in the order the opens were recorded; the webhook's cursor.
    public var id: Int64
    public var appID: String
    public var pushID: String
    public var deviceID: String
    /// The user the device was bound to when the open was reported.
    public var alias: String?
    public var occurredAt: Date

    public init(id: Int64, appID: String, pushID: String, deviceID: String, alias: String?, occurredAt: Date) {
        self.id = id
        self.appID = appID
        self.pushID = pushID
        self.deviceID = deviceID
        self.alias = alias
        self.occurredAt = occurredAt
    }
}

/// Whose open to record as an ``OpenEvent``: for an app whose webhook posts opens.
public struct OpenEventSubject: Sendable, Equatable {
    public var app: String
    /// The user the device is bound to now.
    public var alias: String?

    public init(app: String, alias: String?) {
        self.app = app
        self.alias = alias
    }
}

/// A token deactivation, for `GET /v1/apps/{app}/token-events` and the webhook.
public struct TokenEvent: Sendable, Equatable {
    /// Increasing per store; the listing's cursor.
    public var id: Int64
    public var appID: String
    public var deviceID: String
    public var token: String
    public var reason: TokenDeactivationReason
    /// APNs' "invalid since" timestamp, when it gave one.
    public var apnsTimestamp: Date?
    public var occurredAt: Date

    public init(
        id: Int64, appID: String, deviceID: String, token: String, reason: TokenDeactivationReason, apnsTimestamp: Date?, occurredAt: Date
    ) {
        self.id = id
        self.appID = appID
        self.deviceID = deviceID
        self.token = token
        self.reason = reason
        self.apnsTimestamp = apnsTimestamp
        self.occurredAt = occurredAt
    }
}

/// Why a token was deactivated (``TokenEvent/reason``, ``DeviceRecord/deactivationReason``): what APNs said of it.
///
/// Its ``rawValue`` is what the API, the webhook and the database show: APNs' reason (`Unregistered`,
/// `BadDeviceToken`, …), or the bare status (`410`) when APNs gave none.
public enum TokenDeactivationReason: Hashable, Sendable, CustomStringConvertible {
    /// APNs' reason: `Unregistered` or `ExpiredToken` (the token died; the legacy feedback service's reports count
    /// as `Unregistered`), `BadDeviceToken` or `DeviceTokenNotForTopic` (it was never valid here), or a reason
    /// Apple added later with a 410.
    case apns(APNsReason)
    /// APNs answered with this status (410) and no reason.
    case apnsStatus(Int)

    /// Reads the text ``rawValue`` makes. Any text gives a reason whose ``rawValue`` is that text again: one this
    /// version does not know is kept as an unknown APNs reason.
    public init(rawValue: String) {
        if let status = statusCode(from: rawValue) {
            self = .apnsStatus(status)
        } else {
            self = .apns(apnsReason(from: rawValue))
        }
    }

    public var rawValue: String {
        switch self {
        case .apns(let reason): reason.rawValue
        case .apnsStatus(let status): String(status)
        }
    }

    public var description: String { rawValue }
}

/// The status code `text` is, if `String(status)` writes it so (no sign, no leading zero): a reason's text for a
/// bare status.
func statusCode(from text: String) -> Int? {
    guard let status = Int(text), status >= 0, String(status) == text else { return nil }
    return status
}

/// The APNs reason `text` names; text that would read back spelled otherwise (an alias spelling) stays as it is,
/// an unknown reason.
func apnsReason(from text: String) -> APNsReason {
    let reason = APNsReason(rawValue: text)
    return reason.rawValue == text ? reason : .unknown(text)
}

/// Who a push goes to.
public enum Audience: Sendable, Equatable {
    case tokens([String])
    case devices([String])
    case aliases([String])
    /// Devices with any (`all == false`) or all of the tags.
    case tags([String], all: Bool)
    case everyone
    /// The devices' update tokens for a Live Activity (``ActivityTokenRecord``); with aliases, only their devices'.
    case activity(String, aliases: [String])
}

/// Where a listing of an app's devices in creation order goes on from: the last device's creation time (milliseconds)
/// and id, written `<ms>:<id>`. With the time in it, a device deleted between pages (as an operator deleting a flood of
/// made-up ones does) leaves the next page where it was.
public struct DeviceCreationCursor: Sendable, Equatable, CustomStringConvertible {
    public var createdAt: Int64
    public var deviceID: String

    public init(createdAt: Int64, deviceID: String) {
        self.createdAt = createdAt
        self.deviceID = deviceID
    }

    /// Reads `<ms>:<id>`; nil for text of another form.
    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), let createdAt = Int64(text[..<colon]), createdAt >= 0 else { return nil }
        self.init(createdAt: createdAt, deviceID: String(text[text.index(after: colon)...]))
    }

    public var description: String { "\(createdAt):\(deviceID)" }
}

/// A page of a listing, with the cursor for the next one (nil when this is the last).
/// A broadcast channel of an app (iOS 18), under the name the app's backend gave it: one broadcast to it updates or
/// ends the Live Activity on every device subscribed to it (they subscribe with `channelID`, APNs' id).
public struct BroadcastChannelRecord: Sendable, Equatable {
    public var name: String
    /// APNs' id for the channel (base64).
    public var channelID: String
    /// The APNs environment the channel belongs to: its broadcasts go there.
    public var environment: APNsEnvironment
    /// Whether APNs keeps the most recent broadcast for up to 8 hours for devices that are offline; fixed when it was
    /// made. Without, a broadcast's expiration is 0.
    public var storesMessages: Bool
    public var createdAt: Date

    public init(name: String, channelID: String, environment: APNsEnvironment, storesMessages: Bool, createdAt: Date) {
        self.name = name
        self.channelID = channelID
        self.environment = environment
        self.storesMessages = storesMessages
        self.createdAt = createdAt
    }
}

/// One broadcast to a channel and what became of it: the latest ``BroadcastRecord/kept`` of each channel are kept,
/// and they go with their channel.
public struct BroadcastRecord: Sendable, Equatable {
    /// What became of a broadcast.
    public enum Result: String, Sendable, CaseIterable {
        /// APNs took it.
        case delivered
        /// APNs refused it (``BroadcastRecord/reason`` is APNs' reason).
        case rejected
        /// No answer from APNs (``BroadcastRecord/reason`` says why: no answer in time, APNs unreachable…).
        case failed
    }

    /// How many of a channel's latest broadcasts are kept.
    public static let kept = 100

    /// Its number, newest highest; 0 until it is recorded.
    public var id: Int64
    /// The channel's name.
    public var channel: String
    public var sentAt: Date
    /// 10 or 5.
    public var priority: Int
    /// Epoch seconds until which a storing channel keeps it; 0 for at once.
    public var expiration: Int64
    /// The payload as sent (JSON text).
    public var payload: String
    public var result: Result
    /// APNs' reason for a refusal, or why there was no answer.
    public var reason: String?
    /// `apns-request-id`, as APNs answered.
    public var requestID: String?
    /// `apns-unique-id`, which Apple's push console finds the broadcast by.
    public var uniqueID: String?
    public var attempts: Int

    public init(
        id: Int64 = 0, channel: String, sentAt: Date, priority: Int, expiration: Int64, payload: String, result: Result,
        reason: String? = nil, requestID: String? = nil, uniqueID: String? = nil, attempts: Int
    ) {
        self.id = id
        self.channel = channel
        self.sentAt = sentAt
        self.priority = priority
        self.expiration = expiration
        self.payload = payload
        self.result = result
        self.reason = reason
        self.requestID = requestID
        self.uniqueID = uniqueID
        self.attempts = attempts
    }
}

public struct Page<Item: Sendable>: Sendable {
    public var items: [Item]
    public var next: String?

    public init(items: [Item], next: String?) {
        self.items = items
        self.next = next
    }
}

extension Page where Item == Recipient {
    /// The page of `found` (read with a limit one higher than `limit`): its first `limit`, and the last one's key as
    /// the cursor if there was one more. Trimmed in place: a chunk's page is thousands of recipients, and copying
    /// them out retained and released each one's strings.
    init(trimming found: consuming [Recipient], to limit: Int) {
        var items = found
        let more = items.count > limit
        if more { items.removeSubrange(limit...) }
        self.init(items: items, next: more ? items.last?.key : nil)
    }
}

/// A device's stored secret hash as a caller read it, for a change that holds only while it is still the same.
public struct StoredSecret: Sendable, Equatable {
    /// The hash, or nil for a device that has none stored (one from before device secrets).
    public var hash: [UInt8]?

    public init(_ hash: [UInt8]?) {
        self.hash = hash
    }
}
