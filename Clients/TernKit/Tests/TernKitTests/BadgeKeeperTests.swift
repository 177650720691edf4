import Foundation
import TernKit
import Testing

/// The icon's badge follows the newest thing the server said (seed 003), as values with the time passed in.
struct BadgeKeeperTests {
    private let noon = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aFreshMessageSetsTheBadgeItCarries() {
        var keeper = BadgeKeeper(staleAfter: 30)
        #expect(keeper.messageArrived(badge: 3, createdAt: noon, now: noon.addingTimeInterval(1)) == .set(3))
        #expect(keeper.shown == 3)
        // The same number again changes nothing; no badge, nothing to do.
        #expect(keeper.messageArrived(badge: 3, createdAt: noon, now: noon.addingTimeInterval(2)) == .none)
        #expect(keeper.messageArrived(badge: nil, createdAt: noon, now: noon) == .none)
    }

    @Test func aMessageFromABacklogAsksForTheCountInstead() {
        var keeper = BadgeKeeper(staleAfter: 30)
        #expect(keeper.messageArrived(badge: 5, createdAt: noon, now: noon.addingTimeInterval(31)) == .refresh)
        #expect(keeper.shown == nil)
    }

    @Test func theCountAnsweredIsShown() {
        var keeper = BadgeKeeper()
        let ticket = keeper.countRequested()
        #expect(keeper.countAnswered(2, ticket: ticket) == .set(2))
        #expect(keeper.countAnswered(2, ticket: keeper.countRequested()) == .none)
        #expect(keeper.countAnswered(-1, ticket: keeper.countRequested()) == .set(0))
    }

    @Test func anAnswerToAnOlderRequestDoesNotUndoANewerOneAndAgreeingChangesNothing() {
        var keeper = BadgeKeeper()
        let older = keeper.countRequested()
        let newer = keeper.countRequested()
        #expect(keeper.countAnswered(0, ticket: newer) == .set(0))
        #expect(keeper.countAnswered(4, ticket: older) == .refresh)
        #expect(keeper.shown == 0)
        let oldest = keeper.countRequested()
        #expect(keeper.countAnswered(1, ticket: keeper.countRequested()) == .set(1))
        #expect(keeper.countAnswered(1, ticket: oldest) == .none)
    }

    /// A probe's case: the inbox read to 0 on a slow leg, a page asked for meanwhile answered 3 first, then the read
    /// answered 0. Which the server counted last cannot be told from the answers, and the badge stayed at 3; the
    /// crossed answers now have the count asked for again.
    @Test func answersThatCrossedAreSettledByAskingAgain() {
        var keeper = BadgeKeeper()
        let read = keeper.countRequested()
        let page = keeper.countRequested()
        #expect(keeper.countAnswered(3, ticket: page) == .set(3))
        #expect(keeper.countAnswered(0, ticket: read) == .refresh)
        #expect(keeper.countAnswered(0, ticket: keeper.countRequested()) == .set(0))
        #expect(keeper.shown == 0)
    }

    @Test func aMessageThatArrivedWhileACountWasAskedForWinsOverThatCount() {
        var keeper = BadgeKeeper()
        let ticket = keeper.countRequested()
        #expect(keeper.messageArrived(badge: 7, createdAt: noon, now: noon) == .set(7))
        // The count may have been read before the message was counted, or after a read elsewhere: asked again.
        #expect(keeper.countAnswered(6, ticket: ticket) == .refresh)
        #expect(keeper.shown == 7)
        // A count asked for after it is newer.
        #expect(keeper.countAnswered(6, ticket: keeper.countRequested()) == .set(6))
    }

    @Test func whatIOSShowedItselfIsNotUndoneByAnOlderAnswer() {
        var keeper = BadgeKeeper()
        let ticket = keeper.countRequested()
        keeper.systemShowed(1)
        #expect(keeper.countAnswered(3, ticket: ticket) == .refresh)
        #expect(keeper.shown == 1)
    }
}
