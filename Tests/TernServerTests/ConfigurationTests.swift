import Foundation
import TernServer
import Testing

/// Settings from a JSON file and `TERN_…` environment variables, the environment winning.
struct ConfigurationTests {
    @Test func theFileAndTheEnvironmentSetWhatTheyNameAndDefaultsKeepTheRest() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try #"{"http": {"host": "0.0.0.0", "port": 9000}, "database": {"path": "/tmp/x.db"}, "delivery": {"pageSize": 500}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        let configuration = try await TernServerConfiguration.load(
            file: file.path, environment: ["TERN_HTTP_PORT": "9100", "TERN_ADMIN_TOKEN": "from-the-environment-0123", "TERN_DEMO_ENABLED": "false"])
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 9100, "the environment wins over the file")
        #expect(configuration.databasePath == "/tmp/x.db")
        #expect(configuration.deliveryPageSize == 500)
        #expect(configuration.adminToken == "from-the-environment-0123")
        #expect(configuration.demoApp == false)
        #expect(configuration.deliveryConcurrency == TernServerConfiguration().deliveryConcurrency)
    }

    @Test func aMissingOrMalformedFileAndOutOfRangeValuesAreClearErrors() async throws {
        await #expect(throws: TernServerConfigurationError.self) {
            _ = try await TernServerConfiguration.load(file: "/nonexistent/tern.json", environment: [:])
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try "{not json".write(to: file, atomically: true, encoding: .utf8)
        await #expect(throws: TernServerConfigurationError.self) {
            _ = try await TernServerConfiguration.load(file: file.path, environment: [:])
        }
        var configuration = TernServerConfiguration()
        configuration.deliveryConcurrency = 0
        #expect(throws: TernServerConfigurationError.self) { try configuration.validate() }
    }
}
