import Foundation

/// Keeps the icon's badge equal to the server's unread count (seed 003): decides, from what the app hears, when to
/// set the badge and when to ask the server. A value: facts in, actions out, the time passed in.
///
/// Facts arrive out of order (an answer to an older request after a newer message), so each carries its place:
/// an answer is as new as the moment its request went out, a message as the moment it arrived. The badge follows
/// the newest fact only, and an older answer that disagrees with it has the count asked for again. A message's badge is the count when the server sent it; one that arrives late (a backlog
/// after reconnecting) may be out of date (reads on another device lowered it), so the count is asked for instead.
public struct BadgeKeeper: Sendable {
    public enum Action: Sendable, Equatable {
        case none
        /// Set the icon's badge to this.
        case set(Int)
        /// Ask the server for the unread count (``countRequested()``, then ``countAnswered(_:ticket:)``).
        case refresh
    }

    /// A request for the count, as new as the moment it went out.
    public struct Ticket: Sendable, Equatable {
        fileprivate let order: UInt64
    }

    /// A message's badge older than this is not shown as is (a refresh instead).
    public var staleAfter: TimeInterval
    /// What the icon shows, as far as TernKit knows (nil: not known yet).
    public private(set) var shown: Int?
    /// Increases with every fact.
    private var order: UInt64 = 0
    /// The place of the fact the badge shows now.
    private var shownOrder: UInt64 = 0

    public init(staleAfter: TimeInterval = 30) {
        self.staleAfter = staleAfter
    }

    /// A request for the unread count goes out now.
    public mutating func countRequested() -> Ticket {
        order += 1
        return Ticket(order: order)
    }

    /// The server answered the count (an inbox page, marking messages read). Applied unless something newer was
    /// applied after the request went out. Such an answer that disagrees with what the badge shows is not dropped
    /// either: the two crossed, and which the server counted last cannot be told from here (a read sent first and
    /// answered last may be the newest state: the badge stayed at 3 after the inbox was read to 0). So the count is
    /// asked for again, and that answer is newer than both.
    public mutating func countAnswered(_ unread: Int, ticket: Ticket) -> Action {
        guard ticket.order > shownOrder else { return max(0, unread) == shown ? .none : .refresh }
        return show(unread, order: ticket.order)
    }

    /// A message arrived over the channel carrying the badge the server gave it (`notification.badge`): nothing
    /// else will put it on the icon (APNs did not carry it).
    public mutating func messageArrived(badge: Int?, createdAt: Date?, now: Date) -> Action {
        guard let badge else { return .none }
        order += 1
        if let createdAt, now.timeIntervalSince(createdAt) > staleAfter { return .refresh }
        return show(badge, order: order)
    }

    /// iOS set the badge itself (a notification with `aps.badge`, such as the server's silent badge update): noted,
    /// so an older answer does not undo it.
    public mutating func systemShowed(_ badge: Int) {
        order += 1
        shownOrder = order
        shown = max(0, badge)
    }

    private mutating func show(_ value: Int, order: UInt64) -> Action {
        shownOrder = order
        let value = max(0, value)
        guard value != shown else { return .none }
        shown = value
        return .set(value)
    }
}
