import Testing

@testable import TernServer

/// When APNs' outright rejections stop deactivating an app's tokens, as values.
struct OutrightRejectionsTests {
    @Test func aFewStaleTokensAmongGoodOnesAreDeactivated() {
        var rejections = OutrightRejections(topic: "com.example.app")
        for _ in 0..<50 {
            #expect(rejections.answered(accepted: 10, rejected: 1) == (true, nil))
        }
        // Fewer than `least` rejections, however alone, say nothing about the app yet.
        var small = OutrightRejections(topic: "com.example.app")
        for _ in 1..<OutrightRejections.least {
            #expect(small.answered(accepted: 0, rejected: 1) == (true, nil))
        }
        #expect(!small.isDoubted)
    }

    @Test func nearlyEveryTokenRejectedDoubtsTheAppAndKeepsItsTokensUntilMostAreAcceptedAgain() {
        var rejections = OutrightRejections(topic: "com.example.app")
        // A push to everyone of an app whose topic is another app's: its first bunch is doubted whole.
        #expect(rejections.answered(accepted: 0, rejected: 300) == (false, .doubting))
        #expect(rejections.answered(accepted: 2, rejected: 300) == (false, nil))
        // Accepted answers that are not yet most of them leave the doubt in place.
        #expect(rejections.answered(accepted: 400, rejected: 0) == (false, nil))
        #expect(rejections.isDoubted)
        // Once the rejections are under half, they deactivate again.
        #expect(rejections.answered(accepted: 300, rejected: 0) == (true, .trusting))
        #expect(rejections.answered(accepted: 5, rejected: 1) == (true, nil))
    }

    @Test func theThresholdIsNineInTenOfAtLeastTwentyRejections() {
        var under = OutrightRejections(topic: "t")
        #expect(under.answered(accepted: 3, rejected: 20) == (true, nil), "20 of 23 is under nine in ten")
        var at = OutrightRejections(topic: "t")
        #expect(at.answered(accepted: 2, rejected: 18) == (true, nil), "18 rejections are fewer than the least")
        #expect(at.answered(accepted: 0, rejected: 2) == (false, .doubting), "20 of 22")
    }

    @Test func aNewTopicStartsAfresh() {
        var rejections = OutrightRejections(topic: "com.example.app.beta")
        #expect(rejections.answered(accepted: 0, rejected: 300) == (false, .doubting))
        // The app's topic put right: its first answers are judged on their own.
        #expect(rejections.answered(accepted: 10, rejected: 1, topic: "com.example.app") == (true, nil))
        #expect(rejections.topic == "com.example.app")
        #expect(!rejections.isDoubted)
    }

    @Test func theCountsKeepToTheWindowSoRecentAnswersWeighMost() {
        var rejections = OutrightRejections(topic: "t")
        for _ in 0..<1_000 { _ = rejections.answered(accepted: 97, rejected: 3) }
        #expect(rejections.accepted + rejections.rejected < OutrightRejections.window)
        #expect(!rejections.isDoubted)
        // After a long healthy history, a run of rejections is doubted within a window, not after the whole history.
        var bunches = 0
        while !rejections.isDoubted, bunches < 100 {
            _ = rejections.answered(accepted: 0, rejected: 100)
            bunches += 1
        }
        #expect(rejections.isDoubted)
        #expect(bunches <= 30, "doubted after \(bunches) bunches of 100 rejections")
    }
}
