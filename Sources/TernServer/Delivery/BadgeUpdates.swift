import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TernAPNs
import TernAPNsClient
import TernStore

/// Silent badge updates after inbox reads: each user's devices get their unread count (`content-available`,
/// priority 5).
///
/// Reads are gathered for `delay` first, so a burst of reads by one user makes one update per device; an update
/// still waiting behind a notification in flight to the same device is replaced by a newer one (``DeliveryOrder``).
/// Best effort: updates not sent when the server stops are not kept. It runs as a service that stops before the
/// dispatcher, so it never asks for an APNs client once they are closed.
final class BadgeUpdates: Service {
    private struct Pending {
        var apps: [String: AppRecord] = [:]
        var owners: [String: Set<InboxOwner>] = [:]
    }

    private let store: any TernStore
    private let clients: ClientDirectory
    private let order: DeliveryOrder
    private let delay: Duration
    /// The gathering waits on `timer`; unread counts go by `wall`.
    private let clocks: ServerClocks
    private let logger: Logger
    private let pending = Mutex(Pending())
    private let doorbell = Doorbell()

    init(
        store: any TernStore, clients: ClientDirectory, order: DeliveryOrder, delay: Duration, clocks: ServerClocks = .system,
        logger: Logger
    ) {
        self.store = store
        self.clients = clients
        self.order = order
        self.delay = delay
        self.clocks = clocks
        self.logger = logger
    }

    /// Sends the owner's devices their unread count soon.
    func schedule(app: AppRecord, owner: InboxOwner) {
        pending.withLock { pending in
            pending.apps[app.id] = app
            pending.owners[app.id, default: []].insert(owner)
        }
        doorbell.ring()
    }

    /// Sends what was scheduled, `delay` after the first of a burst, until graceful shutdown.
    func run() async {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.doorbell.wait()
                // What else is scheduled meanwhile goes with it.
                try? await self.clocks.clock(for: .badgeUpdates).sleep(for: self.delay)
                guard !Task.isCancelled else { return }
                await self.flush()
            }
        }
    }

    private func flush() async {
        let taken = pending.withLock { pending -> Pending in
            defer { pending = Pending() }
            return pending
        }
        for (appID, owners) in taken.owners {
            guard let app = taken.apps[appID] else { continue }
            for owner in owners {
                do {
                    try await update(owner, app: app)
                } catch {
                    logger.warning("badge update not sent", metadata: ["app": "\(appID)", "error": "\(error)"])
                }
            }
        }
    }

    private func update(_ owner: InboxOwner, app: AppRecord) async throws {
        let now = clocks.wall.now
        let unread = try await store.unreadCount(app: app.id, owner: owner, at: now)
        // What the devices are about to show is what the next `"+N"` counts on from: left at the counter's old value,
        // a read brought the icon to the unread count and the next "+1" took it past it again, for good.
        _ = try await store.badges(app: app.id, owners: [owner], pushID: "", change: .set(min(unread, BadgeChange.largest)), at: now)
        let devices: [DeviceRecord]
        switch owner {
        case .alias(let alias): devices = try await store.devices(app: app.id, alias: alias)
        case .device(let deviceID): devices = try await store.device(app: app.id, deviceID: deviceID).map { [$0] } ?? []
        }
        var payload = APNsPayload()
        payload.badge = min(unread, BadgeChange.largest)
        payload.contentAvailable = true
        let metadata = APNsRequestMetadata(topic: app.topic, pushType: .alert, priority: .throttled)
        // A badge with content-available and no alert: shown without a banner, and priority 5 (APNs allows no
        // badge on a `background` push).
        var notifications: [(environment: APNsEnvironment, notification: APNsNotification)] = []
        for device in devices where device.deactivatedAt == nil {
            guard let token = try? DeviceToken(hex: device.token) else { continue }
            notifications.append((device.environment, try APNsNotification(deviceToken: token, metadata: metadata, payload: payload)))
        }
        // Places in line only once nothing can fail before sending.
        var byEnvironment: [APNsEnvironment: [QueuedNotification]] = [:]
        for (environment, notification) in notifications {
            byEnvironment[environment, default: []].append(
                QueuedNotification(notification: notification, ticket: order.enqueue(notification.deviceToken, badgeOnly: true)))
        }
        for (environment, batch) in byEnvironment {
            let client: any NotificationSender
            do {
                client = try await clients.client(for: app, tokenEnvironment: environment)
            } catch {
                // The tickets still hand on their turn.
                await Self.release(batch, order: order)
                throw error
            }
            await OrderedBatch.send(batch, client: client, order: order, concurrency: 100) { _ in }
        }
    }

    /// Hands on the turns of tickets that will not be sent.
    private static func release(_ batch: [QueuedNotification], order: DeliveryOrder) async {
        for item in batch {
            guard let ticket = item.ticket else { continue }
            if case .go = await order.turn(ticket) { order.finish([ticket]) }
        }
    }
}
