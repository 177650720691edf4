import Foundation
import TernAPNs

/// A push as stored: who it goes to, what it says (opaque to the store), and how far delivery got.
public struct PushRecord: Sendable, Equatable {
    public enum Status: String, Sendable, Equatable {
        /// Stored to be sent at ``PushRecord/sendAt``: no node claims it before then. Once due it is `pending`, and
        /// takes its place in the app's order of pushes then.
        case scheduled
        /// Stored, not yet picked up by a dispatcher.
        case pending
        /// Nodes are sending it, chunk by chunk; ``PushRecord/cursor`` says how far the audience has been handed out.
        case sending
        /// Every recipient has a result.
        case completed
    }

    /// A UUID, lowercase.
    public var id: String
    public var appID: String
    /// A repeat of the same key for the same app returns this push instead of making another.
    public var idempotencyKey: String?
    public var audience: Audience
    /// Which of the audience's devices it goes to, by what they registered (their app version, language, last
    /// registration); nil: all of them.
    public var filter: AudienceFilter?
    /// The notification as the server encoded it (payload and APNs options); the store keeps the bytes.
    public var notification: [UInt8]
    public var status: Status
    public var counts: PushCounts
    /// The last recipient key handed out in a chunk: the next chunk starts after it.
    public var cursor: String?
    public var createdAt: Date
    public var finishedAt: Date?
    /// When the push was cancelled (``TernStore/cancelPush(app:id:at:)``): no recipient was handed out after it.
    public var cancelledAt: Date?
    /// When a push stored as ``Status-swift.enum/scheduled`` is to be sent; nil for a push sent as soon as it is stored.
    public var sendAt: Date?
    /// A throttled push's recipients handed out a second at most, across every node: one chunk at a time, of at most
    /// that many, each the time its size takes at this rate after the one before. It holds none of its app's later
    /// pushes back, and waits for none of the earlier ones. Nil: as fast as the nodes go, in the app's order.
    public var ratePerSecond: Int?
    /// The kind of the devices' tokens it goes to (a VoIP push to a user: each device's VoIP token), for a push of a
    /// type with tokens of its own sent to registered devices; nil: the device tokens, or the tokens its audience lists.
    /// A device without a token of the kind is passed over.
    public var tokenKind: PushTokenKind?

    /// Whose tokens the recipients hold.
    public var recipientTokens: RecipientTokens {
        if case .activity = audience { return .activity }
        return tokenKind.map(RecipientTokens.kind) ?? .device
    }

    public init(
        id: String, appID: String, idempotencyKey: String?, audience: Audience, filter: AudienceFilter? = nil, notification: [UInt8],
        status: Status = .pending,
        counts: PushCounts = PushCounts(), cursor: String? = nil, createdAt: Date, finishedAt: Date? = nil, cancelledAt: Date? = nil,
        sendAt: Date? = nil, ratePerSecond: Int? = nil, tokenKind: PushTokenKind? = nil
    ) {
        self.tokenKind = tokenKind
        self.id = id
        self.appID = appID
        self.idempotencyKey = idempotencyKey
        self.audience = audience
        self.filter = filter
        self.notification = notification
        self.status = status
        self.counts = counts
        self.cursor = cursor
        self.createdAt = createdAt
        self.finishedAt = finishedAt
        self.cancelledAt = cancelledAt
        self.sendAt = sendAt
        self.ratePerSecond = ratePerSecond
    }
}

extension PushRecord {
    /// Whether this push was handed out to `device`, as far as the push's record can tell: the device is in its audience
    /// as the device is now, the push's recipients were handed out up to the device's place in the audience, the
    /// device existed before the push finished, and its token was not dead before the push was made. A device's report
    /// of a push (an open, an arrival) is taken only then, so a device cannot count reports of pushes that were never
    /// its own. (A device whose tags, alias, or what the push's filter looks at changed since is not taken.)
    public func wasHandedOut(to device: DeviceRecord, at now: Date) -> Bool {
        guard device.appID == appID, let key = audience.recipientKey(of: device), let cursor else { return false }
        guard filter?.admits(device) ?? true else { return false }
        guard device.createdAt <= (finishedAt ?? now), (device.deactivatedAt ?? createdAt) >= createdAt else { return false }
        return !cursor.precedesByBytes(key)
    }
}

extension Audience {
    /// The key `device` has among this audience's recipients (``Recipient/key``, the order chunks hand them out in),
    /// or nil if the audience does not include it.
    public func recipientKey(of device: DeviceRecord) -> String? {
        switch self {
        case .tokens(let tokens):
            return tokens.contains(device.token) ? device.token : nil
        case .devices(let deviceIDs):
            return deviceIDs.contains(device.deviceID) ? device.deviceID : nil
        case .aliases(let aliases):
            guard let alias = device.alias, aliases.contains(where: { Self.sameBytes($0, alias) }) else { return nil }
            return alias + SQLStore.aliasKeySeparator + device.deviceID
        case .tags(let tags, all: false):
            return tags.contains { tag in device.tags.contains { Self.sameBytes($0, tag) } } ? device.deviceID : nil
        case .tags(let tags, all: true):
            return !tags.isEmpty && tags.allSatisfy { tag in device.tags.contains { Self.sameBytes($0, tag) } } ? device.deviceID : nil
        case .everyone:
            return device.deviceID
        case .activity:
            // Which activities a device runs is not in its record; an activity update is not a notification it opens.
            return nil
        }
    }

    /// Aliases and tags compared as the database compares them, by their bytes: Swift's `==` takes canonically
    /// equivalent texts for the same.
    private static func sameBytes(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }
}

/// How a push's recipients fared so far.
public struct PushCounts: Sendable, Equatable {
    /// Recipients whose result is recorded (accepted + failed).
    public var targeted = 0
    public var accepted = 0
    public var failed = 0
    /// Failed recipients whose token was deactivated because of the answer.
    public var pruned = 0
    /// Failures by reason, keyed by its ``DeliveryFailureReason/rawValue`` (as the API shows them).
    public var failedByReason: [String: Int] = [:]
    /// For a reason whose failures came with a ``PushFailure/detail``, the detail of the first: of the first chunk
    /// that had one, and the first failure in that chunk.
    public var failureDetails: [String: String] = [:]
    /// Older inbox messages deleted to keep recipients' inboxes within the app's cap.
    public var inboxDropped = 0

    public init(
        targeted: Int = 0, accepted: Int = 0, failed: Int = 0, pruned: Int = 0, failedByReason: [String: Int] = [:],
        failureDetails: [String: String] = [:], inboxDropped: Int = 0
    ) {
        self.targeted = targeted
        self.accepted = accepted
        self.failed = failed
        self.pruned = pruned
        self.failedByReason = failedByReason
        self.failureDetails = failureDetails
        self.inboxDropped = inboxDropped
    }
}

/// One device token a push goes to, from the registry (or given directly by a `tokens` audience).
public struct Recipient: Sendable, Equatable {
    /// The key the audience is paged by (and the push's cursor): the device id; the token for a `tokens` audience; the
    /// alias and the device id for an `aliases` audience.
    public var key: String
    public var deviceID: String?
    public var token: String
    /// Which APNs environment issued the token; nil for a token given directly that no device registered.
    public var environment: APNsEnvironment?
    public var lastRegisteredAt: Date?
    /// The device's alias (its user), if it has one: whose inbox and badge counter the device shares.
    public var alias: String?

    public init(
        key: String, deviceID: String?, token: String, environment: APNsEnvironment?, lastRegisteredAt: Date?, alias: String? = nil
    ) {
        self.key = key
        self.deviceID = deviceID
        self.token = token
        self.environment = environment
        self.lastRegisteredAt = lastRegisteredAt
        self.alias = alias
    }
}

/// A recipient whose notification was not delivered.
public struct PushFailure: Sendable, Equatable {
    public var deviceID: String?
    public var token: String
    /// The HTTP status from APNs, or nil for a client error (timeout, connection failure).
    public var status: Int?
    public var reason: DeliveryFailureReason
    public var at: Date
    /// What the reason alone does not say, for an operator: the APNs client's own words (`timedOut`, the last connect
    /// error), why the app had no client. The store keeps one per reason and chunk (``PushCounts/failureDetails``),
    /// not one per failure: a push that cannot reach APNs fails the same way for every recipient.
    public var detail: String?

    public init(deviceID: String?, token: String, status: Int?, reason: DeliveryFailureReason, at: Date, detail: String? = nil) {
        self.deviceID = deviceID
        self.token = token
        self.status = status
        self.reason = reason
        self.at = at
        self.detail = detail
    }

    /// The most of a detail the store keeps, in Unicode scalars (what JSON Schema's `maxLength` counts): an error's
    /// message, not a page of it.
    public static let detailLimit = 500

    /// `detail` as the store keeps it: cut to ``detailLimit`` scalars, with an ellipsis where it was cut.
    static func storedDetail(_ detail: String) -> String {
        guard detail.unicodeScalars.count > detailLimit else { return detail }
        var kept = String.UnicodeScalarView(detail.unicodeScalars.prefix(detailLimit - 1))
        kept.append("…")
        return String(kept)
    }
}

/// What a device reports of a push that came through APNs to it.
public enum PushReport: Sendable {
    /// It arrived: the app's Notification Service Extension ran for it.
    case received
    /// The user opened it.
    case opened

    /// The column of `push_reports` that keeps when.
    var column: String {
        switch self {
        case .received: "received_at"
        case .opened: "opened_at"
        }
    }
}

/// How many devices reported each thing of a push (each device once for each).
public struct PushReportCounts: Sendable, Equatable {
    public var received = 0
    public var opened = 0

    public init(received: Int = 0, opened: Int = 0) {
        self.received = received
        self.opened = opened
    }
}

/// What one device reported of a push: when it arrived, and when the user opened it (each nil until reported).
public struct PushDeviceReport: Sendable, Equatable {
    public var deviceID: String
    public var receivedAt: Date?
    public var openedAt: Date?

    public init(deviceID: String, receivedAt: Date?, openedAt: Date?) {
        self.deviceID = deviceID
        self.receivedAt = receivedAt
        self.openedAt = openedAt
    }
}

/// What one ``TernStore/purgeFinishedPushes(before:limit:)`` deleted.
public struct PushPurge: Sendable, Equatable {
    public var pushes: Int
    public var failures: Int
    /// Devices' reports of the pushes (``TernStore/recordPushReport(_:pushID:deviceID:at:)``), a row per device.
    public var reports: Int
    /// Whether a call may find more to delete: it deleted as many rows as it was allowed.
    public var more: Bool

    public init(pushes: Int, failures: Int, reports: Int = 0, more: Bool) {
        self.pushes = pushes
        self.failures = failures
        self.reports = reports
        self.more = more
    }
}

/// Why a notification was not delivered (``PushFailure/reason``): APNs' answer, or what kept it from getting one.
///
/// Its ``rawValue`` is what the API and the database show: APNs' reason (`BadDeviceToken`, `Unregistered`, …), the
/// bare status when APNs gave no reason (`500`), the client's error code (`timedOut`, `connectionFailed`, …), or
/// `clientUnavailable` / `notSent` / `notAnswering`.
public enum DeliveryFailureReason: Hashable, Sendable, CustomStringConvertible {
    /// APNs refused it with this reason. (Tern refuses a token that is not hex as APNs would: `BadDeviceToken`.)
    case apns(APNsReason)
    /// APNs refused it with this status and no reason.
    case apnsStatus(Int)
    /// The APNs client gave up with this error code (`timedOut`, `connectionFailed`, …: `APNsClientError.Code`).
    case clientError(String)
    /// Tern had no APNs client for the app (the built-in simulator is off, the server is stopping, …).
    case clientUnavailable
    /// It never went: its batch stopped first.
    case notSent
    /// It never went: its app's APNs endpoint took connections but answered nothing, so it failed at once.
    case notAnswering
    /// A push with `delivery` `online` reached a token no registered device holds: the online channel needs a device.
    case noDevice

    /// Reads the text ``rawValue`` makes. Any text gives a reason whose ``rawValue`` is that text again: APNs'
    /// reasons are capitalized (one this version does not know is kept as an unknown APNs reason), a number is a
    /// bare status, and other text is a client error code.
    public init(rawValue: String) {
        switch rawValue {
        case "clientUnavailable": self = .clientUnavailable
        case "notSent": self = .notSent
        case "notAnswering": self = .notAnswering
        case "noDevice": self = .noDevice
        default:
            if let status = statusCode(from: rawValue) {
                self = .apnsStatus(status)
            } else if let first = rawValue.unicodeScalars.first, ("A"..."Z").contains(first) {
                self = .apns(apnsReason(from: rawValue))
            } else {
                self = .clientError(rawValue)
            }
        }
    }

    public var rawValue: String {
        switch self {
        case .apns(let reason): reason.rawValue
        case .apnsStatus(let status): String(status)
        case .clientError(let code): code
        case .clientUnavailable: "clientUnavailable"
        case .notSent: "notSent"
        case .notAnswering: "notAnswering"
        case .noDevice: "noDevice"
        }
    }

    public var description: String { rawValue }

    /// The reason as a metric's label (`tern_push_failures_total{reason}`): ``rawValue``, with an APNs reason this
    /// version does not know as `unknown` (``APNsReason/metricLabel``). The other cases are Tern's own, a bounded set.
    public var metricLabel: String {
        if case .apns(let reason) = self { reason.metricLabel } else { rawValue }
    }
}

/// The results of a chunk's recipients, recorded together.
public struct PushProgress: Sendable, Equatable {
    public var accepted: Int
    public var failures: [PushFailure]
    /// How many of the failures pruned a token.
    public var pruned: Int
    /// Older inbox messages the cap deleted for this chunk's recipients.
    public var inboxDropped: Int

    public init(accepted: Int, failures: [PushFailure], pruned: Int, inboxDropped: Int = 0) {
        self.accepted = accepted
        self.failures = failures
        self.pruned = pruned
        self.inboxDropped = inboxDropped
    }
}

/// A run of consecutive recipients of one push, claimed by one node under a lease (see ``TernStore/claimChunk(node:size:leaseUntil:at:)``).
public struct PushChunk: Sendable, Equatable {
    /// The push as stored when the chunk was claimed.
    public var push: PushRecord
    /// The chunk's number within its push, from 0.
    public var sequence: Int
    /// Its recipients, in key order: the audience's keys after the previous chunk's last, up to and including its own.
    public var recipients: [Recipient]
    /// Whether it was claimed before by a node whose lease ran out (some of it may have been sent already).
    public var reclaimed: Bool
    /// Keys of recipients whose results the previous holder recorded out of order (``ChunkMark/runs``): they are in
    /// the chunk's counts already and are not sent again.
    public var recorded: Set<String>

    public var id: ChunkID { ChunkID(pushID: push.id, sequence: sequence) }

    public init(push: PushRecord, sequence: Int, recipients: [Recipient], reclaimed: Bool, recorded: Set<String> = []) {
        self.push = push
        self.sequence = sequence
        self.recipients = recipients
        self.reclaimed = reclaimed
        self.recorded = recorded
    }
}

/// Which of a chunk's recipients have their results recorded while it is sent (``TernStore/recordChunkProgress(pushID:sequence:node:_:mark:)``).
///
/// Answers come back out of order, so the mark has two parts: every recipient up to and including `through`, in
/// key order, and after it the `runs` of consecutive recipients answered early. A node that takes the chunk over
/// starts after `through` and skips the recipients inside a run. Runs name keys, not positions, so they stay right
/// when devices come or go in the chunk's range meanwhile (a device registered inside a run is skipped, as if it
/// had registered after the push).
public struct ChunkMark: Sendable, Equatable {
    /// A run of consecutive recipients, by the keys of its first and last.
    public struct Run: Sendable, Equatable, Codable {
        public var first: String
        public var last: String

        public init(first: String, last: String) {
            self.first = first
            self.last = last
        }

        public func contains(_ key: String) -> Bool {
            !key.precedesByBytes(first) && !last.precedesByBytes(key)
        }
    }

    /// The last recipient of the recorded prefix; nil while the chunk's first recipient is unanswered.
    public var through: String?
    /// Recorded recipients after `through`, in key order.
    public var runs: [Run]

    public init(through: String?, runs: [Run] = []) {
        self.through = through
        self.runs = runs
    }

    /// Whether `key` (a recipient after `through`) lies in a run.
    public func inRun(_ key: String) -> Bool {
        // Runs are in key order: the last one starting at or before the key is the only one that can hold it.
        var low = 0
        var high = runs.count
        while low < high {
            let middle = (low + high) / 2
            if key.precedesByBytes(runs[middle].first) { high = middle } else { low = middle + 1 }
        }
        return low > 0 && runs[low - 1].contains(key)
    }
}

/// Names a chunk: its push and its number within it.
public struct ChunkID: Sendable, Hashable {
    public var pushID: String
    public var sequence: Int

    public init(pushID: String, sequence: Int) {
        self.pushID = pushID
        self.sequence = sequence
    }
}

/// What a node looking for work gets (``TernStore/claimChunk(node:size:leaseUntil:at:)``).
public enum ChunkClaim: Sendable, Equatable {
    /// A chunk to send, leased to the node until the lease time given or a renewal.
    case chunk(PushChunk)
    /// Nothing claimable now, but something may be soon (another node was claiming from the same push, or a push
    /// just completed): ask again shortly.
    case retrySoon
    /// Nothing claimable now; a throttled push's next chunk may be handed out at this time.
    case notBefore(Date)
    /// Nothing to do until a push is stored or a lease runs out.
    case idle
}

/// What became of a chunk's results (``TernStore/recordChunk(pushID:sequence:node:_:at:)``).
public enum ChunkRecording: Sendable, Equatable {
    /// Recorded; `pushCompleted` when it was the push's last open chunk.
    case recorded(pushCompleted: Bool)
    /// Not recorded: the node's lease ran out and another node claimed the chunk, which records it instead.
    case lost
}
