import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernAPNsClient
import TernStore

/// Delivers stored pushes, page by page, so a restart resumes where the last recorded page ended.
///
/// For each unfinished push (oldest first) it reads the audience from the store `pageSize` recipients at a time
/// (never the whole audience), sends the page through the app's APNs clients with at most `concurrency` in flight,
/// applies the pruning rule to dead tokens, and records the page's results and the new cursor in one transaction.
/// A process killed mid-push re-sends at most the page it was on; the push id is the notifications'
/// `apns-collapse-id` unless the caller chose one, so a device shows such a repeat once.
final class PushDispatcher: Service {
    struct Settings: Sendable {
        var pageSize = 2000
        var concurrency = 1000
        /// How often to look for work when nothing woke the dispatcher.
        var pollInterval: Duration = .seconds(1)
    }

    private let store: any TernStore
    private let clients: ClientDirectory
    private let settings: Settings
    private let onTokensPruned: @Sendable () -> Void
    private let logger: Logger
    private let doorbell = Doorbell()
    private let stopping = Atomic<Bool>(false)
    private let pushesCompleted = Counter(label: "tern_pushes_completed_total")
    private let recipientsAccepted = Counter(label: "tern_push_recipients_total", dimensions: [("outcome", "accepted")])
    private let recipientsFailed = Counter(label: "tern_push_recipients_total", dimensions: [("outcome", "failed")])
    private let tokensPruned = Counter(label: "tern_tokens_pruned_total")

    /// - Parameter onTokensPruned: called after a page that deactivated tokens (the webhook sender looks then).
    init(
        store: any TernStore, clients: ClientDirectory, settings: Settings, onTokensPruned: @escaping @Sendable () -> Void = {},
        logger: Logger
    ) {
        self.store = store
        self.clients = clients
        self.settings = settings
        self.onTokensPruned = onTokensPruned
        self.logger = logger
    }

    /// A new push is stored: look now rather than at the next poll.
    func wake() { doorbell.ring() }

    func run() async throws {
        await withGracefulShutdownHandler {
            while !stopping.load(ordering: .relaxed) {
                let pushes: [PushRecord]
                do {
                    pushes = try await store.unfinishedPushes(limit: 16)
                } catch {
                    logger.error("cannot read pushes from the store", metadata: ["error": "\(error)"])
                    pushes = []
                }
                for push in pushes where !stopping.load(ordering: .relaxed) {
                    do {
                        try await deliver(push)
                    } catch {
                        logger.error("push delivery interrupted", metadata: ["push": "\(push.id)", "error": "\(error)"])
                    }
                }
                if pushes.isEmpty, !stopping.load(ordering: .relaxed) {
                    await doorbell.wait(upTo: settings.pollInterval)
                }
            }
        } onGracefulShutdown: {
            // The page in flight finishes and is recorded; the rest resumes at the next start.
            self.stopping.store(true, ordering: .relaxed)
            self.doorbell.ring()
        }
    }

    /// Sends one push from its cursor to the end of its audience (or until shutdown).
    func deliver(_ push: PushRecord) async throws {
        guard let app = try await store.app(push.appID) else {
            try await store.completePush(id: push.id, at: Date())
            return
        }
        let content = try JSONDecoder().decode(PushContent.self, from: Data(push.notification))
        if push.status == .pending { try await store.startPush(id: push.id, at: Date()) }
        var cursor = push.cursor
        while !stopping.load(ordering: .relaxed) {
            let page = try await store.recipients(app: app.id, audience: push.audience, after: cursor, limit: settings.pageSize)
            guard let last = page.items.last else { break }
            var progress = await send(page.items, app: app, content: content, pushID: push.id)
            progress.cursor = last.key
            try await store.recordProgress(pushID: push.id, progress)
            recipientsAccepted.increment(by: progress.accepted)
            recipientsFailed.increment(by: progress.failures.count)
            tokensPruned.increment(by: progress.pruned)
            if progress.pruned > 0 { onTokensPruned() }
            cursor = last.key
            if page.next == nil { break }
        }
        guard !stopping.load(ordering: .relaxed) else { return }
        try await store.completePush(id: push.id, at: Date())
        pushesCompleted.increment()
        logger.info("push delivered", metadata: ["push": "\(push.id)", "app": "\(app.id)"])
    }

    /// Sends one page and classifies every result.
    private func send(_ recipients: [Recipient], app: AppRecord, content: PushContent, pushID: String) async -> PushProgress {
        var byEnvironment: [String: [Recipient]] = [:]
        for recipient in recipients { byEnvironment[recipient.environment ?? app.environment, default: []].append(recipient) }
        let tally = Tally()
        await withTaskGroup(of: Void.self) { group in
            for (environment, share) in byEnvironment {
                group.addTask {
                    await self.send(share, environment: environment, app: app, content: content, pushID: pushID, into: tally)
                }
            }
        }
        return tally.progress()
    }

    private func send(
        _ recipients: [Recipient], environment: String, app: AppRecord, content: PushContent, pushID: String, into tally: Tally
    ) async {
        let byToken = Dictionary(recipients.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
        let client: APNsClient
        do {
            client = try await clients.client(for: app, tokenEnvironment: environment)
        } catch {
            let now = Date()
            for recipient in recipients {
                tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: nil, reason: "clientUnavailable", at: now))
            }
            logger.error("no APNs client for the app", metadata: ["app": "\(app.id)", "error": "\(error)"])
            return
        }
        let notifications = recipients.compactMap { recipient -> APNsNotification? in
            guard let token = try? DeviceToken(hex: recipient.token) else { return nil }
            return content.notification(to: token, topic: app.topic, pushID: pushID)
        }
        do {
            try await client.sendAll(notifications.async, concurrency: settings.concurrency) { result in
                guard let recipient = byToken[result.notification.deviceToken.hex] else { return }
                await self.record(result, recipient: recipient, app: app, into: tally)
            }
        } catch {
            logger.error("sending a page failed", metadata: ["push": "\(pushID)", "error": "\(error)"])
        }
    }

    private func record(_ result: APNsBatchResult, recipient: Recipient, app: AppRecord, into tally: Tally) async {
        let now = Date()
        switch result.result {
        case .success(let delivery) where delivery.isDelivered:
            tally.accept()
        case .success(let delivery):
            let response = delivery.response
            let reason = response.reason?.rawValue ?? "\(response.status)"
            var pruned = false
            if case .deactivate = TokenPruning.verdict(
                for: response, lastRegisteredAt: recipient.lastRegisteredAt ?? .distantPast, answeredAt: now)
            {
                let atOnce = response.reason == .badDeviceToken || response.reason == .deviceTokenNotForTopic
                do {
                    let event = try await store.deactivateToken(
                        app: app.id, token: recipient.token, reason: reason, invalidSince: atOnce ? nil : (response.timestamp ?? now),
                        apnsTimestamp: response.timestamp, at: now)
                    pruned = event != nil
                } catch {
                    logger.error("cannot deactivate a dead token", metadata: ["app": "\(app.id)", "error": "\(error)"])
                }
            }
            tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: response.status, reason: reason, at: now), pruned: pruned)
        case .failure(let error):
            tally.fail(PushFailure(deviceID: recipient.deviceID, token: recipient.token, status: nil, reason: error.code.rawValue, at: now))
        }
    }
}

/// A page's results as they come in from several clients.
private final class Tally: Sendable {
    private struct State {
        var accepted = 0
        var failures: [PushFailure] = []
        var pruned = 0
    }

    private let state = Mutex(State())

    func accept() { state.withLock { $0.accepted += 1 } }

    func fail(_ failure: PushFailure, pruned: Bool = false) {
        state.withLock { state in
            state.failures.append(failure)
            if pruned { state.pruned += 1 }
        }
    }

    func progress() -> PushProgress {
        state.withLock { PushProgress(accepted: $0.accepted, failures: $0.failures, pruned: $0.pruned, cursor: "") }
    }
}

extension Array where Element: Sendable {
    /// The elements as an async sequence, for `sendAll`.
    var async: AsyncStream<Element> {
        AsyncStream { continuation in
            for element in self { continuation.yield(element) }
            continuation.finish()
        }
    }
}
