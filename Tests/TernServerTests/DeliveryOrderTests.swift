import Synchronization
import Testing

@testable import TernServer

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
        let first = order.enqueue("a")
        let second = order.enqueue("a")
        let third = order.enqueue("a")
        let other = order.enqueue("b")
        #expect(first.goesNow && other.goesNow)
        #expect(!second.goesNow && !third.goesNow)

        let turns = Turns()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { if case .go = await order.turn(third) { turns.note("third") } }
            group.addTask { if case .go = await order.turn(second) { turns.note("second"); order.finish("a") } }
            try await Task.sleep(for: .milliseconds(50))
            #expect(turns.names.isEmpty, "nothing goes while the first is in flight")
            order.finish("a")
            try await group.waitForAll()
        }
        #expect(turns.names == ["second", "third"])
        order.finish("a")
        order.finish("b")
        #expect(order.tokensInFlight == 0)
    }

    @Test func aWaitingBadgeUpdateIsReplacedByANewerOneButNotByAlerts() async throws {
        let order = DeliveryOrder()
        let alert = order.enqueue("a")
        let oldBadge = order.enqueue("a", badgeOnly: true)
        let nextAlert = order.enqueue("a")
        let newBadge = order.enqueue("a", badgeOnly: true)
        #expect(alert.goesNow)
        #expect(await order.turn(oldBadge) == .superseded)
        order.finish("a")
        #expect(await order.turn(nextAlert) == .go, "an alert is never replaced")
        order.finish("a")
        #expect(await order.turn(newBadge) == .go)
        order.finish("a")
        #expect(order.tokensInFlight == 0)
    }

    @Test func admissionFollowsReservedPlacesAndSkipsGivenUpOnes() async throws {
        let queue = AdmissionQueue()
        let first = queue.reserve()
        let second = queue.reserve()
        let third = queue.reserve()
        let turns = Turns()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await queue.admit(third) { turns.note("third") } }
            try await Task.sleep(for: .milliseconds(20))
            group.addTask { await queue.admit(first) { turns.note("first") } }
            try await Task.sleep(for: .milliseconds(20))
            queue.give(up: second)
            try await group.waitForAll()
        }
        #expect(turns.names == ["first", "third"])
        await queue.admit { turns.note("later") }
        #expect(turns.names.last == "later")
    }
}
