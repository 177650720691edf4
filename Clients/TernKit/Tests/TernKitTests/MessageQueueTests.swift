import Foundation
import Testing

@testable import TernKit

/// The bounded buffer between the channel and the app: back-pressure instead of dropping.
struct MessageQueueTests {
    private func message(_ number: Int) -> TernMessage {
        TernMessage(id: "m\(number)", sequence: Int64(number), pushID: nil, notification: nil, data: nil, createdAt: nil, source: .channel)
    }

    @Test func itTakesUpToItsCapacityThenSaysFull() async {
        let queue = MessageQueue(capacity: 2)
        #expect(queue.offer(message(1)))
        #expect(queue.offer(message(2)))
        #expect(!queue.offer(message(3)))
        // The channel may add the frame it read while the APNs path took the last place: one over, no more.
        queue.append(message(4))
        #expect(queue.count == 3)
        #expect(await queue.take()?.id == "m1")
        #expect(await queue.take()?.id == "m2")
        #expect(await queue.take()?.id == "m4")
    }

    @Test func aMessageTakenOutAnotherWayFreesItsPlaceForTheChannel() async {
        let queue = MessageQueue(capacity: 1)
        queue.append(message(1))
        async let room = queue.waitForRoom(epoch: queue.epoch)
        // The user opened its notification: the app has it, so it leaves the buffer (ids in any case, as the
        // de-duplication reads them).
        #expect(queue.remove(id: "M1"))
        #expect(await room)
        #expect(!queue.remove(id: "m1"))
        queue.append(message(2))
        #expect(await queue.take()?.id == "m2")
    }

    @Test func theChannelWaitsForRoomUntilTheAppTakesOne() async throws {
        let queue = MessageQueue(capacity: 1)
        queue.append(message(1))
        let epoch = queue.epoch
        async let room = queue.waitForRoom(epoch: epoch)
        #expect(await queue.take()?.id == "m1")
        #expect(await room)
        #expect(await queue.waitForRoom(epoch: epoch))
    }

    @Test func closingTheConnectionEndsItsWaitForRoomWhetherItCameBeforeOrDuring() async {
        let queue = MessageQueue(capacity: 1)
        queue.append(message(1))
        let epoch = queue.epoch
        async let during = queue.waitForRoom(epoch: epoch)
        queue.interrupt()
        #expect(await during == false)
        // A wait that starts after the close ends at once; the next connection's epoch waits as before.
        #expect(await queue.waitForRoom(epoch: epoch) == false)
        let next = queue.epoch
        _ = await queue.take()
        #expect(await queue.waitForRoom(epoch: next))
    }

    @Test func aWaitingTakerGetsTheNextMessageAndACancelledOneGetsNil() async throws {
        let queue = MessageQueue(capacity: 4)
        let taker = Task { await queue.take() }
        queue.offer(message(7))
        #expect(await taker.value?.id == "m7")
        let cancelled = Task { await queue.take() }
        cancelled.cancel()
        #expect(await cancelled.value == nil)
        #expect(queue.offer(message(8)))
        #expect(queue.count == 1)
    }
}
