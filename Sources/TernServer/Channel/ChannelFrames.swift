import Foundation
import Synchronization
import TernAPNs
import TernStore
import TernWeb

/// Why the server closes a device's connection: the WebSocket close code and the reason it sends (README, "The
/// online channel"). Refused connections never open: their upgrade is answered 400.
enum ChannelCloseCode: Error, Sendable, Equatable {
    /// 4400: a frame the server cannot read (not JSON, an unknown type or field, a bad id); the reason names it.
    case badFrame(String)
    /// 1003: a binary frame; the channel speaks JSON text frames only.
    case binaryFrame
    /// 4409: the device opened a newer connection, which took over.
    case replaced
    /// 1001: the server is stopping; connect again (to this node once it is back, or another).
    case goingAway
    /// 1001: the device did not answer the last ping before the next was due; the server closes without waiting for
    /// the device's close frame.
    case pingTimeout
    /// 1009: a message (its fragments put together) over ``DeviceChannelAPI/maximumInboundFrame``. A single frame
    /// over it is refused by NIO's decoder with the same code.
    case tooLarge
    /// 4401: the device's secret was replaced, or the device deleted: a connection opened with the old secret does not
    /// outlive it. Connect again with the current secret (or register again).
    case credentialsChanged

    var code: UInt16 {
        switch self {
        case .badFrame: 4400
        case .binaryFrame: 1003
        case .replaced: 4409
        case .goingAway, .pingTimeout: 1001
        case .tooLarge: 1009
        case .credentialsChanged: 4401
        }
    }

    /// At most 123 bytes, as a close frame's reason must be.
    var reason: String {
        let text =
            switch self {
            case .badFrame(let problem): "bad frame: \(problem)"
            case .binaryFrame: "binary frames are not accepted: send JSON text frames"
            case .replaced: "replaced by a newer connection of this device"
            case .goingAway: "the server is stopping; connect again"
            case .pingTimeout: "Ping timeout"
            case .tooLarge: "a message is at most \(DeviceChannelAPI.maximumInboundFrame / 1024) KiB"
            case .credentialsChanged: "the device's secret was replaced or the device deleted; connect again with its current secret"
            }
        var bytes = Array(text.utf8)
        guard bytes.count > 123 else { return text }
        bytes = Array(bytes.prefix(120))
        // Cut on a character boundary.
        while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self) + "…"
    }
}

/// The frames of the online channel.
enum ChannelFrame {
    /// Device → server.
    struct Inbound: Decodable {
        var type: String
        var ids: [String]?
    }

    /// Most ids one ack may carry.
    static let maximumAckIDs = 1000

    /// The frame for `message`: `{"type": "message", "id", "sequence", "pushId", "notification"?, "data"?,
    /// "createdAt"}` in that order (the README's), with the stored JSON objects put in as they were kept (the
    /// dispatcher wrote them, so they are JSON). Built as text: a push to 10,000 online devices writes 10,000, and the
    /// id and sequence first let a client pick them out without parsing the rest.
    static func encode(_ message: DeviceMessage) -> String {
        var frame = #"{"type":"message","id":"# + quoted(message.id) + #","sequence":"# + String(message.sequence)
        frame += #","pushId":"# + quoted(message.pushID)
        if let notification = message.notification { frame += #","notification":"# + notification }
        if let data = message.data { frame += #","data":"# + data }
        frame += #","createdAt":"# + quoted(timestamp(message.createdAt)) + "}"
        return frame
    }

    /// A JSON string literal for `text`.
    static func quoted(_ text: String) -> String { JSONValue.quoted(text) }

    /// The API's timestamp (ISO 8601 with milliseconds, UTC), remembered for the last date: a push's messages share one.
    private static func timestamp(_ date: Date) -> String {
        if let text = lastTimestamp.withLock({ $0.date == date ? $0.text : nil }) { return text }
        let text = InternetDate.format(date)
        lastTimestamp.withLock { $0 = (date, text) }
        return text
    }

    private static let lastTimestamp = Mutex<(date: Date, text: String)>((.distantPast, ""))

    /// What the device sent. - Throws: ``ChannelCloseCode/badFrame(_:)`` naming the problem.
    static func decodeAck(_ text: String) throws(ChannelCloseCode) -> [String] {
        if let ids = plainAck(text) {
            if let problem = ackIDsProblem(ids) { throw .badFrame("ids: " + problem) }
            return ids.map { $0.lowercased() }
        }
        let frame: Inbound
        do {
            frame = try StrictJSONDecoder().decode(Inbound.self, from: Array(text.utf8))
        } catch {
            throw .badFrame(JSONAPIError(decoding: error).message)
        }
        guard frame.type == "ack" else { throw .badFrame("type must be \"ack\", not \"\(frame.type.prefix(32))\"") }
        let ids = frame.ids ?? []
        if let problem = ackIDsProblem(ids) { throw .badFrame("ids: " + problem) }
        return ids.map { $0.lowercased() }
    }

    /// The ids of an ack in its plain form — `{"type": "ack", "ids": ["…", …]}`, keys in either order, any JSON
    /// whitespace, ids without escapes — read without the general decoder (a connection reads one per message); nil
    /// for anything else, which the strict decoder then reads (and refuses, if it must, naming the problem). It only
    /// accepts what the strict decoder would accept with the same meaning.
    static func plainAck(_ text: String) -> [String]? {
        var scanner = PlainScanner(bytes: Array(text.utf8))
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        var type: Bool = false
        var ids: [String]?
        for index in 0..<2 {
            if index == 1, !scanner.take(UInt8(ascii: ",")) { return nil }
            guard let key = scanner.plainString(), scanner.take(UInt8(ascii: ":")) else { return nil }
            switch key {
            case "type" where !type:
                guard scanner.plainString() == "ack" else { return nil }
                type = true
            case "ids" where ids == nil:
                guard scanner.take(UInt8(ascii: "[")) else { return nil }
                var list: [String] = []
                if !scanner.take(UInt8(ascii: "]")) {
                    repeat {
                        guard let id = scanner.plainString() else { return nil }
                        list.append(id)
                    } while scanner.take(UInt8(ascii: ","))
                    guard scanner.take(UInt8(ascii: "]")) else { return nil }
                }
                ids = list
            default:
                return nil
            }
        }
        guard scanner.take(UInt8(ascii: "}")), scanner.atEnd, type else { return nil }
        return ids
    }

    /// What is wrong with acknowledged ids, if anything: 1-1,000 message ids are the rule of an ack frame and of
    /// `POST …/acks`, which name the field each in their own way.
    static func ackIDsProblem(_ ids: [String]) -> String? {
        guard !ids.isEmpty else { return "one or more message ids are required" }
        guard ids.count <= maximumAckIDs else { return "at most \(maximumAckIDs) in one ack" }
        // (Foundation's UUID(uuidString:) goes through sscanf: a visible cost at one ack per message.)
        if let bad = ids.first(where: { UUID(apnsText: $0) == nil }) { return "'\(bad.prefix(40))' is not a message id" }
        return nil
    }
}

/// Reads the plain JSON of ``ChannelFrame/plainAck(_:)``: punctuation and strings without escapes, skipping JSON's
/// whitespace.
private struct PlainScanner {
    let bytes: [UInt8]
    var position = 0

    var atEnd: Bool {
        mutating get {
            skipSpace()
            return position == bytes.count
        }
    }

    mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    /// Takes `byte` (after whitespace) if it is next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// A string of printable ASCII without escapes; nil (and the frame goes to the strict decoder) otherwise.
    mutating func plainString() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return String(decoding: bytes[start..<(position - 1)], as: UTF8.self)
            }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
            position += 1
        }
        return nil
    }
}
