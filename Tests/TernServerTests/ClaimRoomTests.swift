import TernStore
import Testing

@testable import TernServer

/// When a node claims another chunk, from what it has in flight.
struct ClaimRoomTests {
    @Test func anIdleNodeAlwaysClaims() {
        #expect(ClaimRoom(chunks: 0, recipients: 0).hasRoom(inFlightLimit: 1, chunkSize: 2000, pushes: 1))
    }

    @Test func aLargePushHasTheNextChunkReadWhileOneIsSent() {
        // Limit 1,000, chunks of 2,000: a second chunk while one is out, not a third.
        #expect(ClaimRoom(chunks: 1, recipients: 2000).hasRoom(inFlightLimit: 1000, chunkSize: 2000, pushes: 32))
        #expect(!ClaimRoom(chunks: 2, recipients: 4000).hasRoom(inFlightLimit: 1000, chunkSize: 2000, pushes: 32))
    }

    @Test func aHigherLimitKeepsMoreClaimed() {
        // APNs far away, limit 4,000: up to 8,000 recipients claimed, so the chunks' tails do not stall the send.
        #expect(ClaimRoom(chunks: 4, recipients: 8000).hasRoom(inFlightLimit: 4000, chunkSize: 2000, pushes: 32))
        #expect(!ClaimRoom(chunks: 5, recipients: 10_000).hasRoom(inFlightLimit: 4000, chunkSize: 2000, pushes: 32))
    }

    @Test func manySmallPushesStopAtTheChunkCap() {
        #expect(ClaimRoom(chunks: 31, recipients: 31).hasRoom(inFlightLimit: 1000, chunkSize: 2000, pushes: 32))
        #expect(!ClaimRoom(chunks: 32, recipients: 32).hasRoom(inFlightLimit: 1000, chunkSize: 2000, pushes: 32))
    }

    @Test func smallChunksLeaveTheRestOfAPushToOtherNodes() {
        // Chunks of 20, 20 in flight: three chunks claimed at most, the rest stays for whichever node claims next.
        #expect(ClaimRoom(chunks: 1, recipients: 20).hasRoom(inFlightLimit: 20, chunkSize: 20, pushes: 32))
        #expect(ClaimRoom(chunks: 2, recipients: 40).hasRoom(inFlightLimit: 20, chunkSize: 20, pushes: 32))
        #expect(!ClaimRoom(chunks: 3, recipients: 60).hasRoom(inFlightLimit: 20, chunkSize: 20, pushes: 32))
    }

    // MARK: What the chunks in flight take

    @Test func aChunkWaitingForItsEndpointTakesNoRoomAndItsAppIsPassedOverUntilItStops() {
        var inFlight = InFlightChunks()
        let large = inFlight.add(ChunkID(pushID: "large", sequence: 0), app: "shop", recipients: 2000)
        let down = inFlight.add(ChunkID(pushID: "stuck", sequence: 0), app: "down", recipients: 2000)
        let alsoDown = inFlight.add(ChunkID(pushID: "stuck", sequence: 1), app: "down", recipients: 2000)
        #expect(inFlight.room == ClaimRoom(chunks: 3, recipients: 6000))
        #expect(!inFlight.room.hasRoom(inFlightLimit: 1000, chunkSize: 2000, pushes: 32))

        // Both of the down app's chunks wait for its endpoint (one of them for two environments): only the other
        // app's chunk takes room, and the down app gets no more chunks.
        inFlight.waitingForEndpoint(down, true)
        inFlight.waitingForEndpoint(alsoDown, true)
        inFlight.waitingForEndpoint(alsoDown, true)
        #expect(inFlight.room == ClaimRoom(chunks: 1, recipients: 2000))
        #expect(inFlight.room.hasRoom(inFlightLimit: 1000, chunkSize: 2000, pushes: 2))
        #expect(inFlight.appsWaitingForEndpoint == ["down"])

        // One stops waiting: it takes its room again; the app is passed over while the other still waits.
        inFlight.waitingForEndpoint(down, false)
        #expect(inFlight.room == ClaimRoom(chunks: 2, recipients: 4000))
        #expect(inFlight.appsWaitingForEndpoint == ["down"])
        inFlight.waitingForEndpoint(alsoDown, false)
        #expect(inFlight.appsWaitingForEndpoint == ["down"], "one of its environments still waits")
        inFlight.waitingForEndpoint(alsoDown, false)
        #expect(inFlight.appsWaitingForEndpoint.isEmpty)
        #expect(inFlight.room == ClaimRoom(chunks: 3, recipients: 6000))

        // Handed to the devices' connections: still a chunk, its recipients no longer.
        inFlight.handedOver(large)
        #expect(inFlight.room == ClaimRoom(chunks: 3, recipients: 4000))
        inFlight.remove(large)
        inFlight.remove(down)
        #expect(inFlight.ids == [ChunkID(pushID: "stuck", sequence: 1)])
        #expect(inFlight.contains(ChunkID(pushID: "stuck", sequence: 1)) && !inFlight.contains(ChunkID(pushID: "large", sequence: 0)))
    }
}
