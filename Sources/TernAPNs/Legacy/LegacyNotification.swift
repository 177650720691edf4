/// The legacy binary gateway's notification formats (port 2195).
public enum LegacyCommand: UInt8, Sendable, CaseIterable {
    /// `0 | u16 tokenLen | token | u16 payloadLen | payload`: no identifier, no error answer.
    case simple = 0
    /// `1 | u32 identifier | u32 expiry | u16 tokenLen | token | u16 payloadLen | payload`.
    case enhanced = 1
    /// `2 | u32 frameLen | items`, each `u8 id | u16 len | data`: token (1), payload (2), identifier (3),
    /// expiration (4), priority (5).
    case frame = 2

    /// The largest payload the format takes.
    public var maximumPayloadSize: Int { self == .frame ? 2048 : 256 }

    /// The format called `name` on the command line: `frame`, `enhanced` or `simple`.
    public init?(name: String) {
        guard let format = Self.allCases.first(where: { "\($0)" == name }) else { return nil }
        self = format
    }
}

import Foundation

/// One notification for the legacy gateway.
public struct LegacyNotification: Hashable, Sendable {
    public var token: [UInt8]
    public var payload: [UInt8]
    /// Echoed in an error response. The simple format has none.
    public var identifier: UInt32
    /// UNIX seconds after which the gateway stops trying; 0: deliver now or never.
    public var expiration: UInt32
    /// 10 (immediately) or 5 (conserving power). Only the frame format carries it.
    public var priority: UInt8

    public init(token: [UInt8], payload: [UInt8], identifier: UInt32 = 0, expiration: UInt32 = 0, priority: UInt8 = 10) {
        self.token = token
        self.payload = payload
        self.identifier = identifier
        self.expiration = expiration
        self.priority = priority
    }

    /// The bytes of this notification in `command`'s format.
    /// - Throws: ``LegacyCodecError`` for an empty or over-long token (1-100 bytes), an empty payload or one over the
    ///   format's limit, or a priority other than 10 or 5.
    public func encoded(as command: LegacyCommand) throws(LegacyCodecError) -> [UInt8] {
        guard (1...DeviceToken.maximumByteCount).contains(token.count) else {
            throw LegacyCodecError("a device token is 1-\(DeviceToken.maximumByteCount) bytes, not \(token.count)")
        }
        guard !payload.isEmpty, payload.count <= command.maximumPayloadSize else {
            throw LegacyCodecError("a \(command) notification's payload is 1-\(command.maximumPayloadSize) bytes, not \(payload.count)")
        }
        guard priority == 10 || priority == 5 else { throw LegacyCodecError("priority is 10 or 5, not \(priority)") }
        var bytes: [UInt8] = [command.rawValue]
        switch command {
        case .simple, .enhanced:
            if command == .enhanced {
                bytes.appendBigEndian(identifier)
                bytes.appendBigEndian(expiration)
            }
            bytes.appendBigEndian(UInt16(token.count))
            bytes += token
            bytes.appendBigEndian(UInt16(payload.count))
            bytes += payload
        case .frame:
            var items: [UInt8] = []
            func item(_ id: UInt8, _ data: [UInt8]) {
                items.append(id)
                items.appendBigEndian(UInt16(data.count))
                items += data
            }
            item(1, token)
            item(2, payload)
            var identifierBytes: [UInt8] = []
            identifierBytes.appendBigEndian(identifier)
            item(3, identifierBytes)
            var expirationBytes: [UInt8] = []
            expirationBytes.appendBigEndian(expiration)
            item(4, expirationBytes)
            item(5, [priority])
            bytes.appendBigEndian(UInt32(items.count))
            bytes += items
        }
        return bytes
    }
}

extension LegacyNotification {
    /// The binary form of an HTTP/2 notification: its token, payload, priority (10 stays 10, anything else is 5)
    /// and expiration. Without an expiration APNs stores a notification for up to 30 days, so that is what the
    /// binary protocol, which needs a time, is given; `.immediately` is 0.
    public init(_ notification: APNsNotification, now: Date = Date()) {
        let expiration: UInt32
        switch notification.metadata.expiration {
        case .none: expiration = UInt32(clamping: Int64(now.timeIntervalSince1970) + 30 * 86_400)
        case .immediately: expiration = 0
        case .at(let date): expiration = UInt32(clamping: APNsExpiration.wholeSeconds(date))
        }
        self.init(
            token: notification.deviceToken.bytes, payload: notification.payload, expiration: expiration,
            priority: notification.metadata.priority == .immediate ? 10 : 5)
    }
}
