import TernAPNs

/// How many notifications one APNs endpoint (one app's client) may have out at once, and whether it answers at all:
/// the decision, as a value.
///
/// The node's permits (``InFlightLimit``) are shared by every app. An endpoint that takes connections and then never
/// answers keeps each notification sent to it, and its permit, until the client's attempt timeout (10 s). Without a
/// limit of its own, one push to it takes every permit, over and over, and every other app's pushes wait behind it.
/// So each endpoint has a window, taken before the node's permits:
/// - It starts at ``initial`` (half the node's least in-flight limit), so an endpoint that never answered holds
///   at most that many permits and the other apps keep the rest.
/// - Each answer while at least half the window is out widens it by two, up to ``maximum`` (the node's limit): the
///   window triples each round trip while a push keeps it full, as fast as the node's own limit grows.
/// - An attempt that timed out with no answer from the endpoint since it was sent means the endpoint answers
///   nothing: it is **silent**. Then a notification goes only when none is out, as a probe, and the others wait for
///   what is out. An answer ends the silence, with the window back at ``initial``, and they go. A timeout says the
///   silence goes on: whoever was waiting before it fails at once, unsent (``Admission/refuse(_:)``). So a push
///   made while its endpoint is silent fails after one attempt timeout (the probe's) holding one permit, and the
///   first push after the endpoint came back goes out whole.
///
/// A slow endpoint is not silent: it answers some notifications while others wait. Only an attempt timeout with
/// nothing answered during it counts.
///
/// An endpoint that answers that the app's credentials are no good for a topic (``credentialsReasons``:
/// `InvalidProviderToken`, `TopicDisallowed`, `BadCertificate`…) would answer every notification of that topic so: it
/// **refuses the credentials** for it. Then that topic's notifications fail at once, unsent, with that reason
/// (``Admission/refuse(_:_:)``, ``Refusal/credentials(_:)``), and one goes as a probe once ``credentialsProbeInterval`` has passed since
/// the last refusal or probe: an app whose key was revoked, or whose topic was mistyped, does not send APNs a
/// million requests it refuses (nor trickle them, one stream a connection, as APNs allows a connection without a
/// valid token). Any other answer to that topic ends it. Refusals go by topic, since a certificate can lack the
/// app's VoIP topic while its alerts go. A new client, made when the app's credentials or topic change, starts
/// afresh.
struct EndpointWindow: Sendable {
    /// How long after the endpoint refused the credentials one notification goes to see whether it still does.
    static let credentialsProbeInterval = Duration.seconds(60)
    /// APNs' answers that refuse the app's provider token or certificate for a topic, whatever the notification: a
    /// revoked or mistyped key, a topic the key or certificate does not cover, a certificate of the wrong environment.
    /// Not `Forbidden`, whose meaning APNs leaves open.
    static let credentialsReasons: Set<APNsReason> = [
        .invalidProviderToken, .missingProviderToken, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
        .badEnvironmentKeyIdInToken,
    ]

    /// What a notification's end says about the endpoint.
    enum Ending: Sendable, Equatable {
        /// The endpoint answered (accepted or not): it is alive.
        case answered
        /// The endpoint answered that the app's credentials are no good for the notification's topic, with this
        /// reason.
        case credentialsRefused(APNsReason)
        /// The client gave up waiting for an answer to a notification sent at `sentAt`.
        case timedOut(sentAt: ContinuousClock.Instant)
        /// It ended otherwise (a connection failed, the batch stopped, its slot was not used): it says nothing.
        case other
    }

    /// A change in whether the endpoint answers, for the log.
    enum Change: Sendable, Equatable {
        /// A timeout with nothing answered since: it answers nothing.
        case silent
        /// It answered again after a silence.
        case answering
        /// It refused the app's credentials for a topic, with this reason.
        case refusingCredentials(APNsReason, topic: String)
        /// It took them again for that topic.
        case acceptingCredentials(topic: String)
    }

    /// Why notifications fail at once, unsent.
    enum Refusal: Sendable, Equatable {
        /// The endpoint answers nothing.
        case silent
        /// The endpoint refuses the app's credentials for their topic, with this reason.
        case credentials(APNsReason)
    }

    enum Admission: Sendable, Equatable {
        /// Send this many (at least one).
        case send(Int)
        /// The window is full: wait until a notification ends.
        case wait
        /// Fail this many at once, unsent, for this reason.
        case refuse(Int, Refusal)
    }

    let initial: Int
    let maximum: Int
    private(set) var limit: Int
    /// Admitted and not yet ended.
    private(set) var outstanding = 0
    /// Whether the endpoint answers nothing now.
    private(set) var isSilent = false
    /// Timeouts that said the endpoint answers nothing, ever: a waiter that began waiting before the latest one is
    /// refused.
    private(set) var silences = 0
    private var lastAnswer: ContinuousClock.Instant?
    /// By topic, why the endpoint refuses the app's credentials, and when it last refused them or a probe went.
    private(set) var credentialsRefused: [String: (reason: APNsReason, at: ContinuousClock.Instant)] = [:]

    /// - Parameters:
    ///   - initial: the window of an endpoint that has not answered yet, or was silent.
    ///   - maximum: the most it grows to (the node's in-flight limit).
    init(initial: Int, maximum: Int) {
        self.maximum = max(1, maximum)
        self.initial = max(1, min(initial, self.maximum))
        self.limit = self.initial
    }

    /// Up to `wanted` notifications asking to go; `waitingSince` is ``silences`` when they began to wait, if they
    /// were told to.
    mutating func admit(_ wanted: Int, topic: String = "", waitingSince: Int? = nil, at now: ContinuousClock.Instant) -> Admission {
        precondition(wanted > 0, "at least one notification")
        if let (reason, since) = credentialsRefused[topic] {
            // One probe a probe interval after the last refusal or probe, when the window has room; the rest fail now.
            guard since.duration(to: now) >= Self.credentialsProbeInterval else { return .refuse(wanted, .credentials(reason)) }
            guard outstanding < limit else { return .wait }
            credentialsRefused[topic] = (reason, now)
            outstanding += 1
            return .send(1)
        }
        if isSilent {
            // A timeout came since they began to wait: the silence goes on.
            if let waitingSince, waitingSince < silences { return .refuse(wanted, .silent) }
            // One probe at a time, once what went before the silence has ended.
            guard outstanding == 0 else { return .wait }
            outstanding = 1
            return .send(1)
        }
        let free = limit - outstanding
        guard free > 0 else { return .wait }
        let taken = min(wanted, free)
        outstanding += taken
        return .send(taken)
    }

    /// Notifications of `topic` admitted earlier ended at `now`. - Returns: whether the endpoint began or stopped
    /// answering nothing, or refusing the credentials, if it did (the last change, when a bunch did both).
    @discardableResult
    mutating func record(_ endings: some Sequence<Ending>, topic: String = "", at now: ContinuousClock.Instant) -> Change? {
        var change: Change?
        for ending in endings {
            let busy = outstanding * 2 >= limit
            outstanding -= 1
            precondition(outstanding >= 0, "more notifications ended than were admitted")
            switch ending {
            case .answered:
                lastAnswer = now
                if credentialsRefused.removeValue(forKey: topic) != nil { change = .acceptingCredentials(topic: topic) }
                if isSilent {
                    isSilent = false
                    limit = initial
                    change = .answering
                } else if busy {
                    limit = min(maximum, limit + 2)
                }
            case .credentialsRefused(let reason):
                // It answers: not silent, and the window does not grow on refusals.
                lastAnswer = now
                if isSilent {
                    isSilent = false
                    limit = initial
                }
                if credentialsRefused[topic] == nil { change = .refusingCredentials(reason, topic: topic) }
                credentialsRefused[topic] = (reason, now)
            case .timedOut(let sentAt):
                if let lastAnswer, lastAnswer >= sentAt { continue }
                silences += 1
                if !isSilent {
                    isSilent = true
                    limit = initial
                    change = .silent
                }
            case .other:
                continue
            }
        }
        return change
    }

    /// Gives back slots admitted and not used (their notifications did not go).
    mutating func giveBack(_ count: Int) {
        outstanding -= count
        precondition(outstanding >= 0, "more slots given back than admitted")
    }
}
