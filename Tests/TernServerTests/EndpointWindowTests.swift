import TernAPNs
import Testing

@testable import TernServer

/// One endpoint's window, and its silence, decided from values: an endpoint that never answers holds few of the
/// node's permits and fails its notifications at once, and one that answers, however slowly, is left alone.
struct EndpointWindowTests {
    /// The time the answers come at: a manual clock, moved by the tests.
    private var now = ContinuousClock.now

    @Test func aNewEndpointGetsTheInitialWindowThenWaits() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        #expect(window.admit(300, at: now) == .send(300))
        #expect(window.admit(300, at: now) == .send(200))
        #expect(window.admit(1, at: now) == .wait)
        #expect(window.outstanding == 500)
        window.giveBack(10)
        #expect(window.admit(20, at: now) == .send(10))
    }

    @Test func answersWhileAPushKeepsTheWindowFullWidenItUpToTheMaximum() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        var answers = 0
        // A push keeps the window full: every bunch of answers frees slots that the next notifications take.
        guard case .send = window.admit(100_000, at: now) else { Issue.record("the window let nothing go"); return }
        while window.limit < 4000, answers < 10_000 {
            window.record(Array(repeating: .answered, count: 50), at: now)
            answers += 50
            _ = window.admit(100_000, at: now)
        }
        // Two wider per answer: 1,750 answers from 500 to 4,000, about two round trips' worth (500, then 1,500).
        #expect(window.limit == 4000)
        #expect(answers == 1750)
        #expect(!window.isSilent)
    }

    @Test func aTrickleOfAnswersLeavesTheWindowWhereItIs() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        for _ in 0..<1000 {
            #expect(window.admit(1, at: now) == .send(1))
            window.record([.answered], at: now)
        }
        #expect(window.limit == 500, "one notification at a time never used the window")
    }

    @Test func anAttemptTimeoutWithNoAnswerMeansSilenceAndWhoWaitedFailsAtOnce() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        let sentAt = now
        #expect(window.admit(500, at: now) == .send(500))
        #expect(window.admit(100, at: now) == .wait)
        // The first of them times out, nothing answered since it went: the endpoint answers nothing (logged once).
        #expect(window.record([.timedOut(sentAt: sentAt)], at: sentAt + .seconds(10)) == .silent)
        #expect(window.isSilent)
        #expect(window.silences == 1)
        #expect(window.admit(100, waitingSince: 0, at: now) == .refuse(100, .silent), "it waited before the silence was seen")
        #expect(window.admit(100, at: now) == .wait, "what went before the silence is still out: no probe yet")
        #expect(window.record(Array(repeating: .timedOut(sentAt: sentAt), count: 499), at: sentAt + .seconds(10)) == nil)
        // Then one probe at a time; the others wait for it.
        #expect(window.admit(100, at: now) == .send(1))
        #expect(window.admit(100, at: now) == .wait)
        let waitingSince = window.silences
        // The probe times out too: whoever waited for it fails.
        window.record([.timedOut(sentAt: sentAt + .seconds(10))], at: sentAt + .seconds(20))
        #expect(window.isSilent)
        #expect(window.admit(100, waitingSince: waitingSince, at: now) == .refuse(100, .silent))

        // The next push: a probe, the rest waiting for it. It is answered: the silence is over, the window back at
        // its start, and the rest go.
        #expect(window.admit(100, at: now) == .send(1))
        #expect(window.admit(99, at: now) == .wait)
        let waiting = window.silences
        #expect(window.record([.answered], at: sentAt + .seconds(21)) == .answering)
        #expect(!window.isSilent)
        #expect(window.admit(99, waitingSince: waiting, at: now) == .send(99))
        #expect(window.limit == 500)
    }

    @Test func aSlowEndpointThatAnswersOthersMeanwhileIsNotSilent() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        let sentAt = now
        #expect(window.admit(2, at: now) == .send(2))
        // One is answered after the other went: a timeout then says the notification was slow, not the endpoint mute.
        window.record([.answered], at: sentAt + .seconds(3))
        window.record([.timedOut(sentAt: sentAt)], at: sentAt + .seconds(10))
        #expect(!window.isSilent)
        #expect(window.admit(10, at: now) == .send(10))
    }

    @Test func aSilentEndpointAfterAnAnswerLongAgoIsSilent() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        #expect(window.admit(1, at: now) == .send(1))
        window.record([.answered], at: now)
        let later = now + .seconds(60)
        #expect(window.admit(1, at: now) == .send(1))
        window.record([.timedOut(sentAt: later)], at: later + .seconds(10))
        #expect(window.isSilent)
    }

    @Test func otherEndingsSayNothing() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        #expect(window.admit(10, at: now) == .send(10))
        // Connections that failed, batches that stopped: the slots come back, the endpoint is not judged.
        window.record(Array(repeating: .other, count: 10), at: now)
        #expect(!window.isSilent)
        #expect(window.outstanding == 0)
        #expect(window.limit == 500)
    }

    @Test func anEndpointThatRefusesTheCredentialsFailsTheRestAtOnceAndIsProbedAMinuteLater() {
        var window = EndpointWindow(initial: 500, maximum: 4000)
        let (app, voip) = ("com.example.app", "com.example.app.voip")
        let start = now
        let refused = { (count: Int, reason: APNsReason) in EndpointWindow.Admission.refuse(count, .credentials(reason)) }
        #expect(window.admit(10, topic: app, at: start) == .send(10))
        // The first answer refuses the app's key: the rest fail at once, unsent, with its reason; logged once.
        #expect(window.record([.credentialsRefused(.invalidProviderToken)], topic: app, at: start + .milliseconds(5))
            == .refusingCredentials(.invalidProviderToken, topic: app))
        #expect(window.admit(1000, topic: app, at: start + .milliseconds(6)) == refused(1000, .invalidProviderToken))
        let last = start + .milliseconds(7)
        #expect(window.record(Array(repeating: .credentialsRefused(.invalidProviderToken), count: 9), topic: app, at: last) == nil)
        // Another topic of the app (a certificate may cover one and not the other) is not refused.
        #expect(window.admit(3, topic: voip, at: last) == .send(3))
        window.record(Array(repeating: .answered, count: 3), topic: voip, at: last)
        // A probe interval after the last refusal, one goes; the others still fail.
        #expect(window.admit(5, topic: app, at: last + .seconds(59)) == refused(5, .invalidProviderToken))
        #expect(window.admit(5, topic: app, at: last + .seconds(60)) == .send(1))
        #expect(window.admit(5, topic: app, at: last + .seconds(61)) == refused(5, .invalidProviderToken), "one probe an interval")
        // The probe never answered (its slot given back, say): another goes an interval after it, not never.
        window.giveBack(1)
        #expect(window.admit(5, topic: app, at: last + .seconds(119)) == refused(5, .invalidProviderToken))
        #expect(window.admit(5, topic: app, at: last + .seconds(120)) == .send(1))
        // Refused again: the next probe an interval after that.
        #expect(window.record([.credentialsRefused(.invalidProviderToken)], topic: app, at: last + .seconds(121)) == nil)
        #expect(window.admit(5, topic: app, at: last + .seconds(150)) == refused(5, .invalidProviderToken))
        #expect(window.admit(5, topic: app, at: last + .seconds(181)) == .send(1))
        // Taken this time: the window lets them go again, as wide as before.
        #expect(window.record([.answered], topic: app, at: last + .seconds(181)) == .acceptingCredentials(topic: app))
        #expect(window.credentialsRefused.isEmpty)
        #expect(window.admit(600, topic: app, at: last + .seconds(182)) == .send(500))
    }

    @Test func aRefusalOfTheCredentialsIsAnAnswerItEndsASilence() {
        var window = EndpointWindow(initial: 4, maximum: 4)
        let sentAt = now
        #expect(window.admit(2, at: sentAt) == .send(2))
        #expect(window.record([.timedOut(sentAt: sentAt)], at: sentAt + .seconds(10)) == .silent)
        #expect(window.record([.credentialsRefused(.badCertificate)], at: sentAt + .seconds(11)) == .refusingCredentials(.badCertificate, topic: ""))
        #expect(!window.isSilent)
        #expect(window.admit(3, at: sentAt + .seconds(11)) == .refuse(3, .credentials(.badCertificate)))
    }
}

/// The window shared by the batches to one endpoint.
struct EndpointGateTests {
    @Test func waitersGoInTheOrderTheyCameAsTheWindowFrees() async throws {
        let gate = EndpointGate(initial: 2, maximum: 2)
        #expect(try await gate.admit(2) == .send(2))
        let (order, input) = AsyncStream.makeStream(of: (Int, EndpointWindow.Admission).self)
        var woken = order.makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for waiter in 0..<3 {
                group.addTask {
                    var told = false
                    let admission = try await gate.admit(5) { told = true }
                    #expect(told, "a batch that waits is told, so its chunk leaves room to other apps")
                    input.yield((waiter, admission))
                }
                while gate.waiting < waiter + 1 { await Task.yield() }
            }
            for expected in 0..<2 {
                gate.record([.answered], at: .now)
                let next = await woken.next()
                #expect(next?.0 == expected)
                #expect(next?.1 == .send(1))
            }
            // The endpoint turns silent (a notification sent after the last answer timed out): the last waiter is
            // refused at once rather than left waiting.
            let sentAt = ContinuousClock.now
            gate.record([.timedOut(sentAt: sentAt)], at: sentAt + .seconds(10))
            let last = await woken.next()
            #expect(last?.0 == 2)
            #expect(last?.1 == .refuse(5, .silent))
            try await group.waitForAll()
        }
    }

    @Test func whoWaitsWhenTheCredentialsAreRefusedFailsAtOnce() async throws {
        let gate = EndpointGate(initial: 1, maximum: 1)
        #expect(try await gate.admit(1) == .send(1))
        let waiter = Task { try await gate.admit(3) }
        while gate.waiting < 1 { await Task.yield() }
        gate.record([.credentialsRefused(.invalidProviderToken)], at: .now)
        #expect(try await waiter.value == .refuse(3, .credentials(.invalidProviderToken)), "it waited for the same topic")
        #expect(try await gate.admit(2) == .refuse(2, .credentials(.invalidProviderToken)))
    }

    @Test func aCancelledWaiterLeaves() async throws {
        let gate = EndpointGate(initial: 1, maximum: 1)
        #expect(try await gate.admit(1) == .send(1))
        let waiter = Task { try await gate.admit(1) }
        while gate.waiting < 1 { await Task.yield() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(gate.waiting == 0)
        gate.giveBack(1)
        #expect(try await gate.admit(1) == .send(1))
    }
}
