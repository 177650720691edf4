import Foundation

/// A message for this device, as the app's message stream (``Tern/messages``) hands it over: a transparent data
/// message or a notification, whichever way it came. Each id is handed over once.
public struct TernMessage: Sendable, Equatable, Identifiable {
    public enum Source: Sendable, Equatable {
        /// Over the online channel (the app was in the foreground, or woke up to fetch).
        case channel
        /// Through APNs (an `auto` push that fell back), handed to TernKit by the app delegate.
        case apns
    }

    /// The device message id: a frame's `id`, a notification's `tern.id`.
    public var id: String
    /// Its place in the device's order (nil if the notification did not say).
    public var sequence: Int64?
    /// The push it came from (also the inbox message id when the push went to the inbox).
    public var pushID: String?
    /// What it shows, if it is a notification; nil for a transparent message.
    public var notification: TernNotification?
    /// The push's custom data.
    public var data: TernJSON?
    /// When the server kept it (nil for one that came through APNs).
    public var createdAt: Date?
    public var source: Source

    public init(
        id: String, sequence: Int64?, pushID: String?, notification: TernNotification?, data: TernJSON?, createdAt: Date?, source: Source
    ) {
        self.id = id
        self.sequence = sequence
        self.pushID = pushID
        self.notification = notification
        self.data = data
        self.createdAt = createdAt
        self.source = source
    }
}

/// The online channel's frames (README, "The online channel"): the server sends `message` frames, the device
/// answers `ack` frames.
enum ChannelFrame {
    /// Most ids one ack may carry.
    static let maximumAckIDs = 1000

    private struct Inbound: Decodable {
        var type: String
        var id: String?
        var sequence: Int64?
        var pushId: String?
        var notification: TernNotification?
        var data: TernJSON?
        var createdAt: Date?
    }

    /// What a text frame from the server is.
    enum Received: Equatable {
        case message(TernMessage)
        /// A frame of a type this version does not know: skipped, so a newer server can add some.
        case other(type: String)
    }

    /// - Throws: ``TernError/Kind/badAnswer`` naming what is wrong with the frame.
    static func decode(_ text: String) throws(TernError) -> Received {
        let frame: Inbound
        do {
            frame = try JSONDecoder.tern.decode(Inbound.self, from: Data(text.utf8))
        } catch {
            throw TernError(.badAnswer, "a channel frame cannot be read: \(TernClient.describe(error))")
        }
        guard frame.type == "message" else { return .other(type: String(frame.type.prefix(40))) }
        guard let id = frame.id, UUID(uuidString: id) != nil else {
            throw TernError(.badAnswer, "a message frame has no message id ('id')")
        }
        guard let sequence = frame.sequence else { throw TernError(.badAnswer, "message frame \(id) has no 'sequence'") }
        return .message(
            TernMessage(
                id: id.lowercased(), sequence: sequence, pushID: frame.pushId?.lowercased(), notification: frame.notification, data: frame.data,
                createdAt: frame.createdAt, source: .channel))
    }

    /// `{"type": "ack", "ids": [...]}`, one frame per 1,000 ids.
    static func acks(_ ids: [String]) -> [String] {
        stride(from: 0, to: ids.count, by: maximumAckIDs).map { start in
            let slice = ids[start..<min(start + maximumAckIDs, ids.count)]
            return #"{"type":"ack","ids":["# + slice.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
        }
    }
}
