import Foundation

/// A notification the user opened (tapped, or chose one of its actions), to route to the right screen.
public struct OpenedNotification: Sendable, Equatable, Identifiable {
    /// What makes two reports of the same open one: the notification's request identifier when there is one, else
    /// Tern's message id, else the payload itself (iOS reports the notification that launched the app both in the
    /// launch options, without an identifier, and to the notification center's delegate).
    public var id: String
    public var payload: TernPayload
    /// `com.apple.UNNotificationDefaultActionIdentifier` for a tap, else the action's identifier.
    public var actionIdentifier: String

    public static let defaultAction = "com.apple.UNNotificationDefaultActionIdentifier"

    public init(payload: TernPayload, actionIdentifier: String = OpenedNotification.defaultAction) {
        self.payload = payload
        self.actionIdentifier = actionIdentifier
        // Tern's ids are the same in both reports; the request identifier is not in the launch options.
        self.id = payload.messageID ?? payload.pushID ?? payload.inboxMessageID ?? "payload:" + TernJSON.object(payload.json).description
    }
}

/// Holds what the user opened until the app is ready to route it, then hands each open over once (seed 004 #7: no
/// guessed delay until the UI is up; the app says when it is). A value.
///
/// Bounded: it holds at most `capacity` opens; past that the oldest goes (the user's latest tap is what they want
/// to see). It remembers the last `memory` ids it took, so a second report of the same open is dropped.
public struct OpenHolder: Sendable {
    public let capacity: Int
    public let memory: Int
    public private(set) var held: [OpenedNotification] = []
    private var recent: [String] = []

    public init(capacity: Int = 8, memory: Int = 32) {
        self.capacity = max(1, capacity)
        self.memory = max(1, memory)
    }

    /// The user opened `notification`. - Returns: false if it is a second report of one already taken.
    public mutating func opened(_ notification: OpenedNotification) -> Bool {
        guard !recent.contains(notification.id) else { return false }
        recent.append(notification.id)
        if recent.count > memory { recent.removeFirst(recent.count - memory) }
        held.append(notification)
        if held.count > capacity { held.removeFirst(held.count - capacity) }
        return true
    }

    /// The oldest open held, handed over (once).
    public mutating func take() -> OpenedNotification? {
        held.isEmpty ? nil : held.removeFirst()
    }
}
