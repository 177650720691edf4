import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing

extension ClientFaultTests {
    /// Broadcast channels (iOS 18) through the client, against a real simulator over TLS on loopback.
    @Suite struct BroadcastTests {
        static let update = Array(#"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"score":"2-1"}}}"#.utf8)

        @Test func aChannelIsMadeReadListedBroadcastToAndDeleted() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                let storing = try await client.createChannel(bundleID: Harness.topic, storagePolicy: .mostRecentMessage)
                let bare = try await client.createChannel(bundleID: Harness.topic, storagePolicy: .noStorage)
                #expect(storing.storagePolicy == .mostRecentMessage && storing.id != bare.id)
                #expect(try await client.channel(bundleID: Harness.topic, id: storing.id) == storing)
                #expect(try await client.channel(bundleID: Harness.topic, id: bare.id) == bare)
                #expect(try await client.channelIDs(bundleID: Harness.topic) == [storing.id, bare.id])

                let broadcast = APNsBroadcast(
                    bundleID: Harness.topic, channelID: storing.id, payload: Self.update, priority: .throttled,
                    expiration: .at(Date(timeIntervalSince1970: 1_700_003_600)))
                let delivery = try await client.broadcast(broadcast)
                #expect(delivery.isDelivered && delivery.attempts == 1)
                #expect(delivery.requestID == broadcast.requestID.apnsString)
                let taken = try #require(simulator.state.broadcasts().first)
                #expect(taken.uniqueID == delivery.uniqueID && taken.channelID == storing.id)
                #expect(taken.priority == 5 && taken.expiration == 1_700_003_600 && taken.payload == String(decoding: Self.update, as: UTF8.self))

                // A channel that stores nothing takes only expiration 0.
                let refused = try await client.broadcast(APNsBroadcast(
                    bundleID: Harness.topic, channelID: bare.id, payload: Self.update, expiration: .at(Date(timeIntervalSince1970: 1_700_003_600))))
                #expect(!refused.isDelivered && refused.response.reason == .badExpirationDate && refused.response.status == 400)
                #expect(try await client.broadcast(APNsBroadcast(bundleID: Harness.topic, channelID: bare.id, payload: Self.update)).isDelivered)

                try await client.deleteChannel(bundleID: Harness.topic, id: storing.id)
                let gone = try await client.broadcast(APNsBroadcast(bundleID: Harness.topic, channelID: storing.id, payload: Self.update))
                #expect(gone.response.reason == .channelNotRegistered)
                await #expect(throws: APNsChannelRejection.self) { try await client.deleteChannel(bundleID: Harness.topic, id: storing.id) }
                do {
                    _ = try await client.channel(bundleID: Harness.topic, id: storing.id)
                    Issue.record("a deleted channel was read")
                } catch let rejection as APNsChannelRejection {
                    #expect(rejection.response.reason == .channelNotRegistered && rejection.requestID != nil)
                }
                #expect(try await client.channelIDs(bundleID: Harness.topic) == [bare.id])
            }
        }

        /// A list of channels is far longer than a notification's answer (4 KiB are kept of those): it comes whole.
        @Test func aLongListOfChannelsComesWhole() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                for _ in 0..<2_000 { _ = try await client.createChannel(bundleID: Harness.topic, storagePolicy: .noStorage) }
                let ids = try await client.channelIDs(bundleID: Harness.topic)
                #expect(ids.count == 2_000)
                #expect(ids == simulator.state.channels(bundleID: Harness.topic).map(\.id))
            }
        }

        @Test func outOfFormIdsAndPayloadsAreRefusedUnsent() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                for call in [
                    { _ = try await client.channelIDs(bundleID: "com.example/app") },
                    { _ = try await client.channel(bundleID: Harness.topic, id: "not base64!") },
                    { _ = try await client.broadcast(APNsBroadcast(bundleID: Harness.topic, channelID: "AAAA", payload: [])) },
                    {
                        _ = try await client.broadcast(APNsBroadcast(
                            bundleID: Harness.topic, channelID: "AAAA", payload: Array(repeating: 0x20, count: APNsBroadcastRules.maximumPayloadSize + 1)))
                    },
                ] as [@Sendable () async throws -> Void] {
                    do {
                        try await call()
                        Issue.record("sent")
                    } catch let error as APNsClientError {
                        #expect(error.code == .invalidRequest, "\(error)")
                    }
                }
                #expect(simulator.state.stats().connectionsOpened == 0, "nothing was sent")
            }
        }

        /// Making a channel twice makes two (APNs allows 10,000): it is sent again only when APNs certainly did not
        /// take it. A 503 did not; a 500, or a connection lost with it in flight, may have.
        @Test func aChannelIsMadeAgainOnlyWhenAPNsCertainlyDidNotTakeIt() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                try simulator.state.setFaults([.init(status: 503, count: 1)])
                _ = try await client.createChannel(bundleID: Harness.topic, storagePolicy: .noStorage)
                #expect(simulator.state.channels().count == 1 && simulator.state.stats().faultsInjected == 1, "503, then made")

                try simulator.state.setFaults([.init(status: 500, count: 1)])
                do {
                    _ = try await client.createChannel(bundleID: Harness.topic, storagePolicy: .noStorage)
                    Issue.record("made after a 500")
                } catch let rejection as APNsChannelRejection {
                    #expect(rejection.response.status == 500 && rejection.response.reason == .internalServerError)
                }
                #expect(simulator.state.channels().count == 1, "not sent again")
                // A read is: the same 500 is tried again.
                try simulator.state.setFaults([.init(status: 500, count: 1)])
                #expect(try await client.channelIDs(bundleID: Harness.topic).count == 1)

                try simulator.state.setDrop(.init(afterStreams: 1, connections: 1))
                do {
                    _ = try await client.createChannel(bundleID: Harness.topic, storagePolicy: .noStorage)
                    Issue.record("made after the connection was lost")
                } catch let error as APNsClientError {
                    #expect(error.code == .connectionFailed && error.message.contains("not sent again"), "\(error)")
                }
                #expect(simulator.state.stats().connectionsDropped == 1)
                #expect(simulator.state.channels().count == 1)
                _ = try await client.createChannel(bundleID: Harness.topic, storagePolicy: .mostRecentMessage)
                #expect(simulator.state.channels().count == 2)
            }
        }
    }
}
