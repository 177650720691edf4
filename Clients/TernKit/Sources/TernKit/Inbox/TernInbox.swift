import Foundation

/// Sets the icon's badge. On iOS, ``Tern/appleBadgeSink()`` (UserNotifications); tests record what was set.
public protocol BadgeSink: Sendable {
    func setBadge(_ count: Int) async
}

/// Applies ``BadgeKeeper``'s decisions: sets the badge through the sink, and asks the server for the unread count
/// when the keeper wants it (one request at a time; asks made meanwhile are served by one more).
actor BadgeController {
    private var keeper: BadgeKeeper
    private let sink: (any BadgeSink)?
    private let client: TernClient
    private let credentials: @Sendable () async -> DeviceCredentials?
    private let now: @Sendable () -> Date
    private let report: @Sendable (TernEvent) -> Void
    private let bell = Bell()
    private var refreshWanted = false

    init(
        staleAfter: TimeInterval, sink: (any BadgeSink)?, client: TernClient, credentials: @escaping @Sendable () async -> DeviceCredentials?,
        now: @escaping @Sendable () -> Date, report: @escaping @Sendable (TernEvent) -> Void
    ) {
        keeper = BadgeKeeper(staleAfter: staleAfter)
        self.sink = sink
        self.client = client
        self.credentials = credentials
        self.now = now
        self.report = report
    }

    var shown: Int? { keeper.shown }

    func messageArrived(_ message: TernMessage) async {
        await act(keeper.messageArrived(badge: message.notification?.badge, createdAt: message.createdAt, now: now()))
    }

    func systemShowed(_ badge: Int) {
        keeper.systemShowed(badge)
    }

    func countRequested() -> BadgeKeeper.Ticket {
        keeper.countRequested()
    }

    func countAnswered(_ unread: Int, ticket: BadgeKeeper.Ticket) async {
        await act(keeper.countAnswered(unread, ticket: ticket))
    }

    /// Asks for the unread count soon (from ``run()``), without waiting for it.
    nonisolated func refreshSoon() {
        bell.ring()
    }

    /// Serves refreshes until cancelled.
    func run() async {
        while !Task.isCancelled {
            await bell.wait()
            if Task.isCancelled { return }
            await refresh()
        }
    }

    /// Asks the server for the unread count now and shows it.
    func refresh() async {
        guard let device = await credentials() else { return }
        let ticket = keeper.countRequested()
        do throws(TernError) {
            let page = try await client.inbox(device, limit: 1)
            await act(keeper.countAnswered(page.unread, ticket: ticket))
        } catch {
            report(.error(error))
        }
    }

    private func act(_ action: BadgeKeeper.Action) async {
        switch action {
        case .none:
            return
        case .set(let count):
            await sink?.setBadge(count)
            report(.badge(count))
        case .refresh:
            bell.ring()
        }
    }
}

/// The user's inbox (README: `GET …/inbox`, `POST …/inbox/read`, `DELETE …/inbox/{id}`): what the app pulls when it
/// opens, including what the offline store let expire (seed 004 #6). Every answer that carries the unread count sets
/// the icon's badge to it.
public struct TernInbox: Sendable {
    let client: TernClient
    let credentials: @Sendable () async -> DeviceCredentials?
    let badge: BadgeController

    private func device() async throws(TernError) -> DeviceCredentials {
        guard let device = await credentials() else {
            throw TernError(.notRegistered, "the inbox needs a registered device: call register(deviceToken:) first")
        }
        return device
    }

    /// A page, oldest first. - Parameters: after: the previous page's ``InboxPage/next``; limit: 1-1000.
    public func page(after: String? = nil, limit: Int = 50) async throws(TernError) -> InboxPage {
        let device = try await device()
        let ticket = await badge.countRequested()
        let page = try await client.inbox(device, after: after, limit: limit)
        await badge.countAnswered(page.unread, ticket: ticket)
        return page
    }

    /// Every page, from the oldest message.
    public func pages(limit: Int = 50) -> InboxPages {
        InboxPages(inbox: self, limit: limit)
    }

    /// Unread messages in the inbox (and the badge set to it).
    public func unreadCount() async throws(TernError) -> Int {
        try await page(limit: 1).unread
    }

    /// Marks this message and every older one read. - Returns: how many are unread now.
    @discardableResult
    public func markRead(upTo messageID: String) async throws(TernError) -> ReadResult {
        let device = try await device()
        let ticket = await badge.countRequested()
        let result = try await client.markRead(device, upTo: messageID)
        await badge.countAnswered(result.unread, ticket: ticket)
        return result
    }

    /// Marks these messages read (1-1000).
    @discardableResult
    public func markRead(_ messageIDs: [String]) async throws(TernError) -> ReadResult {
        let device = try await device()
        let ticket = await badge.countRequested()
        let result = try await client.markRead(device, ids: messageIDs)
        await badge.countAnswered(result.unread, ticket: ticket)
        return result
    }

    /// Deletes one message from the inbox.
    public func delete(_ messageID: String) async throws(TernError) {
        try await client.deleteInboxMessage(try await device(), id: messageID)
        badge.refreshSoon()
    }
}

/// The inbox page by page (``TernInbox/pages(limit:)``).
public struct InboxPages: AsyncSequence, Sendable {
    public typealias Element = InboxPage
    let inbox: TernInbox
    let limit: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        let inbox: TernInbox
        let limit: Int
        var cursor: String?
        var done = false

        public mutating func next() async throws -> InboxPage? {
            guard !done else { return nil }
            let page = try await inbox.page(after: cursor, limit: limit)
            cursor = page.next
            done = page.next == nil
            return page
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(inbox: inbox, limit: limit)
    }
}
