import Foundation
import NIOEmbedded
import Synchronization
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
        let state = Sending(last: 1)
        #expect(state.opened(readFirst: false) == (open: true, startSender: false))
        // Nothing else to send, and they follow the last sent: written at once, without a sender task.
        #expect(state.handOver([message(3), message(2)]) == (now: [message(2), message(3)], startSender: false))
        // One more while they are written: queued, no second writer.
        #expect(state.handOver([message(4)]) == (now: nil, startSender: false))
        // Written: a sender starts for what came meanwhile, and stops when nothing is left.
        #expect(state.written(through: 3))
        #expect(state.next() == .send([message(4)]))
        state.sent(through: 4, more: false)
        #expect(state.next() == .stop)
        // A gap (5 was never handed over): queued, and the sender reads the store instead, once.
        #expect(state.handOver([message(6)]) == (now: nil, startSender: true))
        #expect(state.next() == .readStore(after: 4))
        #expect(state.next() == .stop)
        // Sent already: dropped.
        #expect(state.handOver([message(2)]) == (now: nil, startSender: true))
        #expect(state.next() == .stop)
        // While a sender runs, at most a few are kept; once they are sent, the rest come from the store.
        #expect(state.wake())
        for sequence in 5...(Int64(SendingState.handOverLimit) + 14) { _ = state.handOver([message(sequence)]) }
        guard case .send(let handed) = state.next() else {
            Issue.record("the handed-over messages were not sent")
            return
        }
        #expect(handed.count == SendingState.handOverLimit)
        #expect(handed.first?.sequence == 5)
        state.sent(through: handed.last?.sequence ?? 0, more: false)
        #expect(state.next() == .readStore(after: handed.last?.sequence ?? 0))
        #expect(state.next() == .stop)
    }

    @Test func nothingIsSentBeforeTheConnectionsPresenceIsStoredAndNothingAfterItClosed() {
        let state = Sending(last: 0)
        // Handed over while its presence is being stored: kept, no sender yet.
        #expect(state.handOver([message(1)]) == (now: nil, startSender: false))
        #expect(!state.wake())
        // Stored: the sender starts, and reads the store first (it was rung, and the device had messages waiting).
        #expect(state.opened(readFirst: true) == (open: true, startSender: true))
        #expect(state.next() == .send([message(1)]))
        state.sent(through: 1, more: false)
        #expect(state.next() == .readStore(after: 1))
        // A full page was read: there may be more.
        state.sent(through: 100, more: true)
        #expect(state.next() == .readStore(after: 100))
        // Closed: the running sender stops at its next step, and nothing starts another.
        #expect(state.closed())
        #expect(state.next() == .stop)
        #expect(!state.wake())
        #expect(state.handOver([message(101)]) == (now: nil, startSender: false))
        // A connection that closed while its presence was being stored is told so when it is stored.
        let early = Sending(last: 0)
        #expect(!early.closed())
        #expect(early.opened(readFirst: true) == (open: false, startSender: false))
    }

    @Test func aWakeFromElsewhereReadsTheStoreAfterWhatWasHandedOver() {
        let state = Sending(last: 0)
        _ = state.opened(readFirst: false)
        #expect(state.handOver([message(1)]).now == [message(1)])
        // Another node kept message 2 meanwhile and rang: read once message 1 is written.
        #expect(!state.wake())
        #expect(state.written(through: 1))
        #expect(state.next() == .readStore(after: 1))
        #expect(state.next() == .stop)
        // A sender that stopped on a failed write leaves none running: the next ring starts one.
        #expect(state.wake())
        state.senderStopped()
        #expect(state.wake())
    }

    /// A socket for connections whose frames the test does not look at.
    private func unusedSocket() -> DeviceSocket {
        DeviceSocket(channel: EmbeddedChannel(), handler: DeviceSocketHandler(pingInterval: .seconds(30)))
    }

    @Test func theNodesSweepWakesEveryConnectionOncePerRoundAndARingAllWakesThemAll() {
        let node = DeviceConnections(node: "n")
        let started = Mutex<[String: Int]>([:])
        let connections = (0..<200).map { index in
            DeviceConnection(app: "demo", deviceID: "d\(index)", after: 0, socket: unusedSocket()) { connection in
                started.withLock { $0[connection.deviceID, default: 0] += 1 }
                // The sender finds its step and stops, as a real one would once it read the store.
                while connection.nextStep() != .stop {}
            }
        }
        for connection in connections {
            _ = node.attach(connection)
            _ = connection.opened(readFirst: false)
        }
        for part in 0..<7 { node.ringSlice(part, of: 7) }
        #expect(started.withLock { $0 }.count == 200)
        #expect(started.withLock { $0 }.values.allSatisfy { $0 == 1 })
        node.ringAll()
        #expect(started.withLock { $0 }.values.allSatisfy { $0 == 2 })
    }

    @Test func aSoleNodeListsItsConnectedDevicesAsThePresenceTableWould() {
        let node = DeviceConnections(node: "n")
        let first = DeviceConnection(app: "demo", deviceID: "d1", after: 0, socket: unusedSocket()) { _ in }
        let second = DeviceConnection(app: "demo", deviceID: "d2", after: 0, socket: unusedSocket()) { _ in }
        _ = node.attach(first)
        _ = node.attach(second)
        node.detach(second)
        #expect(node.presence(app: "demo", deviceIDs: ["d1", "d2", "d3"]) == [DevicePresence(deviceID: "d1", node: "n", connection: first.id)])
        #expect(node.presence(app: "other", deviceIDs: ["d1"]).isEmpty)
    }

    @Test func aConnectionAcknowledgesWhatItWasSentAndOnlyAFewOthers() throws {
        let connection = DeviceConnection(app: "demo", deviceID: "d1", after: 0, socket: unusedSocket()) { _ in }
        connection.sending([message(1), message(2)])
        // Its own, and a few it had from elsewhere (a repeated ack counts as one of those).
        try connection.acknowledge(["m1", "m2"])
        try connection.acknowledge((0..<DeviceConnection.otherAcksLimit - 2).map { "other-\($0)" })
        try connection.acknowledge(["m1", "m2"])
        // One more made-up id is one too many.
        #expect(throws: ChannelCloseCode.self) { try connection.acknowledge(["made-up"]) }
    }

    @Test func theRecordersQueueDropsTheOldestPastItsCapacityAndCountsThem() {
        var pending = ChannelRecorder.Pending()
        pending.delivered = [("demo", "d1", 1, "m1"), ("demo", "d1", 2, "m2")]
        pending.acks = [("demo", "d1", "a"), ("demo", "d1", "b"), ("demo", "d1", "c")]
        pending.trim(to: 2)
        // Sent marks go first (they only feed a count), then the oldest acks.
        #expect(pending.delivered.isEmpty)
        #expect(pending.acks.map(\.id) == ["b", "c"])
        #expect(pending.dropped == 3)
        pending.trim(to: 10)
        #expect(pending.dropped == 3)
    }

    @Test func aMessageSentAndAcknowledgedInOneBatchIsOneWrite() {
        var pending = ChannelRecorder.Pending()
        pending.delivered = [("demo", "d1", 1, "m1"), ("demo", "d1", 2, "m2"), ("demo", "d2", 1, "m1")]
        // m1 of d1 acknowledged (twice), m9 acknowledged without having been sent in this batch, d2's m1 not yet.
        pending.acks = [("demo", "d1", "m1"), ("demo", "d1", "m9"), ("demo", "d1", "m1")]
        let (delivered, acks, both) = pending.merged()
        #expect(both.map { "\($0.deviceID)/\($0.id)" } == ["d1/m1"])
        #expect(delivered.map { "\($0.deviceID)/\($0.sequence)" } == ["d1/2", "d2/1"])
        #expect(acks.map { "\($0.deviceID)/\($0.id)" } == ["d1/m9", "d1/m1"])
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

    @Test func dropEventsReachEveryNodeAndAreNotTakenForWakeUps() {
        let devices = (0..<400).map { _ in UUID().uuidString.lowercased() }
        let events = DeviceConnections.dropEvents(app: "demo", deviceIDs: devices)
        #expect(events.count == 3)
        #expect(events.allSatisfy { $0.utf8.count < 8000 })
        #expect(events.compactMap(DeviceConnections.dropTarget(of:)).flatMap(\.deviceIDs) == devices)
        #expect(events.compactMap(DeviceConnections.dropTarget(of:)).allSatisfy { $0.app == "demo" })
        let node = DeviceConnections(node: "demo")
        #expect(events.compactMap { node.wakeTarget(of: $0) }.isEmpty, "a node named like the app takes no drop for a wake-up")
        let wakes = DeviceConnections.wakeEvents(node: "demo", app: "demo", deviceIDs: devices)
        #expect(wakes.compactMap(DeviceConnections.dropTarget(of:)).isEmpty)
        #expect(DeviceConnections.dropTarget(of: "drop demo") == nil, "no device")
        // An app deleted: one event names it, and no other kind is taken for it, nor it for another.
        let appDropped = DeviceConnections.dropAppEvent(app: "demo")
        #expect(DeviceConnections.dropAppTarget(of: appDropped) == "demo")
        #expect(DeviceConnections.dropTarget(of: appDropped) == nil)
        #expect(node.wakeTarget(of: appDropped) == nil)
        #expect((events + wakes).compactMap(DeviceConnections.dropAppTarget(of:)).isEmpty)
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

/// ``SendingState`` behind a reference, so `#expect` can call its mutating steps.
private final class Sending {
    var state: SendingState

    init(last: Int64) { state = SendingState(last: last) }

    func opened(readFirst: Bool) -> (open: Bool, startSender: Bool) { state.opened(readFirst: readFirst) }
    func handOver(_ messages: [DeviceMessage]) -> (now: [DeviceMessage]?, startSender: Bool) { state.handOver(messages) }
    func written(through sequence: Int64) -> Bool { state.written(through: sequence) }
    func wake() -> Bool { state.wake() }
    func next() -> SendingState.Step { state.next() }
    func sent(through sequence: Int64, more: Bool) { state.sent(through: sequence, more: more) }
    func closed() -> Bool { state.closed() }
    func senderStopped() { state.senderStopped() }
}
