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
