import Foundation
import Logging
import Testing
@testable import TernStore
import TernTestSupport

/// Registrations made on two nodes of one PostgreSQL database at once. Each node writes its own registrations one
/// group at a time, so only two nodes race for real: their transactions read the same rows and write them together.
/// The database plans its reads through indexes (``StoreFactory/postgresIndexedReads``), as it does for a large
/// registry: a test's few rows are otherwise read whole, and every pair of transactions would conflict.
@Suite("Registrations on two nodes at once", .enabled(if: PostgresTestServer.url != nil))
struct TwoNodeRegistrationTests {
    @Test("one token registered under 30 device ids on two nodes at once ends on exactly one device; the other 29 are gone, each in the history once")
    func oneTokenManyDevices() async throws {
        try await withTwoNodes { nodes in
            let deviceIDs = (0..<30).map { numbered("device", $0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (n, deviceID) in deviceIDs.enumerated() {
                    group.addTask {
                        _ = try await nodes[n % 2].register(registration(deviceID, token: "shared", tags: ["t"]), app: "demo", at: time(Int64(n)))
                    }
                }
                try await group.waitForAll()
            }
            var holders: [String] = []
            for deviceID in deviceIDs where try await nodes[0].device(app: "demo", deviceID: deviceID) != nil { holders.append(deviceID) }
            #expect(holders.count == 1)
            #expect(try await nodes[1].devices(app: "demo", tag: "t", after: nil, limit: 100).items.map(\.deviceID) == holders)
            var moved: [String] = []
            for deviceID in deviceIDs {
                moved += try await nodes[0].tokenHistory(app: "demo", deviceID: deviceID).filter { $0.reason == .moved }.map { _ in deviceID }
            }
            #expect(moved.sorted() == deviceIDs.filter { !holders.contains($0) }, "every device the token left is in the history once")
        }
    }

    @Test("one device registered with 30 tokens on two nodes at once keeps one of them; the other 29 are in its history once each")
    func oneDeviceManyTokens() async throws {
        try await withTwoNodes { nodes in
            _ = try await nodes[0].register(registration("d1", token: "first"), app: "demo", at: time(0))
            let tokens = (0..<30).map { numbered("token", $0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (n, token) in tokens.enumerated() {
                    group.addTask { _ = try await nodes[n % 2].register(registration("d1", token: token), app: "demo", at: time(Int64(1 + n))) }
                }
                try await group.waitForAll()
            }
            let device = try #require(try await nodes[0].device(app: "demo", deviceID: "d1"))
            let history = try await nodes[1].tokenHistory(app: "demo", deviceID: "d1").map(\.token)
            #expect(tokens.contains(device.token))
            #expect(history.sorted() == (["first"] + tokens.filter { $0 != device.token }).sorted())
        }
    }

    @Test("a new device id registered on two nodes at once with two secrets: one is made, with the secret it was answered with, and the other is refused")
    func firstRegistrationOnTwoNodes() async throws {
        try await withTwoNodes { nodes in
            for round in 0..<20 {
                let deviceID = numbered("new", round)
                let secrets: [[UInt8]] = [Array(repeating: 0xA1, count: 32), Array(repeating: 0xB2, count: 32)]
                let outcomes = try await withThrowingTaskGroup(of: Result<DeviceRecord, StoreError>.self) { group in
                    for node in 0..<2 {
                        group.addTask {
                            var value = registration(deviceID, token: "\(deviceID)-\(node)")
                            value.caller = .device(presentedSecretHash: nil, legacySecretHash: Array(repeating: 0x1E, count: 32), aliasProof: .none)
                            value.newSecretHash = secrets[node]
                            do {
                                return .success(try await nodes[node].register(value, app: "demo", at: time(Int64(round))))
                            } catch let error as StoreError {
                                return .failure(error)
                            }
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let stored = try #require(try await nodes[0].device(app: "demo", deviceID: deviceID))
                // One is first; the other then finds the device made, and has no secret to show for it.
                let answered = outcomes.compactMap { try? $0.get() }
                #expect(answered.count == 1, "round \(round)")
                for record in answered {
                    #expect(record.secretHash == stored.secretHash, "round \(round): told a secret the device does not have")
                    #expect(record.token == stored.token, "round \(round)")
                }
                for case .failure(let error) in outcomes { #expect(error == .refused(.deviceSecret), "round \(round)") }
            }
        }
    }

    /// Runs `body` with two stores on one fresh, migrated database holding the app "demo"; the database is dropped
    /// afterwards whatever happens.
    private func withTwoNodes(_ body: ([SQLStore]) async throws -> Void) async throws {
        let database = try await PostgresTestServer.createDatabase()
        do {
            try await PostgresTestServer.administer("ALTER DATABASE \(database.name) SET enable_seqscan = off")
            var nodes: [SQLStore] = []
            for node in 0..<2 {
                nodes.append(try await SQLStore.openPostgres(
                    url: database.url, callTimeout: PostgresTestServer.callTimeout, logger: Logger(label: "tern.store.tests.node\(node)")))
            }
            try await withThrowingTaskGroup(of: Void.self) { pools in
                for node in nodes { pools.addTask { await node.run() } }
                defer { pools.cancelAll() }
                do {
                    try await nodes[0].migrate()
                    try await nodes[1].migrate()
                    try await nodes[0].createApp(makeApp())
                    try await body(nodes)
                } catch {
                    for node in nodes { try? await node.close() }
                    throw error
                }
                for node in nodes { try await node.close() }
            }
        } catch {
            try? await PostgresTestServer.dropDatabase(database.name)
            throw error
        }
        try await PostgresTestServer.dropDatabase(database.name)
    }
}
