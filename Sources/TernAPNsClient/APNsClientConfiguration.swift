import Foundation
import NIOCore
import TernAPNs

/// How an ``APNsClient`` reaches APNs and how hard it tries. Required values in `init`; the rest are tunables.
public struct APNsClientConfiguration: Sendable {
    /// How the client proves who it is.
    public enum Authentication: Sendable {
        /// Provider tokens (JWT) signed with a `.p8` key; one token is shared by every connection.
        case token(APNsSigningKey)
        /// A client certificate and its private key, PEM.
        case certificate(chainPEM: String, privateKeyPEM: String)
        /// A PKCS#12 bundle (`.p12`) and its passphrase.
        case pkcs12(bytes: [UInt8], passphrase: String)
    }

    /// Where APNs is: Apple's hosts, or any host that speaks the protocol (the simulator) with its own CA.
    public struct Endpoint: Sendable, Hashable {
        public var host: String
        public var port: Int
        /// PEM certificates to trust instead of the system's roots.
        public var trustRootsPEM: String?

        public init(host: String, port: Int, trustRootsPEM: String? = nil) {
            self.host = host
            self.port = port
            self.trustRootsPEM = trustRootsPEM
        }

        public static let production = Endpoint(host: APNsEnvironment.production.host, port: 443)
        public static let development = Endpoint(host: APNsEnvironment.development.host, port: 443)

        public static func apple(_ environment: APNsEnvironment) -> Endpoint {
            environment == .production ? .production : .development
        }
    }

    /// Exponential back-off with full jitter: attempt n waits a random time up to `initial × 2^(n-1)`, capped.
    public struct Backoff: Sendable, Hashable {
        public var initial: Duration
        public var maximum: Duration

        public init(initial: Duration, maximum: Duration) {
            self.initial = initial
            self.maximum = maximum
        }

        /// The wait before the next try after `failures` failures in a row (none after zero failures).
        public func delay(afterFailures failures: Int) -> Duration {
            guard failures > 0 else { return .zero }
            let ceiling = min(Double(maximum.nanoseconds), Double(initial.nanoseconds) * pow(2, Double(min(failures - 1, 30))))
            // Full jitter, but never less than half the initial wait: a burst of failures must not reconnect in a
            // tight loop.
            let low = Double(initial.nanoseconds) / 2
            return .nanoseconds(Int64(Double.random(in: min(low, ceiling)...max(low, ceiling))))
        }

        func delay(afterFailures failures: Int) -> TimeAmount {
            .nanoseconds(Int64((delay(afterFailures: failures) as Duration).nanoseconds))
        }
    }

    public var authentication: Authentication
    public var endpoint: Endpoint
    /// An HTTP proxy to reach the endpoint through (a CONNECT tunnel); nil connects directly.
    public var proxy: HTTPProxy?
    /// Most connections the pool opens. It grows only while every open connection is busy.
    public var connections = 2
    /// The most a whole send may take: waiting for a stream, every attempt and the waits between them.
    public var sendTimeout: Duration = .seconds(30)
    /// The most one attempt waits for APNs' answer. A request that got no answer may still have been delivered, so
    /// it is not sent again: the send ends with `timedOut` (pushes never arrive twice from a timeout).
    public var attemptTimeout: Duration = .seconds(10)
    /// Attempts per send for retryable outcomes (429, 500, 503, an expired provider token, a lost connection).
    /// Requests APNs never processed (GOAWAY, REFUSED_STREAM) are sent again without counting.
    public var maxAttempts = 5
    public var retryBackoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
    public var reconnectBackoff = Backoff(initial: .milliseconds(200), maximum: .seconds(30))
    /// PING a connection after this long without traffic; close it if the PING is not answered in `pingTimeout`.
    public var idlePingInterval: Duration = .seconds(60)
    public var pingTimeout: Duration = .seconds(10)
    /// A connection that has carried no notification for this long (up to twice it) is closed; the next
    /// notification opens one again. At least 1 second.
    public var idleTimeout: Duration = .seconds(600)
    /// Age at which the provider token is replaced (20…55 minutes; APNs rejects tokens older than an hour).
    public var tokenRefreshInterval: TimeInterval = 50 * 60
    /// Wall-clock time for provider tokens and expirations.
    public var clock: any WallClock = SystemWallClock()

    public init(authentication: Authentication, endpoint: Endpoint) {
        self.authentication = authentication
        self.endpoint = endpoint
    }

    func validate() throws {
        guard (1...64).contains(connections) else { throw APNsClientError.invalidConfiguration("connections must be 1…64") }
        guard maxAttempts >= 1 else { throw APNsClientError.invalidConfiguration("maxAttempts must be 1 or more") }
        guard idleTimeout >= .seconds(1) else { throw APNsClientError.invalidConfiguration("idleTimeout must be 1 second or more") }
        guard sendTimeout > .zero, attemptTimeout > .zero else {
            throw APNsClientError.invalidConfiguration("timeouts must be positive")
        }
        guard (1...65_535).contains(endpoint.port), !endpoint.host.isEmpty else {
            throw APNsClientError.invalidConfiguration("the endpoint needs a host and a port 1…65535")
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    var timeAmount: TimeAmount { .nanoseconds(nanoseconds) }
}
