import Foundation
import TernAPNs
import Testing

@testable import TernServer

/// A push's notifications are built from one template per chunk; each is still a notification of its own.
struct NotificationTemplateTests {
    @Test func eachRecipientsNotificationHasItsOwnAPNsIDAndTheTemplatesHeaders() throws {
        let template = NotificationTemplate(
            metadata: APNsRequestMetadata(topic: "com.example.app", pushType: .alert, collapseID: "push-1"),
            payload: Array(#"{"aps":{"alert":"Hi"}}"#.utf8))
        let tokens = try (0..<3).map { try DeviceToken(bytes: [UInt8](repeating: UInt8($0), count: 32)) }
        var ids = FastUUIDGenerator()
        let notifications = tokens.map { template.notification(to: $0, ids: &ids) }
        #expect(Set(notifications.map(\.metadata.apnsID)).count == 3)
        #expect(!notifications.contains { $0.metadata.apnsID == template.metadata.apnsID })
        #expect(notifications.allSatisfy { $0.metadata.topic == "com.example.app" && $0.metadata.collapseID == "push-1" })
        #expect(notifications.map(\.deviceToken) == tokens)
        // A recipient's own payload (its badge) replaces the push's.
        let own = Array(#"{"aps":{"alert":"Hi","badge":3}}"#.utf8)
        #expect(template.notification(to: tokens[0], payload: own, ids: &ids).payload == own)
        #expect(notifications[1].payload == template.payload)
    }
}
