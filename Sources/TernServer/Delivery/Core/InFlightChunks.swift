import TernStore

/// The chunks a node is sending, by a number of its own (a chunk the node gave up and claimed again can be in flight
/// twice for a moment), and what they take of its room to claim more (``ClaimRoom``).
///
/// A chunk's recipients take room from its claim to its end, except once an `online` chunk is with the devices'
/// connections and has nothing for APNs. A chunk that waits for its app's APNs endpoint to have a connection takes no
/// room at all, neither its recipients nor its place among the `pushes` chunks: an app whose endpoint is down would
/// otherwise fill the room with chunks that only wait, and hold up every other app's pushes for a send time. While one
/// of an app's chunks waits, the node claims no more of that app's chunks (``appsWaitingForEndpoint``), so the chunks
/// that wait are those claimed before the first began to: one or two per app whose endpoint is down.
struct InFlightChunks: Sendable {
    struct Entry: Sendable {
        var id: ChunkID
        var app: String
        var recipients: Int
        /// Handed to the devices' connections with nothing for APNs.
        var handedOver = false
        /// Its batches waiting for an APNs endpoint's connection now (one per APNs environment at most).
        var waitingForEndpoint = 0
    }

    private(set) var chunks: [UInt64: Entry] = [:]
    private var next: UInt64 = 0

    /// A claimed chunk of `app`'s starts. - Returns: its number.
    mutating func add(_ id: ChunkID, app: String, recipients: Int) -> UInt64 {
        defer { next += 1 }
        chunks[next] = Entry(id: id, app: app, recipients: recipients)
        return next
    }

    mutating func remove(_ number: UInt64) {
        chunks.removeValue(forKey: number)
    }

    mutating func handedOver(_ number: UInt64) {
        chunks[number]?.handedOver = true
    }

    /// One of the chunk's batches starts (`true`) or stops (`false`) waiting for its endpoint.
    mutating func waitingForEndpoint(_ number: UInt64, _ waits: Bool) {
        guard let waiting = chunks[number]?.waitingForEndpoint else { return }
        chunks[number]?.waitingForEndpoint = max(0, waiting + (waits ? 1 : -1))
    }

    /// What the chunks take of the room.
    var room: ClaimRoom {
        var room = ClaimRoom(chunks: 0, recipients: 0)
        for entry in chunks.values where entry.waitingForEndpoint == 0 {
            room.chunks += 1
            if !entry.handedOver { room.recipients += entry.recipients }
        }
        return room
    }

    /// Apps with a chunk waiting for their APNs endpoint: the next claims pass them over.
    var appsWaitingForEndpoint: Set<String> {
        var apps: Set<String> = []
        for entry in chunks.values where entry.waitingForEndpoint > 0 { apps.insert(entry.app) }
        return apps
    }

    func contains(_ id: ChunkID) -> Bool { chunks.values.contains { $0.id == id } }

    /// The chunks' ids, each once.
    var ids: [ChunkID] { Array(Set(chunks.values.map(\.id))) }
}

/// What a chunk being sent tells the claim loop about the room it takes (``InFlightChunks``).
struct ChunkSignals: Sendable {
    /// It is with the devices' connections and sends nothing through APNs.
    var handedOver: @Sendable () -> Void = {}
    /// One of its batches starts (`true`) or stops (`false`) waiting for its APNs endpoint to have a connection.
    var waitingForEndpoint: @Sendable (Bool) -> Void = { _ in }
}
