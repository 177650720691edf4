import Foundation
import TernStore
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
        connection.handOver(message(3))
        connection.handOver(message(2))
        #expect(connection.takeHandedOver(after: 1)?.map(\.sequence) == [2, 3])
        // Taken: nothing left.
        #expect(connection.takeHandedOver(after: 3) == nil)
        // A gap (4 was never handed over): read the store instead.
        connection.handOver(message(5))
        #expect(connection.takeHandedOver(after: 3) == nil)
        // Sent already: dropped.
        connection.handOver(message(2))
        connection.handOver(message(4))
        #expect(connection.takeHandedOver(after: 3)?.map(\.sequence) == [4])
        // At most a few are kept; the rest come from the store.
        for sequence in 1...(DeviceConnection.handOverLimit + 10) { connection.handOver(message(Int64(sequence))) }
        #expect(connection.takeHandedOver(after: 0)?.count == DeviceConnection.handOverLimit)
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
