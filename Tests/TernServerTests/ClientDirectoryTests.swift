import Foundation
import Logging
import TernAPNs
import TernSimulator
import TernStore
import TernTestSupport
import Testing
@testable import TernServer

/// The node's clients by app and endpoint (`ClientDirectory`), made without sending anything.
struct ClientDirectoryTests {
    /// An app on Apple's servers has a client for each APNs environment its tokens are of. Its certificate's coming
    /// end was logged by each, so twice; it is said once for each version of the app.
    @Test func aCertificateNearItsEndIsLoggedOnceForAnAppWithClientsForBothEnvironments() async throws {
        let serverKey = try ServerKey(bytes: Array(repeating: 7, count: 32))
        let issued = try SimulatorCertificateAuthority.generate().issuePushCertificate(bundleID: "com.example.near", validFor: 10 * 86400)
        let sealed = AppCredentialsVault(serverKey: serverKey).seal(
            .certificate(certificatePEM: issued.certificatePEM, privateKeyPEM: issued.privateKeyPEM))
        let created = Date()
        var app = AppRecord(
            id: "near", topic: "com.example.near", environment: .production, endpoint: nil, sealedCredentials: sealed, appKeyHash: [1],
            masterSecretHash: [2], webhookURL: nil, createdAt: created, updatedAt: created)
        let logs = LogRecorder()
        let directory = ClientDirectory(serverKey: serverKey, simulator: nil, connections: 1, logger: logs.logger)
        let warning = "certificate expires within \(AppCredentials.certificateWarningDays) days"

        // Clients it replaces, and all of them once it is closed, are shut down here.
        async let closing: Void = directory.closeRetired()
        _ = try await directory.client(for: app, tokenEnvironment: .production)
        _ = try await directory.client(for: app, tokenEnvironment: .development)
        #expect(logs.messages(containing: warning).count == 1, "\(logs.lines(atLeast: .warning))")

        // A new version of the app (its credentials or settings changed): its clients are made again, and it is said again.
        app.updatedAt = created.addingTimeInterval(1)
        _ = try await directory.client(for: app, tokenEnvironment: .production)
        _ = try await directory.client(for: app, tokenEnvironment: .development)
        #expect(logs.messages(containing: warning).count == 2, "\(logs.lines(atLeast: .warning))")
        await directory.close()
        await closing
    }

    /// A node whose connection to the others was lost may have missed their announcements: when it is back, the
    /// clients of apps changed or deleted meanwhile close (their certificate no longer shown); the others stay.
    @Test func clientsOfAppsChangedOrDeletedWhileUnheardAreForgotten() async throws {
        let serverKey = try ServerKey(bytes: Array(repeating: 7, count: 32))
        let created = Date()
        func app(_ id: String) throws -> AppRecord {
            let issued = try SimulatorCertificateAuthority.generate().issuePushCertificate(bundleID: "com.example.\(id)", validFor: 10 * 86400)
            let sealed = AppCredentialsVault(serverKey: serverKey).seal(
                .certificate(certificatePEM: issued.certificatePEM, privateKeyPEM: issued.privateKeyPEM))
            return AppRecord(
                id: id, topic: "com.example.\(id)", environment: .production, endpoint: nil, sealedCredentials: sealed, appKeyHash: [1],
                masterSecretHash: [2], webhookURL: nil, createdAt: created, updatedAt: created)
        }
        let (kept, changed, deleted) = (try app("kept"), try app("changed"), try app("deleted"))
        let logs = LogRecorder()
        let directory = ClientDirectory(serverKey: serverKey, simulator: nil, connections: 1, logger: logs.logger)
        let warning = "certificate expires within \(AppCredentials.certificateWarningDays) days"
        async let closing: Void = directory.closeRetired()
        for app in [kept, changed, deleted] { _ = try await directory.client(for: app, tokenEnvironment: .production) }
        #expect(logs.messages(containing: warning).count == 3)

        // What the store holds now: `changed` at a later version, `deleted` gone.
        var newer = changed
        newer.updatedAt = created.addingTimeInterval(1)
        await directory.forgetChanged(current: [kept, newer])
        // Asked for again as they were: the two forgotten are made anew (their certificate noted, so said, again);
        // the one kept is the client it had.
        for app in [kept, changed, deleted] { _ = try await directory.client(for: app, tokenEnvironment: .production) }
        let said = logs.lines(atLeast: .warning).filter { $0.contains(warning) }
        for (app, times) in [("kept", 1), ("changed", 2), ("deleted", 2)] {
            #expect(said.filter { $0.contains("app=\(app)") }.count == times, "\(app): \(said)")
        }
        await directory.close()
        await closing
    }

    /// The event a node announces when it changes or deletes an app: the other nodes take it for that app, and take no
    /// other node event for it, nor it for another.
    @Test func anAppChangedEventNamesItsAppAndNoOtherEventIsTakenForIt() {
        let event = ClientDirectory.appChangedEvent(app: "shop")
        #expect(ClientDirectory.appChangedTarget(of: event) == "shop")
        #expect(DeviceConnections.dropAppTarget(of: event) == nil)
        #expect(DeviceConnections.dropTarget(of: event) == nil)
        let others = [DeviceConnections.dropAppEvent(app: "shop")]
            + DeviceConnections.dropEvents(app: "shop", deviceIDs: ["d1"])
            + DeviceConnections.wakeEvents(node: "n1", app: "shop", deviceIDs: ["d1"])
        #expect(others.compactMap(ClientDirectory.appChangedTarget(of:)).isEmpty)
        #expect(ClientDirectory.appChangedTarget(of: "appchanged ") == nil, "no app")
        #expect(ClientDirectory.appChangedTarget(of: "appchanged a b") == nil, "an app id has no space")
    }
}
