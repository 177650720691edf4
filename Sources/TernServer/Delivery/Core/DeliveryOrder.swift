import Synchronization

/// Keeps each device token's notifications in order: at most one in flight per token, the next one sent only once
/// APNs has answered the previous one (retries included), in the order they were queued. Different tokens never
/// wait for each other.
///
/// Two notifications racing over parallel streams reach a device in either order, which is how badges jump
/// (1, 3, 2, 4). APNs delivers one connection's requests in no promised order either, so the only way to keep them in
/// order is to keep one at a time per token.
///
/// A badge-only update that is still waiting is replaced by a newer one for the same token: a burst of reads sends
/// the latest count once.
final class DeliveryOrder: Sendable {
    /// A place in one token's line.
    final class Ticket: Sendable {
        fileprivate enum State {
            case waiting(CheckedContinuation<Turn, Never>?)
            case decided(Turn)
        }

        let token: String
        let badgeOnly: Bool
        fileprivate let state: Mutex<State>

        fileprivate init(token: String, badgeOnly: Bool, goesNow: Bool) {
            self.token = token
            self.badgeOnly = badgeOnly
            self.state = Mutex(goesNow ? .decided(.go) : .waiting(nil))
        }

        /// Whether its turn has come (without waiting).
        var goesNow: Bool {
            state.withLock { if case .decided(.go) = $0 { true } else { false } }
        }

        fileprivate func decide(_ turn: Turn) {
            let waiter = state.withLock { state -> CheckedContinuation<Turn, Never>? in
                guard case .waiting(let waiter) = state else { return nil }
                state = .decided(turn)
                return waiter
            }
            waiter?.resume(returning: turn)
        }
    }

    enum Turn: Sendable {
        /// Send it now; call ``finish(_:)`` once APNs answered.
        case go
        /// A newer badge-only update for the token took its place: do not send it.
        case superseded
        /// The waiting task was cancelled: the ticket left its line; do not send it (nor call ``finish(_:)``).
        case cancelled
    }

    private struct Line {
        var waiting: [Ticket] = []
    }

    /// Tokens with a notification in flight, and who waits behind it.
    private let lines = Mutex<[String: Line]>([:])

    init() {}

    /// Takes the next place in the token's line; the ticket goes at once if nothing is in flight for the token.
    func enqueue(_ token: String, badgeOnly: Bool = false) -> Ticket {
        var superseded: [Ticket] = []
        let ticket = lines.withLock { lines -> Ticket in
            guard var line = lines[token] else {
                lines[token] = Line()
                return Ticket(token: token, badgeOnly: badgeOnly, goesNow: true)
            }
            if badgeOnly {
                superseded = line.waiting.filter(\.badgeOnly)
                line.waiting.removeAll(where: \.badgeOnly)
            }
            let ticket = Ticket(token: token, badgeOnly: badgeOnly, goesNow: false)
            line.waiting.append(ticket)
            lines[token] = line
            return ticket
        }
        for old in superseded { old.decide(.superseded) }
        return ticket
    }

    /// Waits until the ticket's turn comes, a newer badge-only update replaces it, or the task is cancelled (the
    /// ticket then leaves its line, unless its turn had come already).
    func turn(_ ticket: Ticket) async -> Turn {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let decided = ticket.state.withLock { state -> Turn? in
                    switch state {
                    case .decided(let turn): return turn
                    case .waiting: state = .waiting(continuation); return nil
                    }
                }
                if let decided { continuation.resume(returning: decided) }
            }
        } onCancel: {
            withdraw(ticket)
        }
    }

    /// Takes a waiting ticket out of its line; one whose turn came is left as it is.
    private func withdraw(_ ticket: Ticket) {
        let removed = lines.withLock { lines -> Bool in
            guard var line = lines[ticket.token], let index = line.waiting.firstIndex(where: { $0 === ticket }) else { return false }
            line.waiting.remove(at: index)
            lines[ticket.token] = line
            return true
        }
        if removed { ticket.decide(.cancelled) }
    }

    /// The token's notification in flight is answered: the next one in its line goes.
    func finish(_ token: String) {
        let next = lines.withLock { lines -> Ticket? in
            guard var line = lines[token] else { return nil }
            guard !line.waiting.isEmpty else {
                lines[token] = nil
                return nil
            }
            let next = line.waiting.removeFirst()
            lines[token] = line
            return next
        }
        next?.decide(.go)
    }

    /// Tokens with a notification in flight (for tests and metrics).
    var tokensInFlight: Int { lines.withLock { $0.count } }
}
