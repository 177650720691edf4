import TernAPNs
import TernStore
import Testing

@testable import TernServer

/// What a chunk records while it is sent: every answered result, whatever order the answers come in, with a mark
/// that a node taking the chunk over can follow; and the permits those results held.
struct ChunkLedgerTests {
    static func failure(_ token: String) -> PushFailure {
        PushFailure(deviceID: nil, token: token, status: 410, reason: .apns(.unregistered), at: .distantPast)
    }

    static func run(_ first: String, _ last: String) -> ChunkMark.Run { ChunkMark.Run(first: first, last: last) }

    @Test func answersOutOfOrderAreRecordedAsRunsAfterThePrefix() throws {
        let ledger = ChunkLedger(keys: ["a", "b", "c", "d", "e", "f"])
        ledger.dropped(2)
        #expect(ledger.recordable() == nil)
        ledger.set(1, .accepted, holdsPermit: true)
        ledger.set(3, .failed(Self.failure("d"), pruned: true), holdsPermit: true)
        ledger.set(4, .accepted, holdsPermit: true)
        let first = try #require(ledger.recordable())
        #expect(first.mark == ChunkMark(through: nil, runs: [Self.run("b", "b"), Self.run("d", "e")]), "a is still out")
        #expect(first.progress == PushProgress(accepted: 2, failures: [Self.failure("d")], pruned: 1, inboxDropped: 2))
        #expect(ledger.markRecorded(first) == 3, "three permits come back")
        #expect(ledger.recordable() == nil)

        ledger.set(0, .accepted, holdsPermit: true)
        ledger.set(2, .accepted, holdsPermit: false)
        let second = try #require(ledger.recordable())
        #expect(second.mark == ChunkMark(through: "e"), "a to e are all recorded now")
        #expect(second.progress == PushProgress(accepted: 2, failures: [], pruned: 0, inboxDropped: 0), "inbox drops count once")
        // Not marked (the write failed): the closing record has these results, and f's.
        ledger.set(5, .accepted, holdsPermit: true)
        let closing = ledger.close()
        #expect(closing.closing == .sent(PushProgress(accepted: 3, failures: [], pruned: 0, inboxDropped: 0)))
        #expect(closing.permits == 2)
        #expect(ledger.recordable() == nil)
    }

    @Test func aChunkWithNotificationsLeftWithoutAResultStaysOpenWithAMarkOfWhatWasAnswered() throws {
        let ledger = ChunkLedger(keys: ["a", "b", "c", "d"])
        ledger.set(0, .accepted, holdsPermit: true)
        ledger.set(2, .failed(Self.failure("c"), pruned: false), holdsPermit: true)
        // b and d went unsent as the node stopped: no result, and the chunk is not sent.
        ledger.unsettled(2)
        ledger.finish()
        let (closing, permits) = ledger.close()
        guard case .unfinished(let record, let unsettled) = closing else {
            Issue.record("an unfinished chunk with a record, not \(closing)")
            return
        }
        #expect(unsettled == 2)
        #expect(record.mark == ChunkMark(through: "a", runs: [Self.run("c", "c")]), "b and d stay outside the mark: they are sent again")
        #expect(record.progress == PushProgress(accepted: 1, failures: [Self.failure("c")], pruned: 0, inboxDropped: 0))
        #expect(permits == 2)
        #expect(ledger.recordable() == nil, "what the record carries counts as recorded")
    }

    @Test func aTakenOverChunkLeftWithoutAnyNewResultKeepsTheEarlierHoldersMark() throws {
        let ledger = ChunkLedger(keys: ["a", "b", "c"], recorded: ["b"])
        ledger.unsettled(2)
        guard case .unfinished(let record, 2) = ledger.close().closing else {
            Issue.record("an unfinished chunk")
            return
        }
        #expect(record.progress == PushProgress(accepted: 0, failures: [], pruned: 0, inboxDropped: 0))
        #expect(record.mark == ChunkMark(through: nil, runs: [Self.run("b", "b")]), "giving it up must not forget what was recorded")
    }

    @Test func aTakenOverChunkSkipsWhatWasRecordedAndKeepsItInItsMark() throws {
        let ledger = ChunkLedger(keys: ["c", "d", "e", "f"], recorded: ["d", "f"])
        #expect(!ledger.needsSending(1) && !ledger.needsSending(3))
        #expect(ledger.needsSending(0) && ledger.needsSending(2))
        ledger.set(2, .accepted, holdsPermit: true)
        let record = try #require(ledger.recordable())
        #expect(record.mark == ChunkMark(through: nil, runs: [Self.run("d", "f")]), "the earlier holder's runs stay in the mark")
        #expect(record.progress.accepted == 1, "only this holder's result is added")
        #expect(ledger.markRecorded(record) == 1)
        ledger.set(0, .accepted, holdsPermit: true)
        #expect(try #require(ledger.recordable()).mark == ChunkMark(through: "f"))
    }

    @Test func aSecondResultForTheSameRecipientIsNotKept() {
        let ledger = ChunkLedger(keys: ["a"])
        #expect(ledger.set(0, .accepted, holdsPermit: true))
        #expect(!ledger.set(0, .accepted, holdsPermit: true), "its permit is the caller's to give back")
        #expect(ledger.close().permits == 1)
    }

    @Test func everyFewResultsRingTheRecorder() async {
        let ledger = ChunkLedger(keys: (0..<20).map { "k\($0)" }, ringEvery: { 5 })
        for index in 0..<5 { ledger.set(index, .accepted) }
        // The ring is kept for the next wait: this returns at once instead of after a long timeout.
        await ledger.doorbell.wait(upTo: .seconds(600))
        #expect(ledger.recordable()?.mark == ChunkMark(through: "k4"))
        ledger.finish()
        await ledger.doorbell.wait(upTo: .seconds(600))
        #expect(ledger.isFinished)
    }
}
