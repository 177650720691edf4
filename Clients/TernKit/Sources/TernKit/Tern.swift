import Foundation

/// What TernKit tells the app as it goes (``Tern/events``), for a status line or a log. Never a secret.
public enum TernEvent: Sendable, Equatable {
    case registered(Registration)
    case registrationFailed(TernError)
    case channel(TernChannelState)
    /// The icon's badge was set to this.
    case badge(Int)
    /// Something failed that no call of the app's was waiting for (a frame that cannot be read, a refresh).
    case error(TernError)
}

/// What TernKit made of a remote notification the app handed over (``Tern/receive(_:)``).
public enum RemoteNotificationResult: Sendable, Equatable {
    /// A message the app did not have; it is in ``Tern/messages`` too.
    case message(TernMessage)
    /// The app already has this message (it came over the channel first): do not show it again.
    case duplicate(messageID: String)
    /// A wake push: TernKit connected and fetched this many new messages (now in ``Tern/messages``).
    case fetched(newMessages: Int)
    /// An inbox push that is not a device message: the inbox has this new message.
    case inbox(messageID: String)
    /// Not from Tern.
    case notFromTern

    /// For `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)`.
    public var hasNewData: Bool {
        switch self {
        case .message, .inbox: true
        case .fetched(let count): count > 0
        case .duplicate, .notFromTern: false
        }
    }
}

/// TernKit: an app's side of Tern. Make one when the app starts, run it, and hand it what iOS hands the app:
///
/// ```swift
/// let tern = Tern(configuration: TernConfiguration(serverURL: url, appID: "shop", appKey: "tak_…"),
///                 identityStore: KeychainIdentityStore(service: "com.example.shop.tern"))
/// Task { await tern.run() }                          // owns the channel, retries, badge and open reports
/// tern.register(deviceToken: deviceToken)            // every launch, from didRegisterForRemoteNotifications…
/// for await message in tern.messages { … }           // channel and APNs messages, each once
/// for await opened in tern.openedNotifications { … } // in the root view: the UI is ready to route
/// ```
///
/// The calls that come from UIKit's synchronous callbacks (``register(deviceToken:)``, ``setForeground(_:)``,
/// ``opened(_:)``, ``ready(_:)``) return at once and never block the main thread: ``run()`` does the work.
public final class Tern: Sendable {
    public let configuration: TernConfiguration
    /// The HTTP API, for what the facade does not cover.
    public let client: TernClient
    /// The user's inbox; its answers keep the icon's badge.
    public let inbox: TernInbox
    /// Every message for this device, over the channel or through APNs, each once, in arrival order. Taking one
    /// acknowledges it.
    public let messages: TernMessages
    /// The notifications the user opened, each once, held until the app iterates (its UI is ready).
    public let openedNotifications: OpenedNotifications
    /// What happens, for a status line or a log (one consumer; the newest 64 are kept when nobody reads).
    public let events: AsyncStream<TernEvent>

    private let registrar: Registrar
    private let channel: OnlineChannel
    private let badge: BadgeController
    private let router: OpenRouter
    private let report: @Sendable (TernEvent) -> Void
    private let now: @Sendable () -> Date
    /// The latest registration asked for and not done yet.
    private let wantedRegistration = Locked<WantedRegistration?>(nil)

    private enum WantedRegistration: Equatable {
        case token(Data)
        case facts(RegistrationFacts)

        var facts: RegistrationFacts {
            switch self {
            case .token(let token): RegistrationFacts.current(deviceToken: token)
            case .facts(let facts): facts
            }
        }
    }
    private let registrationBell = Bell()
    /// The latest token of each kind (``register(pushToken:kind:)``) and of each Live Activity
    /// (``register(activityToken:for:)``) the app gave, and the device each was last set for: one is sent when the
    /// two differ (a new token, or a device made again under a new id).
    private let tokens: Locked<DeviceTokens>
    private let tokenBell: Bell

    /// What a token of the device's other than its APNs token is for.
    private enum TokenSlot: Hashable {
        case kind(PushTokenKind)
        case activity(String)
    }

    private struct DeviceTokens {
        var kinds: [PushTokenKind: Data] = [:]
        /// By activity id; `started`: when the server started counting the activity's lifetime, as near as known (when
        /// the app first gave its token, until the server said).
        var activities: [String: (token: Data, started: Date)] = [:]
        var sent: [TokenSlot: (deviceID: String, token: Data)] = [:]

        /// The first token not yet set for `deviceID`: the kinds in their order, then the activities, oldest first
        /// (the order the server keeps them in). Before looking, forgets the activities past their lifetime, as the
        /// server does.
        mutating func due(for deviceID: String, at now: Date) -> (slot: TokenSlot, token: Data)? {
            for (id, activity) in activities where now >= activity.started + RegisteredActivityToken.lifetime { forget(.activity(id)) }
            let byAge = activities.sorted { ($0.value.started, $0.key) < ($1.value.started, $1.key) }
            let wanted = PushTokenKind.allCases.compactMap { kind in kinds[kind].map { (TokenSlot.kind(kind), $0) } }
                + byAge.map { (TokenSlot.activity($0.key), $0.value.token) }
            return wanted.first { slot, token in
                guard let sent = sent[slot] else { return true }
                return sent.deviceID != deviceID || sent.token != token
            }
        }

        /// A new activity, or a new token for one (its start stays). Past the most the server keeps, the oldest goes,
        /// as the server forgets it.
        mutating func set(_ token: Data, for activity: String, at now: Date) {
            activities[activity] = (token, activities[activity]?.started ?? now)
            while activities.count > RegisteredActivityToken.maximumPerDevice,
                let oldest = activities.min(by: { ($0.value.started, $0.key) < ($1.value.started, $1.key) })
            {
                forget(.activity(oldest.key))
            }
        }

        mutating func forget(_ slot: TokenSlot) {
            switch slot {
            case .kind(let kind): kinds[kind] = nil
            case .activity(let id): activities[id] = nil
            }
            sent[slot] = nil
        }

        /// Keeps that `token` was set (or refused for good) for `deviceID`, if the slot is still wanted. - Returns:
        /// false if the app forgot it meanwhile (it removed the kind's token, or ended the activity).
        mutating func markSent(_ slot: TokenSlot, _ token: Data, to deviceID: String) -> Bool {
            switch slot {
            case .kind(let kind): guard kinds[kind] != nil else { return false }
            case .activity(let id): guard activities[id] != nil else { return false }
            }
            sent[slot] = (deviceID, token)
            return true
        }
    }
    /// Opens to report to the server, the oldest first (at most 64).
    private let openReports = Locked<[OpenReport]>([])
    private let openBell = Bell()
    private let route = Locked<(@MainActor @Sendable (OpenedNotification) -> Void)?>(nil)
    private let routeBell = Bell()

    /// - Parameters:
    ///   - identityStore: where the device id and secret are kept: `KeychainIdentityStore` on Apple platforms.
    ///   - stateStore: what was last registered (a file in Application Support by default).
    ///   - channelTransport: how the online channel connects (`URLSessionWebSocketTask` by default).
    ///   - badgeSink: what sets the icon's badge (``appleBadgeSink()`` on iOS; nil: nobody).
    ///   - now: the wall clock (injected by tests).
    public init(
        configuration: TernConfiguration, identityStore: any IdentityStore, stateStore: any StateStore = FileStateStore.applicationSupport(),
        channelTransport: any ChannelTransport = URLSessionChannelTransport(), httpTransport: any HTTPTransport = URLSessionHTTPTransport(),
        badgeSink: (any BadgeSink)? = nil, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.now = now
        let client = TernClient(configuration: configuration, transport: httpTransport)
        self.client = client
        let (events, input) = AsyncStream.makeStream(of: TernEvent.self, bufferingPolicy: .bufferingNewest(64))
        self.events = events
        let report: @Sendable (TernEvent) -> Void = { input.yield($0) }
        self.report = report
        let registrar = Registrar(
            client: client, identities: identityStore, states: stateStore, policy: configuration.registrationPolicy, now: now)
        self.registrar = registrar
        let (tokens, tokenBell) = (Locked(DeviceTokens()), Bell())
        (self.tokens, self.tokenBell) = (tokens, tokenBell)
        let credentials: @Sendable () async -> DeviceCredentials? = { await registrar.credentials() }
        let badge = BadgeController(
            staleAfter: configuration.badgeStaleAfter, sink: badgeSink, client: client, credentials: credentials, now: now, report: report)
        self.badge = badge
        channel = OnlineChannel(
            configuration: configuration.channel, client: client, transport: channelTransport, credentials: credentials,
            reregister: {
                do throws(TernError) {
                    report(.registered(try await registrar.registerAgain()))
                    // Made again, the device has none of its tokens of other kinds, nor its activities'.
                    tokens.withLock { $0.sent = [:] }
                    tokenBell.ring()
                    return true
                } catch {
                    report(.registrationFailed(error))
                    return false
                }
            },
            arrived: { await badge.messageArrived($0) }, report: report)
        messages = TernMessages(queue: channel.queue, handed: { [channel] in await channel.acknowledge($0.id) })
        router = OpenRouter()
        openedNotifications = OpenedNotifications(router: router)
        inbox = TernInbox(client: client, credentials: credentials, badge: badge)
    }

    /// Runs TernKit's work until the task is cancelled: the online channel, registration retries, the badge, and
    /// reporting and routing opened notifications. Call it once, for the app's lifetime (`Task { await tern.run() }`
    /// in `didFinishLaunching`, or `.task { await tern.run() }` on the root view).
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.channel.run() }
            group.addTask { await self.badge.run() }
            group.addTask { await self.registering() }
            group.addTask { await self.settingTokens() }
            group.addTask { await self.reportingOpens() }
            group.addTask { await self.routing() }
            await group.waitForAll()
        }
    }

    // MARK: Registration

    /// Registers the device's APNs token: call it on every launch from
    /// `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)` (the token may have changed, seed 004). It
    /// talks to the server only when the token, environment, app version, locale or time zone changed, or a day
    /// passed, and retries with back-off. Returns at once.
    public func register(deviceToken: Data) {
        // The facts (version, locale, the build's environment from its provisioning profile) are read in `run()`,
        // off the main thread.
        wantedRegistration.withLock { $0 = .token(deviceToken) }
        registrationBell.ring()
    }

    /// ``register(deviceToken:)`` with facts the app made itself.
    public func register(_ facts: RegistrationFacts) {
        wantedRegistration.withLock { $0 = .facts(facts) }
        registrationBell.ring()
    }

    /// Registers now, once (no retries), and answers what happened. - Parameter force: even if nothing changed.
    @discardableResult
    public func registerNow(_ facts: RegistrationFacts, force: Bool = false) async throws(TernError) -> Registration {
        let registration = try await registrar.register(facts, force: force)
        registered(registration)
        return registration
    }

    /// Binds the device to the user that the backend's alias token names (its `sub`): a JWT the backend signs with
    /// the app's identity secret after its own sign-in. Needs the APNs token registered first.
    @discardableResult
    public func signIn(aliasToken: String) async throws(TernError) -> Registration {
        let registration = try await registrar.signIn(aliasToken: aliasToken)
        registered(registration)
        return registration
    }

    /// Unbinds the device from its user: it gets no more of that user's pushes, and reads its own inbox.
    public func signOut() async throws(TernError) {
        _ = try await registrar.signOut()
        badge.refreshSoon()
    }

    /// Registers the device's token of another kind: its PushKit VoIP token (from `pushRegistry(_:didUpdate:for:)`,
    /// on every launch), or its ActivityKit push-to-start token (from `pushToStartTokenUpdates`). The backend's
    /// `voip` pushes to the user then ring this device, and its `liveactivity` pushes that start an activity start it
    /// here. Returns at once: the token is sent once the device is registered, again whenever the device is made
    /// again under a new id, and retried with back-off.
    public func register(pushToken: Data, kind: PushTokenKind) {
        tokens.withLock { $0.kinds[kind] = pushToken }
        tokenBell.ring()
    }

    /// The device takes no more pushes of the kind's type (the user turned calls off): forgets the token the app gave
    /// and removes it from the server. - Returns: whether the server had one.
    @discardableResult
    public func removePushToken(kind: PushTokenKind) async throws(TernError) -> Bool {
        tokens.withLock { $0.forget(.kind(kind)) }
        guard let device = await registrar.credentials() else { return false }
        return try await client.removePushToken(device, kind: kind)
    }

    /// Registers a Live Activity's update token under the activity's id (the app chooses it: a match, an order), from
    /// ActivityKit's `pushTokenUpdates`: the backend's `liveactivity` pushes to `audience: {"activity": id}` then
    /// update or end the activity on this device. Call it with each token ActivityKit gives; a new one for the same
    /// activity replaces the old. Returns at once: the token is sent once the device is registered, again whenever
    /// the device is made again under a new id, and retried with back-off.
    ///
    /// This process remembers the activities it was told about (call it again for the running ones after a launch),
    /// as the server does: at most 16 (one more forgets the oldest), each for 12 hours after it started. An id that is
    /// not 1-128 letters, digits, `.`, `_`, `:` and `-` is not sent; ``events`` says so.
    public func register(activityToken: Data, for activity: String) {
        do throws(TernError) {
            try TernClient.checkActivityID(activity)
        } catch {
            report(.error(error))
            return
        }
        tokens.withLock { $0.set(activityToken, for: activity, at: now()) }
        tokenBell.ring()
    }

    /// The activity ended (or the user dismissed it): forgets its token, so no registration sets it again, and removes
    /// it from the server. - Returns: whether the server had one.
    @discardableResult
    public func endActivity(_ activity: String) async throws(TernError) -> Bool {
        try TernClient.checkActivityID(activity)
        tokens.withLock { $0.forget(.activity(activity)) }
        guard let device = await registrar.credentials() else { return false }
        return try await client.removeActivityToken(device, activity: activity)
    }

    /// The broadcast channel (iOS 18) the app's backend made under `name`: subscribe a Live Activity to its
    /// ``BroadcastChannel/channelID`` (`Activity.request(…, pushType: .channel(channel.channelID))`), and the backend's
    /// broadcasts update it on every device at once. - Returns: nil when there is no channel of that name.
    public func broadcastChannel(named name: String) async throws(TernError) -> BroadcastChannel? {
        try await client.broadcastChannel(named: name)
    }

    /// Adds and removes the device's tags. - Returns: its tags now.
    @discardableResult
    public func updateTags(add: [String] = [], remove: [String] = []) async throws(TernError) -> [String] {
        try await registrar.updateTags(add: add, remove: remove)
    }

    /// The device's id, once it registered.
    public var deviceID: String? {
        get async { await registrar.credentials()?.deviceID }
    }

    /// The user the device is bound to, as last registered.
    public var alias: String? {
        get async { await registrar.alias() }
    }

    private func registered(_ registration: Registration) {
        report(.registered(registration))
        // A registration the server was told of (at most daily, or when something changed) sets the tokens again
        // too: the server may have deleted the device and made it again, without its tokens.
        if registration.outcome != .upToDate { tokens.withLock { $0.sent = [:] } }
        tokenBell.ring()
        channel.poke()
        openBell.ring()
        badge.refreshSoon()
    }

    private func registering() async {
        var failures = 0
        while !Task.isCancelled {
            guard let wanted = wantedRegistration.withLock({ $0 }) else {
                failures = 0
                await registrationBell.wait()
                continue
            }
            do throws(TernError) {
                let registration = try await registrar.register(wanted.facts)
                // A newer token asked for meanwhile stays wanted.
                wantedRegistration.withLock { if $0 == wanted { $0 = nil } }
                failures = 0
                registered(registration)
            } catch {
                report(.registrationFailed(error))
                guard error.isTemporary else {
                    wantedRegistration.withLock { if $0 == wanted { $0 = nil } }
                    continue
                }
                failures += 1
                let failed = ContinuousClock.now
                let serverWait = error.retryAfter ?? 0
                let delay = max(serverWait, configuration.registrationBackoff.delay(afterFailures: failures))
                // The server's Retry-After is kept whatever rings meanwhile (the call that asked for this
                // registration rang before it was sent; a newer token is no reason to ask the server sooner than it
                // said). After it, a newer registration asked for ends the rest of TernKit's own back-off: that one
                // has not failed yet.
                await registrationBell.wait(until: failed + .wait(seconds: serverWait))
                await registrationBell.wait(until: failed + .wait(seconds: delay)) { [wantedRegistration] in
                    wantedRegistration.withLock { $0 } != wanted
                }
            }
        }
    }

    // MARK: The app's state and remote notifications

    /// The app came to the foreground (the channel connects, the badge is checked) or went to the background (the
    /// channel closes). Returns at once.
    public func setForeground(_ foreground: Bool) {
        channel.setForeground(foreground)
        if foreground { badge.refreshSoon() }
    }

    /// A remote notification reached the app (`didReceiveRemoteNotification`, or `willPresent` in the foreground).
    /// Make the payload where it arrives: `TernPayload(userInfo: userInfo)`.
    ///
    /// A device message (`tern.id`) the app does not have yet goes to ``messages``; one it has is a duplicate (do
    /// not show it). A wake push connects the channel and fetches. An inbox push refreshes the badge.
    public func receive(_ payload: TernPayload) async -> RemoteNotificationResult {
        if payload.isWake {
            let count = await channel.wake()
            badge.refreshSoon()
            return .fetched(newMessages: count)
        }
        if let message = payload.message() {
            guard await channel.receivedThroughAPNs(message) else { return .duplicate(messageID: message.id) }
            if let shown = payload.badge { await badge.systemShowed(shown) }
            return .message(message)
        }
        // The server's silent badge update after reads, or a plain notification with a badge: iOS shows it.
        if let shown = payload.badge { await badge.systemShowed(shown) }
        if let id = payload.inboxMessageID { return .inbox(messageID: id) }
        return .notFromTern
    }

    /// Asks the server for the unread count and sets the badge to it.
    public func refreshBadge() async {
        await badge.refresh()
    }

    /// Where the online channel is now.
    public var channelState: TernChannelState {
        get async { await channel.state }
    }

    /// The badge TernKit last set or saw (nil: not known yet).
    public var badgeCount: Int? {
        get async { await badge.shown }
    }

    // MARK: Opened notifications

    /// The user opened a notification (from `userNotificationCenter(_:didReceive:withCompletionHandler:)`, or the
    /// launch options' remote notification). It is held until the app is ready to route it (``openedNotifications``
    /// or ``ready(_:)``) and handed over once, however many times it is reported; a Tern message is reported to the
    /// server as opened and not handed to ``messages`` again; a push that came through APNs is reported by its id, and
    /// counted in its `opened`. Returns at once.
    public func opened(_ notification: OpenedNotification) {
        guard router.opened(notification) else { return }
        let payload = notification.payload
        guard let report = payload.messageID.map(OpenReport.message) ?? payload.pushID.map(OpenReport.push) else { return }
        openReports.withLock { reports in
            reports.append(report)
            if reports.count > 64 { reports.removeFirst(reports.count - 64) }
        }
        openBell.ring()
    }

    /// The UI is ready to route: `route` gets the opened notifications held so far, then each new one, on the main
    /// actor (call it from the root view controller's `viewDidAppear`). Use this or ``openedNotifications``, not both.
    public func ready(_ route: @escaping @MainActor @Sendable (OpenedNotification) -> Void) {
        self.route.withLock { $0 = route }
        routeBell.ring()
    }

    private func routing() async {
        while !Task.isCancelled {
            guard let route = route.withLock({ $0 }) else {
                await routeBell.wait()
                continue
            }
            guard let opened = await router.next() else { return }
            await MainActor.run { route(opened) }
        }
    }

    private func reportingOpens() async {
        while !Task.isCancelled {
            guard let open = openReports.withLock({ $0.first }) else {
                await openBell.wait()
                continue
            }
            if case .message(let id) = open {
                // Not again in the message stream; acknowledged, so the channel does not send it either.
                await channel.handled(id)
            }
            guard let device = await registrar.credentials() else {
                // Not registered yet: after the registration (which rings the bell).
                await openBell.wait()
                continue
            }
            for attempt in 1...3 {
                do throws(TernError) {
                    switch open {
                    case .message(let id): try await client.reportOpen(device, messageID: id)
                    case .push(let id): try await client.reportOpen(device, pushID: id)
                    }
                    break
                } catch {
                    guard error.isTemporary, attempt < 3 else {
                        report(.error(error))
                        break
                    }
                    try? await Task.sleep(for: .wait(seconds: configuration.registrationBackoff.delay(afterFailures: attempt)))
                }
            }
            openReports.withLock { reports in
                if reports.first == open { reports.removeFirst() }
            }
        }
    }

    /// Sets the tokens of other kinds and the activities' tokens the app gave, one at a time, once the device is
    /// registered.
    private func settingTokens() async {
        var failures = 0
        while !Task.isCancelled {
            guard let device = await registrar.credentials(), let (slot, token) = tokens.withLock({ $0.due(for: device.deviceID, at: now()) })
            else {
                // Nothing to send, or not registered yet: a new token or the registration rings.
                failures = 0
                await tokenBell.wait()
                continue
            }
            do throws(TernError) {
                switch slot {
                case .kind(let kind):
                    _ = try await client.setPushToken(device, kind: kind, token: token)
                case .activity(let id):
                    let answer = try await client.setActivityToken(device, activity: id, token: token)
                    // The activity's lifetime counts from its start on the server (a token given again after a launch
                    // keeps it): taken as an age, the two clocks need not agree.
                    let age = answer.registeredAt.timeIntervalSince(answer.startedAt)
                    tokens.withLock { $0.activities[id]?.started = now().addingTimeInterval(-max(age, 0)) }
                }
                failures = 0
                if !tokens.withLock({ $0.markSent(slot, token, to: device.deviceID) }) {
                    // The app removed it while it was being set: the removal may have reached the server first.
                    await unset(slot, device)
                }
            } catch {
                report(.error(error))
                guard error.isTemporary else {
                    // Refused as it is: not sent again until the app gives another token or the device changes.
                    _ = tokens.withLock { $0.markSent(slot, token, to: device.deviceID) }
                    continue
                }
                failures += 1
                let delay = max(error.retryAfter ?? 0, configuration.registrationBackoff.delay(afterFailures: failures))
                await tokenBell.wait(until: ContinuousClock.now + .wait(seconds: delay))
            }
        }
    }

    private func unset(_ slot: TokenSlot, _ device: DeviceCredentials) async {
        do throws(TernError) {
            switch slot {
            case .kind(let kind): try await client.removePushToken(device, kind: kind)
            case .activity(let id): try await client.removeActivityToken(device, activity: id)
            }
        } catch {
            report(.error(error))
        }
    }

    /// An open to report: of a device message (`tern.id`), or of a push that came through APNs (`tern.pushId`).
    private enum OpenReport: Equatable {
        case message(String)
        case push(String)
    }
}
