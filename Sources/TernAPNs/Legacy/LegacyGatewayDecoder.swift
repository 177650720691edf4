/// Reads notifications from a legacy gateway connection's byte stream, in any chunking: what a gateway (the
/// simulator) does with what a provider writes.
///
/// Framing it cannot follow (an unknown command, a frame longer than any notification) is an error: the gateway
/// closes without a packet. A notification it can frame but not take (sizes, missing items) is an event with the
/// status to answer; the gateway then closes, so the decoder stops there.
public struct LegacyGatewayDecoder: Sendable {
    public enum Event: Hashable, Sendable {
        case notification(LegacyNotification, LegacyCommand)
        /// Answer with this status for this identifier (0 for the simple format, which has none), then close.
        case rejected(LegacyStatus, identifier: UInt32, command: LegacyCommand)
    }

    /// The longest frame the decoder reads: every item at its largest, with room to spare.
    public static let maximumFrameLength = 4096

    private var queue = ByteQueue()
    private var stopped = false

    public init() {}

    /// Bytes waiting for the rest of their notification.
    public var buffered: Int { queue.count }

    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        guard !stopped else { return }
        queue.append(contentsOf: bytes)
    }

    /// The next notification or rejection, or nil until more bytes arrive (and after a rejection).
    /// - Throws: ``LegacyCodecError`` for bytes that cannot be framed.
    public mutating func next() throws(LegacyCodecError) -> Event? {
        guard !stopped, queue.count >= 1 else { return nil }
        guard let command = LegacyCommand(rawValue: queue[0]) else {
            stopped = true
            throw LegacyCodecError("unknown command \(queue[0])")
        }
        let event: Event?
        switch command {
        case .simple, .enhanced: event = nextSimpleOrEnhanced(command)
        case .frame: event = try nextFrame()
        }
        if case .rejected? = event { stopped = true }
        return event
    }

    private mutating func nextSimpleOrEnhanced(_ command: LegacyCommand) -> Event? {
        let header = command == .enhanced ? 9 : 1
        guard queue.count >= header + 2 else { return nil }
        let identifier = command == .enhanced ? queue.uint32(at: 1) : 0
        let expiration = command == .enhanced ? queue.uint32(at: 5) : 0
        let tokenLength = Int(queue.uint16(at: header))
        guard tokenLength > 0 else { return .rejected(.missingDeviceToken, identifier: identifier, command: command) }
        guard tokenLength <= DeviceToken.maximumByteCount else {
            return .rejected(.invalidTokenSize, identifier: identifier, command: command)
        }
        guard queue.count >= header + 2 + tokenLength + 2 else { return nil }
        let payloadLength = Int(queue.uint16(at: header + 2 + tokenLength))
        guard payloadLength > 0 else { return .rejected(.missingPayload, identifier: identifier, command: command) }
        guard payloadLength <= command.maximumPayloadSize else {
            return .rejected(.invalidPayloadSize, identifier: identifier, command: command)
        }
        let total = header + 2 + tokenLength + 2 + payloadLength
        guard queue.count >= total else { return nil }
        let notification = LegacyNotification(
            token: queue.slice(header + 2, tokenLength), payload: queue.slice(header + 4 + tokenLength, payloadLength),
            identifier: identifier, expiration: expiration)
        queue.consume(total)
        return .notification(notification, command)
    }

    private mutating func nextFrame() throws(LegacyCodecError) -> Event? {
        guard queue.count >= 5 else { return nil }
        let length = Int(queue.uint32(at: 1))
        guard length <= Self.maximumFrameLength else {
            stopped = true
            throw LegacyCodecError("a frame of \(length) bytes is longer than any notification")
        }
        guard queue.count >= 5 + length else { return nil }
        var token: [UInt8]?
        var payload: [UInt8]?
        var identifier: UInt32 = 0
        var expiration: UInt32 = 0
        var priority: UInt8 = 10
        var problem: LegacyStatus?
        var offset = 5
        while offset < 5 + length {
            guard offset + 3 <= 5 + length else {
                stopped = true
                throw LegacyCodecError("an item header runs past the end of its frame")
            }
            let id = queue[offset]
            let itemLength = Int(queue.uint16(at: offset + 1))
            let data = offset + 3
            guard data + itemLength <= 5 + length else {
                stopped = true
                throw LegacyCodecError("item \(id) runs past the end of its frame")
            }
            switch (id, itemLength) {
            case (1, 0): problem = problem ?? .missingDeviceToken
            case (1, ...DeviceToken.maximumByteCount): token = queue.slice(data, itemLength)
            case (1, _): problem = problem ?? .invalidTokenSize
            case (2, 0): problem = problem ?? .missingPayload
            case (2, ...LegacyCommand.frame.maximumPayloadSize): payload = queue.slice(data, itemLength)
            case (2, _): problem = problem ?? .invalidPayloadSize
            case (3, 4): identifier = queue.uint32(at: data)
            case (4, 4): expiration = queue.uint32(at: data)
            case (5, 1) where queue[data] == 10 || queue[data] == 5: priority = queue[data]
            default: problem = problem ?? .processingError
            }
            offset = data + itemLength
        }
        queue.consume(5 + length)
        if token == nil { problem = problem ?? .missingDeviceToken }
        if payload == nil { problem = problem ?? .missingPayload }
        if let problem { return .rejected(problem, identifier: identifier, command: .frame) }
        guard let token, let payload else { return .rejected(.processingError, identifier: identifier, command: .frame) }
        return .notification(
            LegacyNotification(token: token, payload: payload, identifier: identifier, expiration: expiration, priority: priority), .frame)
    }
}
