import NIOCore

/// The parts of HTTP/2 (RFC 9113) framing that both ends of an APNs connection need, for the simulator's server
/// framing and the client's: frame types, flags, error codes, and reading and writing frames on a `ByteBuffer`.
/// HPACK stays with NIOHPACK; the state machines live with their users.
public enum HTTP2Wire {
    public static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// SETTINGS_MAX_FRAME_SIZE's initial value, which neither end of an APNs connection raises.
    public static let defaultMaxFrameSize = 16_384
    /// The initial window of every stream and of the connection until SETTINGS or WINDOW_UPDATE change it.
    public static let defaultWindow = 65_535
    /// The largest window RFC 9113 allows (2^31-1).
    public static let maxWindow = Int(Int32.max)

    public enum FrameType {
        public static let data: UInt8 = 0x0
        public static let headers: UInt8 = 0x1
        public static let priority: UInt8 = 0x2
        public static let rstStream: UInt8 = 0x3
        public static let settings: UInt8 = 0x4
        public static let pushPromise: UInt8 = 0x5
        public static let ping: UInt8 = 0x6
        public static let goAway: UInt8 = 0x7
        public static let windowUpdate: UInt8 = 0x8
        public static let continuation: UInt8 = 0x9
    }

    public enum Flag {
        public static let endStream: UInt8 = 0x1
        public static let ack: UInt8 = 0x1
        public static let endHeaders: UInt8 = 0x4
        public static let padded: UInt8 = 0x8
        public static let priority: UInt8 = 0x20
    }

    public enum Setting {
        public static let headerTableSize: UInt16 = 0x1
        public static let enablePush: UInt16 = 0x2
        public static let maxConcurrentStreams: UInt16 = 0x3
        public static let initialWindowSize: UInt16 = 0x4
        public static let maxFrameSize: UInt16 = 0x5
        public static let maxHeaderListSize: UInt16 = 0x6
    }

    public enum ErrorCode {
        public static let noError: UInt32 = 0x0
        public static let protocolError: UInt32 = 0x1
        public static let flowControlError: UInt32 = 0x3
        public static let streamClosed: UInt32 = 0x5
        public static let frameSizeError: UInt32 = 0x6
        public static let refusedStream: UInt32 = 0x7
        public static let cancel: UInt32 = 0x8
        public static let compressionError: UInt32 = 0x9
        /// The peer behaves in a way that might be generating excessive load (RFC 9113 §7): floods of PINGs or
        /// CONTINUATIONs.
        public static let enhanceYourCalm: UInt32 = 0xb
    }
}

/// A connection error (RFC 9113 §5.4.1): the side that finds it sends GOAWAY with `code` and closes.
public struct HTTP2ConnectionError: Error, Sendable {
    public var code: UInt32
    public var message: String

    public init(code: UInt32, message: String) {
        self.code = code
        self.message = message
    }
}

/// A frame's 9-byte header.
public struct HTTP2FrameHead: Sendable {
    public var type: UInt8
    public var flags: UInt8
    public var streamID: UInt32

    public init(type: UInt8, flags: UInt8, streamID: UInt32) {
        self.type = type
        self.flags = flags
        self.streamID = streamID
    }

    public func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
}

extension ByteBuffer {
    /// Reads the next whole frame, or returns nil (reading nothing) when its bytes have not all arrived.
    /// - Throws: `FRAME_SIZE_ERROR` for a frame longer than `maxFrameSize`.
    public mutating func readHTTP2Frame(maxFrameSize: Int) throws(HTTP2ConnectionError) -> (HTTP2FrameHead, ByteBuffer)? {
        guard readableBytes >= 9 else { return nil }
        let start = readerIndex
        let length = Int(getInteger(at: start, as: UInt32.self)! >> 8)
        guard length <= maxFrameSize else {
            throw HTTP2ConnectionError(
                code: HTTP2Wire.ErrorCode.frameSizeError, message: "frame of \(length) bytes exceeds MAX_FRAME_SIZE")
        }
        guard readableBytes >= 9 + length else { return nil }
        let head = HTTP2FrameHead(
            type: getInteger(at: start + 3, as: UInt8.self)!,
            flags: getInteger(at: start + 4, as: UInt8.self)!,
            streamID: getInteger(at: start + 5, as: UInt32.self)! & 0x7fff_ffff)
        moveReaderIndex(forwardBy: 9)
        return (head, readSlice(length: length)!)
    }

    public mutating func writeHTTP2FrameHeader(length: Int, type: UInt8, flags: UInt8, streamID: UInt32) {
        writeInteger(UInt32(length) << 8 | UInt32(type))
        writeInteger(flags)
        writeInteger(streamID)
    }

    /// One identifier/value pair of a SETTINGS frame's payload.
    public mutating func writeHTTP2Setting(_ identifier: UInt16, _ value: UInt32) {
        writeInteger(identifier)
        writeInteger(value)
    }

    public mutating func writeHTTP2WindowUpdate(streamID: UInt32, increment: Int) {
        writeHTTP2FrameHeader(length: 4, type: HTTP2Wire.FrameType.windowUpdate, flags: 0, streamID: streamID)
        writeInteger(UInt32(increment))
    }

    public mutating func writeHTTP2RstStream(streamID: UInt32, code: UInt32) {
        writeHTTP2FrameHeader(length: 4, type: HTTP2Wire.FrameType.rstStream, flags: 0, streamID: streamID)
        writeInteger(code)
    }

    public mutating func writeHTTP2GoAway(lastStreamID: UInt32, code: UInt32, debugData: [UInt8]) {
        writeHTTP2FrameHeader(length: 8 + debugData.count, type: HTTP2Wire.FrameType.goAway, flags: 0, streamID: 0)
        writeInteger(lastStreamID)
        writeInteger(code)
        writeBytes(debugData)
    }

    /// An HPACK string literal, plain (no Huffman coding): length with a 7-bit prefix, then the bytes.
    public mutating func writeHPACKStringLiteral(_ string: String) {
        let length = string.utf8.count
        if length < 127 {
            writeInteger(UInt8(length))
        } else {
            writeInteger(UInt8(0x7f))
            var rest = length - 127
            while rest >= 128 {
                writeInteger(UInt8(rest & 0x7f | 0x80))
                rest >>= 7
            }
            writeInteger(UInt8(rest))
        }
        writeString(string)
    }
}

extension HTTP2FrameHead {
    /// A HEADERS payload's header block fragment, without its padding and priority fields.
    public func headerBlockFragment(of payload: inout ByteBuffer) throws(HTTP2ConnectionError) -> ByteBuffer {
        var padding = 0
        if has(HTTP2Wire.Flag.padded) {
            guard let length = payload.readInteger(as: UInt8.self) else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.frameSizeError, message: "HEADERS too short for its padding")
            }
            padding = Int(length)
        }
        if has(HTTP2Wire.Flag.priority) {
            guard payload.readableBytes >= 5 else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.frameSizeError, message: "HEADERS too short for its priority")
            }
            payload.moveReaderIndex(forwardBy: 5)
        }
        guard payload.readableBytes >= padding else {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, message: "HEADERS padding longer than the frame")
        }
        return payload.readSlice(length: payload.readableBytes - padding)!
    }

    /// A DATA payload without its padding.
    public func dataWithoutPadding(_ payload: ByteBuffer) throws(HTTP2ConnectionError) -> ByteBuffer {
        guard has(HTTP2Wire.Flag.padded) else { return payload }
        var payload = payload
        guard let length = payload.readInteger(as: UInt8.self), payload.readableBytes >= Int(length) else {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, message: "DATA padding longer than the frame")
        }
        return payload.readSlice(length: payload.readableBytes - Int(length))!
    }
}
