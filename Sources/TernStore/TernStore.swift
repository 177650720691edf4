import Foundation

/// Why a store call failed in a way the caller should tell apart.
public enum StoreError: Error, Equatable, Sendable {
    /// A record with that key exists already.
    case conflict(String)
    /// No such record.
    case notFound(String)
    /// The database settings are wrong (a malformed URL); the message says how.
    case invalidInput(String)
    /// The database cannot be reached; the message says why.
    case unavailable(String)
    /// A registration's caller did not prove what it needs (``RegistrationCaller``); nothing was written.
    case refused(RegistrationRefusal)
    /// A row holds text the store never writes in that column (edited by hand, or by a newer Tern); the message
    /// names the column, the text and what the column takes.
    case unreadable(String)
    /// A change would take a device past ``DeviceRecord/maximumTags``; nothing was written. Carries the count it
    /// would have had.
    case tooManyTags(Int)
}

extension Error {
    /// ``StoreError/unavailable(_:)``: the database, not the call, failed.
    public var isStoreUnavailable: Bool {
        if case .unavailable? = self as? StoreError { return true }
        return false
    }
}

extension StoreError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .conflict(let what): "\(what) exists already"
        case .notFound(let what): "no \(what)"
        case .invalidInput(let message), .unavailable(let message), .unreadable(let message): message
        case .refused(let refusal): "registration refused: \(refusal.rawValue)"
        case .tooManyTags(let count): "a device has at most \(DeviceRecord.maximumTags) tags; this change would give it \(count)"
        }
    }
}

/// Everything `tern serve` keeps: apps, the device registry, token events and pushes.
///
/// One protocol, one shared conformance test suite; SQLite is the embedded implementation, PostgreSQL the one for
/// several nodes. Every mutating call is one transaction: it happens whole or not at all. Dates are stored with
/// millisecond precision.
public protocol TernStore: Sendable {
    /// Creates or upgrades the schema. Safe to call on every start.
    func migrate() async throws
    /// Whether the store answers (for `/ready`).
    func ping() async throws
    /// The database server's own time, or nil when the database is a file of this node's (SQLite), whose time is the
    /// node's. On PostgreSQL every node stores dates that the others compare with theirs (chunk leases above all),
    /// so the nodes read their dates through this clock (`DatabaseAlignedClock` in TernServer), not their own.
    func databaseTime() async throws -> Date?
    /// Runs what keeps the store's connections (PostgreSQL's pool) until the calling task is cancelled; returns at
    /// once when there is nothing to run (SQLite). Whoever opens a store runs this, in a task of its own structure,
    /// for as long as the store is used: until it runs, PostgreSQL calls wait.
    func run() async
    func close() async throws

    // MARK: Settings

    /// A server-wide setting (such as the admin token's hash), or nil.
    func setting(_ key: String) async throws -> String?
    func setSetting(_ key: String, to value: String) async throws
    /// Stores `value` unless the key has a value already. - Returns: the value in force afterwards.
    func initializeSetting(_ key: String, to value: String) async throws -> String
    /// Removes the setting if its value is still `value` (what one start wrote, taken back when that start fails).
    func removeSetting(_ key: String, ifItIs value: String) async throws

    // MARK: Apps

    /// - Throws: ``StoreError/conflict(_:)`` if the id is taken.
    func createApp(_ app: AppRecord) async throws
    func app(_ id: String) async throws -> AppRecord?
    func apps() async throws -> [AppRecord]
    /// Replaces every field but `id` and `createdAt`. - Throws: ``StoreError/notFound(_:)``.
    func updateApp(_ app: AppRecord) async throws
    /// Deletes the app with its devices, token events and pushes. Returns false if there was no such app.
    func deleteApp(_ id: String) async throws -> Bool
    /// Notes when the legacy feedback service was read for `app`, without touching the app's `updatedAt`.
    func recordFeedbackPoll(app: String, at: Date) async throws

    // MARK: Device registry

    /// Registers a device, applying the registry's rules in one transaction:
    /// - the device id has exactly one current token: a new token replaces the old one, which goes to the device's
    ///   token history (reason `replaced`);
    /// - a token belongs to one device: registered under another device id, it moves there and the device that had
    ///   it is removed (its id was lost, e.g. a cleared keychain);
    /// - registering again sets `lastRegisteredAt` to `at` and reactivates a deactivated token;
    /// - a non-nil alias binds the device to it (unbinding the old one); non-nil tags replace the device's tags;
    /// - a new device keeps `newSecretHash` as its secret's hash; an existing one keeps its own;
    /// - a device caller must present an existing device's secret, and may bind only an alias it proved (or the
    ///   one it has): otherwise ``StoreError/refused(_:)`` and nothing is written.
    /// - Throws: ``StoreError/notFound(_:)`` for an unknown app.
    func register(_ registration: DeviceRegistration, app: String, at: Date) async throws -> DeviceRecord
    /// Replaces a device's secret hash; with `onlyReplacing`, only while the stored hash is still that one (nil: none
    /// stored), in the same statement: a rotation that a secret authorised cannot undo one made meanwhile (the
    /// backend revoking that very secret). Returns false if there is no such device, or its hash had changed.
    func setDeviceSecret(app: String, deviceID: String, secretHash: [UInt8], onlyReplacing current: StoredSecret?, at: Date) async throws -> Bool
    func device(app: String, deviceID: String) async throws -> DeviceRecord?
    /// The locales these devices registered, by device id; a device with none, or no such device, is left out.
    func locales(app: String, deviceIDs: [String]) async throws -> [String: String]
    /// The devices that hold `token` (lowercase hex), active or not: as their device token, or as a token of another
    /// kind (``PushTokenKind``) or a Live Activity's; at most one for each, device token first.
    func devices(app: String, token: String) async throws -> [DeviceRecord]
    /// Returns false if there was no such device.
    func deleteDevice(app: String, deviceID: String) async throws -> Bool
    /// Unbinds every device of the app whose alias was bound without proof, while the app's binding was open (``AliasProof/open``):
    /// the app binds only with tokens now. - Returns: how many.
    func unbindUnprovenAliases(app: String, at: Date) async throws -> Int
    /// Unbinds the device from its alias (logout). Returns the device, or nil if there is none.
    func removeAlias(app: String, deviceID: String, at: Date) async throws -> DeviceRecord?
    /// Adds and removes tags. Returns the device, or nil if there is none.
    /// - Throws: ``StoreError/tooManyTags(_:)``, having changed nothing, when the device would have more than
    ///   ``DeviceRecord/maximumTags``.
    func updateTags(app: String, deviceID: String, add: Set<String>, remove: Set<String>, at: Date) async throws -> DeviceRecord?
    /// The devices bound to an alias (active or not), by device id.
    func devices(app: String, alias: String) async throws -> [DeviceRecord]
    /// The devices with a tag, by device id, `limit` at a time after the cursor.
    func devices(app: String, tag: String, after cursor: String?, limit: Int) async throws -> Page<DeviceRecord>
    /// The devices created from `since` on (and before `before`, if given), active or not, oldest first, `limit` at
    /// a time after the cursor (the page's `next` is a ``DeviceCreationCursor``): what a flood of made-up
    /// registrations left, for an operator to delete.
    func devices(
        app: String, createdSince since: Date, before: Date?, after cursor: DeviceCreationCursor?, limit: Int
    ) async throws -> Page<DeviceRecord>
    /// The tokens the device had before its current one, oldest first.
    func tokenHistory(app: String, deviceID: String) async throws -> [TokenHistoryEntry]

    // MARK: Token hygiene

    /// Deactivates the devices that hold `tokens`, in one transaction (the dead tokens of a bunch of answers cost one
    /// commit, not one each), and records a token event for each. With `invalidSince` (a 410 or feedback timestamp)
    /// only a token last registered before that moment is deactivated; without it, at once. The check and the update
    /// are one statement, so a registration racing with it is never lost. - Returns: the events, in the order of
    /// `tokens`, of those it deactivated (not an unknown token, one already inactive, or one registered again since
    /// its `invalidSince`).
    func deactivateTokens(app: String, _ tokens: [TokenDeactivation], at: Date) async throws -> [TokenEvent]
    /// Sets the device's token of `kind` (``PushTokenKind``), active from `at`: a token of the kind another device of
    /// the app had moves here, and one APNs called dead is alive again. - Returns: nil when there is no such device.
    func setPushToken(app: String, deviceID: String, kind: PushTokenKind, token: String, at: Date) async throws -> PushTokenRecord?
    /// Removes the device's token of `kind`. - Returns: whether it had one.
    func deletePushToken(app: String, deviceID: String, kind: PushTokenKind) async throws -> Bool
    /// The devices' tokens of other kinds than their device tokens, by device id (a device with none is left out),
    /// each device's by kind.
    func pushTokens(app: String, deviceIDs: [String]) async throws -> [String: [PushTokenRecord]]
    /// Deactivates devices' tokens of `kind` that APNs called dead, as ``deactivateTokens(app:_:at:)`` does device
    /// tokens (the same rule for a 410's timestamp), in one transaction. The devices stay, with their device tokens;
    /// no token event is recorded (the app's backend never held these tokens). - Returns: the tokens deactivated.
    func deactivatePushTokens(app: String, kind: PushTokenKind, _ tokens: [TokenDeactivation], at: Date) async throws -> [String]
    /// Registers the device's update token for Live Activity `activity` (``ActivityTokenRecord``), from `at`: a new
    /// token for an activity it has replaces the old one and keeps the activity's start; the token registered for
    /// another activity or device moves here; past ``ActivityTokenRecord/maximumPerDevice`` activities, the device's
    /// oldest is forgotten. - Returns: nil when there is no such device.
    func setActivityToken(app: String, deviceID: String, activity: String, token: String, at: Date) async throws -> ActivityTokenRecord?
    /// Removes the device's token for `activity` (the activity ended). - Returns: whether it had one.
    func deleteActivityToken(app: String, deviceID: String, activity: String) async throws -> Bool
    /// The devices' activity tokens, by device id (a device with none is left out), each device's oldest first.
    func activityTokens(app: String, deviceIDs: [String]) async throws -> [String: [ActivityTokenRecord]]
    /// Removes activity tokens APNs called dead, by the rule for a 410's timestamp that
    /// ``deactivateTokens(app:_:at:)`` follows, in one transaction. An ended activity's token has no use, so it is
    /// removed, not kept deactivated. - Returns: the tokens removed.
    func removeDeadActivityTokens(app: String, _ tokens: [TokenDeactivation]) async throws -> [String]
    /// Keeps a channel APNs made for the app, unless the app has one of that name already. - Returns: the app's
    /// channel of that name (the one given, or the one kept before), and whether it is the one given.
    func addBroadcastChannel(app: String, _ channel: BroadcastChannelRecord) async throws -> (channel: BroadcastChannelRecord, added: Bool)
    /// The app's channel named `name`, or nil.
    func broadcastChannel(app: String, name: String) async throws -> BroadcastChannelRecord?
    /// The app's channels by name, `limit` at a time after the cursor (a name).
    func broadcastChannels(app: String, after cursor: String?, limit: Int) async throws -> Page<BroadcastChannelRecord>
    /// Forgets the app's channel named `name`, and its broadcasts. - Returns: whether it had one.
    func deleteBroadcastChannel(app: String, name: String) async throws -> Bool
    /// Records a broadcast to the app's channel, and forgets that channel's broadcasts but the latest
    /// ``BroadcastRecord/kept``. - Returns: the broadcast with its id.
    /// - Throws: ``StoreError/notFound(_:)`` when the app has no such channel (deleted meanwhile).
    func recordBroadcast(app: String, _ broadcast: BroadcastRecord) async throws -> BroadcastRecord
    /// The broadcasts to the app's channel `channel`, newest first, `limit` at a time before the cursor (an id).
    func broadcasts(app: String, channel: String, before cursor: Int64?, limit: Int) async throws -> Page<BroadcastRecord>
    /// The latest broadcast to each of the app's channels named, by name (a channel with none is left out).
    func latestBroadcasts(app: String, channels: [String]) async throws -> [String: BroadcastRecord]
    /// The app's activities with how many devices follow each, by id, `limit` at a time after the cursor (an id).
    func activities(app: String, after cursor: String?, limit: Int) async throws -> Page<ActivitySummary>
    /// Activity `id` of the app, or nil if no device follows it.
    func activity(app: String, id: String) async throws -> ActivitySummary?
    /// Removes up to `limit` activity tokens of activities that started before `before`. - Returns: how many.
    func purgeEndedActivities(startedBefore before: Date, limit: Int) async throws -> Int
    /// Forgets up to `limit` tokens of activity `activity` registered no later than `registeredBy` (of the devices
    /// bound to `aliases`, when there are any): an `end` push went to them, and no update can reach an ended activity.
    /// A token registered after (the id used again for a new activity) stays. - Returns: how many were forgotten (fewer
    /// than `limit`: none are left).
    func endActivity(app: String, activity: String, aliases: [String], registeredBy: Date, limit: Int) async throws -> Int
    /// Token events after the cursor (an event id), oldest first.
    func tokenEvents(app: String, after: Int64?, limit: Int) async throws -> [TokenEvent]
    /// The app's open events after event `after` (nil: from the first), oldest first, at most `limit`.
    func openEvents(app: String, after: Int64?, limit: Int) async throws -> [OpenEvent]
    /// Deletes up to `limit` open events that occurred before `before`, oldest first. - Returns: how many.
    func purgeOpenEvents(before: Date, limit: Int) async throws -> Int
    /// A device's token events, newest first, at most `limit` (the console's device page).
    func tokenEvents(app: String, deviceID: String, limit: Int) async throws -> [TokenEvent]

    // MARK: Pushes

    /// Stores a push. With an idempotency key already used by the app, stores nothing and returns that push. A push
    /// stored as ``PushRecord/Status-swift.enum/scheduled`` waits for its ``PushRecord/sendAt``: see
    /// ``claimChunk(node:size:leaseUntil:at:passingOver:)``. - Returns: the stored push and whether it is new.
    func createPush(_ push: PushRecord) async throws -> (push: PushRecord, created: Bool)
    func push(app: String, id: String) async throws -> PushRecord?
    /// The push as its row keeps it, without the counts its chunks add up to: for a check that needs only what the
    /// push is and how far it was handed out (a device's report of it), which a push of many chunks makes cheaper.
    func pushWithoutCounts(app: String, id: String) async throws -> PushRecord?
    /// The app's pushes with their counts, newest first in the order they are sent (a scheduled push takes its place
    /// when it is due), `limit` at a time; only those with `status` when one is given. The cursor is opaque.
    func pushes(app: String, status: PushRecord.Status?, after cursor: String?, limit: Int) async throws -> Page<PushRecord>
    /// The audience's recipients after the cursor, by key, `limit` at a time: active devices only (a `tokens`
    /// audience lists the given tokens, minus those registered and deactivated). Never the whole audience at once.
    func recipients(app: String, audience: Audience, after cursor: String?, limit: Int) async throws -> Page<Recipient>
    /// A page of ``recipients(app:audience:after:limit:)`` with only the devices `filter` admits: it may hold fewer
    /// than `limit`, none at all, and still have a next.
    func recipients(app: String, audience: Audience, filter: AudienceFilter?, after cursor: String?, limit: Int) async throws -> Page<Recipient>

    // MARK: Delivery in chunks

    /// Claims the next chunk of work for `node`, in one transaction, until `leaseUntil`: a chunk whose node's lease
    /// ran out (taken over as it was), or else the next `size` recipients of an unfinished push. An app's pushes go in
    /// the order they were stored (never by a node's clock), and any number of nodes may claim chunks of one push. A
    /// node claims from a later push of an app only when every earlier unfinished push of that app is handed out in
    /// full and its open chunks are this node's, so a device's notifications from one app are sent in the order the
    /// pushes were made, whichever nodes send them. Between apps, the push with the fewest chunks being sent goes
    /// first (then the oldest): another app's small push does not wait for a large one to be handed out. Apps in
    /// `passingOver` get no chunk from this claim (the node is waiting for their APNs endpoint with one already).
    /// Scheduled pushes whose `sendAt` is `now` or earlier become pending first, in the order of their times, and
    /// take their place in their apps' order then (after the pushes stored before it).
    func claimChunk(node: String, size: Int, leaseUntil: Date, at now: Date, passingOver: Set<String>) async throws -> ChunkClaim
    /// Extends `node`'s lease on the given chunks (those it is still sending; one it gave up lapses, and any node
    /// may then claim it again). - Returns: how many of them it still holds.
    @discardableResult
    func renewChunks(node: String, _ chunks: [ChunkID], until: Date) async throws -> Int
    /// Records results of a chunk's recipients while it is being sent, if `node` still holds it: `progress` is added
    /// to the chunk's, and `mark` replaces the chunk's mark (it names every recipient recorded so far, these and
    /// earlier ones). A node that takes the chunk over sends only to the recipients outside the mark, so a crash
    /// sends again only what was not recorded. - Returns: false if `node` no longer holds the chunk (nothing recorded).
    func recordChunkProgress(pushID: String, sequence: Int, node: String, _ progress: PushProgress, mark: ChunkMark) async throws -> Bool
    /// Records results of a chunk as ``recordChunkProgress(pushID:sequence:node:_:mark:)`` does, and gives the chunk up:
    /// it stays open, and any node may claim it at once to send to the recipients outside `mark`. For a node that
    /// stopped sending it unfinished. - Returns: false if `node` no longer holds the chunk (nothing recorded).
    func giveUpChunk(pushID: String, sequence: Int, node: String, _ progress: PushProgress, mark: ChunkMark) async throws -> Bool
    /// Records a chunk's results (those not recorded as progress) and closes it, in one transaction, if `node`
    /// still holds it; completes the push when that was its last open chunk.
    func recordChunk(pushID: String, sequence: Int, node: String, _ progress: PushProgress, at now: Date) async throws -> ChunkRecording
    /// Lets any node claim every open chunk now: for a node starting alone on its database, whose previous run's
    /// chunks would otherwise wait for their leases to run out. - Returns: how many were open.
    @discardableResult
    func releaseChunks() async throws -> Int
    /// Stops a push: no recipient of its audience is handed out in a chunk from now on, on any node. The chunks handed
    /// out already are sent to the end (a node claims about twice its in-flight limit of recipients), and the push
    /// completes with the last of them, or at once if none is open. Cancelling again changes nothing; a push that had
    /// completed is left as it was (no ``PushRecord/cancelledAt``). - Returns: the push after it, and whether this
    /// call completed it; nil when the app has no such push.
    func cancelPush(app: String, id: String, at now: Date) async throws -> (push: PushRecord, completedNow: Bool)?
    /// A push's failures, `limit` at a time; the cursor is opaque.
    func failures(pushID: String, after cursor: String?, limit: Int) async throws -> Page<PushFailure>
    /// Deletes pushes that completed before `before`, oldest first, with their failures, devices' reports and chunks,
    /// in one transaction of at most `limit` failures and reports or else `limit` pushes: a push's failures and reports
    /// go before the push, over as many calls as they take. A push whose device messages are still kept for the online channel stays until they
    /// expire.
    func purgeFinishedPushes(before: Date, limit: Int) async throws -> PushPurge
    /// Completes, at `now`, the pushes whose audience is handed out in full and whose chunks are all closed, but which
    /// are not completed: at most `limit`, oldest first. A chunk's close completes its push when it is the last open
    /// one, so none should be found; up to this version, two nodes on PostgreSQL closing a push's last two chunks at
    /// once could each see the other's chunk open and leave it so. - Returns: the ids of those it completed.
    func completeStrandedPushes(at now: Date, limit: Int) async throws -> [String]

    // MARK: Inbox and badges

    /// Puts the message in each owner's inbox (storing the message once), unread, after the owner's newest message.
    /// Idempotent: an owner that has the message already is left as it is, so a page sent again after a crash adds
    /// nothing. Each inbox then keeps at most `cap` unexpired messages: the oldest beyond it are deleted.
    /// - Returns: how many messages the cap deleted.
    func deliverToInbox(_ message: InboxMessage, owners: [InboxOwner], cap: Int, at: Date) async throws -> Int
    /// The badge each owner's devices get for push `pushID`, in one transaction:
    /// - `.unread`: the owner's unread, unexpired messages at `at`, at most ``BadgeChange/largest``, stored as the
    ///   owner's counter (the next increment counts on from what the devices show);
    /// - `.increment(n)`: the owner's counter plus n, at most ``BadgeChange/largest``, stored; once per push and owner
    ///   (asked again, the same value);
    /// - `.set(n)`: n, stored as the owner's counter.
    func badges(app: String, owners: [InboxOwner], pushID: String, change: BadgeChange, at: Date) async throws -> [InboxOwner: Int]
    /// The owner's unexpired messages after the cursor (a sequence), oldest first, `limit` at a time.
    func inbox(app: String, owner: InboxOwner, after cursor: Int64?, limit: Int, at: Date) async throws -> Page<InboxItem>
    /// The owner's unread, unexpired messages.
    func unreadCount(app: String, owner: InboxOwner, at: Date) async throws -> Int
    /// Marks as read the owner's messages up to and including `upTo` (a message id in this inbox) and those in
    /// `ids`; ids not in the inbox are ignored. - Returns: how many messages went from unread to read.
    func markRead(app: String, owner: InboxOwner, upTo: String?, ids: [String], at: Date) async throws -> Int
    /// Removes a message from one inbox. Returns false if it was not there.
    func deleteFromInbox(app: String, owner: InboxOwner, messageID: String) async throws -> Bool
    /// Deletes up to `limit` inbox entries that expired before `before`, and messages no inbox holds any more.
    /// - Returns: how many entries were deleted (less than `limit`: nothing expired is left).
    func purgeExpiredInbox(before: Date, limit: Int) async throws -> Int

    // MARK: The online channel (``DeviceMessage``)

    /// Keeps a push's message for each device, numbered after the device's newest, in one transaction. Idempotent:
    /// a device that has the message (same id) already keeps it as it is. - Returns: every draft's message, new or
    /// kept before, in the drafts' order.
    func keepMessages(_ drafts: [DeviceMessageDraft], app: String, pushID: String, at: Date, expiresAt: Date) async throws -> [DeviceMessage]
    /// The device's messages after `sequence` that are neither acknowledged nor expired, oldest first.
    func pendingMessages(app: String, deviceID: String, after sequence: Int64, limit: Int, at: Date) async throws -> [DeviceMessage]
    /// Many connections' writes in one transaction: messages sent online (by device and sequence; the first time
    /// counts), acknowledgements (by device and id; ignored for another device's or an acknowledged message), and
    /// messages both sent online and acknowledged since the last such write (one row write each instead of two: a
    /// device acknowledges within milliseconds, so most of a push's messages are reported this way).
    /// - Returns: how many were acknowledged now, and how many of those had gone through APNs already.
    func recordChannel(
        delivered: [(app: String, deviceID: String, sequence: Int64)], acks: [(app: String, deviceID: String, id: String)],
        deliveredAndAcked: [(app: String, deviceID: String, id: String)], at: Date
    ) async throws -> (acked: Int, afterFallback: Int)
    /// Marks for APNs those of these messages that are still unacknowledged and not marked before, atomically, so a
    /// message falls back once whichever node asks. - Returns: the ids marked now.
    func fallBack(app: String, ids: [String], at: Date) async throws -> Set<String>
    /// Those of these messages not acknowledged yet (ids of no message are left out).
    func unacknowledged(app: String, ids: [String]) async throws -> Set<String>
    /// Records that the device opened its message `id`, and for the first open an ``OpenEvent`` if `openEvent` says
    /// whose, in the same transaction. - Returns: false if the device has no such message.
    func openMessage(app: String, deviceID: String, id: String, at: Date, openEvent: OpenEventSubject?) async throws -> Bool
    /// What happened to push `pushID`'s device messages.
    func messageCounts(pushID: String) async throws -> DeviceMessageCounts
    /// Records what the device reported of push `pushID`, one that went through APNs (the caller checked that it was
    /// handed out to the device, ``PushRecord/wasHandedOut(to:at:)``). - Returns: false if the device had reported
    /// that already. The first open of the push on the device is also an ``OpenEvent`` if `openEvent` says whose,
    /// written in the same transaction.
    func recordPushReport(_ report: PushReport, pushID: String, deviceID: String, at: Date, openEvent: OpenEventSubject?) async throws -> Bool
    /// How many devices reported each thing of push `pushID` (``recordPushReport(_:pushID:deviceID:at:openEvent:)``).
    func pushReportCounts(pushID: String) async throws -> PushReportCounts
    /// How many opens each of these pushes has: devices that reported a push through APNs opened, and device messages
    /// opened (a push sent over the online channel). Pushes with none are left out.
    func openCounts(pushIDs: [String]) async throws -> [String: Int]
    /// The devices that reported push `pushID`, `limit` at a time in device id order, after device `after`; the
    /// cursor is the last device id of a page that has more after it.
    func pushReports(pushID: String, after: String?, limit: Int) async throws -> Page<PushDeviceReport>
    /// Deletes up to `limit` device messages that expired before `before`. - Returns: how many.
    func purgeExpiredMessages(before: Date, limit: Int) async throws -> Int

    /// Records that each entry's node holds its device's connection now (replacing any earlier entry of the device),
    /// in one transaction. - Returns: the earlier entries replaced (another connection's), so that their connections
    /// can be closed wherever they are.
    @discardableResult
    func setPresence(_ entries: [PresenceEntry], at: Date) async throws -> [PresenceEntry]
    /// Records these entries of devices that have none (a node putting back its connections' entries after they were
    /// removed while it was unseen; a device's newer connection elsewhere keeps its own).
    func restorePresence(_ entries: [PresenceEntry], at: Date) async throws
    /// Records that `node` runs at `at`. - Returns: false if it was unknown (new, or removed as unseen: its presence
    /// entries may have been removed with it).
    func nodeSeen(_ node: String, at: Date) async throws -> Bool
    /// Removes the nodes not seen since `since`, and the presence entries of every node not seen since then. - Returns:
    /// how many entries.
    func clearPresenceOfUnseenNodes(since: Date) async throws -> Int
    /// Removes each device's entry if it is still the entry's connection's (a newer connection may have replaced it).
    func clearPresence(_ entries: [PresenceEntry]) async throws
    /// Which of these devices of `app` have a message not acknowledged and not expired at `at`.
    func devicesWithMessages(app: String, deviceIDs: [String], at: Date) async throws -> Set<String>
    /// Removes every entry of `node` (it stops), or with nil every node's (the sole node starts). - Returns: how many.
    @discardableResult
    func clearPresence(node: String?) async throws -> Int
    /// Which of these devices have a connection, and on which node.
    func presence(app: String, deviceIDs: [String]) async throws -> [DevicePresence]
}

/// Comparing secrets' hashes.
public enum ConstantTime {
    /// Equal byte strings, compared in time that does not depend on where they differ. Empty ones match nothing.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count, !a.isEmpty else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

extension TernStore {
    /// The device's tokens of other kinds than its device token, by kind.
    public func pushTokens(app: String, deviceID: String) async throws -> [PushTokenRecord] {
        try await pushTokens(app: app, deviceIDs: [deviceID])[deviceID] ?? []
    }
}

extension TernStore {
    /// ``recordChannel(delivered:acks:deliveredAndAcked:at:)`` with sent marks and acknowledgements apart.
    public func recordChannel(
        delivered: [(app: String, deviceID: String, sequence: Int64)], acks: [(app: String, deviceID: String, id: String)], at: Date
    ) async throws -> (acked: Int, afterFallback: Int) {
        try await recordChannel(delivered: delivered, acks: acks, deliveredAndAcked: [], at: at)
    }

    /// ``claimChunk(node:size:leaseUntil:at:passingOver:)`` passing over no app.
    public func claimChunk(node: String, size: Int, leaseUntil: Date, at now: Date) async throws -> ChunkClaim {
        try await claimChunk(node: node, size: size, leaseUntil: leaseUntil, at: now, passingOver: [])
    }
}

extension TernStore {
    /// ``deactivateTokens(app:_:at:)`` for one token. - Returns: its event, or nil when nothing was deactivated.
    public func deactivateToken(
        app: String, token: String, reason: TokenDeactivationReason, invalidSince: Date?, apnsTimestamp: Date?, at: Date
    ) async throws -> TokenEvent? {
        try await deactivateTokens(
            app: app, [TokenDeactivation(token: token, reason: reason, invalidSince: invalidSince, apnsTimestamp: apnsTimestamp)], at: at
        ).first
    }
}
