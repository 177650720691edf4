import Synchronization
import TernAPNs

/// An `auto` chunk's places in its tokens' lines (``DeliveryOrder``), by recipient (an index into the chunk).
///
/// An `auto` chunk learns which of its recipients go through APNs only after its admission turn: a device is found
/// offline, or does not acknowledge in time. Its places are taken in the turn all the same, so that a device's
/// fallbacks leave in the order its pushes were counted, however long the steps in between take on each chunk (a
/// presence lookup, the fallback marks: database calls that two chunks can finish in either order). Each place is
/// used when its recipient goes through APNs (``take(_:)``), or given back once it is known not to: none is left
/// holding a device's line.
final class HeldPlaces: Sendable {
    private let order: DeliveryOrder
    private let byRecipient: Mutex<[Int: (ticket: DeliveryOrder.Ticket, behindNotification: Bool)]>

    /// Takes a place in each recipient's token line, in the chunk's order and under one lock; a token that is not
    /// hex (refused later, like APNs would) takes none, nor does a token a recipient before it took one for.
    init(_ recipients: some Sequence<(index: Int, token: String)>, order: DeliveryOrder) {
        self.order = order
        var seen: Set<DeviceToken> = []
        var indices: [Int] = []
        var keys: [DeliveryOrder.LineKey] = []
        for (index, hex) in recipients {
            guard let token = try? DeviceToken(hex: hex), seen.insert(token).inserted else { continue }
            indices.append(index)
            keys.append(DeliveryOrder.LineKey(token))
        }
        // Channel-backed: the device's channel carries the push's message in order by itself, so a later push's
        // channel message does not wait for these places.
        byRecipient = Mutex(Dictionary(uniqueKeysWithValues: zip(indices, order.enqueueChannelBacked(keys: keys))))
    }

    /// The recipient's place, if a notification the device gets only through APNs was ahead of it in line and its
    /// turn has not come: the device's channel message waits for that turn. Nil otherwise (the message goes now).
    func channelWait(_ recipient: Int) -> DeliveryOrder.Ticket? {
        byRecipient.withLock { held in
            guard let place = held[recipient], place.behindNotification, !place.ticket.goesNow else { return nil }
            return place.ticket
        }
    }

    /// The recipient's place, for its notification (which hands the turn on once answered); nil if it holds none.
    func take(_ recipient: Int) -> DeliveryOrder.Ticket? {
        byRecipient.withLock { $0.removeValue(forKey: recipient)?.ticket }
    }

    /// Gives back the places these recipients still hold: they do not go through APNs.
    func giveBack(_ recipients: some Sequence<Int>) {
        let tickets = byRecipient.withLock { held in recipients.compactMap { held.removeValue(forKey: $0)?.ticket } }
        if !tickets.isEmpty { order.giveBack(tickets) }
    }

    /// Gives back every place still held: the chunk is done with APNs.
    func giveBackAll() {
        let tickets = byRecipient.withLock { held in
            defer { held = [:] }
            return held.values.map(\.ticket)
        }
        if !tickets.isEmpty { order.giveBack(tickets) }
    }

    /// How many places are still held (for tests).
    var count: Int { byRecipient.withLock { $0.count } }
}
