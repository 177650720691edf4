/// Whether APNs' outright rejections of an app's tokens still say something about the tokens, or about the app: the
/// decision, as a value.
///
/// `BadDeviceToken` and `DeviceTokenNotForTopic` carry no timestamp, and a token APNs answers so is deactivated at
/// once (``TokenPruning``). That is right for one stale token among good ones. When APNs answers so for nearly every
/// token of an app, the app is what is wrong: its topic names another app of the team (`com.example.app.beta`), or its
/// environment is not its devices'. Deactivating then would wipe the app's registry with one push to everyone, and
/// the devices would get nothing until each app is opened again and registers.
///
/// So each app's recent answers are counted: accepted ones, and outright rejections.
/// - Once at least ``least`` rejections make up ``doubtingShare`` of them or more, the app is **doubted**: its
///   outright rejections fail their notifications and deactivate nothing.
/// - It is trusted again once they are under ``trustingShare``.
/// - The counts are halved whenever they reach ``window``, so the recent answers weigh most.
///
/// A push to everyone of a misconfigured app is doubted in its first bunch of answers. Smaller pushes deactivate at
/// most about ``least`` tokens before the doubt sets in.
struct OutrightRejections: Sendable, Equatable {
    /// A change, for the log.
    enum Change: Sendable, Equatable {
        case doubting
        case trusting
    }

    /// The detail of a failure whose token was kept because the app is doubted.
    static let keptDetail =
        "not deactivated: APNs refuses nearly every token of this app this way, so the app's topic or its devices' environment looks wrong, not the tokens"

    static let least = 20
    static let doubtingShare = 0.9
    static let trustingShare = 0.5
    static let window = 1_000

    /// The app's topic when these answers came: a new topic starts afresh.
    private(set) var topic: String
    private(set) var accepted = 0
    private(set) var rejected = 0
    /// Whether its outright rejections deactivate nothing now.
    private(set) var isDoubted = false

    init(topic: String) {
        self.topic = topic
    }

    /// Counts a bunch of answers to notifications of the app's `topic` (by default the one counted so far):
    /// `accepted` accepted, `rejected` rejected outright. A topic other than the counted one (the app's topic was
    /// changed) starts the counts afresh. - Returns: whether the bunch's outright rejections may deactivate their
    /// tokens, and the change in doubt it made, if any.
    mutating func answered(accepted: Int, rejected: Int, topic: String? = nil) -> (deactivate: Bool, change: Change?) {
        if let topic, topic != self.topic { self = OutrightRejections(topic: topic) }
        self.accepted += accepted
        self.rejected += rejected
        while self.accepted + self.rejected >= Self.window {
            self.accepted /= 2
            self.rejected /= 2
        }
        let total = Double(self.accepted + self.rejected)
        let share = total == 0 ? 0 : Double(self.rejected) / total
        var change: Change?
        if !isDoubted, self.rejected >= Self.least, share >= Self.doubtingShare {
            isDoubted = true
            change = .doubting
        } else if isDoubted, share < Self.trustingShare {
            isDoubted = false
            change = .trusting
        }
        return (!isDoubted, change)
    }
}
