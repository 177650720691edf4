/// Whether the dispatcher claims another chunk now: decided from what this node has in flight.
///
/// A chunk stays in flight from its claim to its last answer and record, while only part of it is out at a time, so
/// a node keeps up to twice its in-flight limit's worth of recipients claimed (at least one chunk's): enough that
/// the next chunk is read and admitted while the others are sent, and no more, so the other nodes on the database
/// get the rest of a large push. `pushes` caps the chunks (many small pushes side by side).
struct ClaimRoom: Sendable, Equatable {
    /// Chunks this node is sending.
    var chunks: Int
    /// Their recipients, answered or not.
    var recipients: Int

    /// - Parameters:
    ///   - inFlightLimit: the node's in-flight limit now (``InFlightLimit/limit``).
    ///   - chunkSize: `delivery.chunkSize`.
    ///   - pushes: `delivery.pushes`, the most chunks at once.
    func hasRoom(inFlightLimit: Int, chunkSize: Int, pushes: Int) -> Bool {
        chunks == 0 || (chunks < pushes && recipients <= max(chunkSize, 2 * inFlightLimit))
    }
}
