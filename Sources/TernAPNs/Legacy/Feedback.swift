/// One entry of the legacy feedback service (port 2196): a token the app is gone from, and since when.
public struct FeedbackTuple: Hashable, Sendable {
    /// Seconds since 1970 UTC.
    public var timestamp: UInt32
    public var token: [UInt8]

    public init(timestamp: UInt32, token: [UInt8]) {
        self.timestamp = timestamp
        self.token = token
    }

    /// `u32 timestamp | u16 tokenLen | token`.
    public func encoded() throws(LegacyCodecError) -> [UInt8] {
        guard (1...DeviceToken.maximumByteCount).contains(token.count) else {
            throw LegacyCodecError("a device token is 1-\(DeviceToken.maximumByteCount) bytes, not \(token.count)")
        }
        var bytes: [UInt8] = []
        bytes.appendBigEndian(timestamp)
        bytes.appendBigEndian(UInt16(token.count))
        return bytes + token
    }
}

/// Reads feedback tuples from the service's byte stream however it is chunked: a read may end in the middle of a
/// tuple, or hold several. Call ``finish()`` at end of stream: bytes left over are a truncated tuple.
public struct FeedbackDecoder: Sendable {
    private var queue = ByteQueue()

    public init() {}

    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        queue.append(contentsOf: bytes)
    }

    /// The next complete tuple, or nil until more bytes arrive.
    /// - Throws: ``LegacyCodecError`` for a token length of 0 or over 100 (the stream is not feedback).
    public mutating func next() throws(LegacyCodecError) -> FeedbackTuple? {
        guard queue.count >= 6 else { return nil }
        let length = Int(queue.uint16(at: 4))
        guard (1...DeviceToken.maximumByteCount).contains(length) else {
            throw LegacyCodecError("a feedback tuple's token is 1-\(DeviceToken.maximumByteCount) bytes, not \(length)")
        }
        guard queue.count >= 6 + length else { return nil }
        let tuple = FeedbackTuple(timestamp: queue.uint32(at: 0), token: queue.slice(6, length))
        queue.consume(6 + length)
        return tuple
    }

    /// Every complete tuple fed so far.
    public mutating func tuples() throws(LegacyCodecError) -> [FeedbackTuple] {
        var tuples: [FeedbackTuple] = []
        while let tuple = try next() { tuples.append(tuple) }
        return tuples
    }

    /// At end of stream. - Throws: ``LegacyCodecError`` if a tuple was cut short.
    public func finish() throws(LegacyCodecError) {
        guard queue.count == 0 else { throw LegacyCodecError("the stream ended inside a tuple (\(queue.count) bytes left)") }
    }
}
