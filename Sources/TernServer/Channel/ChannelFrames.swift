import Foundation
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

    var code: UInt16 {
        switch self {
        case .badFrame: 4400
        case .binaryFrame: 1003
        case .replaced: 4409
        case .goingAway: 1001
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
    /// Server → device: one message, in the device's order.
    struct Message: Encodable {
        var type = "message"
        var id: String
        var sequence: Int64
        var pushId: String
        var notification: JSONValue?
        var data: JSONValue?
        var createdAt: Date
    }

    /// Device → server.
    struct Inbound: Decodable {
        var type: String
        var ids: [String]?
    }

    /// Most ids one ack may carry.
    static let maximumAckIDs = 1000

    /// The frame for `message` (its stored JSON objects put back as they were).
    static func encode(_ message: DeviceMessage) throws -> String {
        let frame = Message(
            id: message.id, sequence: message.sequence, pushId: message.pushID,
            notification: try message.notification.map { try JSONValue(parsing: Data($0.utf8)) },
            data: try message.data.map { try JSONValue(parsing: Data($0.utf8)) }, createdAt: message.createdAt)
        return String(decoding: try APIJSON.encoder.encode(frame), as: UTF8.self)
    }

    /// What the device sent. - Throws: ``ChannelCloseCode/badFrame(_:)`` naming the problem.
    static func decodeAck(_ text: String) throws(ChannelCloseCode) -> [String] {
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

    /// What is wrong with acknowledged ids, if anything: 1-1,000 message ids are the rule of an ack frame and of
    /// `POST …/acks`, which name the field each in their own way.
    static func ackIDsProblem(_ ids: [String]) -> String? {
        guard !ids.isEmpty else { return "one or more message ids are required" }
        guard ids.count <= maximumAckIDs else { return "at most \(maximumAckIDs) in one ack" }
        if let bad = ids.first(where: { UUID(uuidString: $0) == nil }) { return "'\(bad.prefix(40))' is not a message id" }
        return nil
    }
}
