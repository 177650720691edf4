import Foundation
import Logging
import Synchronization
import TernAPNs
import TernStore
import TernTestSupport
import Testing

@testable import TernServer

/// A token named by a short string, for the lines (any bytes are a token to them).
private func token(_ name: String) -> DeviceToken {
    try! DeviceToken(bytes: Array(name.utf8))
}

/// The per-token lines and the admission queue, as values.
struct DeliveryOrderTests {
    /// Records the order in which turns come.
    private final class Turns: Sendable {
        let order = Mutex<[String]>([])
        func note(_ name: String) { order.withLock { $0.append(name) } }
        var names: [String] { order.withLock { $0 } }
    }

    @Test func aTokensNotificationsGoOneAtATimeInQueueOrderAndOtherTokensDoNotWait() async throws {
        let order = DeliveryOrder()
        let first = order.enqueue(token("a"))
        let second = order.enqueue(token("a"))
        let third = order.enqueue(token("a"))
        let other = order.enqueue(token("b"))
        #expect(first.goesNow && other.goesNow)
        #expect(!second.goesNow && !third.goesNow)

        // The first is answered: only the next in line goes.
        order.finish(token("a"))
        #expect(second.goesNow && !third.goesNow)
        #expect(await order.turn(second) == .go)
        let turns = Turns()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { if case .go = await order.turn(third) { turns.note("third") } }
            order.finish(token("a"))
            try await group.waitForAll()
        }
        #expect(turns.names == ["third"])
        order.finish(token("a"))
        order.finish(token("b"))
        #expect(order.tokensInFlight == 0)
    }

    @Test func answeredLinesAreSweptAndATokenSeenBeforeQueuesAsUsual() {
        let order = DeliveryOrder()
        // A fan-out's worth of tokens, each sent once and answered: more than a sweep's worth of idle lines.
        let tokens = (0..<40_000).map { index in withUnsafeBytes(of: UInt32(index).bigEndian) { try! DeviceToken(bytes: Array($0)) } }
        let held = order.enqueue(token("held"))
        for bunch in stride(from: 0, to: tokens.count, by: 1_000) {
            let slice = Array(tokens[bunch..<min(bunch + 1_000, tokens.count)])
            let tickets = order.enqueue(keys: slice.map(DeliveryOrder.LineKey.init))
            #expect(tickets.allSatisfy { $0.goesNow })
            order.finish(slice)
        }
        // The one still in flight kept its line through the sweeps; the answered ones queue as if new.
        #expect(order.tokensInFlight == 1)
        #expect(held.goesNow)
        let behind = order.enqueue(token("held"))
        #expect(!behind.goesNow)
        let again = order.enqueue(tokens[7])
        let second = order.enqueue(tokens[7])
        #expect(again.goesNow && !second.goesNow)
        order.finish(token("held"))
        #expect(behind.goesNow)
        order.finish([token("held"), tokens[7], tokens[7]])
        #expect(order.tokensInFlight == 0)
    }

    @Test func thirtyTwoByteTokensAreOneLineByTheirBytesAndTellApartInEveryWord() {
        let order = DeliveryOrder()
        let base = [UInt8](repeating: 0xab, count: 32)
        // The same token, parsed from its hex twice: one line.
        let first = order.enqueue(try! DeviceToken(hex: String(repeating: "ab", count: 32)))
        let same = order.enqueue(try! DeviceToken(bytes: base))
        #expect(first.goesNow && !same.goesNow)
        // One byte changed in each 8-byte word, and the same 32 bytes with one more: each its own line.
        var others = (0..<4).map { word -> DeviceToken in
            var bytes = base
            bytes[word * 8 + 7] ^= 1
            return try! DeviceToken(bytes: bytes)
        }
        others.append(try! DeviceToken(bytes: base + [0xab]))
        let theirs = order.enqueue(keys: others.map(DeliveryOrder.LineKey.init))
        #expect(theirs.allSatisfy { $0.goesNow })
        #expect(order.tokensInFlight == 6)
        order.finish(try! DeviceToken(bytes: base))
        #expect(same.goesNow)
        order.finish([try! DeviceToken(bytes: base)] + others)
        #expect(order.tokensInFlight == 0)
    }

    @Test func aCancelledWaiterLeavesItsLineAndTheNextOneGetsTheTurn() async throws {
        let order = DeliveryOrder()
        _ = order.enqueue(token("a"))
        let cancelled = order.enqueue(token("a"))
        let next = order.enqueue(token("a"))
        let waiting = Task { await order.turn(cancelled) }
        waiting.cancel()
        #expect(await waiting.value == .cancelled)
        order.finish(token("a"))
        #expect(next.goesNow, "the cancelled ticket does not hold the line")
        order.finish(token("a"))
        #expect(order.tokensInFlight == 0)
    }

    @Test func aPlaceGivenBackLeavesItsLineBeforeItsTurnAndHandsTheTurnOnAfterIt() async throws {
        let order = DeliveryOrder()
        _ = order.enqueue(token("a"))
        let unused = order.enqueue(token("a"))
        let third = order.enqueue(token("a"))
        // Given back while it waits: out of its line, and told so if anyone waits on it.
        order.giveBack([unused])
        #expect(await order.turn(unused) == .cancelled)
        order.finish(token("a"))
        #expect(third.goesNow, "the place given back does not hold the line")
        // Given back once its turn has come: the turn goes to the next in line.
        let fourth = order.enqueue(token("a"))
        order.giveBack([third])
        #expect(fourth.goesNow)
        // One whose turn came as it was queued, given back with another token's waiting place.
        let other = order.enqueue(token("b"))
        let otherNext = order.enqueue(token("b"))
        let fifth = order.enqueue(token("a"))
        order.giveBack([fourth, other])
        #expect(fifth.goesNow && otherNext.goesNow)
        order.finish([token("a"), token("b")])
        #expect(order.tokensInFlight == 0)
    }

    @Test func aPlaceThatLeftItsLineAlreadyIsPassedOverWhenGivenBack() async throws {
        let order = DeliveryOrder()
        _ = order.enqueue(token("a"))
        let cancelled = order.enqueue(token("a"))
        let replaced = order.enqueue(token("a"), badgeOnly: true)
        let newest = order.enqueue(token("a"), badgeOnly: true)
        let waiting = Task { await order.turn(cancelled) }
        waiting.cancel()
        #expect(await waiting.value == .cancelled)
        #expect(await order.turn(replaced) == .superseded)
        // Neither is in the line any more: giving them back hands on no one's turn.
        order.giveBack([cancelled, replaced])
        #expect(!newest.goesNow, "the notification in flight still holds the line")
        order.finish(token("a"))
        #expect(newest.goesNow)
        order.finish(token("a"))
        #expect(order.tokensInFlight == 0)
    }

    @Test func heldPlacesTakeOnePerTokenInOrderAndGiveBackWhatIsNotUsed() async throws {
        let order = DeliveryOrder()
        let hex = { (byte: UInt8) in String(repeating: String(format: "%02x", byte), count: 32) }
        let busy = order.enqueue(try DeviceToken(hex: hex(1)))
        // Recipients 0 and 2 share a token; recipient 3's is not hex.
        let held = HeldPlaces([(0, hex(1)), (1, hex(2)), (2, hex(1)), (3, "not hex")], order: order)
        #expect(held.count == 2)
        #expect(order.tokensInFlight == 2)
        let waiting = try #require(held.take(0))
        #expect(!waiting.goesNow, "behind the notification already in flight to its token")
        #expect(held.take(2) == nil && held.take(3) == nil)
        // Recipient 1 turned out not to need APNs: its line is free again at once.
        held.giveBack([1, 5])
        #expect(order.tokensInFlight == 1 && held.count == 0)
        order.finish([busy])
        #expect(waiting.goesNow)
        order.finish([waiting])
        #expect(order.tokensInFlight == 0)

        // What is still held at the end goes back with the rest.
        let rest = HeldPlaces([(0, hex(3)), (1, hex(4))], order: order)
        #expect(order.tokensInFlight == 2)
        rest.giveBackAll()
        #expect(order.tokensInFlight == 0 && rest.count == 0)
    }

    @Test func aChannelMessageWaitsOnlyForANotificationSentOnlyThroughAPNs() async throws {
        let order = DeliveryOrder()
        let keys = ["idle", "held", "apns", "heldThenAPNs"].map { DeliveryOrder.LineKey(token($0)) }
        // "held": an auto push's place (channel-backed); "apns": an apns push's notification in flight;
        // "heldThenAPNs": an auto push's place with an apns push's notification waiting behind it.
        let held = order.enqueueChannelBacked(keys: [keys[1], keys[3]])
        #expect(held.map(\.behindNotification) == [false, false] && held.allSatisfy { $0.ticket.goesNow })
        _ = order.enqueue(token("apns"))
        let queued = order.enqueue(token("heldThenAPNs"))
        #expect(!queued.goesNow)

        // An online push's channel messages: a place only where a notification sent only through APNs is in line.
        let online = order.enqueueBehindNotifications(keys: keys)
        #expect(online.map { $0 != nil } == [false, false, true, true])
        #expect(order.tokensInFlight == 3, "no place taken in an idle line")
        #expect(order.linesKept == 3, "a token with no line is not added to the table")
        // Pure channel traffic to many devices leaves nothing in the table (nothing would sweep it).
        let many = (0..<1_000).map { index in withUnsafeBytes(of: UInt32(index).bigEndian) { DeliveryOrder.LineKey(try! DeviceToken(bytes: Array($0))) } }
        #expect(order.enqueueBehindNotifications(keys: many).allSatisfy { $0 == nil })
        #expect(order.linesKept == 3)
        // An auto push's places: every line, each saying whether such a notification is ahead.
        let auto = order.enqueueChannelBacked(keys: keys)
        #expect(auto.map(\.behindNotification) == [false, false, true, true])

        // The apns notification behind the held place goes when the held place is given back; the channel places
        // behind it, once it is answered.
        order.giveBack([held[1].ticket])
        #expect(queued.goesNow)
        #expect(online[3]?.goesNow == false)
        order.finish([queued])
        #expect(online[3]?.goesNow == true)
        order.finish(token("apns"))
        #expect(online[2]?.goesNow == true)
        order.giveBack(online.compactMap { $0 } + auto.map(\.ticket) + [held[0].ticket])
        #expect(order.tokensInFlight == 0)
    }

    @Test func aWaitingBadgeUpdateIsReplacedByANewerOneButNotByAlerts() async throws {
        let order = DeliveryOrder()
        let alert = order.enqueue(token("a"))
        let oldBadge = order.enqueue(token("a"), badgeOnly: true)
        let nextAlert = order.enqueue(token("a"))
        let newBadge = order.enqueue(token("a"), badgeOnly: true)
        #expect(alert.goesNow)
        #expect(await order.turn(oldBadge) == .superseded)
        order.finish(token("a"))
        #expect(await order.turn(nextAlert) == .go, "an alert is never replaced")
        order.finish(token("a"))
        #expect(await order.turn(newBadge) == .go)
        order.finish(token("a"))
        #expect(order.tokensInFlight == 0)
    }

    @Test func aChunkQueuedTogetherGetsTheSameTurnsAsOneByOne() async throws {
        let order = DeliveryOrder()
        _ = order.enqueue(token("b"))
        let tickets = order.enqueue(keys: [token("a"), token("b"), token("a"), token("c")].map(DeliveryOrder.LineKey.init))
        #expect(tickets.map(\.goesNow) == [true, false, false, true], "a token already in flight, or twice in the chunk, waits")
        // A bunch of answers hands on each token's turn once.
        order.finish([token("a"), token("b")])
        #expect(tickets[1].goesNow && tickets[2].goesNow)
        order.finish([token("a"), token("b"), token("c")])
        #expect(order.tokensInFlight == 0)
    }

    @Test func aTicketThatWentAtOnceNeedsNoWait() async throws {
        let order = DeliveryOrder()
        let first = order.enqueue(token("a"))
        #expect(await order.turn(first) == .go)
        order.finish(token("a"))
        #expect(order.tokensInFlight == 0)
    }

    @Test func admissionFollowsReservedPlacesAndSkipsGivenUpOnes() async throws {
        let queue = AdmissionQueue()
        let first = queue.reserve()
        let second = queue.reserve()
        let third = queue.reserve()
        let turns = Turns()
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The third place arrives first and waits.
            group.addTask { try await queue.admit(third) { turns.note("third") } }
            while queue.waiting < 1 { await Task.yield() }
            try await queue.admit(first) { turns.note("first") }
            #expect(turns.names == ["first"], "the third still waits for the second place")
            queue.give(up: second)
            try await group.waitForAll()
        }
        #expect(turns.names == ["first", "third"])
        try await queue.admit { turns.note("later") }
        #expect(turns.names.last == "later")
    }

    @Test func aPlaceCancelledWhileWaitingIsGivenUp() async throws {
        let queue = AdmissionQueue()
        let first = queue.reserve()
        let cancelled = queue.reserve()
        let waiting = Task { try await queue.admit(cancelled) {} }
        while queue.waiting < 1 { await Task.yield() }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        try await queue.admit(first) {}
        // Had the cancelled place stayed, this would wait for ever.
        try await withTimeout(10, "a later place") { try await queue.admit {} }
    }
}
