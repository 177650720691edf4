import Foundation
import Logging
@testable import TernServer
import TernAPNsClient
import Testing

/// Settings from a JSON file and `TERN_…` environment variables, the environment winning.
struct ConfigurationTests {
    @Test func theFileAndTheEnvironmentSetWhatTheyNameAndDefaultsKeepTheRest() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try #"{"http": {"host": "0.0.0.0", "port": 9000}, "database": {"path": "/tmp/x.db"}, "delivery": {"chunkSize": 500}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        let configuration = try await TernServerConfiguration.load(
            file: file.path, environment: ["TERN_HTTP_PORT": "9100", "TERN_ADMIN_TOKEN": "from-the-environment-0123", "TERN_DEMO_ENABLED": "false"])
        #expect(configuration.http.host == "0.0.0.0")
        #expect(configuration.http.port == 9100, "the environment wins over the file")
        #expect(configuration.database.path == "/tmp/x.db")
        #expect(configuration.delivery.chunkSize == 500)
        #expect(configuration.admin.token == "from-the-environment-0123")
        #expect(configuration.demo.enabled == false)
        #expect(configuration.delivery.concurrency == TernServerConfiguration().delivery.concurrency)
    }

    @Test func aMissingOrMalformedFileAndOutOfRangeValuesAreClearErrors() async throws {
        await #expect(throws: TernServerConfigurationError.self) {
            _ = try await TernServerConfiguration.load(file: "/nonexistent/tern.json", environment: [:])
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        // JSON as request bodies are read: each of these is an error that says where, in the file's own words, not
        // Foundation's ("Error Domain=NSCocoaErrorDomain Code=3840 …"). A trailing comma and a key given twice were
        // taken before (the second value silently winning).
        for (text, expected) in [
            ("{not json", "is not valid JSON: "),
            (#"{"http": {"port": 24403,},}"#, "is not valid JSON: "),
            (#"{"http": {"port": 24404, "port": 24405}}"#, "is not valid JSON: "),
            ("[1, 2]", "is not a JSON configuration: it must be one object of settings"),
            ("", "is not valid JSON: "),
        ] {
            try text.write(to: file, atomically: true, encoding: .utf8)
            let error = await #expect(throws: TernServerConfigurationError.self) {
                _ = try await TernServerConfiguration.load(file: file.path, environment: [:])
            }
            let said = error?.description ?? ""
            #expect(said.hasPrefix(file.path) && said.contains(expected) && !said.contains("NSCocoaErrorDomain"), "\(text): \(said)")
        }
        var configuration = TernServerConfiguration()
        configuration.delivery.concurrency = 0
        #expect(throws: TernServerConfigurationError.self) { try configuration.validate() }
    }

    @Test func aValueThatIsNotOfItsSettingsTypeIsAnErrorNamingTheSettingNotItsDefault() async throws {
        func message(file contents: String? = nil, _ environment: [String: String]) async -> String {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
            defer { try? FileManager.default.removeItem(at: file) }
            do {
                if let contents { try contents.write(to: file, atomically: true, encoding: .utf8) }
                _ = try await TernServerConfiguration.load(file: contents == nil ? nil : file.path, environment: environment)
                return "loaded"
            } catch {
                return "\(error)"
            }
        }
        #expect(await message(["TERN_DATABASE_CALL_TIMEOUT": "abc"])
            == "database.callTimeout must be a whole number (environment TERN_DATABASE_CALL_TIMEOUT)")
        #expect(await message(["TERN_DATABASE_CONNECTIONS": "1.5"])
            == "database.connections must be a whole number (environment TERN_DATABASE_CONNECTIONS)")
        #expect(await message(["TERN_CONSOLE_ENABLED": "maybe"]) == "console.enabled must be true or false (environment TERN_CONSOLE_ENABLED)")
        #expect(await message(file: #"{"http": {"port": "80"}}"#, [:]).hasPrefix("http.port must be a whole number ("))
        // JSON's own types: Foundation's reader took 1 and 0 for true and false, and true for 1 (a probe started a
        // node with one notification in flight from `"concurrency": true`), and called a number too large for its
        // setting "not JSON".
        #expect(await message(file: #"{"delivery": {"concurrency": true}}"#, [:]).hasPrefix("delivery.concurrency must be a whole number ("))
        #expect(await message(file: #"{"console": {"enabled": 0}}"#, [:]).hasPrefix("console.enabled must be true or false ("))
        #expect(await message(file: #"{"http": {"port": 12345678901234567890}}"#, [:]).hasPrefix("http.port must be a whole number ("))
        #expect(await message(file: #"{"http": {"port": 80.5}}"#, [:]).hasPrefix("http.port must be a whole number ("))
        #expect(await message(file: #"{"http": {"host": 127}}"#, [:]).hasPrefix("http.host must be a string ("))
        #expect(await message(file: #"{"http": {"port": null}}"#, [:]).hasPrefix("http.port must be a whole number ("))
        #expect(await message(file: #"{"admin": {"token": ["s3cr3t-value"]}}"#, [:]).contains("s3cr3t") == false)
        // The value itself is not repeated (an admin token or a database URL could be in the wrong place).
        #expect(await message(["TERN_HTTP_PORT": "s3cr3t-value"]).contains("s3cr3t") == false)
        // Set and readable, or not set at all: no error.
        #expect(await message(["TERN_DATABASE_CALL_TIMEOUT": "40", "TERN_CONSOLE_ENABLED": "false"]) == "loaded")
        #expect(await message([:]) == "loaded")
    }

    @Test func camelCaseKeysAreWordsInTheEnvironmentAndTheChunkLeaseIsChecked() async throws {
        let configuration = try await TernServerConfiguration.load(
            file: nil, environment: ["TERN_DELIVERY_PAGE_SIZE": "300", "TERN_DELIVERY_CHUNK_LEASE": "3"])
        #expect(configuration.delivery.chunkSize == 300, "the setting's former name is still read")
        #expect(configuration.delivery.chunkLease == .seconds(3), "a number of seconds")
        #expect(TernServerConfiguration().delivery.chunkLease == .seconds(15))
        let renamed = try await TernServerConfiguration.load(
            file: nil, environment: ["TERN_DELIVERY_PAGE_SIZE": "300", "TERN_DELIVERY_CHUNK_SIZE": "400", "TERN_INBOX_BADGE_UPDATE_DELAY": "250"])
        #expect(renamed.delivery.chunkSize == 400, "the new name wins")
        #expect(renamed.inbox.badgeUpdateDelay == .milliseconds(250), "a number of milliseconds")
        for lease in [Duration.seconds(1), .seconds(3601)] {
            var settings = TernServerConfiguration()
            settings.delivery.chunkLease = lease
            let error = #expect(throws: TernServerConfigurationError.self) { try settings.validate() }
            #expect(error?.description == "delivery.chunkLease must be 2-3600 seconds")
        }
    }

    @Test func theHTTPConnectionLimitsAreReadAndChecked() async throws {
        let defaults = TernServerConfiguration()
        #expect(defaults.http.maxConnections == nil)
        #expect(defaults.http.requestHeadTimeout == .seconds(30))
        #expect(defaults.http.requestBodyTimeout == .seconds(30))
        #expect(defaults.http.idleTimeout == .seconds(75))
        let configuration = try await TernServerConfiguration.load(file: nil, environment: [
            "TERN_HTTP_MAX_CONNECTIONS": "5000", "TERN_HTTP_REQUEST_HEAD_TIMEOUT": "10", "TERN_HTTP_REQUEST_BODY_TIMEOUT": "20",
            "TERN_HTTP_IDLE_TIMEOUT": "120",
        ])
        #expect(configuration.http.maxConnections == 5000)
        #expect(configuration.http.requestHeadTimeout == .seconds(10))
        #expect(configuration.http.requestBodyTimeout == .seconds(20))
        #expect(configuration.http.idleTimeout == .seconds(120))
        for (key, value, message) in [
            ("TERN_HTTP_MAX_CONNECTIONS", "0", "http.maxConnections must be 1-10000000, not 0"),
            ("TERN_HTTP_REQUEST_HEAD_TIMEOUT", "0", "http.requestHeadTimeout must be 1-600 seconds"),
            ("TERN_HTTP_REQUEST_BODY_TIMEOUT", "601", "http.requestBodyTimeout must be 1-600 seconds"),
            ("TERN_HTTP_IDLE_TIMEOUT", "7200", "http.idleTimeout must be 1-3600 seconds"),
        ] {
            let loaded = try await TernServerConfiguration.load(file: nil, environment: [key: value])
            #expect(performing: { try loaded.validate() }, throws: { ($0 as? TernServerConfigurationError)?.description == message })
        }
        // Unset, the ceiling follows the open-files limit, less what the node needs besides: read here from the
        // kernel's own account of the process (/proc/self/limits, "Max open files", the soft limit).
        let limits = try String(contentsOfFile: "/proc/self/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let soft = try #require(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first)
        if let files = Int(soft) {
            #expect(ConnectionCeiling.fromOpenFilesLimit() == max(64, files - ConnectionCeiling.reserve))
        } else {
            #expect(soft == "unlimited")
            #expect(ConnectionCeiling.fromOpenFilesLimit() == 1_000_000)
        }
    }

    @Test func theLegacyReplayWindowIsReadInMillisecondsAndChecked() async throws {
        #expect(TernServerConfiguration().apns.legacyReplayWindow == .milliseconds(500))
        let configuration = try await TernServerConfiguration.load(file: nil, environment: ["TERN_APNS_LEGACY_REPLAY_WINDOW": "2000"])
        #expect(configuration.apns.legacyReplayWindow == .seconds(2))
        for window in [Duration.milliseconds(5), .seconds(61)] {
            var settings = TernServerConfiguration()
            settings.apns.legacyReplayWindow = window
            let error = #expect(throws: TernServerConfigurationError.self) { try settings.validate() }
            #expect(error?.description == "apns.legacyReplayWindow must be 10-60000 ms")
        }
    }

    @Test func thePushRetentionIsReadInDaysAndZeroKeepsEveryPush() async throws {
        #expect(TernServerConfiguration().delivery.pushRetention == .seconds(30 * 86_400))
        let configuration = try await TernServerConfiguration.load(file: nil, environment: ["TERN_DELIVERY_PUSH_RETENTION": "7"])
        #expect(configuration.delivery.pushRetention == .seconds(7 * 86_400))
        let keeping = try await TernServerConfiguration.load(file: nil, environment: ["TERN_DELIVERY_PUSH_RETENTION": "0"])
        #expect(keeping.delivery.pushRetention == .zero)
        try keeping.validate()
        for days in [-1, 3651] {
            let settings = try await TernServerConfiguration.load(file: nil, environment: ["TERN_DELIVERY_PUSH_RETENTION": "\(days)"])
            let error = #expect(throws: TernServerConfigurationError.self) { try settings.validate() }
            #expect(error?.description == "delivery.pushRetention must be 1-3650 days, or 0 to keep every push")
        }
    }

    /// A setting in seconds: its default, read from its variable, and refused outside its range, naming it.
    struct SecondsSetting: Sendable, CustomTestStringConvertible {
        var key: String
        var variable: String
        var path: WritableKeyPath<TernServerConfiguration, Duration> & Sendable
        var defaultValue: Duration
        var given: Duration
        var outOfRange: [Duration]
        var range: String

        var testDescription: String { key }
    }

    static let secondsSettings = [
        SecondsSetting(
            key: "apns.idleTimeout", variable: "TERN_APNS_IDLE_TIMEOUT", path: \.apns.idleTimeout, defaultValue: .seconds(600),
            given: .seconds(120), outOfRange: [.seconds(5), .seconds(86_401)], range: "10-86400"),
        SecondsSetting(
            key: "apns.sendTimeout", variable: "TERN_APNS_SEND_TIMEOUT", path: \.apns.sendTimeout, defaultValue: .seconds(30),
            given: .seconds(90), outOfRange: [.zero, .seconds(601)], range: "1-600"),
        SecondsSetting(
            key: "channel.nodeTimeout", variable: "TERN_CHANNEL_NODE_TIMEOUT", path: \.channel.nodeTimeout, defaultValue: .seconds(60),
            given: .seconds(30), outOfRange: [.seconds(5), .seconds(3601)], range: "6-3600"),
    ]

    @Test(arguments: secondsSettings)
    func aSettingInSecondsIsReadAndChecked(_ setting: SecondsSetting) async throws {
        #expect(TernServerConfiguration()[keyPath: setting.path] == setting.defaultValue)
        let seconds = setting.given.components.seconds
        let configuration = try await TernServerConfiguration.load(file: nil, environment: [setting.variable: "\(seconds)"])
        #expect(configuration[keyPath: setting.path] == setting.given)
        for value in setting.outOfRange {
            var settings = TernServerConfiguration()
            settings[keyPath: setting.path] = value
            let error = #expect(throws: TernServerConfigurationError.self) { try settings.validate() }
            #expect(error?.description == "\(setting.key) must be \(setting.range) seconds")
        }
    }

    @Test func theConsoleIsOnByDefaultAndItsSettingsAreReadAndChecked() async throws {
        let defaults = TernServerConfiguration()
        #expect(defaults.console.enabled)
        #expect(!defaults.console.secureCookies)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try #"{"console": {"enabled": false, "sessionLifetime": 7200}}"#.write(to: file, atomically: true, encoding: .utf8)
        let configuration = try await TernServerConfiguration.load(
            file: file.path, environment: ["TERN_CONSOLE_SECURE_COOKIES": "true", "TERN_CONSOLE_SESSION_IDLE_TIMEOUT": "600"])
        #expect(configuration.console.enabled == false)
        #expect(configuration.console.secureCookies)
        #expect(configuration.console.sessionIdleTimeout == .seconds(600))
        #expect(configuration.console.sessionLifetime == .seconds(7200))
        var settings = TernServerConfiguration()
        settings.console.sessionLifetime = .seconds(60)
        #expect(throws: TernServerConfigurationError.self, "a lifetime shorter than the idle timeout") { try settings.validate() }
    }

    /// A misspelt setting was ignored: `{"http": {"prot": 0}}` listened on the default port, with no word.
    @Test func aKeyOrVariableThatIsNoSettingIsAnErrorNamingIt() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        for (json, unknown) in [
            (#"{"http": {"prot": 0}}"#, "http.prot"),
            (#"{"delivery": {"concurrency": 50, "concurency": 5}}"#, "delivery.concurency"),
            (#"{"bogus": 1}"#, "bogus"),
            (#"{"http": 8080}"#, "http"),
            // Nested, not dotted: a member named "http.port" is not the setting.
            (#"{"http.port": 8080}"#, "http.port"),
        ] {
            try json.write(to: file, atomically: true, encoding: .utf8)
            let error = await #expect(throws: TernServerConfigurationError.self) { _ = try await TernServerConfiguration.load(file: file.path, environment: [:]) }
            #expect(error?.description.contains("no setting \(unknown)") == true, "\(json): \(String(describing: error))")
        }
        for variable in ["TERN_HTTP_PROT", "TERN_DELIVERY_CONCURENCY", "TERN_SERVER_KEYFILE"] {
            let error = await #expect(throws: TernServerConfigurationError.self) { _ = try await TernServerConfiguration.load(file: nil, environment: [variable: "1"]) }
            #expect(error?.description.contains(variable) == true, "\(String(describing: error))")
        }
        // Every documented key is a setting, and other tools' TERN_ names are not Tern's to refuse.
        try #"{"http": {"port": 9000, "maxConnections": 100}, "delivery": {"pageSize": 500}, "admin": {"token": "0123456789abcdef"}}"#
            .write(to: file, atomically: true, encoding: .utf8)
        let taken = try await TernServerConfiguration.load(
            file: file.path, environment: ["TERN_URL": "http://x", "TERN_TEST_POSTGRES_URL": "postgres://x", "TERN_SERVER_SHUTDOWN_TIMEOUT": "5"])
        #expect(taken.http.port == 9000 && taken.http.maxConnections == 100 && taken.delivery.chunkSize == 500)
        #expect(taken.server.shutdownTimeout == .seconds(5))
    }

    @Test(arguments: ["apns.proxy", "webhooks.proxy"])
    func aProxyIsReadAsASecretAndAWrongOneIsAClearErrorWithoutItsPassword(setting: String) async throws {
        let variable = setting == "apns.proxy" ? "TERN_APNS_PROXY" : "TERN_WEBHOOKS_PROXY"
        let proxy = { (configuration: TernServerConfiguration) throws in
            try setting == "apns.proxy" ? configuration.apnsProxy : configuration.webhooksProxy
        }
        #expect(try proxy(TernServerConfiguration()) == nil)
        let configuration = try await TernServerConfiguration.load(
            file: nil, environment: [variable: "http://tern:hunter2secret@proxy.internal:3128"])
        #expect(try proxy(configuration) == HTTPProxy(host: "proxy.internal", port: 3128, username: "tern", password: "hunter2secret"))
        for (url, problem) in [
            ("https://tern:hunter2secret@proxy.internal:3128", "the scheme is https, not http"),
            ("http://tern:hunter2secret@proxy.internal", "no port"),
        ] {
            var settings = TernServerConfiguration()
            if setting == "apns.proxy" { settings.apns.proxy = url } else { settings.webhooks.proxy = url }
            let error = #expect(throws: TernServerConfigurationError.self) { try settings.validate() }
            let text = error?.description ?? ""
            #expect(text.hasPrefix("\(setting): the proxy must be http://[user:password@]host:port: \(problem)"), "\(text)")
            #expect(!text.contains("hunter2secret"))
        }
    }

    @Test func theMetricsTokenIsReadFromTheEnvironmentOrTheFileAndAShortOneIsRefused() async throws {
        #expect(TernServerConfiguration().http.metricsToken == nil)
        let fromEnvironment = try await TernServerConfiguration.load(
            file: nil, environment: ["TERN_HTTP_METRICS_TOKEN": "scrape-0123456789abcdef"])
        #expect(fromEnvironment.http.metricsToken == "scrape-0123456789abcdef")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try #"{"http": {"metricsToken": "scrape-from-the-file-0123"}}"#.write(to: file, atomically: true, encoding: .utf8)
        #expect(try await TernServerConfiguration.load(file: file.path, environment: [:]).http.metricsToken == "scrape-from-the-file-0123")

        var short = TernServerConfiguration()
        short.http.metricsToken = "scrape-123"
        let error = #expect(throws: TernServerConfigurationError.self) { try short.validate() }
        #expect(error?.description == "http.metricsToken must be at least 16 characters")
    }

    @Test func trustedProxiesAreAListInOneStringAndAWrongEntryIsAClearError() async throws {
        #expect(TernServerConfiguration().http.trustedProxies.isEmpty)
        let fromEnvironment = try await TernServerConfiguration.load(
            file: nil, environment: ["TERN_HTTP_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1,,fd00::/8 "])
        #expect(fromEnvironment.http.trustedProxies == ["10.0.0.0/8", "127.0.0.1", "fd00::/8"])
        try fromEnvironment.validate()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-config-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try #"{"http": {"trustedProxies": "192.168.0.0/16"}}"#.write(to: file, atomically: true, encoding: .utf8)
        #expect(try await TernServerConfiguration.load(file: file.path, environment: [:]).http.trustedProxies == ["192.168.0.0/16"])

        var wrong = TernServerConfiguration()
        wrong.http.trustedProxies = ["10.0.0.0/8", "lb.internal"]
        let error = #expect(throws: TernServerConfigurationError.self) { try wrong.validate() }
        #expect(error?.description == "http.trustedProxies: 'lb.internal' is not an IP address or a range such as 10.0.0.0/8")
    }

    @Test func aPostgreSQLDatabaseIsConfiguredByURLAndAWrongOneIsAClearError() async throws {
        let configuration = try await TernServerConfiguration.load(
            file: nil, environment: ["TERN_DATABASE_URL": "postgres://tern:pw@db:5432/tern", "TERN_DATABASE_CONNECTIONS": "4",
                                  "TERN_DATABASE_CALL_TIMEOUT": "40"])
        #expect(configuration.database.url == "postgres://tern:pw@db:5432/tern")
        #expect(configuration.database.connections == 4)
        #expect(configuration.database.callTimeout == .seconds(40))
        #expect(TernServerConfiguration().database.callTimeout == .seconds(15))

        func message(_ change: (inout TernServerConfiguration) -> Void) -> String {
            var settings = TernServerConfiguration()
            change(&settings)
            do {
                try settings.validate()
                return "valid"
            } catch {
                return error.description
            }
        }
        #expect(message { $0.database.url = "mysql://db/tern" }.contains("database.url must be a PostgreSQL URL"))
        #expect(message { $0.database.connections = 0 } == "database.connections must be 1-1000")
        #expect(message { $0.database.callTimeout = .zero } == "database.callTimeout must be 1-600 seconds")
        #expect(message { $0.database.callTimeout = .seconds(601) } == "database.callTimeout must be 1-600 seconds")
        #expect(message { $0.database.url = "postgresql://db/tern" } == "valid")

        // A server that is not there: the start fails at once, saying why, and never shows the password.
        var settings = TernServerConfiguration()
        settings.http.port = 0
        settings.simulator.enabled = false
        settings.database.url = "postgres://tern:hunter2secret@127.0.0.1:1/tern?sslmode=disable"
        let server = TernServer(configuration: settings, metrics: nil, logger: Logger(label: "test"))
        let error = await #expect(throws: TernServerConfigurationError.self) {
            try await server.run(gracefulShutdownSignals: []) { _ in }
        }
        let text = error?.description ?? ""
        #expect(text.hasPrefix("database: cannot reach PostgreSQL at postgres://tern:***@127.0.0.1:1/tern"), "\(text)")
        #expect(!text.contains("hunter2secret"))
    }
}
