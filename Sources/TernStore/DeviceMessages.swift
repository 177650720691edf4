import Foundation

/// A message for one device's own connection (the online channel): kept until the device acknowledges it or it
/// expires, numbered in the device's order.
///
/// A push with `delivery` `online` or `auto` keeps one per device it reaches. The device's connection sends them in
/// `sequence` order; the device acknowledges them by `id`, and after an acknowledgement a message is never sent
/// again. A connection that resumes with `after=SEQ` gets those after `SEQ` that are neither acknowledged nor expired.
public struct DeviceMessage: Sendable, Equatable {
    public var appID: String
    public var deviceID: String
    /// The device's own count: 1 for its first message, then one more for each.
    public var sequence: Int64
    /// The same for the same push and device whoever keeps it (the server derives it from both), so a chunk sent
    /// again keeps no second copy, and the APNs payload of a fallback can name it.
    public var id: String
    public var pushID: String
    /// The notification (title, body, badge… as the device sees them), as a JSON object, or nil.
    public var notification: String?
    /// The push's custom data, as a JSON object, or nil.
    public var data: String?
    public var createdAt: Date
    public var expiresAt: Date

    public init(
        appID: String, deviceID: String, sequence: Int64, id: String, pushID: String, notification: String?, data: String?,
        createdAt: Date, expiresAt: Date
    ) {
        self.appID = appID
        self.deviceID = deviceID
        self.sequence = sequence
        self.id = id
        self.pushID = pushID
        self.notification = notification
        self.data = data
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// What a push keeps for one device: the store numbers it (``DeviceMessage``).
public struct DeviceMessageDraft: Sendable, Equatable {
    public var deviceID: String
    public var id: String
    public var notification: String?
    public var data: String?

    public init(deviceID: String, id: String, notification: String?, data: String?) {
        self.deviceID = deviceID
        self.id = id
        self.notification = notification
        self.data = data
    }
}

/// What happened to a push's device messages, for `GET …/pushes/{id}`.
public struct DeviceMessageCounts: Sendable, Equatable {
    /// Sent over a device's connection (at least once).
    public var deliveredOnline = 0
    /// Acknowledged by the device.
    public var acked = 0
    /// Sent through APNs because the device was offline or did not acknowledge in time.
    public var fellBackToAPNs = 0
    /// Acknowledged after the fallback went out: the device had it twice (its SDK shows it once).
    public var ackedAfterFallback = 0
    /// Reported opened by the device.
    public var opened = 0

    public init() {}
}

/// Which node holds a device's connection now.
public struct DevicePresence: Sendable, Equatable {
    public var deviceID: String
    public var node: String
    public var connection: String

    public init(deviceID: String, node: String, connection: String) {
        self.deviceID = deviceID
        self.node = node
        self.connection = connection
    }
}

/// A device's connection on a node, as the presence table keeps it.
public struct PresenceEntry: Sendable, Equatable {
    public var app: String
    public var deviceID: String
    public var node: String
    /// Unique per connection: only this connection's goodbye removes the entry.
    public var connection: String

    public init(app: String, deviceID: String, node: String, connection: String) {
        self.app = app
        self.deviceID = deviceID
        self.node = node
        self.connection = connection
    }
}
