import Foundation
import TernAPNs
import TernStore
import TernWeb

/// What a console template renders: the frame every page shares, the page's own values, and the API's refusal of the
/// form just sent, if it was refused.
struct ConsolePage {
    var chrome: Chrome
    var view: Any?
    var problem: Problem?
}

/// The frame of a page: its title, who is signed in, the CSRF token for its forms, which navigation entry is
/// current.
struct Chrome {
    var title: String
    var csrf: String?
    var signedIn = false
    /// Who is signed in, in words (never the secret).
    var principal = ""
    var overview = false
    var appsPage = false
    var app: AppNav?

    struct AppNav {
        var id: String
        /// Settings (and rotating secrets) are for the admin.
        var canManage: Bool
        var devices = false
        var compose = false
        var pushes = false
        var events = false
        var activities = false
        var settings = false
    }
}

/// A refusal as the API words it.
struct Problem: Equatable {
    var message: String
    var field: String?
}

/// One `<option>` of a `<select>`, or one radio button.
struct Choice {
    var value: String
    var label: String
    var selected: Bool

    static func list(_ values: [(value: String, label: String)], selected: String?) -> [Choice] {
        values.map { Choice(value: $0.value, label: $0.label, selected: $0.value == (selected ?? "")) }
    }
}

/// How the console writes a date: ISO 8601 in UTC, to the second.
enum ConsoleFormat {
    static func date(_ date: Date?) -> String {
        date.map { $0.formatted(Date.ISO8601FormatStyle()) } ?? "—"
    }

    /// A token short enough for a table on a phone (`abababab…abab`); its page and the `title` show it whole.
    static func shortToken(_ token: String) -> String {
        token.count > 16 ? "\(token.prefix(8))…\(token.suffix(4))" : token
    }

    /// `Unregistered 2, BadDeviceToken 1`, the most frequent first.
    static func reasons(_ counts: [String: Int]) -> String {
        counts.isEmpty ? "—" : sortedReasons(counts).map { "\($0.reason) \($0.count)" }.joined(separator: ", ")
    }

    static func sortedReasons(_ counts: [String: Int], details: [String: String] = [:]) -> [ReasonCount] {
        counts.map { ReasonCount(reason: $0.key, count: $0.value, detail: details[$0.key]) }
            .sorted { ($0.count, $1.reason) > ($1.count, $0.reason) }
    }

    /// A form's values by name, dots made underscores (a template reads `form.notification_title`; a dot would be a
    /// lookup).
    static func values(_ form: ConsoleForm) -> [String: String] {
        var values: [String: String] = [:]
        for (name, value) in form.fields where values[name.replacingOccurrences(of: ".", with: "_")] == nil {
            values[name.replacingOccurrences(of: ".", with: "_")] = value
        }
        return values
    }
}

struct ReasonCount: Encodable, Equatable {
    var reason: String
    var count: Int
    /// What the reason does not say itself (a push's ``PushesAPI/PushView/failureDetails``).
    var detail: String? = nil
}

/// A bar chart of accepted and failed counts (one bar per minute or per push), drawn server-side as SVG geometry so
/// the page needs no script to show it; the overview's script redraws it from the same values.
struct ConsoleChart: Encodable {
    struct Bar: Encodable {
        var label: String
        var accepted: Int
        var failed: Int
        var x: Double
        var barWidth: Double
        var acceptedY: Double
        var acceptedHeight: Double
        var failedY: Double
        var failedHeight: Double
    }

    var id: String
    var viewWidth = 600
    var viewHeight = 100
    var summary: String
    var highest: Int
    var caption: String
    var bars: [Bar]

    init(id: String, points: [(label: String, accepted: Int, failed: Int)], caption: String) {
        self.id = id
        self.caption = caption
        let highest = points.map { $0.accepted + $0.failed }.max() ?? 0
        self.highest = highest
        let (viewWidth, viewHeight) = (self.viewWidth, self.viewHeight)
        // At least twenty slots, so a few bars stay bars rather than filling the width.
        let slot = Double(viewWidth) / Double(max(points.count, 20))
        let scale = highest == 0 ? 0 : Double(viewHeight) / Double(highest)
        func round(_ value: Double) -> Double { (value * 100).rounded() / 100 }
        bars = points.enumerated().map { index, point in
            let acceptedHeight = Double(point.accepted) * scale
            let failedHeight = Double(point.failed) * scale
            let acceptedY = Double(viewHeight) - acceptedHeight
            return Bar(
                label: point.label, accepted: point.accepted, failed: point.failed, x: round(Double(index) * slot + slot * 0.1),
                barWidth: round(slot * 0.8), acceptedY: round(acceptedY), acceptedHeight: round(acceptedHeight),
                failedY: round(acceptedY - failedHeight), failedHeight: round(failedHeight))
        }
        let accepted = points.reduce(0) { $0 + $1.accepted }
        let failed = points.reduce(0) { $0 + $1.failed }
        summary = "\(caption): \(accepted) accepted, \(failed) failed in all; the highest bar is \(highest)"
    }
}

// MARK: Pages' values

struct OverviewView: Encodable {
    var deviceConnections: Int
    var apnsConnections: Int
    var notifications: Int
    var pushesCompleted: Int
    /// Notifications the apps reported opened (on this node: the report came to it).
    var opens: Int
    var chart: ConsoleChart
    var answers: [ReasonCount]
    /// The apps the principal may open.
    var apps: [String]
    var hasApps: Bool

    init(activity: ConsoleActivity, deviceConnections: Int, now: Date, apps: [String]?) {
        let (minutes, apnsConnections) = activity.lastHour(now: now)
        self.deviceConnections = deviceConnections
        self.apnsConnections = apnsConnections
        notifications = minutes.reduce(0) { $0 + $1.accepted + $1.failed }
        pushesCompleted = minutes.reduce(0) { $0 + $1.pushesCompleted }
        opens = minutes.reduce(0) { $0 + $1.opens }
        chart = ConsoleChart(
            id: "per-minute",
            points: minutes.map { minute in
                let ofDay = Int(minute.minute % 1440)
                return (String(format: "%02d:%02d UTC", ofDay / 60, ofDay % 60), minute.accepted, minute.failed)
            },
            caption: "one bar a minute, the last 60 minutes (UTC)")
        var answers: [String: Int] = [:]
        for minute in minutes { answers.merge(minute.answers, uniquingKeysWith: +) }
        self.answers = ConsoleFormat.sortedReasons(answers)
        self.apps = apps ?? []
        hasApps = !self.apps.isEmpty
    }
}

struct AppRow {
    var id: String
    var topic: String
    var environment: String
    var endpoint: String?
    var transport: String
    var credentials: String
    /// When the app's certificate stops being valid, and how soon.
    var certificate: String?
    /// What the app's Apple push certificate is for: its APNs environments, and its topics.
    var certificateFor: String?
    /// Said at the top of the app's page when its certificate has expired or expires within 30 days.
    var certificateWarning: String?
    /// Said at the top of the app's page when its certificate is not for the app's APNs environment.
    var certificateEnvironmentWarning: String?
    var userBinding: String
    var identitySecret: String
    var webhookURL: String
    /// The kinds of events the webhook posts, by their `type`.
    var webhookEvents: String
    var inbox: String
    /// How the app's broadcasts are throttled when they do not say.
    var broadcasts: String
    var createdAt: String
    var updatedAt: String

    init(_ view: AppsAPI.AppView, now: Date) {
        id = view.id
        topic = view.topic
        environment = view.environment
        endpoint = view.endpoint.map { "\($0.host):\($0.port)" + ($0.customCA ? " (own CA)" : "") }
        transport = view.transport
        let credentials = view.credentials
        self.credentials = credentials.type + (credentials.keyID.map { " \($0)" } ?? "") + (credentials.teamID.map { " (team \($0))" } ?? "")
        if let expiry = credentials.certificateExpiresAt {
            let days = Int((expiry.timeIntervalSince(now) / 86400).rounded(.down))
            let date = ConsoleFormat.date(expiry)
            if expiry <= now {
                self.credentials += ", expired"
                certificate = "\(date) (expired)"
                certificateWarning =
                    "The app's push certificate expired on \(date): APNs refuses it, so every notification fails. Make a new one in Apple's developer account and change the credentials, or use a token key (.p8), which does not expire."
            } else {
                self.credentials += ", expires \(date.prefix(10))"
                certificate = "\(date) (in \(days) day\(days == 1 ? "" : "s"))"
                if days < AppCredentials.certificateWarningDays {
                    certificateWarning =
                        "The app's push certificate expires in \(days) day\(days == 1 ? "" : "s") (\(date)). After that APNs refuses it and every notification fails: make a new one in Apple's developer account and change the credentials, or use a token key (.p8), which does not expire."
                }
            }
        }
        if let environments = credentials.certificateEnvironments {
            let both = Set(environments) == [APNsEnvironment.production.rawValue, APNsEnvironment.development.rawValue]
            certificateFor = (both ? "production and development" : environments.joined(separator: ", ") + " only")
                + (credentials.certificateTopics.map { "; topics " + $0.joined(separator: ", ") } ?? "")
            // The app's environment is the one its tokens go to when they do not say theirs; on Apple's servers only.
            if ["production", "development"].contains(view.environment), !environments.contains(view.environment) {
                certificateEnvironmentWarning =
                    "The app's push certificate is for \(environments.joined(separator: " and ")) only, and the app's tokens are \(view.environment) ones unless they say otherwise: APNs refuses the certificate for them. Make a certificate for \(view.environment) in Apple's developer account (or one for both), or use a token key (.p8), which works for both."
            }
        }
        userBinding = view.userBinding
        identitySecret = view.hasIdentitySecret ? "set (shown only when made)" : "none"
        webhookURL = view.webhookURL ?? "—"
        webhookEvents = view.webhookEvents.joined(separator: ", ") + (view.webhookURL == nil ? " (once a URL is set)" : "")
        inbox = "messages kept up to \(view.inboxMaxTTL) s, \(view.inboxCap) per user"
        broadcasts =
            view.broadcastRatePerSecond.map { "throttled to \($0) recipients a second unless the push gives its own rate" }
            ?? "as fast as the nodes go unless the push gives a rate"
        createdAt = ConsoleFormat.date(view.createdAt)
        updatedAt = ConsoleFormat.date(view.updatedAt)
    }
}

struct AppsView {
    var apps: [AppRow]
    var form: [String: String]
    var environments: [Choice]
    var transports: [Choice]
    var bindings: [Choice]
    var credentialTypes: [Choice]
    /// Whether the form asked for the opens to be posted too.
    var webhookOpens: Bool

    init(apps: [AppRow], form: ConsoleForm) {
        self.apps = apps
        self.form = ConsoleFormat.values(form)
        environments = Choice.list(
            AppEnvironment.allCases.map { ($0.rawValue, $0.rawValue) }, selected: form["environment"] ?? AppEnvironment.simulator.rawValue)
        transports = Choice.list([(AppRecord.http2, AppRecord.http2), (AppRecord.legacy, AppRecord.legacy)], selected: form["transport"] ?? AppRecord.http2)
        bindings = Choice.list(
            [(UserBinding.signed.rawValue, UserBinding.signed.rawValue), (UserBinding.open.rawValue, UserBinding.open.rawValue)],
            selected: form["userBinding"] ?? UserBinding.signed.rawValue)
        credentialTypes = Choice.list(
            [("", "none (simulator)"), ("token", "token key (.p8)"), ("certificate", "certificate and key (PEM)"), ("pkcs12", "PKCS#12")],
            selected: form["credentials.type"])
        webhookOpens = form.isChecked("webhookOpens")
    }
}

struct SecretsView {
    struct Secret {
        var label: String
        var value: String
        var purpose: String
    }
    var app: String
    var secrets: [Secret]

    init(_ view: AppsAPI.AppView) {
        app = view.id
        secrets = [
            view.appKey.map { Secret(label: "App key", value: $0, purpose: "ships in the app: devices register with it") },
            view.masterSecret.map { Secret(label: "Master secret", value: $0, purpose: "for your backend: pushes, devices; signs in here") },
            view.identitySecret.map { Secret(label: "Identity secret", value: $0, purpose: "for your backend: signs alias tokens") },
            view.webhookSecret.map { Secret(label: "Webhook secret", value: $0, purpose: "checks X-Tern-Signature") },
        ].compactMap { $0 }
    }
}

struct DeviceRow {
    var deviceId: String
    var token: String
    var shortToken: String
    var environment: String
    var alias: String
    var tags: String
    var state: String
    var locale: String
    var timezone: String
    var appVersion: String
    var createdAt: String
    var lastRegisteredAt: String

    init(_ device: DeviceRecord) {
        deviceId = device.deviceID
        token = device.token
        shortToken = ConsoleFormat.shortToken(device.token)
        environment = device.environment.rawValue
        alias = device.alias ?? "—"
        tags = device.tags.isEmpty ? "—" : device.tags.sorted().joined(separator: ", ")
        state =
            device.isActive
            ? "active"
            : "deactivated \(ConsoleFormat.date(device.deactivatedAt)): \(device.deactivationReason?.rawValue ?? "unknown reason")"
        locale = device.locale ?? "—"
        timezone = device.timezone ?? ""
        appVersion = device.appVersion ?? "—"
        createdAt = ConsoleFormat.date(device.createdAt)
        lastRegisteredAt = ConsoleFormat.date(device.lastRegisteredAt)
    }
}

struct DevicesView {
    var kinds: [Choice]
    var query: String
    var searched: Bool
    var resultSummary: String
    var devices: [DeviceRow]
    var next: String?

    static let searchKinds = [("alias", "alias (user)"), ("tag", "tag"), ("token", "token"), ("device", "device id")]
}

struct DeviceView {
    struct HistoryRow {
        var token: String
        var environment: String
        var firstRegisteredAt: String
        var replacedAt: String
        var reason: String
    }
    struct EventRow {
        var id: String
        var deviceId: String
        var token: String
        var shortToken: String
        var reason: String
        var occurredAt: String
        var apnsTimestamp: String

        init(_ event: PushesAPI.TokenEventList.Event) {
            id = String(event.id)
            deviceId = event.deviceId
            token = event.token
            shortToken = ConsoleFormat.shortToken(event.token)
            reason = event.reason
            occurredAt = ConsoleFormat.date(event.occurredAt)
            apnsTimestamp = ConsoleFormat.date(event.apnsTimestamp)
        }
    }
    /// A token of another kind than the device token (``PushTokenRecord``).
    struct PushTokenRow {
        var label: String
        var token: String
        var state: String

        init(_ record: PushTokenRecord) {
            label = switch record.kind {
            case .voip: "VoIP token (PushKit)"
            case .pushToStart: "Push-to-start token (ActivityKit)"
            }
            token = record.token
            state =
                if let deactivated = record.deactivatedAt {
                    "deactivated \(ConsoleFormat.date(deactivated)) (\(record.deactivationReason?.rawValue ?? "dead"))"
                } else {
                    "active, set \(ConsoleFormat.date(record.registeredAt))"
                }
        }
    }
    /// A Live Activity's update token on the device (``ActivityTokenRecord``).
    struct ActivityRow {
        var activityID: String
        var token: String
        var state: String

        init(_ record: ActivityTokenRecord) {
            activityID = record.activityID
            token = record.token
            state = "started \(ConsoleFormat.date(record.startedAt)), forgotten \(ConsoleFormat.date(record.startedAt.addingTimeInterval(ActivityTokenRecord.lifetime)))"
        }
    }
    var device: DeviceRow
    var pushTokens: [PushTokenRow] = []
    var activities: [ActivityRow] = []
    var history: [HistoryRow]
    var events: [EventRow]
}

struct ActivitiesView {
    struct Row {
        var activityId: String
        var devices: String
        var firstStartedAt: String
        var lastRegisteredAt: String

        init(_ summary: ActivitySummary) {
            activityId = summary.activityID
            devices = summary.devices.formatted()
            firstStartedAt = ConsoleFormat.date(summary.firstStartedAt)
            lastRegisteredAt = ConsoleFormat.date(summary.lastRegisteredAt)
        }
    }
    var activities: [Row]
    var next: String?

    /// The app's broadcast channels (iOS 18), the first page's first 100 by name.
    struct ChannelRow {
        var name: String
        var channelId: String
        var storage: String
        var environment: String
        var createdAt: String
        /// The latest broadcast to it: when, and what became of it ("—" for none).
        var lastBroadcast = "—"

        init(_ record: BroadcastChannelRecord, latest: BroadcastRecord? = nil) {
            name = record.name
            channelId = record.channelID
            storage = record.storesMessages ? "the most recent, 8 hours" : "nothing"
            environment = record.environment.rawValue
            createdAt = ConsoleFormat.date(record.createdAt)
            if let latest {
                lastBroadcast = ConsoleFormat.date(latest.sentAt) + ", " + latest.result.rawValue + (latest.reason.map { ": \($0)" } ?? "")
            }
        }
    }
    var channels: [ChannelRow] = []
    /// The cursor for the app's next 100 channels by name, when it has more than shown.
    var nextChannels: String?
    /// Whether this is the first page, which shows the channels.
    var firstPage = true
    /// The form to make a channel, as sent when it was refused.
    var form: [String: String] = [:]
    var storages: [Choice] = Choice.list([("none", "nothing"), ("mostRecent", "the most recent, 8 hours")], selected: "none")

    mutating func keep(_ form: ConsoleForm) {
        self.form = ConsoleFormat.values(form)
        storages = Choice.list([("none", "nothing"), ("mostRecent", "the most recent, 8 hours")], selected: form["storage"] ?? "none")
    }
}

/// A broadcast channel's page: what it is, a form to broadcast to it, and its latest broadcasts.
struct ChannelPageView {
    /// One broadcast of the channel's history.
    struct SentRow {
        var id: String
        var sentAt: String
        var event: String
        var result: String
        var delivered: Bool
        var reason: String
        var priority: Int
        var uniqueID: String
        /// The content state as sent, compact.
        var state: String

        init(_ record: BroadcastRecord) {
            id = String(record.id)
            sentAt = ConsoleFormat.date(record.sentAt)
            result = record.result.rawValue
            delivered = record.result == .delivered
            reason = record.reason ?? ""
            priority = record.priority
            uniqueID = record.uniqueID ?? "—"
            let aps = (try? JSONValue(parsing: Data(record.payload.utf8)))?["aps"]
            if case .string(let text)? = aps?["event"] { event = text } else { event = "—" }
            if let state = aps?["content-state"], let bytes = try? state.serialized() {
                self.state = String(decoding: bytes, as: UTF8.self)
            } else {
                state = "—"
            }
        }
    }

    var channel: ActivitiesView.ChannelRow
    var form: [String: String]
    var events: [Choice]
    var priorities: [Choice]
    var sent: [SentRow]
    var next: String?

    init(channel: BroadcastChannelRecord, form: ConsoleForm, history: Page<BroadcastRecord>) {
        self.channel = ActivitiesView.ChannelRow(channel)
        self.form = ConsoleFormat.values(form)
        sent = history.items.map(SentRow.init)
        // The next update usually changes a little of the last one: start from the state last sent.
        if form["contentState"] == nil, let latest = sent.first, latest.state != "—" { self.form["contentState"] = latest.state }
        events = Choice.list([("update", "update"), ("end", "end")], selected: form["event"] ?? "update")
        priorities = Choice.list([("10", "10: now"), ("5", "5: when it saves power")], selected: form["priority"] ?? "10")
        next = history.next
    }
}

struct TokenEventsView {
    var events: [DeviceView.EventRow]
    var next: String?
}

struct PushRow {
    var id: String
    var shortID: String
    var status: String
    var targeted: Int
    var accepted: Int
    var failed: Int
    /// Devices whose user opened it, and that as a share of those APNs accepted it for.
    var opened: String
    var failedByReason: String
    var createdAt: String
    /// When a scheduled push goes.
    var sendAt: String?
    /// A throttled push's recipients a second at most, while it is being sent.
    var ratePerSecond: Int?
    /// Whether its Stop button shows: it is not completed, nor cancelled yet.
    var stoppable: Bool

    init(_ push: PushRecord, opened: Int = 0) {
        id = push.id
        shortID = String(push.id.prefix(8))
        status = push.status.rawValue
        sendAt = push.status == .scheduled ? push.sendAt.map { ConsoleFormat.date($0) } : nil
        ratePerSecond = push.status == .completed ? nil : push.ratePerSecond
        stoppable = push.status != .completed && push.cancelledAt == nil
        targeted = push.counts.targeted
        accepted = push.counts.accepted
        failed = push.counts.failed
        let accepted = push.counts.accepted
        self.opened = accepted > 0 && opened > 0 ? "\(opened) (\((Double(opened) * 100 / Double(accepted)).formatted(.number.precision(.fractionLength(1))))%)" : "\(opened)"
        failedByReason = ConsoleFormat.reasons(push.counts.failedByReason)
        createdAt = ConsoleFormat.date(push.createdAt)
    }
}

struct PushesView {
    var pushes: [PushRow]
    var chart: ConsoleChart

    /// - Parameter opens: each push's opens (``TernStore/openCounts(pushIDs:)``).
    init(_ pushes: [PushRecord], opens: [String: Int] = [:]) {
        self.pushes = pushes.map { PushRow($0, opened: opens[$0.id] ?? 0) }
        chart = ConsoleChart(
            id: "pushes",
            points: pushes.reversed().map { (ConsoleFormat.date($0.createdAt), $0.counts.accepted, $0.counts.failed) },
            caption: "one bar a push, the oldest of the last \(pushes.count) first")
    }
}

/// A push as its page and its status poll show it: the API's view of it (`GET …/pushes/{id}`).
struct PushPageView {
    struct Summary: Encodable {
        var id: String
        var status: String
        var targeted: Int
        var accepted: Int
        var failed: Int
        var pruned: Int
        var inboxDropped: Int
        /// Devices whose user opened it (for an online push, its messages opened).
        var opened: Int
        /// Of a push through APNs only: devices whose Notification Service Extension reported its arrival.
        var received: Received?
        var createdAt: String
        var finishedAt: String
        /// When it was cancelled, if it was.
        var cancelledAt: String?
        /// When it is (or was) to be sent, for a scheduled push.
        var sendAt: String?
        /// A throttled push's recipients a second at most.
        var ratePerSecond: Int?
        /// Whether its Stop button shows: it is not completed, nor cancelled yet.
        var stoppable: Bool
        var online: Online?
        /// Whom it goes to, in words, with its filters.
        var audience: String?
    }
    struct Received: Encodable {
        var count: Int
    }
    struct Online: Encodable {
        var deliveredOnline: Int
        var acked: Int
        var fellBackToAPNs: Int
    }
    struct FailureRow {
        var at: String
        var deviceId: String?
        var token: String
        var shortToken: String
        var status: String
        var reason: String
    }

    var push: Summary
    var reasons: [ReasonCount]
    var failures: [FailureRow]?
    var failureLimit: Int

    init(_ view: PushesAPI.PushView, failureLimit: Int) {
        let counts = view.counts
        push = Summary(
            id: view.id, status: view.status, targeted: counts.targeted, accepted: counts.accepted, failed: counts.failed, pruned: counts.pruned,
            inboxDropped: counts.inboxDropped, opened: counts.opened, received: counts.received.map(Received.init), createdAt: ConsoleFormat.date(view.createdAt), finishedAt: ConsoleFormat.date(view.finishedAt),
            cancelledAt: view.cancelledAt.map { ConsoleFormat.date($0) }, sendAt: view.sendAt.map { ConsoleFormat.date($0) }, ratePerSecond: view.ratePerSecond, stoppable: view.status != "completed" && view.cancelledAt == nil,
            online: counts.deliveredOnline.map {
                Online(deliveredOnline: $0, acked: counts.acked ?? 0, fellBackToAPNs: counts.fellBackToAPNs ?? 0)
            }, audience: view.audience.map(Self.words))
        reasons = ConsoleFormat.sortedReasons(counts.failedByReason, details: view.failureDetails ?? [:])
        let rows = (view.failures ?? []).map {
            FailureRow(at: ConsoleFormat.date($0.at), deviceId: $0.deviceId, token: $0.token, shortToken: ConsoleFormat.shortToken($0.token),
                status: $0.status.map(String.init) ?? "—", reason: $0.reason)
        }
        failures = rows.isEmpty ? nil : rows
        self.failureLimit = failureLimit
    }

    /// An audience in words: `tags news, sale (any of them); app version 2.3 or later, below 3; languages ko, zh-Hant`.
    static func words(_ audience: PushesAPI.AudienceInput) -> String {
        func list(_ values: [String]) -> String {
            let shown = values.prefix(5).joined(separator: ", ")
            return values.count > 5 ? "\(shown) and \((values.count - 5).formatted()) more" : shown
        }
        var parts: [String] = []
        if let activity = audience.activity {
            parts.append("the Live Activity \(activity)" + (audience.aliases.map { " of the users \(list($0))" } ?? ""))
        } else if let tags = audience.tags {
            parts.append("tags \(list(tags))" + (tags.count > 1 ? (audience.match == "all" ? " (all of them)" : " (any of them)") : ""))
        } else if let aliases = audience.aliases {
            parts.append("users \(list(aliases))")
        } else if let devices = audience.devices {
            parts.append("devices \(list(devices))")
        } else if let tokens = audience.tokens {
            parts.append("tokens \(list(tokens.map(ConsoleFormat.shortToken)))")
        } else {
            parts.append("everyone")
        }
        if let filters = audience.filters {
            if let versions = filters.appVersion {
                parts.append(
                    "app version " + [versions.atLeast.map { "\($0) or later" }, versions.below.map { "below \($0)" }].compactMap { $0 }
                        .joined(separator: ", "))
            }
            if let languages = filters.languages { parts.append("languages \(list(languages))") }
            if let since = filters.registeredSince.flatMap({ InternetDate.parse($0) }) { parts.append("registered since \(ConsoleFormat.date(since))") }
        }
        return parts.joined(separator: "; ")
    }
}
