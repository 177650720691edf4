/// A status in the legacy gateway's error response (command 8). Values the protocol does not list are kept as they
/// are (``name`` says `unknown`).
public struct LegacyStatus: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let noErrors = LegacyStatus(rawValue: 0)
    public static let processingError = LegacyStatus(rawValue: 1)
    public static let missingDeviceToken = LegacyStatus(rawValue: 2)
    public static let missingTopic = LegacyStatus(rawValue: 3)
    public static let missingPayload = LegacyStatus(rawValue: 4)
    public static let invalidTokenSize = LegacyStatus(rawValue: 5)
    public static let invalidTopicSize = LegacyStatus(rawValue: 6)
    public static let invalidPayloadSize = LegacyStatus(rawValue: 7)
    public static let invalidToken = LegacyStatus(rawValue: 8)
    /// The gateway is going down; the identifier is the last notification it took: send everything after it again.
    public static let shutdown = LegacyStatus(rawValue: 10)
    public static let protocolError = LegacyStatus(rawValue: 128)
    public static let none = LegacyStatus(rawValue: 255)

    /// Every status the protocol lists.
    public static let all: [LegacyStatus] = [
        .noErrors, .processingError, .missingDeviceToken, .missingTopic, .missingPayload, .invalidTokenSize, .invalidTopicSize,
        .invalidPayloadSize, .invalidToken, .shutdown, .protocolError, .none,
    ]

    public var name: String {
        switch rawValue {
        case 0: "noErrors"
        case 1: "processingError"
        case 2: "missingDeviceToken"
        case 3: "missingTopic"
        case 4: "missingPayload"
        case 5: "invalidTokenSize"
        case 6: "invalidTopicSize"
        case 7: "invalidPayloadSize"
        case 8: "invalidToken"
        case 10: "shutdown"
        case 128: "protocolError"
        case 255: "none"
        default: "unknown"
        }
    }

    public var description: String { "\(rawValue) (\(name))" }
}

/// The 6 bytes the legacy gateway sends before it closes the connection: `8 | status | identifier`.
public struct LegacyErrorResponse: Hashable, Sendable {
    public static let command: UInt8 = 8
    public static let byteCount = 6

    public var status: LegacyStatus
    /// The identifier of the notification at fault (for ``LegacyStatus/shutdown``: the last one taken).
    public var identifier: UInt32

    public init(status: LegacyStatus, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    public var encoded: [UInt8] {
        var bytes = [Self.command, status.rawValue]
        bytes.appendBigEndian(identifier)
        return bytes
    }

    /// - Throws: ``LegacyCodecError`` unless `bytes` is exactly one error response.
    public init(decoding bytes: some Collection<UInt8>) throws(LegacyCodecError) {
        let bytes = Array(bytes)
        guard bytes.count == Self.byteCount else {
            throw LegacyCodecError("an error response is 6 bytes, got \(bytes.count)")
        }
        guard bytes[0] == Self.command else {
            throw LegacyCodecError("an error response starts with command 8, got \(bytes[0])")
        }
        self.init(status: LegacyStatus(rawValue: bytes[1]), identifier: bytes.bigEndianUInt32(at: 2))
    }
}

/// Why legacy bytes could not be encoded or decoded.
public struct LegacyCodecError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian(_ value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xFF))
    }

    mutating func appendBigEndian(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { append(UInt8((value >> UInt32(shift)) & 0xFF)) }
    }

    func bigEndianUInt32(at index: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 << 8 | UInt32(self[index + $1]) }
    }
}
