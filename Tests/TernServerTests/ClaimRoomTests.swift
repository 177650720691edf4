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
}
