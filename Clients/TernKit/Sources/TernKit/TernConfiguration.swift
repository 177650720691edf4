import Foundation

/// Where the app's Tern is and how TernKit behaves. The required values go in `init`; the rest are tunables with
/// defaults:
///
/// ```swift
/// var configuration = TernConfiguration(serverURL: URL(string: "https://push.example.com")!, appID: "shop", appKey: "tak_…")
/// configuration.channel.messageBuffer = 64
/// ```
public struct TernConfiguration: Sendable {
    /// The server's address, e.g. `https://push.example.com` (a path prefix is kept: `https://example.com/tern`).
    public var serverURL: URL
    /// The app's id on the server (`demo`, `shop`).
    public var appID: String
    /// The app key (`tak_…`). It ships inside the app and the server treats it as public, but TernKit still never
    /// logs it.
    public var appKey: String

    /// How long one HTTP request may take.
    public var requestTimeout: TimeInterval = 30
    /// When a launch talks to the server (token, environment, version, locale or time zone changed, or a day passed).
    public var registrationPolicy = RegistrationPolicy()
    /// How long to wait between registration attempts that failed for a temporary reason.
    public var registrationBackoff = RetryBackoff(initial: 2, maximum: 600)
    /// The online channel's tunables.
    public var channel = Channel()
    /// A badge carried by a message older than this (a backlog delivered on reconnecting) is not shown as is: the
    /// unread count is asked for instead, since reads on other devices may have lowered it meanwhile.
    public var badgeStaleAfter: TimeInterval = 30

    public init(serverURL: URL, appID: String, appKey: String) {
        self.serverURL = serverURL
        self.appID = appID
        self.appKey = appKey
    }

    /// The online channel's tunables.
    public struct Channel: Sendable {
        /// Waits between connection attempts: doubling, jittered (each wait drawn between half and all of it).
        public var reconnect = RetryBackoff(initial: 0.5, maximum: 60)
        /// A connection that stayed up this long counts as healthy: the next reconnect starts from the shortest wait.
        public var stableAfter: TimeInterval = 30
        /// Messages received and not yet taken by the app. When it is full, TernKit stops reading the socket until the
        /// app takes one: nothing is dropped, and nothing the app has not taken is acknowledged (an `auto` push then
        /// falls back to APNs after its `ackTimeout`, as for a device that is offline).
        public var messageBuffer = 256
        /// How many message ids are remembered to show each message once, whether it came over the channel or
        /// through APNs (the oldest are forgotten first).
        public var deduplicationWindow = 2000
        /// A wake push (`{"tern": {"wake": true}}`) in the background: the channel connects and stays until no
        /// message came for `wakeQuietPeriod`, or `wakeLimit` passed (iOS gives a background push about 30 s).
        public var wakeQuietPeriod: TimeInterval = 1
        public var wakeLimit: TimeInterval = 25
        /// How long opening a connection may take.
        public var connectTimeout: TimeInterval = 20
        /// How often an open connection is pinged. A connection can go silent without ending (a NAT or a proxy
        /// forgot it, the network froze): nothing arrives and nothing fails, so only a ping that is not answered
        /// shows it. One whose pong does not come within this interval is closed and made again. Taken between 1 s
        /// and 10 minutes.
        public var pingInterval: TimeInterval = 30
        /// The largest frame accepted from the server.
        public var maximumFrameSize = 1 << 20

        public init() {}
    }
}
