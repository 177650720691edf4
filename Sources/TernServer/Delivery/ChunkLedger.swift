import Synchronization
import TernStore

/// A chunk's results as they come in, by recipient, so they can be recorded while the chunk is still being sent.
///
/// Answers arrive out of order. What may be recorded is the *answered prefix*: the recipients, in the chunk's key
/// order, up to the first one still waiting. A node that takes the chunk over after a crash starts after the last
/// recorded recipient, so what it sends again is what lay beyond: the notifications in flight and those answered
/// since the last record. The dispatcher records every ``interval`` or every ``batch`` answers, whichever is first.
final class ChunkLedger: Sendable {
    enum Outcome: Sendable {
        case accepted
        case failed(PushFailure, pruned: Bool)
    }

    static let interval = Duration.milliseconds(100)
    static let batch = 500

    private struct State {
        var outcomes: [Outcome?]
        /// Recipients `0..<recorded` are in the store.
        var recorded = 0
        /// Recipients `0..<answered` all have an outcome.
        var answered = 0
        var inboxDropped = 0
        var inboxDroppedRecorded = false
        var outcomesSinceRing = 0
        var finished = false
    }

    let keys: [String]
    /// Rung every ``batch`` outcomes and at the end: the recorder looks then, not only every ``interval``.
    let doorbell = Doorbell()
    private let state: Mutex<State>

    init(keys: [String]) {
        self.keys = keys
        self.state = Mutex(State(outcomes: Array(repeating: nil, count: keys.count)))
    }

    func dropped(_ count: Int) { state.withLock { $0.inboxDropped += count } }

    func set(_ index: Int, _ outcome: Outcome) {
        let ring = state.withLock { state -> Bool in
            state.outcomes[index] = outcome
            while state.answered < state.outcomes.count, state.outcomes[state.answered] != nil { state.answered += 1 }
            state.outcomesSinceRing += 1
            guard state.outcomesSinceRing >= Self.batch else { return false }
            state.outcomesSinceRing = 0
            return true
        }
        if ring { doorbell.ring() }
    }

    /// The chunk is sent: every outcome that will come is in.
    func finish() {
        state.withLock { $0.finished = true }
        doorbell.ring()
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// The answered prefix's results not recorded yet, and where it ends; nil if there are none.
    func recordable() -> (progress: PushProgress, through: Int)? {
        state.withLock { state in
            guard state.answered > state.recorded else { return nil }
            var progress = Self.progress(state.outcomes[state.recorded..<state.answered])
            if !state.inboxDroppedRecorded { progress.inboxDropped = state.inboxDropped }
            return (progress, state.answered)
        }
    }

    /// The results up to `through` are in the store.
    func markRecorded(through: Int) {
        state.withLock { state in
            state.recorded = max(state.recorded, through)
            state.inboxDroppedRecorded = true
        }
    }

    /// Every result not recorded yet: what the chunk's closing record adds.
    func remainder() -> PushProgress {
        state.withLock { state in
            var progress = Self.progress(state.outcomes[state.recorded...])
            if !state.inboxDroppedRecorded { progress.inboxDropped = state.inboxDropped }
            return progress
        }
    }

    private static func progress(_ outcomes: ArraySlice<Outcome?>) -> PushProgress {
        var progress = PushProgress(accepted: 0, failures: [], pruned: 0)
        for outcome in outcomes {
            switch outcome {
            case .accepted?: progress.accepted += 1
            case .failed(let failure, let pruned)?:
                progress.failures.append(failure)
                if pruned { progress.pruned += 1 }
            case nil: break
            }
        }
        return progress
    }
}
