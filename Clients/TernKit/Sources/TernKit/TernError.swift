import Foundation

/// What went wrong talking to Tern, typed so the app can decide, and worded so a log line says what was wrong. It
/// never carries a secret: not the app key, the device secret nor an alias token (nor the headers that hold them).
public struct TernError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of failure; an open set (more may come), so compare with the `static let`s.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        public let description: String

        private init(_ name: String) {
            description = name
        }

        /// The server answered with an error (4xx or 5xx); ``TernError/status``, ``TernError/serverError`` and
        /// ``TernError/field`` say which.
        public static let refused = Kind("refused")
        /// The server answered something TernKit cannot read (not JSON, a field missing or of the wrong type).
        public static let badAnswer = Kind("badAnswer")
        /// No answer: no network, the server is down, or the request timed out.
        public static let unreachable = Kind("unreachable")
        /// The call needs a registered device: call `register(deviceToken:)` first.
        public static let notRegistered = Kind("notRegistered")
        /// The device's identity cannot be read or written where it is kept (the keychain).
        public static let identity = Kind("identity")
        /// The alias token the backend gave is not a JWT whose `sub` names the user.
        public static let aliasToken = Kind("aliasToken")
        /// A value the app passed that the server would refuse (e.g. a device token that is not hex).
        public static let invalidArgument = Kind("invalidArgument")
    }

    public var kind: Kind
    /// What went wrong, for a log line.
    public var message: String
    /// The HTTP status, for ``Kind/refused`` and ``Kind/badAnswer``.
    public var status: Int?
    /// The server's `error` (`forbidden`, `badRequest`, …), for ``Kind/refused``.
    public var serverError: String?
    /// The request field the server named (`aliasToken`, `X-Tern-Device-Secret`, …), if it named one.
    public var field: String?
    /// How long the server asked to wait (`Retry-After`), if it did.
    public var retryAfter: TimeInterval?

    public init(
        _ kind: Kind, _ message: String, status: Int? = nil, serverError: String? = nil, field: String? = nil, retryAfter: TimeInterval? = nil
    ) {
        self.kind = kind
        self.message = message
        self.status = status
        self.serverError = serverError
        self.field = field
        self.retryAfter = retryAfter
    }

    /// Whether trying the same call again later may succeed: no answer, a server error, too many requests.
    public var isTemporary: Bool {
        if kind == .unreachable { return true }
        guard kind == .refused || kind == .badAnswer, let status else { return false }
        return status == 408 || status == 429 || status >= 500
    }

    /// 403 naming `X-Tern-Device-Secret`: the server knows this device id under a secret this installation does not
    /// have (the keychain lost it, or the first answer never got stored).
    var isWrongDeviceSecret: Bool {
        kind == .refused && status == 403 && field == "X-Tern-Device-Secret"
    }

    public var description: String {
        var text = "\(kind): \(message)"
        if let status { text += " (HTTP \(status)" + (field.map { ", field \($0)" } ?? "") + ")" }
        return text
    }
}
