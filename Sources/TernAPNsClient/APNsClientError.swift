/// Why a send ended without an answer from APNs. APNs' own rejections are not errors: they come back as an
/// ``APNsDelivery`` whose response says why (and how to act: `response.outcomeClass`).
public struct APNsClientError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No answer within the send's time limit.
        public static let timedOut = Code("timedOut")
        /// Every attempt failed on the connection (closed, reset), or no connection could be made.
        public static let connectionFailed = Code("connectionFailed")
        /// The client is shutting down or shut down.
        public static let shutDown = Code("shutDown")
        /// The task that sent it was cancelled (in a batch; a single `send` throws `CancellationError`).
        public static let cancelled = Code("cancelled")
        /// The credentials cannot be used (unreadable key or certificate).
        public static let invalidCredentials = Code("invalidCredentials")
        /// A configuration value is out of range.
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// A request APNs could not take as given (a bundle id or channel id out of form, a payload too large): not sent.
        public static let invalidRequest = Code("invalidRequest")
    }

    public let code: Code
    /// What happened, for an operator. Never contains key material or a provider token.
    public let message: String

    public var description: String { "\(code): \(message)" }

    static func timedOut(waitingForConnection lastConnectError: String?) -> APNsClientError {
        APNsClientError(
            code: .timedOut,
            message: lastConnectError.map { "no connection to APNs in time; last connect error: \($0)" }
                ?? "no free stream to APNs in time")
    }

    static func timedOut(attempts: Int, lastProblem: String?) -> APNsClientError {
        APNsClientError(
            code: .timedOut,
            message: "no answer from APNs in time after \(attempts) attempt(s)" + (lastProblem.map { "; last problem: \($0)" } ?? ""))
    }

    static func unreachable(lastConnectError: String?) -> APNsClientError {
        APNsClientError(
            code: .connectionFailed,
            message: "no connection to APNs has worked for longer than a send may wait"
                + (lastConnectError.map { "; last connect error: \($0)" } ?? ""))
    }

    static func connectionFailed(_ message: String) -> APNsClientError {
        APNsClientError(code: .connectionFailed, message: message)
    }

    static let shutDown = APNsClientError(code: .shutDown, message: "the client is shut down")

    static func invalidCredentials(_ message: String) -> APNsClientError {
        APNsClientError(code: .invalidCredentials, message: message)
    }

    static func invalidRequest(_ message: String) -> APNsClientError {
        APNsClientError(code: .invalidRequest, message: message)
    }

    static func invalidConfiguration(_ message: String) -> APNsClientError {
        APNsClientError(code: .invalidConfiguration, message: message)
    }
}
