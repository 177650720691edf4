import TernAPNs

/// How a ``LegacyGatewayClient`` or ``LegacyFeedbackClient`` reaches a legacy binary service (Apple's retired
/// ports 2195 and 2196, or the simulator's) and how it judges what it wrote.
public struct LegacyClientConfiguration: Sendable {
    /// A client certificate (`.certificate` or `.pkcs12`): the binary services take no provider tokens.
    public var authentication: APNsClientConfiguration.Authentication
    public var endpoint: APNsClientConfiguration.Endpoint
    /// An HTTP proxy to reach the endpoint through (a CONNECT tunnel); nil connects directly.
    public var proxy: HTTPProxy?
    /// The format notifications are written in: `.frame` (command 2, the default), `.enhanced` (command 1) or
    /// `.simple` (command 0, which gets no error responses, so its rejections go unseen).
    public var format = LegacyCommand.frame
    /// The gateway answers only failures. A written notification counts as accepted once this long has passed
    /// without an error response naming it or an earlier one; until then it is kept for re-sending.
    public var replayWindow: Duration = .milliseconds(500)
    /// Most notifications written and not yet settled; writing waits when this many are. With ``replayWindow`` it
    /// bounds throughput per client (capacity ÷ window) and memory (capacity × notification size).
    public var replayCapacity = 65_536
    /// The waits between fruitless connections. Its maximum is also how often a gateway that counts as unreachable is
    /// tried again, one connection for a caller that comes.
    public var reconnectBackoff = APNsClientConfiguration.Backoff(initial: .milliseconds(200), maximum: .seconds(30))
    /// Connections in a row that fail without settling anything before the notifications waiting end with
    /// ``LegacyOutcome/failed(_:)``, and the gateway counts as unreachable: later notifications fail at once.
    public var maxConnectFailures = 5
    /// The most a connection may take to carry bytes: the TCP connect, and then the first write to complete, which
    /// NIOSSL holds back until the TLS handshake is done (with nothing to write, the handshake itself). A connection past it is closed as fruitless (and counts
    /// toward ``maxConnectFailures``): a gateway that accepts TCP and never finishes the handshake must not have
    /// what waited on it counted accepted.
    public var connectTimeout: Duration = .seconds(10)
    /// The most a notification may wait, from `send` until it is written on a connection that carries bytes; past
    /// it, it ends ``LegacyOutcome/failed(_:)`` with a message starting "timed out". What has been written settles
    /// within ``replayWindow`` anyway. `nil`: no limit but ``maxConnectFailures``.
    public var sendTimeout: Duration?
    /// The most a feedback read may take, connect to end of stream.
    public var feedbackTimeout: Duration = .seconds(60)
    /// The most tuples one feedback read takes. A service that sends more is broken (Apple's lists ran to hundreds
    /// of thousands at most), and the read fails with `connectionFailed` as soon as it passes the bound, so an
    /// endless stream cannot grow memory without end. One tuple costs about 100 bytes as a ``FeedbackTuple`` (a
    /// 32-byte token in its own array), so the default bounds a read at about 100 MB.
    ///
    /// Why fail rather than return the tuples read: the caller prunes tokens on what it gets, and a stream that
    /// overruns any real list is not a list to act on (the same judgement as a stream that is not whole tuples).
    public var feedbackMaxTuples = 1_000_000

    public init(authentication: APNsClientConfiguration.Authentication, endpoint: APNsClientConfiguration.Endpoint) {
        self.authentication = authentication
        self.endpoint = endpoint
    }

    /// Apple's gateway for an environment (retired in March 2021: useful only to gateways that still speak it).
    public static func appleGateway(_ environment: APNsEnvironment) -> APNsClientConfiguration.Endpoint {
        .init(host: environment == .production ? "gateway.push.apple.com" : "gateway.sandbox.push.apple.com", port: 2195)
    }

    /// Apple's feedback service for an environment (retired with the gateway).
    public static func appleFeedback(_ environment: APNsEnvironment) -> APNsClientConfiguration.Endpoint {
        .init(host: environment == .production ? "feedback.push.apple.com" : "feedback.sandbox.push.apple.com", port: 2196)
    }

    func validate() throws {
        if case .token = authentication {
            throw APNsClientError.invalidConfiguration("the legacy binary services take a client certificate, not a provider token")
        }
        guard (1...65_535).contains(endpoint.port), !endpoint.host.isEmpty else {
            throw APNsClientError.invalidConfiguration("the endpoint needs a host and a port 1…65535")
        }
        guard replayWindow >= .milliseconds(10) else {
            throw APNsClientError.invalidConfiguration("replayWindow must be at least 10 ms")
        }
        guard (1...10_000_000).contains(replayCapacity) else {
            throw APNsClientError.invalidConfiguration("replayCapacity must be 1…10000000")
        }
        guard maxConnectFailures >= 1 else { throw APNsClientError.invalidConfiguration("maxConnectFailures must be 1 or more") }
        guard feedbackTimeout > .zero else { throw APNsClientError.invalidConfiguration("feedbackTimeout must be positive") }
        guard connectTimeout >= .milliseconds(10) else {
            throw APNsClientError.invalidConfiguration("connectTimeout must be at least 10 ms")
        }
        if let sendTimeout, sendTimeout <= .zero { throw APNsClientError.invalidConfiguration("sendTimeout must be positive") }
        guard feedbackMaxTuples >= 1 else { throw APNsClientError.invalidConfiguration("feedbackMaxTuples must be 1 or more") }
    }
}

/// What became of one notification sent over the legacy gateway.
public enum LegacyOutcome: Hashable, Sendable {
    /// No error response named it within the replay window (or one named a later notification).
    case accepted
    /// The gateway's error response for it.
    case rejected(LegacyStatus)
    /// It could not be sent: it does not encode, or no connection could be made.
    case failed(String)
    /// Never written: it was handed over after the client began to shut down.
    case shutDown
}
