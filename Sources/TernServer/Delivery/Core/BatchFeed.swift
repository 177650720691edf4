/// What one batch has handed to its APNs client and what came back, as a value.
///
/// The client reads the notifications in the order they were handed over and reports each result with its place in
/// that sequence (``TernAPNsClient/APNsBatchResult/index``), so the batch finds the item again in an array: no
/// hashing of tokens, and an item sent twice in one batch is told apart.
struct BatchFeed: Sendable {
    enum HandOver: Equatable, Sendable {
        /// Hand it to the client; `last`: it was the batch's last item, the client's input ends after it.
        case send(last: Bool)
        /// The client stopped taking work: it does not go.
        case closed
    }

    /// Items neither handed over nor skipped yet.
    private(set) var remaining: Int
    /// The client takes no more.
    private(set) var isClosed = false
    /// By place in the client's sequence: the item, when it was handed over, and whether it was answered.
    private var items: [Int] = []
    private var sentAt: [ContinuousClock.Instant] = []
    private var answered: [Bool] = []

    init(count: Int) {
        remaining = count
        items.reserveCapacity(count)
        sentAt.reserveCapacity(count)
        answered.reserveCapacity(count)
    }

    /// The item goes to the client now (its place is the next one).
    mutating func handOver(_ item: Int, at now: ContinuousClock.Instant) -> HandOver {
        remaining -= 1
        guard !isClosed else { return .closed }
        items.append(item)
        sentAt.append(now)
        answered.append(false)
        return .send(last: remaining == 0)
    }

    /// The item will not go (superseded, or its wait ended). - Returns: whether the client's input ends now.
    mutating func skip() -> Bool {
        remaining -= 1
        return remaining == 0 && !isClosed
    }

    /// The answer to what was handed over at `place`. - Returns: the item and when it went; nil for a place never
    /// handed over or answered already.
    mutating func answer(at place: Int) -> (item: Int, sentAt: ContinuousClock.Instant)? {
        guard items.indices.contains(place), !answered[place] else { return nil }
        answered[place] = true
        return (items[place], sentAt[place])
    }

    /// The client takes no more. - Returns: the items it was handed and did not answer.
    mutating func close() -> [Int] {
        isClosed = true
        return items.indices.filter { !answered[$0] }.map { items[$0] }
    }
}
