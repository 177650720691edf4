import Foundation
import Logging
import TernAPNsClient
import TernSimulator
import TernStore
import TernTestSupport
import Testing
@testable import TernServer

/// The feedback service's scheduled reads (`FeedbackPoller`), on a real SQLite file, without a server.
struct FeedbackPollerTests {
    /// A node learns where its embedded APNs listens when its dispatcher starts, and the poller's first look can
    /// come before that. Such a look is not a failure of the app's service: the app is looked at again at the next
    /// check, not five minutes later.
    @Test func aLookBeforeTheNodeKnowsTheSimulatorTriesTheAppAgainAtTheNextCheck() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tern-feedback-\(UUID().uuidString).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try await SQLStore.openSQLite(path: path, logger: Logger(label: "test"))
        try await store.migrate()
        let serverKey = try ServerKey(bytes: Array(repeating: 7, count: 32))
        let issued = try SimulatorCertificateAuthority.generate().issuePushCertificate(bundleID: "com.example.old", validFor: 86400)
        let sealed = AppCredentialsVault(serverKey: serverKey).seal(.certificate(certificatePEM: issued.certificatePEM, privateKeyPEM: issued.privateKeyPEM))
        let now = Date()
        var app = AppRecord(
            id: "old", topic: "com.example.old", environment: .simulator, endpoint: nil, sealedCredentials: sealed, appKeyHash: [1],
            masterSecretHash: [2], webhookURL: nil, createdAt: now, updatedAt: now)
        app.transport = AppRecord.legacy
        try await store.createApp(app)

        let logs = LogRecorder()
        let clients = ClientDirectory(serverKey: serverKey, simulator: nil, connections: 1, logger: logs.logger)
        let poller = FeedbackPoller(store: store, clients: clients, checkInterval: .seconds(60), onTokensPruned: {}, logger: logs.logger)
        let failed = "cannot read the feedback service"
        await poller.pollDue(now: now)
        #expect(logs.messages(containing: failed).isEmpty, "not a failure of the app's service: \(logs.lines(atLeast: .warning))")

        // The node knows the simulator now (here: a port where nothing listens, so the read fails): the next check,
        // a second later, reads the app's service.
        await clients.useSimulator(.init(endpoint: .init(host: "127.0.0.1", port: 1), legacyGatewayPort: 1, feedbackPort: 1))
        await poller.pollDue(now: now.addingTimeInterval(1))
        #expect(logs.messages(containing: failed).count == 1, "\(logs.lines(atLeast: .warning))")
        try await store.close()
    }
}
