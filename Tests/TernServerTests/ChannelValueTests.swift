import Foundation
import TernStore
import TernWeb
import Testing

@testable import TernServer

/// The online channel's decisions as values: frames read strictly, close reasons within a close frame's size, wake
/// events between nodes, and messages handed over in order or not at all.
struct ChannelValueTests {
    private func message(_ sequence: Int64, device: String = "d1") -> DeviceMessage {
        DeviceMessage(
            appID: "demo", deviceID: device, sequence: sequence, id: "m\(sequence)", pushID: "p", notification: nil, data: nil,
            createdAt: Date(timeIntervalSince1970: 0), expiresAt: Date(timeIntervalSince1970: 60))
    }

    @Test func handedOverMessagesGoOnlyInOrderAfterWhatWasSent() {
        let connection = DeviceConnection(app: "demo", deviceID: "d1") { _ in }
        // Nothing handed over, nothing rung: wait.
        #expect(connection.next(after: 0) == .wait)
        connection.handOver(message(3))
        connection.handOver(message(2))
        #expect(connection.next(after: 1) == .send([message(2), message(3)]))
        // Taken: nothing left, and the store has nothing this node did not hand over.
        #expect(connection.next(after: 3) == .wait)
        // A gap (4 was never handed over): read the store instead, once.
        connection.handOver(message(5))
        #expect(connection.next(after: 3) == .readStore)
        #expect(connection.next(after: 3) == .wait)
        // Sent already: dropped.
        connection.handOver(message(2))
        connection.handOver(message(4))
        #expect(connection.next(after: 3) == .send([message(4)]))
        // At most a few are kept; once they are sent, the rest come from the store.
        for sequence in 5...(Int64(DeviceConnection.handOverLimit) + 14) { connection.handOver(message(sequence)) }
        guard case .send(let handed) = connection.next(after: 4) else {
            Issue.record("the handed-over messages were not sent")
            return
        }
        #expect(handed.count == DeviceConnection.handOverLimit)
        #expect(connection.next(after: handed.last?.sequence ?? 0) == .readStore)
        #expect(connection.next(after: handed.last?.sequence ?? 0) == .wait)
    }

    @Test func aWakeFromElsewhereReadsTheStoreAfterWhatWasHandedOver() {
        let connection = DeviceConnection(app: "demo", deviceID: "d1") { _ in }
        connection.handOver(message(1))
        // Another node kept message 2 meanwhile and rang.
        connection.wake()
        #expect(connection.next(after: 0) == .send([message(1)]))
        #expect(connection.next(after: 1) == .readStore)
        #expect(connection.next(after: 1) == .wait)
    }

    @Test func theNodesSweepWakesEveryConnectionOncePerRoundAndARingAllWakesThemAll() {
        let node = DeviceConnections(node: "n")
        let connections = (0..<200).map { DeviceConnection(app: "demo", deviceID: "d\($0)") { _ in } }
        for connection in connections { _ = node.attach(connection) }
        var woken = [Int](repeating: 0, count: connections.count)
        for part in 0..<7 {
            node.ringSlice(part, of: 7)
            for (index, connection) in connections.enumerated() where connection.next(after: 0) == .readStore { woken[index] += 1 }
        }
        #expect(woken.allSatisfy { $0 == 1 })
        node.ringAll()
        #expect(connections.allSatisfy { $0.next(after: 0) == .readStore })
        #expect(connections.allSatisfy { $0.next(after: 0) == .wait })
    }

    @Test func aConnectionAcknowledgesWhatItWasSentAndOnlyAFewOthers() throws {
        let connection = DeviceConnection(app: "demo", deviceID: "d1") { _ in }
        connection.sent([message(1), message(2)])
        // Its own, and a few it had from elsewhere (a repeated ack counts as one of those).
        try connection.acknowledge(["m1", "m2"])
        try connection.acknowledge((0..<DeviceConnection.otherAcksLimit - 2).map { "other-\($0)" })
        try connection.acknowledge(["m1", "m2"])
        // One more made-up id is one too many.
        #expect(throws: ChannelCloseCode.self) { try connection.acknowledge(["made-up"]) }
    }

    @Test func theRecordersQueueDropsTheOldestPastItsCapacityAndCountsThem() {
        var pending = ChannelRecorder.Pending()
        pending.delivered = [("demo", "d1", 1), ("demo", "d1", 2)]
        pending.acks = [("demo", "d1", "a"), ("demo", "d1", "b"), ("demo", "d1", "c")]
        pending.trim(to: 2)
        // Sent marks go first (they only feed a count), then the oldest acks.
        #expect(pending.delivered.isEmpty)
        #expect(pending.acks.map(\.id) == ["b", "c"])
        #expect(pending.dropped == 3)
        pending.trim(to: 10)
        #expect(pending.dropped == 3)
    }

    @Test func acksAreReadStrictly() throws {
        let id = UUID().uuidString
        #expect(try ChannelFrame.decodeAck(#"{"type": "ack", "ids": ["\#(id)"]}"#) == [id.lowercased()])
        for (frame, problem) in [
            ("[]", "object"), (#"{"type": "ack"}"#, "ids"), (#"{"type": "ack", "ids": []}"#, "ids"), (#"{"type": "nack", "ids": ["\#(id)"]}"#, "type"),
            (#"{"type": "ack", "ids": ["\#(id)"], "more": 1}"#, "more"), (#"{"type": "ack", "ids": ["not-an-id"]}"#, "not-an-id"),
        ] {
            #expect(throws: ChannelCloseCode.self, "\(frame)") { try ChannelFrame.decodeAck(frame) }
            do {
                _ = try ChannelFrame.decodeAck(frame)
            } catch {
                #expect(error.code == 4400)
                #expect(error.reason.contains(problem), "\(frame): \(error.reason)")
            }
        }
        let many = (0...ChannelFrame.maximumAckIDs).map { _ in "\"\(UUID().uuidString)\"" }.joined(separator: ",")
        #expect(throws: ChannelCloseCode.self) { try ChannelFrame.decodeAck(#"{"type": "ack", "ids": [\#(many)]}"#) }
    }

    @Test func theFastReadingOfPlainAcksAgreesWithTheStrictDecoder() throws {
        let (a, b) = (UUID().uuidString, UUID().uuidString.lowercased())
        // Plain forms: read without the decoder, the same as the decoder reads them.
        for frame in [
            #"{"type": "ack", "ids": ["\#(a)"]}"#, #"{"type":"ack","ids":["\#(a)","\#(b)"]}"#, #"{"ids": ["\#(b)"], "type": "ack"}"#,
            " {\n\t\"type\" : \"ack\" ,\r\"ids\":[ \"\(a)\" ] } ",
        ] {
            let fast = try #require(ChannelFrame.plainAck(frame), "\(frame)")
            let strict = try StrictJSONDecoder().decode(ChannelFrame.Inbound.self, from: Array(frame.utf8))
            #expect(fast == strict.ids)
            #expect(try ChannelFrame.decodeAck(frame) == fast.map { $0.lowercased() })
        }
        // Anything else goes to the strict decoder (which may accept it, or refuse it naming the problem).
        for frame in [
            #"{"type": "ack"}"#, #"{"type": "ack", "ids": ["\u0041"]}"#, #"{"type": "ack", "type": "ack"}"#,
            #"{"type": "ack", "ids": ["\#(a)"], "more": 1}"#, #"{"type": "ack", "ids": ["\#(a)"]} x"#, #"{"type": "ack", "ids": "\#(a)"}"#,
            #"{"type": "ack", "ids": ["\#(a)",]}"#, #"{"type": "ack", "ids": ["é"]}"#,
        ] {
            #expect(ChannelFrame.plainAck(frame) == nil, "\(frame)")
        }
    }

    @Test func aMessageFrameIsTheDocumentedJSONWithTheStoredObjectsAsKept() throws {
        var kept = message(7)
        kept.id = UUID().uuidString.lowercased()
        kept.notification = #"{"badge":3,"title":"Hi \"there\""}"#
        kept.data = #"{"orderId":42,"nested":{"id":"x"}}"#
        kept.pushID = "push \"quoted\"\n"
        let frame = ChannelFrame.encode(kept)
        #expect(frame.hasPrefix(#"{"type":"message","id":"\#(kept.id)","sequence":7,"#))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(frame.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["type", "id", "sequence", "pushId", "notification", "data", "createdAt"])
        #expect(object["pushId"] as? String == kept.pushID)
        #expect((object["notification"] as? [String: Any])?["title"] as? String == #"Hi "there""#)
        #expect(((object["data"] as? [String: Any])?["nested"] as? [String: Any])?["id"] as? String == "x")
        #expect(object["createdAt"] as? String == "1970-01-01T00:00:00.000Z")
        // Without a notification or data, the keys are left out.
        let bare = try #require(try JSONSerialization.jsonObject(with: Data(ChannelFrame.encode(message(1)).utf8)) as? [String: Any])
        #expect(Set(bare.keys) == ["type", "id", "sequence", "pushId", "createdAt"])
        #expect(ChannelFrame.quoted("a\u{1}b") == #""a\u0001b""#)
    }

    @Test func closeReasonsFitACloseFrame() {
        let long = ChannelCloseCode.badFrame(String(repeating: "é", count: 200))
        #expect(long.reason.utf8.count <= 123)
        #expect(long.reason.hasSuffix("…"))
        #expect(ChannelCloseCode.replaced.code == 4409)
        #expect(ChannelCloseCode.binaryFrame.code == 1003)
    }

    @Test func wakeEventsReachOnlyTheirNodeAndFitANotification() {
        let devices = (0..<400).map { _ in UUID().uuidString.lowercased() }
        let events = DeviceConnections.wakeEvents(node: "node-b", app: "demo", deviceIDs: devices)
        #expect(events.count == 3)
        #expect(events.allSatisfy { $0.utf8.count < 8000 })
        let mine = DeviceConnections(node: "node-b")
        let other = DeviceConnections(node: "node-a")
        #expect(events.compactMap { mine.wakeTarget(of: $0) }.flatMap(\.deviceIDs) == devices)
        #expect(events.compactMap { other.wakeTarget(of: $0) }.isEmpty)
        #expect(mine.wakeTarget(of: "push") == nil)
    }
}
