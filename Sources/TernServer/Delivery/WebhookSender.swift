import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import Metrics
import NIOCore
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernAPNsClient
import TernStore

/// POSTs each app's events to its webhook URL: in order, at least once, signed. Token deactivations always, and the
/// opens of pushes when the app asks for them (``AppRecord/webhookEvents``).
///
/// Per app and kind, events after the last acknowledged one go out in batches (`{"app": …, "type": …, "events":
/// [...]}`); a 2xx answer moves the app's cursor of that kind (kept in the store, so a restart neither loses nor
/// repeats acknowledged events). Any other answer, or none within the timeout, is retried with exponential back-off
/// (1 s doubling to 5 min) while the events wait. The `X-Tern-Signature` header is
/// `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` keyed with the app's webhook secret, so the receiver can
/// check origin and freshness. The signature's time and the back-off go by the wall clock; the loop waits on the
/// timer (both from ``ServerClocks``).
final class WebhookSender: Service {
    static let signatureHeader = "X-Tern-Signature"

    private let store: any TernStore
    private let serverKey: ServerKey
    private let policy: WebhookAddressPolicy
    private let proxy: HTTPProxy?
    private let logger: Logger
    private let pollInterval: Duration
    /// One node sends webhooks at a time, so a receiver gets each event once per attempt.
    private let lease: JobLease
    private let doorbell = Doorbell()
    private let stopping = Atomic<Bool>(false)
    private let clocks: ServerClocks
    /// Per app: failures in a row and when to try again. By the wall clock, as the feedback poller's retries: a step
    /// of the system's time moves one wait by at most that step, and a test drives it with the same clock it dates by.
    private let backoff = Mutex<[String: (failures: Int, next: Date)]>([:])
    /// The apps' list that cannot be read (the database away): said when it starts, once a minute, and when it ends.
    private let readFailures: FailureLog
    /// Events a receiver acknowledged, and attempts that failed (an answer not 2xx, none in time, a refused address,
    /// the events not readable), for an alert on a receiver that stays down while its events wait.
    private let eventsDelivered = Counter(label: "tern_webhook_events_delivered_total")
    private let postsFailed = Counter(label: "tern_webhook_failures_total")

    /// - Parameter proxy: the egress proxy posts go through (`webhooks.proxy`), if any.
    init(
        store: any TernStore, serverKey: ServerKey, policy: WebhookAddressPolicy, proxy: HTTPProxy? = nil, pollInterval: Duration = .seconds(1),
        coordinator: any NodeCoordinator = LocalCoordinator(), clocks: ServerClocks = .system, logger: Logger
    ) {
        self.clocks = clocks
        self.proxy = proxy
        self.store = store
        self.serverKey = serverKey
        self.policy = policy
        self.pollInterval = pollInterval
        self.lease = coordinator.lease("webhooks")
        self.logger = logger
        self.readFailures = FailureLog("cannot read apps for webhooks", logger: logger)
    }

    /// New events were recorded: look now.
    func wake() { doorbell.ring() }

    func run() async throws {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(10))
        if let proxy {
            // A CONNECT tunnel for every post, http or https: the proxy sees the receiver's name and port.
            configuration.proxy = .server(
                host: proxy.host, port: proxy.port, authorization: proxy.username.map { .basic(username: $0, password: proxy.password ?? "") })
        }
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        await withGracefulShutdownHandler {
            // Each app's posts run on their own, at most ``appsAtATime`` apps at once: a receiver that never answers
            // holds up its own app's events for its timeout, not every other app's (posted one after another, ten dead
            // receivers kept a healthy app's events 97 s late). The group waits for the posts under way at shutdown.
            await withDiscardingTaskGroup { posting in
                var backoff = ErrorBackoff()
                while !stopping.load(ordering: .relaxed), !Task.isCancelled {
                    var wait = pollInterval
                    do {
                        var started: Set<String> = []
                        for app in try await store.apps() where app.webhookURL != nil {
                            guard !stopping.load(ordering: .relaxed), lease.isHeld else { break }
                            guard inFlight.withLock({ $0.count < Self.appsAtATime && $0.insert(app.id).inserted }) else { continue }
                            started.insert(app.id)
                            posting.addTask {
                                await self.deliver(app, using: http)
                                self.inFlight.withLock { _ = $0.remove(app.id) }
                                self.posted.ring()
                            }
                        }
                        // The posts that are answered at once end before the next look (their outcome and back-off
                        // recorded by then); one that hangs is left to its timeout, and the next look goes on without it.
                        // On the system's clock: it waits for receivers, real ones.
                        let patience = ContinuousClock.now + Self.roundPatience
                        while inFlight.withLock({ !$0.isDisjoint(with: started) }), case let left = ContinuousClock.now.duration(to: patience),
                            left > .zero
                        {
                            await posted.wait(upTo: left)
                        }
                        _ = backoff.succeeded()
                        readFailures.succeeded()
                    } catch {
                        wait = max(backoff.failed(), pollInterval)
                        if !Task.isCancelled { readFailures.failed(["error": "\(error)"]) }
                    }
                    await doorbell.wait(upTo: wait, on: clocks.clock(for: .webhooks))
                }
            }
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.doorbell.ring()
        }
        try? await http.shutdown()
    }

    /// How many apps' receivers are posted to at the same time.
    static let appsAtATime = 16
    /// The apps whose posts are under way.
    private let inFlight = Mutex<Set<String>>([])
    /// Rung as each app's posts end.
    private let posted = Doorbell()
    /// How long a look at the apps waits for the posts it started before it looks again.
    static let roundPatience = Duration.seconds(1)

    private func deliver(_ app: AppRecord, using http: HTTPClient) async {
        guard let url = app.webhookURL else { return }
        guard let parsed = URL(string: url), let host = parsed.host else { return }
        if let wait = backoff.withLock({ $0[app.id] }), clocks.wall.now < wait.next { return }
        do {
            // Each kind in order of its own, one post of each in turn: a backlog of opens (a push to millions, opened
            // over an hour) does not hold a token's deactivation back until it is all posted. A receiver down holds
            // both up, one answering takes both.
            let kinds = app.webhookEvents.sorted()
            var cursors: [WebhookEventKind: Int64] = [:]
            for kind in kinds { cursors[kind] = Int64(try await store.setting(Self.cursorKey(kind, app: app.id)) ?? "") ?? 0 }
            var posting = true
            while posting, !stopping.load(ordering: .relaxed), lease.isHeld {
                posting = false
                for kind in kinds where !stopping.load(ordering: .relaxed) && lease.isHeld {
                    guard let page = try await page(of: kind, app: app.id, after: cursors[kind] ?? 0) else { continue }
                    posting = true
                    // Checked on the addresses the name has now, not only as the URL was written.
                    if let refused = await policy.refusal(
                        resolving: host, port: parsed.port ?? (parsed.scheme == "https" ? 443 : 80), proxied: proxy != nil)
                    {
                        throw WebhookError("the webhook URL may not be reached: \(refused)")
                    }
                    let body = try JSONValue.object(["app": .string(app.id), "type": .string(kind.rawValue), "events": .array(page.events)]).serialized()
                    var request = HTTPClientRequest(url: url)
                    request.method = .POST
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.headers.add(name: "User-Agent", value: "tern-webhook")
                    request.headers.add(
                        name: Self.signatureHeader, value: Self.signature(body: body, secret: serverKey.webhookSecret(app: app), at: clocks.wall.now))
                    request.body = .bytes(ByteBuffer(bytes: body))
                    let response = try await http.execute(request, timeout: .seconds(15))
                    guard (200..<300).contains(response.status.code) else {
                        throw WebhookError("the receiver answered \(response.status.code)")
                    }
                    cursors[kind] = page.last
                    try await store.setSetting(Self.cursorKey(kind, app: app.id), to: String(page.last))
                    eventsDelivered.increment(by: page.events.count)
                    backoff.withLock { $0[app.id] = nil }
                }
            }
        } catch {
            postsFailed.increment()
            let now = clocks.wall.now
            let delay = backoff.withLock { state -> Int in
                let failures = (state[app.id]?.failures ?? 0) + 1
                let delay = min(300, 1 << min(failures - 1, 9))
                state[app.id] = (failures, now.addingTimeInterval(TimeInterval(delay)))
                return delay
            }
            logger.warning(
                "webhook delivery failed; will retry", metadata: ["app": "\(app.id)", "retryIn": "\(Duration.seconds(delay))", "error": "\(error)"])
        }
    }

    /// Where the app's cursor of a kind of event is kept: the last event its receiver acknowledged.
    static func cursorKey(_ kind: WebhookEventKind, app: String) -> String {
        switch kind {
        case .tokenDeactivated: "webhook.cursor.\(app)"
        case .pushOpened: "webhook.openCursor.\(app)"
        }
    }

    /// The next post's events of a kind after `cursor`, as the post shows them, and the last one's id; nil when
    /// there are none.
    private func page(of kind: WebhookEventKind, app: String, after cursor: Int64) async throws -> (events: [JSONValue], last: Int64)? {
        switch kind {
        case .tokenDeactivated:
            let events = try await store.tokenEvents(app: app, after: cursor, limit: Self.eventsPerPost)
            return events.last.map { (events.map(Self.item), $0.id) }
        case .pushOpened:
            let events = try await store.openEvents(app: app, after: cursor, limit: Self.eventsPerPost)
            return events.last.map { (events.map(Self.item), $0.id) }
        }
    }

    /// The most events in one post.
    static let eventsPerPost = 100

    static func item(_ event: TokenEvent) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .int(Int(event.id)), "deviceId": .string(event.deviceID), "token": .string(event.token),
            "reason": .string(event.reason.rawValue), "occurredAt": .int(Int(event.occurredAt.timeIntervalSince1970 * 1000)),
        ]
        if let timestamp = event.apnsTimestamp { object["apnsTimestamp"] = .int(Int(timestamp.timeIntervalSince1970 * 1000)) }
        return .object(object)
    }

    static func item(_ event: OpenEvent) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .int(Int(event.id)), "pushId": .string(event.pushID), "deviceId": .string(event.deviceID),
            "openedAt": .int(Int(event.occurredAt.timeIntervalSince1970 * 1000)),
        ]
        if let alias = event.alias { object["alias"] = .string(alias) }
        return .object(object)
    }

    /// `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
    static func signature(body: [UInt8], secret: String, at date: Date) -> String {
        let timestamp = String(Int(date.timeIntervalSince1970))
        let mac = HMAC<SHA256>.authenticationCode(for: Array("\(timestamp).".utf8) + body, using: SymmetricKey(data: Array(secret.utf8)))
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}

private struct WebhookError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
