import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import Testing

/// A rejection that retrying cannot fix, and how to provoke it.
enum PermanentRejection: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case badDeviceToken
    case deviceTokenNotForTopic
    case unregistered
    case expiredToken
    case payloadTooLarge
    /// Larger than any push type allows, so the simulator stops reading it.
    case payloadFarTooLarge
    case badTopic

    var testDescription: String { rawValue }

    var reason: APNsReason {
        switch self {
        case .badDeviceToken: return .badDeviceToken
        case .deviceTokenNotForTopic: return .deviceTokenNotForTopic
        case .unregistered: return .unregistered
        case .expiredToken: return .expiredToken
        case .payloadTooLarge, .payloadFarTooLarge: return .payloadTooLarge
        case .badTopic: return .badTopic
        }
    }

    var status: Int {
        switch self {
        case .badDeviceToken, .deviceTokenNotForTopic, .badTopic: return 400
        case .unregistered, .expiredToken: return 410
        case .payloadTooLarge, .payloadFarTooLarge: return 413
        }
    }

    var outcomeClass: APNsOutcomeClass {
        switch self {
        case .badDeviceToken, .deviceTokenNotForTopic, .unregistered, .expiredToken: return .tokenInvalid
        case .payloadTooLarge, .payloadFarTooLarge, .badTopic: return .requestInvalid
        }
    }

    /// When the simulator says the token went dead (410 only).
    static let unregisteredAt = Date(timeIntervalSince1970: 1_690_000_123.456)

    /// Sets the simulator up and returns the notification it must reject.
    func prepare(_ simulator: APNsSimulator) -> APNsNotification {
        let token = Harness.token(1)
        let metadata = APNsRequestMetadata(topic: Harness.topic)
        switch self {
        case .badDeviceToken:
            // The simulator plays development; this token belongs to production.
            simulator.state.bind(token, topic: nil, environment: .production)
        case .deviceTokenNotForTopic:
            simulator.state.bind(token, topic: "com.example.other", environment: nil)
        case .unregistered:
            simulator.state.unregister(token, at: Self.unregisteredAt)
        case .expiredToken:
            simulator.state.unregister(token, at: Self.unregisteredAt, reason: .expiredToken)
        case .payloadTooLarge:
            return APNsNotification(unchecked: token, metadata: metadata, payload: Self.payload(bytes: 4_500))
        case .payloadFarTooLarge:
            return APNsNotification(unchecked: token, metadata: metadata, payload: Self.payload(bytes: 9_000))
        case .badTopic:
            // A VoIP push needs the `.voip` topic.
            return APNsNotification(
                unchecked: token, metadata: APNsRequestMetadata(topic: Harness.topic, pushType: .voip),
                payload: Array(#"{"aps":{}}"#.utf8))
        }
        return Harness.notification(1)
    }

    /// A JSON payload of exactly `bytes` bytes.
    static func payload(bytes: Int) -> [UInt8] {
        let frame = #"{"aps":{"alert":""}}"#
        return Array(#"{"aps":{"alert":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: bytes - frame.utf8.count)
            + Array(#""}}"#.utf8)
    }
}

extension ClientFaultTests {
    @Suite struct PermanentRejections {
        @Test func anAcceptedNotificationIsDeliveredOnTheFirstAttempt() async throws {
            try await Harness.withSimulatorAndClient { simulator, client in
                let notification = Harness.notification(7)
                let delivery = try await client.send(notification)
                #expect(delivery.isDelivered)
                #expect(delivery.response.status == 200)
                #expect(delivery.response.outcomeClass == .delivered)
                #expect(delivery.attempts == 1)
                #expect(delivery.apnsID == notification.metadata.apnsID)
                #expect(delivery.response.apnsID == notification.metadata.apnsID)
                // Development answers carry apns-unique-id.
                #expect(delivery.response.apnsUniqueID != nil)
                #expect(simulator.state.stats().requests == 1)
                #expect(Harness.arrivalsByToken(simulator) == [notification.deviceToken.hex: 1])
            }
        }

        @Test(arguments: PermanentRejection.allCases)
        func aPermanentRejectionIsReturnedWithItsReasonAndNotRetried(_ rejection: PermanentRejection) async throws {
            try await Harness.withSimulatorAndClient(configureClient: { $0.maxAttempts = 5 }) { simulator, client in
                let notification = rejection.prepare(simulator)
                let delivery = try await client.send(notification)

                #expect(!delivery.isDelivered)
                #expect(delivery.response.status == rejection.status)
                #expect(delivery.response.reason == rejection.reason)
                #expect(delivery.response.outcomeClass == rejection.outcomeClass)
                #expect(delivery.attempts == 1)
                #expect(delivery.deviceToken == notification.deviceToken)
                #expect(delivery.apnsID == notification.metadata.apnsID)
                #expect(delivery.response.apnsID == notification.metadata.apnsID)
                if rejection.status == 410 {
                    let timestamp = try #require(delivery.response.timestamp)
                    #expect(
                        Int64((timestamp.timeIntervalSince1970 * 1000).rounded())
                            == Int64((PermanentRejection.unregisteredAt.timeIntervalSince1970 * 1000).rounded()))
                } else {
                    #expect(delivery.response.timestamp == nil)
                }

                let stats = simulator.state.stats()
                #expect(stats.requests == 1, "the simulator saw the notification more than once: it was retried")
                #expect(stats.rejected == 1)
                #expect(stats.rejectedByReason == [rejection.reason.rawValue: 1])
                #expect(stats.accepted == 0)
                #expect(simulator.state.notifications().isEmpty)
            }
        }
    }
}
