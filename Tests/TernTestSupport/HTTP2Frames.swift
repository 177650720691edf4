import NIOCore

/// HTTP/2 frames as plain values, for tests that play the other end of a framing state machine.
public struct RawFrame: Equatable, Sendable, CustomStringConvertible {
    public var type: UInt8
    public var flags: UInt8
    public var streamID: UInt32
    public var payload: [UInt8]

    public init(type: UInt8, flags: UInt8, streamID: UInt32, payload: [UInt8]) {
        self.type = type
        self.flags = flags
        self.streamID = streamID
        self.payload = payload
    }

    public var description: String { "frame(type \(type), flags \(flags), stream \(streamID), \(payload.count) bytes)" }

    /// The frame's bytes: 9-byte header, then the payload.
    public static func bytes(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(payload.count >> 16 & 0xff), UInt8(payload.count >> 8 & 0xff), UInt8(payload.count & 0xff), type, flags]
        bytes += [UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)]
        return bytes + payload
    }

    /// A SETTINGS frame's bytes.
    public static func settings(_ values: [(UInt16, UInt32)] = [], ack: Bool = false) -> [UInt8] {
        var payload: [UInt8] = []
        for (identifier, value) in values {
            payload += [UInt8(identifier >> 8), UInt8(identifier & 0xff)]
            payload += [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
        }
        return bytes(0x4, flags: ack ? 0x1 : 0, payload)
    }

    /// The whole frames in `buffer` (a trailing partial frame is left out).
    public static func parse(_ buffer: ByteBuffer) -> [RawFrame] {
        var buffer = buffer
        var frames: [RawFrame] = []
        while buffer.readableBytes >= 9 {
            let lengthBytes = buffer.getBytes(at: buffer.readerIndex, length: 3)!
            let length = Int(lengthBytes[0]) << 16 | Int(lengthBytes[1]) << 8 | Int(lengthBytes[2])
            guard buffer.readableBytes >= 9 + length else { break }
            buffer.moveReaderIndex(forwardBy: 3)
            let type = buffer.readInteger(as: UInt8.self)!
            let flags = buffer.readInteger(as: UInt8.self)!
            let stream = buffer.readInteger(as: UInt32.self)! & 0x7fff_ffff
            frames.append(RawFrame(type: type, flags: flags, streamID: stream, payload: buffer.readBytes(length: length)!))
        }
        return frames
    }
}
