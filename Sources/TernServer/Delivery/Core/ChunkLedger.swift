import Synchronization
import TernStore

/// A chunk's results as they come in, by recipient, so they can be recorded while the chunk is still being sent.
///
/// Every answered result not yet recorded goes into the next record, whatever order the answers came in; the
/// record's ``ChunkMark`` names every recipient recorded so far (the prefix up to the first one still waiting, and
/// runs after it). A node that takes the chunk over after a crash sends only to the recipients outside the mark.
///
/// A notification handed to APNs holds a permit of the node's ``InFlightLimit`` until its result is recorded: the
/// ledger counts those permits and hands them back as records are written. The dispatcher records every
/// ``interval``, or as soon as `ringEvery` results are waiting, whichever is first.
final class ChunkLedger: Sendable {
    enum Outcome: Sendable, Equatable {
        case accepted
        case failed(PushFailure, pruned: Bool)
    }

    /// A record to write: the results not recorded yet, the mark once they are, and which recipients it covers.
    struct Record: Sendable, Equatable {
        var progress: PushProgress
        var mark: ChunkMark
        fileprivate var indices: [Int]
    }

    static let interval = Duration.milliseconds(100)

    private enum Entry {
        case waiting
        case answered(Outcome, holdsPermit: Bool)
        /// In the store: by this node's record, or by an earlier holder's (the chunk was taken over).
        case recorded
    }

    private struct State {
        var entries: [Entry]
        /// Recipients `0..<prefix` are all recorded.
        var prefix = 0
        var inboxDropped = 0
        var inboxDroppedRecorded = false
        var answeredSinceRing = 0
        var finished = false
        /// Notifications that ended without a result (``AnswerVerdict/unsettled``): their recipients stay waiting.
        var unsettled = 0
    }

    let keys: [String]
    private let ringEvery: @Sendable () -> Int
    /// Rung every `ringEvery` results and at the end: the recorder looks then, not only every ``interval``.
    let doorbell = Doorbell()
    private let state: Mutex<State>

    /// - Parameters:
    ///   - recorded: keys whose results an earlier holder of the chunk recorded (``PushChunk/recorded``).
    ///   - ringEvery: results after which the recorder is woken; asked at each result, since it follows the node's
    ///     moving limit (the permits of what is answered come back no later than a quarter of the limit later).
    init(keys: [String], recorded: Set<String> = [], ringEvery: @escaping @Sendable () -> Int = { 500 }) {
        self.keys = keys
        self.ringEvery = ringEvery
        var state = State(entries: keys.map { recorded.contains($0) ? .recorded : .waiting })
        Self.advancePrefix(&state)
        self.state = Mutex(state)
    }

    /// The recipients that still need sending, by index (an earlier holder of the chunk did not record them).
    func pending() -> [Int] {
        state.withLock { state in
            state.entries.indices.filter { index in
                if case .recorded = state.entries[index] { return false }
                return true
            }
        }
    }

    /// Whether the recipient at `index` still needs sending (an earlier holder did not record it).
    func needsSending(_ index: Int) -> Bool {
        state.withLock { state in
            if case .recorded = state.entries[index] { return false }
            return true
        }
    }

    func dropped(_ count: Int) { state.withLock { $0.inboxDropped += count } }

    /// The recipient's result; `holdsPermit` when its notification took a permit of the node's ``InFlightLimit``.
    /// - Returns: false if the recipient had a result already (this one is not kept, and its permit is the caller's
    ///   to give back).
    @discardableResult
    func set(_ index: Int, _ outcome: Outcome, holdsPermit: Bool = false) -> Bool {
        let ringEvery = max(1, self.ringEvery())
        let (kept, ring) = state.withLock { state -> (Bool, Bool) in
            guard case .waiting = state.entries[index] else { return (false, false) }
            state.entries[index] = .answered(outcome, holdsPermit: holdsPermit)
            state.answeredSinceRing += 1
            guard state.answeredSinceRing >= ringEvery else { return (true, false) }
            state.answeredSinceRing = 0
            return (true, true)
        }
        if ring { doorbell.ring() }
        return kept
    }

    /// A bunch of results, under one lock. - Returns: how many of them held a permit and were not kept (their
    /// recipient had a result already): those permits are the caller's to give back.
    func set(_ results: [(index: Int, outcome: Outcome, holdsPermit: Bool)]) -> Int {
        let ringEvery = max(1, self.ringEvery())
        let (unkept, ring) = state.withLock { state -> (Int, Bool) in
            var unkept = 0
            var ring = false
            for (index, outcome, holdsPermit) in results {
                guard case .waiting = state.entries[index] else {
                    if holdsPermit { unkept += 1 }
                    continue
                }
                state.entries[index] = .answered(outcome, holdsPermit: holdsPermit)
                state.answeredSinceRing += 1
                if state.answeredSinceRing >= ringEvery {
                    state.answeredSinceRing = 0
                    ring = true
                }
            }
            return (unkept, ring)
        }
        if ring { doorbell.ring() }
        return unkept
    }

    /// Notifications that ended without a result, this node having stopped sending (``AnswerVerdict/unsettled``):
    /// their recipients stay waiting, and the chunk will not be closed as sent.
    func unsettled(_ count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.unsettled += count }
    }

    /// The chunk is sent: every result that will come is in.
    func finish() {
        state.withLock { $0.finished = true }
        doorbell.ring()
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// The results not recorded yet and the mark that includes them; nil if there are none.
    func recordable() -> Record? {
        state.withLock { state in
            var indices: [Int] = []
            var outcomes: [Outcome] = []
            for index in state.prefix..<state.entries.count {
                if case .answered(let outcome, _) = state.entries[index] {
                    indices.append(index)
                    outcomes.append(outcome)
                }
            }
            guard !indices.isEmpty else { return nil }
            var progress = Self.progress(outcomes)
            if !state.inboxDroppedRecorded { progress.inboxDropped = state.inboxDropped }
            // By index rather than a set of them: this runs every few hundred answers, over the whole chunk.
            var including = [Bool](repeating: false, count: state.entries.count)
            for index in indices { including[index] = true }
            return Record(progress: progress, mark: mark(state, including: including), indices: indices)
        }
    }

    /// The record is in the store. - Returns: how many permits its recipients held (to hand back).
    func markRecorded(_ record: Record) -> Int {
        state.withLock { state in
            var permits = 0
            for index in record.indices {
                if case .answered(_, let holdsPermit) = state.entries[index], holdsPermit { permits += 1 }
                state.entries[index] = .recorded
            }
            state.inboxDroppedRecorded = true
            Self.advancePrefix(&state)
            return permits
        }
    }

    /// How the chunk ends on this node.
    enum Closing: Sendable, Equatable {
        /// Every recipient has its result: the chunk's closing record, with the results not recorded yet.
        case sent(PushProgress)
        /// Some notifications ended without a result (``unsettled(_:)``): the chunk is given up, open, with the
        /// results not recorded yet (perhaps none) and a mark of every recipient recorded, so that whoever takes it up
        /// again sends the rest.
        case unfinished(Record, unsettled: Int)
    }

    /// How the chunk ends, and the permits its unrecorded results held (to hand back whether or not the record is
    /// written: this node is done with them). Those results count as recorded from now on.
    func close() -> (closing: Closing, permits: Int) {
        state.withLock { state in
            var indices: [Int] = []
            var outcomes: [Outcome] = []
            var permits = 0
            for index in state.prefix..<state.entries.count {
                if case .answered(let outcome, let holdsPermit) = state.entries[index] {
                    indices.append(index)
                    outcomes.append(outcome)
                    if holdsPermit { permits += 1 }
                }
            }
            var progress = Self.progress(outcomes)
            if !state.inboxDroppedRecorded { progress.inboxDropped = state.inboxDropped }
            state.inboxDroppedRecorded = true
            let closing: Closing
            if state.unsettled == 0 {
                closing = .sent(progress)
            } else {
                var including = [Bool](repeating: false, count: state.entries.count)
                for index in indices { including[index] = true }
                closing = .unfinished(Record(progress: progress, mark: mark(state, including: including), indices: indices), unsettled: state.unsettled)
            }
            for index in indices { state.entries[index] = .recorded }
            Self.advancePrefix(&state)
            return (closing, permits)
        }
    }

    /// The mark once the entries `including` flags are recorded too.
    private func mark(_ state: State, including: [Bool]) -> ChunkMark {
        func isRecorded(_ index: Int) -> Bool {
            if case .recorded = state.entries[index] { return true }
            return including[index]
        }
        var prefix = state.prefix
        while prefix < state.entries.count, isRecorded(prefix) { prefix += 1 }
        var runs: [ChunkMark.Run] = []
        var index = prefix
        while index < state.entries.count {
            guard isRecorded(index) else {
                index += 1
                continue
            }
            let first = index
            while index + 1 < state.entries.count, isRecorded(index + 1) { index += 1 }
            runs.append(ChunkMark.Run(first: keys[first], last: keys[index]))
            index += 1
        }
        return ChunkMark(through: prefix > 0 ? keys[prefix - 1] : nil, runs: runs)
    }

    private static func advancePrefix(_ state: inout State) {
        while state.prefix < state.entries.count, case .recorded = state.entries[state.prefix] { state.prefix += 1 }
    }

    private static func progress(_ outcomes: [Outcome]) -> PushProgress {
        var progress = PushProgress(accepted: 0, failures: [], pruned: 0)
        for outcome in outcomes {
            switch outcome {
            case .accepted: progress.accepted += 1
            case .failed(let failure, let pruned):
                progress.failures.append(failure)
                if pruned { progress.pruned += 1 }
            }
        }
        return progress
    }
}
