import Foundation
import NIOCore
import TernAPNs

extension APNsSimulator {
    /// How a simulator listens and behaves. Required values have no default; the rest are tunables.
    public struct Configuration: Sendable {
        /// Address to listen on.
        public var host = "127.0.0.1"
        /// HTTP/2 port; 0 picks a free one (read it from ``APNsSimulator/port`` once running).
        public var port = 0
        /// HTTP/1.1 control API port; 0 picks a free one, nil turns the control API off.
        public var controlPort: Int? = 0
        /// Legacy binary gateway port (Apple's was 2195); 0 picks a free one, nil turns it off.
        public var legacyGatewayPort: Int? = 0
        /// Legacy feedback service port (Apple's was 2196); 0 picks a free one, nil turns it off.
        public var feedbackPort: Int? = 0
        /// The environment it plays: tokens bound to the other one get `BadDeviceToken`; development answers carry
        /// `apns-unique-id`.
        public var environment = APNsEnvironment.development
        /// Provider-token keys it trusts (key id → public key, team id).
        public var tokenKeys: [ProviderTokenKey] = []
        /// Signs the server certificate and is the only issuer of client certificates it accepts.
        public var certificateAuthority: SimulatorCertificateAuthority
        /// The server certificate; nil issues one from ``certificateAuthority`` for localhost, 127.0.0.1, ::1 and ``host``.
        public var serverCertificate: IssuedCertificate?
        /// MAX_CONCURRENT_STREAMS once a connection is authenticated (token connections get 1 before that).
        public var maxConcurrentStreams = 1000
        /// A stream over that limit: false (as APNs) ends the connection with GOAWAY `REFUSED_STREAM`; true resets that
        /// stream only (RST_STREAM `REFUSED_STREAM`).
        public var resetExcessStreams = false
        /// SETTINGS_INITIAL_WINDOW_SIZE, and the connection window it keeps open (64 KiB, like APNs).
        public var initialWindowSize = 65_535
        /// How many accepted notifications the arrival log keeps (the oldest go first).
        public var logCapacity = 100_000
        /// A file to keep broadcast channels in across restarts, as Apple keeps them (JSON lines, owner-only; its
        /// folder must exist); nil keeps them in memory only, and a restart forgets them.
        public var channelsFile: URL?
        /// Time for JWT age, token-update spacing and log timestamps.
        public var clock: any WallClock = SystemWallClock()
        /// How long stopping waits for connections to finish their streams after GOAWAY before closing them.
        public var shutdownGracePeriod = TimeAmount.seconds(5)

        public init(certificateAuthority: SimulatorCertificateAuthority) {
            self.certificateAuthority = certificateAuthority
        }

        /// A configuration with a fresh in-memory CA: what tests want.
        public init() throws {
            self.certificateAuthority = try SimulatorCertificateAuthority.generate()
        }

        func validate() throws {
            guard (0...65_535).contains(port) else { throw SimulatorError.configuration("port must be 0…65535") }
            if let controlPort, !(0...65_535).contains(controlPort) {
                throw SimulatorError.configuration("control port must be 0…65535")
            }
            for (name, value) in [("legacy gateway", legacyGatewayPort), ("feedback", feedbackPort)] {
                if let value, !(0...65_535).contains(value) { throw SimulatorError.configuration("\(name) port must be 0…65535") }
            }
            guard (1...100_000).contains(maxConcurrentStreams) else {
                throw SimulatorError.configuration("max concurrent streams must be 1…100000")
            }
            guard (65_535...(1 << 30)).contains(initialWindowSize) else {
                throw SimulatorError.configuration("initial window size must be 65535…1073741824 bytes")
            }
            guard logCapacity >= 0 else { throw SimulatorError.configuration("log capacity must be 0 or more") }
        }
    }
}

/// Why a simulator could not start.
public struct SimulatorError: Error, CustomStringConvertible, Sendable {
    public let description: String
    static func configuration(_ message: String) -> SimulatorError { SimulatorError(description: message) }
}
