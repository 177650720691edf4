import TernAPNs
import TernStore
import Testing

@testable import TernServer

/// A batch's hand-over to its APNs client, as a value: results find their item by their place in the client's
/// sequence, whatever order the items went in.
struct BatchFeedTests {
    private let t0 = ContinuousClock.now

    @Test func answersFindTheirItemsByPlaceWhateverOrderTheItemsWentIn() {
        var feed = BatchFeed(count: 3)
        let first = feed.handOver(2, at: t0)
        #expect(first == .send(last: false))
        let second = feed.handOver(0, at: t0 + .milliseconds(1))
        #expect(second == .send(last: false))
        let endsInput = feed.skip()
        #expect(endsInput, "the last of the batch was skipped: the client's input ends")
        #expect(feed.remaining == 0)
        let answerAt1 = feed.answer(at: 1)
        #expect(answerAt1?.item == 0 && answerAt1?.sentAt == t0 + .milliseconds(1))
        let answerAt0 = feed.answer(at: 0)
        #expect(answerAt0?.item == 2)
        let again = feed.answer(at: 0)
        #expect(again == nil, "an answer counts once")
        let never = feed.answer(at: 7)
        #expect(never == nil, "a place never handed over has no item")
        let unanswered = feed.close()
        #expect(unanswered.isEmpty)
    }

    @Test func theLastItemHandedOverOrSkippedEndsTheInput() {
        var handed = BatchFeed(count: 2)
        let notLastHanded = handed.handOver(0, at: t0)
        #expect(notLastHanded == .send(last: false))
        let lastHanded = handed.handOver(1, at: t0)
        #expect(lastHanded == .send(last: true))

        var skipped = BatchFeed(count: 2)
        let firstOfTwo = skipped.handOver(1, at: t0)
        #expect(firstOfTwo == .send(last: false))
        let lastSkipped = skipped.skip()
        #expect(lastSkipped, "the superseded last item ends the input too")
    }

    @Test func closingGivesBackWhatWasHandedOverAndNotAnsweredAndTakesNoMore() {
        var feed = BatchFeed(count: 4)
        _ = feed.handOver(3, at: t0)
        _ = feed.handOver(1, at: t0)
        _ = feed.handOver(0, at: t0)
        _ = feed.answer(at: 1)
        let unanswered = feed.close()
        #expect(unanswered == [3, 0])
        #expect(feed.isClosed)
        let afterClose = feed.handOver(2, at: t0)
        #expect(afterClose == .closed, "the client stopped taking work")
        let skipAfterClose = feed.skip()
        #expect(skipAfterClose == false, "the input ended with the close")
    }
}

/// The ledger's bunch of results at once, as the dispatcher hands them over.
struct ChunkLedgerBunchTests {
    @Test func aBunchIsKeptLikeItsResultsOneByOneAndGivesBackThePermitsOfRepeats() {
        let ledger = ChunkLedger(keys: ["a", "b", "c"])
        #expect(ledger.pending() == [0, 1, 2])
        let failure = PushFailure(deviceID: nil, token: "b", status: 410, reason: .apns(.unregistered), at: .distantPast)
        let unkept = ledger.set([(0, .accepted, true), (1, .failed(failure, pruned: true), true), (0, .accepted, true), (2, .accepted, false)])
        #expect(unkept == 1, "the second result for recipient 0 is not kept; its permit goes back")
        let record = ledger.recordable()
        #expect(record?.progress.accepted == 2)
        #expect(record?.progress.pruned == 1)
        #expect(record.map { ledger.markRecorded($0) } == 2, "the kept results held two permits")
    }

    @Test func recipientsAnEarlierHolderRecordedAreNotPending() {
        let ledger = ChunkLedger(keys: ["a", "b", "c"], recorded: ["b"])
        #expect(ledger.pending() == [0, 2])
    }
}
