import Synchronization
import TernAPNs

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
///
/// The online channel's pushes take places here too (``Kind/channelBacked``): an `auto` push for the fallbacks it may
/// send, and a channel message behind a notification the device gets only through APNs, so that it does not overtake
/// it. Such a place that sends nothing after all is given back (``giveBack(_:)``).
///
/// A fan-out puts every one of its notifications through here, nearly all of them to a token with nothing in
/// flight: lines are keyed by the token's bytes, a whole chunk is queued and a bunch of answers handed on under one
/// lock each, and only a notification that has to wait gets an object to wait on.
final class DeliveryOrder: Sendable {
    /// A place in one token's line. Copied a few times per notification on its way, so it holds no more than the
    /// line's key (inline words for a 32-byte token) and, when it has to wait, its waiter.
    struct Ticket: Sendable {
        /// The token as its line's key, worked out once.
        fileprivate let key: LineKey
        /// Nil when its turn had come as it was queued (the usual case, no wait to keep).
        fileprivate let waiter: Waiter?

        /// Whether its turn has come (without waiting).
        var goesNow: Bool { waiter?.goesNow ?? true }
    }

    /// The turn of a ticket that had to wait.
    fileprivate final class Waiter: Sendable {
        enum State {
            case waiting(CheckedContinuation<Turn, Never>?)
            case decided(Turn)
        }

        let badgeOnly: Bool
        /// An `online` or `auto` push's place, whose message also goes over the device's channel (``Kind``).
        let channelBacked: Bool
        let state = Mutex(State.waiting(nil))

        init(badgeOnly: Bool, channelBacked: Bool) {
            self.badgeOnly = badgeOnly
            self.channelBacked = channelBacked
        }

        var goesNow: Bool {
            state.withLock { if case .decided(.go) = $0 { true } else { false } }
        }

        /// Its turn, once decided.
        var decision: Turn? {
            state.withLock { if case .decided(let turn) = $0 { turn } else { nil } }
        }

        /// Decides its turn, under the lines' lock as it leaves its line, so that a waiter is in its line exactly
        /// while it has no turn. - Returns: the task waiting for it, to resume once the lines' lock is let go.
        func decide(_ turn: Turn) -> Resumption? {
            state.withLock { state -> Resumption? in
                guard case .waiting(let waiter) = state else { return nil }
                state = .decided(turn)
                return waiter.map { Resumption(task: $0, turn: turn) }
            }
        }
    }

    /// A task waiting for a turn that was decided: resumed once the lines' lock is let go.
    fileprivate struct Resumption {
        let task: CheckedContinuation<Turn, Never>
        let turn: Turn

        static func resume(_ resumptions: [Resumption]) {
            for resumption in resumptions { resumption.task.resume(returning: resumption.turn) }
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

    /// What a place is for, as a device's channel sees it.
    enum Kind: Sendable {
        /// A notification the device gets only through APNs: an `apns` push's, a wake-up, a badge update. A channel
        /// message of a later push waits for it.
        case notification
        /// A place of an `online` or `auto` push, which keeps its message for the device's channel too: the channel
        /// carries those messages in order by itself, so a later channel message does not wait for it.
        case channelBacked
    }

    /// A token's line.
    private enum Line {
        /// Nothing in flight. An answered token stays in the table like this until the next sweep: taking it out
        /// at once cost more than the answer's hash (a removal from Swift's dictionary rehashes its neighbours).
        case idle
        /// A place whose turn has come (a notification in flight), whether it is channel-backed, and who waits
        /// behind it.
        case busy(headChannelBacked: Bool, [Waiter])

        /// Whether a notification the device gets only through APNs is in the line.
        var holdsNotification: Bool {
            guard case .busy(let headChannelBacked, let waiters) = self else { return false }
            return !headChannelBacked || waiters.contains { !$0.channelBacked }
        }
    }

    /// A token as the table's key: a 32-byte token (every token APNs has handed out so far) held inline as four
    /// words, so a probe compares the table's own memory instead of following each stored key to its byte array (a
    /// cache miss per probe once the table outgrows the cache); any other length keeps its bytes.
    struct LineKey: Hashable {
        private let words: (UInt64, UInt64, UInt64, UInt64)
        /// The bytes of a token that is not 32 bytes long; nil for one that is.
        private let other: [UInt8]?

        init(_ token: DeviceToken) {
            let bytes = token.bytes
            guard bytes.count == 32 else {
                words = (0, 0, 0, 0)
                other = bytes
                return
            }
            words = bytes.withUnsafeBytes { raw in
                (raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                 raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
            }
            other = nil
        }

        static func == (lhs: LineKey, rhs: LineKey) -> Bool {
            lhs.words == rhs.words && lhs.other == rhs.other
        }

        func hash(into hasher: inout Hasher) {
            if let other {
                other.withUnsafeBytes { hasher.combine(bytes: $0) }
            } else {
                hasher.combine(words.0)
                hasher.combine(words.1)
                hasher.combine(words.2)
                hasher.combine(words.3)
            }
        }
    }

    /// Every token's line, and how many are busy.
    private struct Lines {
        var byToken: [LineKey: Line] = [:]
        var busy = 0

        /// Takes the next place in the token's line: nil when nothing was in flight (it goes now), else its waiter.
        /// `behindNotification` says whether a notification the device gets only through APNs was in the line.
        mutating func enqueue(
            _ token: LineKey, badgeOnly: Bool, kind: Kind, superseded: inout [Waiter], behindNotification: inout Bool
        ) -> Waiter? {
            var becameBusy = false
            let channelBacked = kind == .channelBacked
            // One hash for a token with nothing in flight, the fan-out's case: found or added, and marked busy.
            func join(_ line: inout Line) -> Waiter? {
                behindNotification = line.holdsNotification
                guard case .busy(let headChannelBacked, var waiters) = line else {
                    line = .busy(headChannelBacked: channelBacked, [])
                    becameBusy = true
                    return nil
                }
                line = .idle  // the array is then referenced once, and changes in place
                if badgeOnly {
                    superseded += waiters.filter(\.badgeOnly)
                    waiters.removeAll(where: \.badgeOnly)
                }
                let waiter = Waiter(badgeOnly: badgeOnly, channelBacked: channelBacked)
                waiters.append(waiter)
                line = .busy(headChannelBacked: headChannelBacked, waiters)
                return waiter
            }
            let waiter = join(&byToken[token, default: .idle])
            if becameBusy { busy += 1 }
            return waiter
        }

        /// Whether the token's line holds a notification the device gets only through APNs; a token with no line
        /// is not added to the table.
        func holdsNotification(_ token: LineKey) -> Bool {
            byToken[token]?.holdsNotification ?? false
        }

        /// The token's notification in flight is answered. - Returns: the waiter whose turn it is now, if any.
        mutating func finish(_ token: LineKey) -> Waiter? {
            guard let index = byToken.index(forKey: token), case .busy(_, var waiters) = byToken.values[index] else { return nil }
            byToken.values[index] = .idle
            guard !waiters.isEmpty else {
                busy -= 1
                return nil
            }
            let next = waiters.removeFirst()
            byToken.values[index] = .busy(headChannelBacked: next.channelBacked, waiters)
            return next
        }

        /// Takes a waiting ticket out of its line. - Returns: false if it is in none (its turn came).
        mutating func withdraw(_ waiter: Waiter, token: LineKey) -> Bool {
            guard let index = byToken.index(forKey: token), case .busy(let headChannelBacked, var waiters) = byToken.values[index],
                let position = waiters.firstIndex(where: { $0 === waiter })
            else { return false }
            byToken.values[index] = .idle
            waiters.remove(at: position)
            byToken.values[index] = .busy(headChannelBacked: headChannelBacked, waiters)
            return true
        }

        /// Drops the idle lines once they outnumber the busy ones and ``sweepAt``: the table stays within a few
        /// thousand tokens more than are in flight, however many a fan-out reaches, and a sweep rehashes only the
        /// busy ones.
        mutating func sweepIfMostlyIdle() {
            let idle = byToken.count - busy
            guard idle > Self.sweepAt, idle > busy else { return }
            // Room for the busy ones and the idle ones until the next sweep: filling the table up again does not
            // grow it a doubling at a time, rehashing it each time.
            var kept: [LineKey: Line] = [:]
            kept.reserveCapacity(busy * 2 + Self.sweepAt * 2)
            for (token, line) in byToken {
                if case .busy = line { kept[token] = line }
            }
            byToken = kept
        }

        static let sweepAt = 16_384
    }

    private let lines = Mutex(Lines())

    init() {}

    /// Takes the next place in the token's line; the ticket goes at once if nothing is in flight for the token.
    func enqueue(_ token: DeviceToken, badgeOnly: Bool = false) -> Ticket {
        enqueue(keys: [LineKey(token)], badgeOnly: badgeOnly)[0]
    }

    /// Takes the next place in each key's line, in order, under one lock. A caller makes each key where its token lies
    /// (`items.map { LineKey($0.token) }`): a copy of the token on the way would retain and release its references.
    func enqueue(keys: [LineKey], badgeOnly: Bool = false) -> [Ticket] {
        var resumptions: [Resumption] = []
        let waiters = lines.withLock { lines -> [Waiter?] in
            var superseded: [Waiter] = []
            var behind = false
            let waiters = keys.map {
                lines.enqueue($0, badgeOnly: badgeOnly, kind: .notification, superseded: &superseded, behindNotification: &behind)
            }
            resumptions = superseded.compactMap { $0.decide(.superseded) }
            return waiters
        }
        Resumption.resume(resumptions)
        return zip(keys, waiters).map { Ticket(key: $0, waiter: $1) }
    }

    /// Channel-backed places in each key's line, in order, under one lock, each with whether a notification the device
    /// gets only through APNs is ahead of it: the device's channel message waits for that place's turn, while one
    /// with none ahead goes at once (an `auto` push's places, kept for its fallbacks).
    func enqueueChannelBacked(keys: [LineKey]) -> [(ticket: Ticket, behindNotification: Bool)] {
        lines.withLock { lines in
            var superseded: [Waiter] = []
            return keys.map { key in
                var behind = false
                let waiter = lines.enqueue(key, badgeOnly: false, kind: .channelBacked, superseded: &superseded, behindNotification: &behind)
                return (Ticket(key: key, waiter: waiter), behind)
            }
        }
    }

    /// A channel-backed place in each key's line that holds a notification the device gets only through APNs, and
    /// none in the others (nil): an `online` push's channel message waits for such a notification pushed before it,
    /// and for nothing else. Under one lock, in order.
    func enqueueBehindNotifications(keys: [LineKey]) -> [Ticket?] {
        lines.withLock { lines in
            var superseded: [Waiter] = []
            return keys.map { key in
                // Looked up first: a channel message to a device with nothing in its line, the usual case, leaves no
                // line behind in the table (pure channel traffic never answers a notification, which sweeps it).
                guard lines.holdsNotification(key) else { return nil }
                var behind = false
                let waiter = lines.enqueue(key, badgeOnly: false, kind: .channelBacked, superseded: &superseded, behindNotification: &behind)
                return waiter.map { Ticket(key: key, waiter: $0) }
            }
        }
    }

    /// Waits until the ticket's turn comes, a newer badge-only update replaces it, or the task is cancelled (the
    /// ticket then leaves its line, unless its turn had come already).
    func turn(_ ticket: Ticket) async -> Turn {
        guard let waiter = ticket.waiter else { return .go }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let decided = waiter.state.withLock { state -> Turn? in
                    switch state {
                    case .decided(let turn): return turn
                    case .waiting: state = .waiting(continuation); return nil
                    }
                }
                if let decided { continuation.resume(returning: decided) }
            }
        } onCancel: {
            withdraw(waiter, key: ticket.key)
        }
    }

    /// Takes a waiting ticket out of its line; one whose turn came is left as it is.
    private func withdraw(_ waiter: Waiter, key: LineKey) {
        let resumption = lines.withLock { $0.withdraw(waiter, token: key) ? waiter.decide(.cancelled) : nil }
        Resumption.resume(resumption.map { [$0] } ?? [])
    }

    /// Gives places back unused: a ticket still waiting leaves its line, and one whose turn has come hands the turn
    /// on; one that left its line already (cancelled, or a badge-only update replaced) is passed over. For places
    /// that send nothing through APNs after all (an `auto` push's, kept for fallbacks that were not needed; an
    /// `online` push's, once its channel message is handed over); each is given back once, and never after its
    /// notification went (``finish(_:)`` hands the turn on then).
    func giveBack(_ tickets: some Sequence<Ticket>) {
        var resumptions: [Resumption] = []
        lines.withLock { lines in
            for ticket in tickets {
                if let waiter = ticket.waiter {
                    switch waiter.decision {
                    case .cancelled, .superseded:
                        continue
                    case .go:
                        break
                    case nil:
                        // Still in its line: out of it, with nothing to hand on.
                        if lines.withdraw(waiter, token: ticket.key), let resumption = waiter.decide(.cancelled) { resumptions.append(resumption) }
                        continue
                    }
                }
                if let next = lines.finish(ticket.key), let resumption = next.decide(.go) { resumptions.append(resumption) }
            }
            lines.sweepIfMostlyIdle()
        }
        Resumption.resume(resumptions)
    }

    /// The token's notification in flight is answered: the next one in its line goes.
    func finish(_ token: DeviceToken) {
        finish(keys: [LineKey(token)])
    }

    /// Each token's notification in flight is answered (a bunch of answers, under one lock).
    func finish(_ tokens: some Sequence<DeviceToken>) {
        finish(keys: tokens.map(LineKey.init))
    }

    /// Each ticket's notification, in flight, is answered (a bunch of answers, under one lock).
    func finish(_ tickets: some Sequence<Ticket>) {
        finish(keys: tickets.map(\.key))
    }

    private func finish(keys: [LineKey]) {
        var resumptions: [Resumption] = []
        lines.withLock { lines in
            for key in keys {
                if let next = lines.finish(key), let resumption = next.decide(.go) { resumptions.append(resumption) }
            }
            lines.sweepIfMostlyIdle()
        }
        Resumption.resume(resumptions)
    }

    /// Tokens with a notification in flight (for tests and metrics).
    var tokensInFlight: Int { lines.withLock { $0.busy } }

    /// Tokens in the table, busy or not yet swept (for tests).
    var linesKept: Int { lines.withLock { $0.byToken.count } }
}
