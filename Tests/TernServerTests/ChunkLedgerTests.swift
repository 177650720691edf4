import TernStore
import Testing

@testable import TernServer

/// What a chunk may record while it is sent: the answered prefix, whatever order the answers come in.
struct ChunkLedgerTests {
    static func failure(_ token: String) -> PushFailure {
        PushFailure(deviceID: nil, token: token, status: 410, reason: "Unregistered", at: .distantPast)
    }

    @Test func onlyTheAnsweredPrefixIsRecordableAndTheRestIsLeftForTheClosingRecord() {
        let ledger = ChunkLedger(keys: ["a", "b", "c", "d", "e"])
        ledger.dropped(2)
        #expect(ledger.recordable() == nil)
        ledger.set(1, .accepted)
        ledger.set(3, .failed(Self.failure("d"), pruned: true))
        #expect(ledger.recordable() == nil, "a is still waiting")
        ledger.set(0, .accepted)
        let first = try! #require(ledger.recordable())
        #expect(first.through == 2)
        #expect(first.progress == PushProgress(accepted: 2, failures: [], pruned: 0, inboxDropped: 2))
        ledger.markRecorded(through: first.through)
        #expect(ledger.recordable() == nil)
        ledger.set(2, .accepted)
        let second = try! #require(ledger.recordable())
        #expect(second.through == 4)
        #expect(second.progress == PushProgress(accepted: 1, failures: [Self.failure("d")], pruned: 1, inboxDropped: 0), "inbox drops count once")
        // Not marked (the write failed): the closing record has these results, and e's.
        ledger.set(4, .accepted)
        #expect(ledger.remainder() == PushProgress(accepted: 2, failures: [Self.failure("d")], pruned: 1, inboxDropped: 0))
    }

    @Test func everyBatchOfAnswersRingsTheRecorder() async {
        let ledger = ChunkLedger(keys: (0..<(ChunkLedger.batch * 2)).map { "k\($0)" })
        for index in 0..<ChunkLedger.batch { ledger.set(index, .accepted) }
        // The ring is kept for the next wait: this returns at once instead of after a long timeout.
        await ledger.doorbell.wait(upTo: .seconds(600))
        #expect(ledger.recordable()?.through == ChunkLedger.batch)
        ledger.finish()
        await ledger.doorbell.wait(upTo: .seconds(600))
        #expect(ledger.isFinished)
    }
}
