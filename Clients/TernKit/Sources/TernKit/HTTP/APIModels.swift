import Foundation

/// Who the device is to the server on every call after its first registration: its id and the secret that
/// registration answered. The secret is sent in `X-Tern-Device-Secret` and never printed.
public struct DeviceCredentials: Sendable, Equatable, CustomStringConvertible {
    public var deviceID: String
    public var secret: String

    public init(deviceID: String, secret: String) {
        self.deviceID = deviceID
        self.secret = secret
    }

    public var description: String { "device \(deviceID) (secret withheld)" }
}

/// A device as the server answered a registration, a sign-out or a change of tags.
public struct RegisteredDevice: Sendable, Equatable, CustomStringConvertible {
    public var deviceID: String
    /// The user the device is bound to, if any.
    public var alias: String?
    public var tags: [String]
    /// False once APNs said the token is dead (until the app registers again).
    public var active: Bool
    /// Only in the answer to the registration that created the device: keep it before anything else.
    public var deviceSecret: String?

    public var description: String {
        "device \(deviceID) alias \(alias ?? "none") tags \(tags)" + (deviceSecret == nil ? "" : " (new secret withheld)")
    }
}

/// One message of the user's inbox (or the device's own while it has no user).
public struct InboxMessage: Sendable, Equatable, Identifiable, Decodable {
    /// The push's id; the notification carried it as `{"tern": {"messageId": …}}`.
    public var id: String
    public var sequence: Int64
    public var title: String?
    public var body: String?
    /// The push's custom data, if it had any.
    public var data: TernJSON?
    public var createdAt: Date
    public var expiresAt: Date
    public var read: Bool
    public var readAt: Date?
}

/// A page of the inbox, oldest first.
public struct InboxPage: Sendable, Equatable, Decodable {
    public var messages: [InboxMessage]
    /// The cursor of the next page, nil on the last one.
    public var next: String?
    /// Unread messages in the whole inbox (what the icon's badge shows).
    public var unread: Int
}

/// The answer to marking messages read.
public struct ReadResult: Sendable, Equatable, Decodable {
    /// How many were unread and now are read.
    public var marked: Int
    /// Unread messages left.
    public var unread: Int
}

// MARK: What goes over the wire (only the fields the API names: the server refuses any other)

struct RegistrationBody: Encodable {
    var token: String
    var environment: String
    var alias: String?
    var aliasToken: String?
    var tags: [String]?
    var locale: String?
    var timezone: String?
    var appVersion: String?
}

struct TagsBody: Encodable {
    var add: [String]?
    var remove: [String]?
}

struct ReadBody: Encodable {
    var upTo: String?
    var ids: [String]?
}

/// One of the two: a device message, or a push that came through APNs.
struct OpenBody: Encodable {
    var messageId: String?
    var pushId: String?
}

/// One of the two: device messages, or a push that came through APNs.
struct AckBody: Encodable {
    var ids: [String]?
    var pushId: String?
}

struct AckAnswer: Decodable {
    var acked: Int
}

/// A token of the device's other than its APNs device token, which another framework gives the app: pushes of its
/// type to the device's user, tags or everyone go to it.
public enum PushTokenKind: String, Sendable, Equatable, Hashable, CaseIterable {
    /// PushKit's VoIP token (`PKPushCredentials.token` for `.voIP`): `voip` pushes, incoming calls.
    case voip
    /// ActivityKit's push-to-start token (`Activity<…>.pushToStartTokenUpdates`, iOS 17.2+): `liveactivity` pushes
    /// that start an activity.
    case pushToStart
}

/// The device's token of a ``PushTokenKind`` as the server keeps it.
public struct RegisteredPushToken: Sendable, Equatable, Decodable {
    public var kind: String
    /// Lowercase hex.
    public var token: String
    /// False once APNs said the token is dead (until the app sets it again).
    public var active: Bool
}

struct PushTokenBody: Encodable {
    var token: String
}

/// A broadcast channel (iOS 18) as the server keeps it, under the name the app's backend gave it.
public struct BroadcastChannel: Sendable, Equatable, Decodable {
    public var name: String
    /// APNs' id: subscribe the Live Activity to it (ActivityKit's `pushType: .channel(channelID)`).
    public var channelID: String
    /// `production` or `development`: the APNs environment it belongs to (a development build's activity subscribes
    /// to a development channel).
    public var environment: String
    /// `none`, or `mostRecent`: APNs keeps the last broadcast for a device that is offline, up to 8 hours.
    public var storage: String
    public var createdAt: Date

    private enum CodingKeys: String, CodingKey {
        case name, channelID = "channelId", environment, storage, createdAt
    }
}

/// A Live Activity's update token on the device (ActivityKit's `Activity.pushTokenUpdates`) as the server keeps it,
/// under the activity's id: the backend's `liveactivity` pushes to `audience.activity` update or end it. The server
/// keeps at most ``maximumPerDevice`` activities per device and forgets each ``lifetime`` after it started.
public struct RegisteredActivityToken: Sendable, Equatable, Decodable {
    /// The server keeps at most this many activities per device: one more forgets the device's oldest.
    public static let maximumPerDevice = 16
    /// The server forgets an activity this long after it started (ActivityKit's 8 hours running and 4 more on the
    /// Lock Screen): no update can reach it after that.
    public static let lifetime: TimeInterval = 12 * 3600

    public var activityID: String
    /// Lowercase hex.
    public var token: String
    /// When the device first registered a token for the activity: its lifetime counts from here.
    public var startedAt: Date
    /// When the device last registered this token.
    public var registeredAt: Date
    /// When the server forgets it.
    public var expiresAt: Date

    private enum CodingKeys: String, CodingKey {
        case activityID = "activityId", token, startedAt, registeredAt, expiresAt
    }

    /// Whether `id` can name an activity: 1-128 ASCII letters, digits, `.`, `_`, `:` and `-` (it is a part of a URL
    /// path), as the server takes.
    public static func isValidActivityID(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count) && id != "." && id != ".."
            && id.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }
}

struct DeviceAnswer: Decodable {
    var deviceId: String
    var alias: String?
    var tags: [String]
    var active: Bool
    var deviceSecret: String?

    var device: RegisteredDevice {
        RegisteredDevice(deviceID: deviceId, alias: alias, tags: tags, active: active, deviceSecret: deviceSecret)
    }
}

/// The server's error shape: `{"error": "...", "message": "...", "field": "..."}`.
struct ErrorAnswer: Decodable {
    var error: String
    var message: String
    var field: String?
}
