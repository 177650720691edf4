import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import TernEmbeddedSimulator
import TernServer

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run Tern: the push service your app backend talks to.",
        discussion: """
            With no options it listens on 127.0.0.1:8080, keeps its data in ./tern.db \
            (SQLite) and its server key in ./tern.key, runs an APNs simulator in this \
            process and, on the first start, creates a `demo` app that delivers to it. \
            It prints the admin token and the demo app's secrets once: keep them.

            Settings come from, strongest first: these options, environment variables \
            (TERN_HTTP_PORT for http.port, TERN_ADMIN_TOKEN, TERN_SERVER_KEY, …) and \
            a JSON file given with --config, e.g.
              {"http": {"host": "0.0.0.0", "port": 8080},
               "database": {"path": "/var/lib/tern/tern.db"},
               "delivery": {"concurrency": 4000}}
            Keys: http.host, http.port, http.maxConnections (open connections at most, \
            devices' included: default the open-files limit less 512), \
            http.requestHeadTimeout (seconds a request's head may take to arrive: default \
            30), http.requestBodyTimeout (seconds a request's body may \
            take after its head: default 30), http.idleTimeout (seconds between \
            requests: default 75), http.metricsToken (what GET /metrics asks as \
            Bearer; unset, it answers anyone), http.trustedProxies (load balancers \
            whose X-Forwarded-For names the client, e.g. 10.0.0.0/8,127.0.0.1), \
            database.path, database.url (PostgreSQL; \
            TERN_DATABASE_URL), database.connections, database.callTimeout (seconds a \
            PostgreSQL call may take: default 15), admin.token, server.key, \
            server.keyFile, simulator.enabled, simulator.stateDirectory, demo.enabled, \
            delivery.chunkSize (recipients per chunk; formerly delivery.pageSize), \
            delivery.concurrency (notifications sent and not yet recorded, at most: the \
            most a crash sends twice), delivery.minimumConcurrency (where the in-flight \
            limit starts; it follows APNs' round trips up to delivery.concurrency), \
            delivery.pushes, delivery.ordering (one notification per \
            device in flight, so badges never jump: default true), delivery.chunkLease \
            (seconds before a dead node's chunks go to another node: default 15), \
            delivery.pushRetention (days a completed push, with its failures, is kept:
            default 30; 0 keeps every push), \
            apns.connections, apns.idleTimeout (seconds an APNs connection may carry \
            nothing before it is closed: default 600), apns.sendTimeout (seconds a \
            notification may take to be answered, and an endpoint be unreachable before \
            its notifications fail at once: default 30), apns.legacyReplayWindow (ms a legacy gateway notification \
            waits for an error before it counts as accepted: default 500), apns.proxy \
            (http://[user:password@]host:port: an HTTP proxy to reach APNs through; TERN_APNS_PROXY), \
            inbox.sweepInterval (seconds between deletions of what expired or passed \
            its retention: default 60), inbox.badgeUpdateDelay (ms:
            reads gathered into one silent badge update), feedback.checkInterval (seconds \
            between looks for legacy apps due a feedback read), channel.pingInterval (ms \
            between pings on each device connection: default 30000), channel.nodeTimeout \
            (seconds a node sharing the database may go unseen before its devices count \
            as disconnected: default 60), \
            webhooks.allowPrivateNetworks, webhooks.proxy (http://[user:password@]host:port: \
            an HTTP proxy to post webhooks through; TERN_WEBHOOKS_PROXY), \
            server.shutdownTimeout (seconds), \
            console.enabled (the operator's console at /console: default true), \
            console.secureCookies (behind a TLS proxy that sends no X-Forwarded-Proto), \
            console.sessionIdleTimeout and console.sessionLifetime (seconds: default \
            1800 and 43200).

            Ctrl-C (SIGINT) or SIGTERM stops it gracefully: no new requests, the chunks \
            of recipients in flight are delivered and recorded (not an auto chunk still \
            waiting for acknowledgements: its devices' connections close first), the \
            rest of a push is sent by the other nodes or resumes at the next start. A \
            second signal during that stop cancels what is left at once.

            Examples:
              tern serve
              tern serve --port 9000 --database /tmp/tern.db
              tern serve --database postgres://tern:secret@db.internal:5432/tern
              TERN_ADMIN_TOKEN=$(openssl rand -hex 24) tern serve --config tern.json
            """
    )

    @Option(name: .long, help: ArgumentHelp("A JSON configuration file.", valueName: "file"))
    var config: String?

    @Option(name: .long, help: "Address to listen on (default 127.0.0.1).")
    var host: String?

    @Option(name: .long, help: "Port to listen on (default 8080; 0 picks a free one).")
    var port: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The SQLite database file (default ./tern.db), or a PostgreSQL URL (postgres://user:password@host:5432/tern) that several nodes may share.",
            valueName: "file|url"))
    var database: String?

    @Option(name: .long, help: ArgumentHelp("The server key file (default ./tern.key; created 0600 if missing).", valueName: "file"))
    var serverKeyFile: String?

    @Flag(name: .long, help: "Do not run the built-in APNs simulator (apps in the simulator environment cannot deliver).")
    var noSimulator = false

    @Flag(name: .long, help: "Do not create the demo app on the first start.")
    var noDemo = false

    @Flag(name: .long, help: "Do not serve the operator's console at /console.")
    var noConsole = false

    @Option(name: .long, help: "Log level (trace … critical).")
    var logLevel = Logger.Level.info

    /// A setting that cannot be taken: one line naming it, and the usage error's exit status (64), without the
    /// usage text an option's own error prints (the settings come from a file and the environment too).
    private static func refuse(_ error: any Error) -> ExitCode {
        FileHandle.standardError.write(Data("tern serve: \(error)\n".utf8))
        return ExitCode(64)
    }

    func run() async throws {
        var settings: TernServerConfiguration
        do {
            settings = try await TernServerConfiguration.load(file: config)
        } catch {
            throw Self.refuse(error)
        }
        if let host { settings.http.host = host }
        if let port { settings.http.port = port }
        if let database {
            if database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") {
                settings.database.url = database
            } else {
                settings.database.path = database
            }
        }
        if let serverKeyFile { settings.server.keyFile = serverKeyFile }
        if noSimulator { settings.simulator.enabled = false }
        if noDemo { settings.demo.enabled = false }
        if noConsole { settings.console.enabled = false }
        do {
            try settings.validate()
        } catch {
            throw Self.refuse(error)
        }

        bootstrapLogging(logLevel)
        let registry = PrometheusCollectorRegistry()
        var metrics = PrometheusMetricsFactory(registry: registry)
        metrics.nameAndLabelSanitizer = HTTPMetrics.prometheusNames
        MetricsSystem.bootstrap(metrics)
        let logger = Logger(label: "tern")
        // The composition: apps in the `simulator` environment deliver to the built-in simulator.
        let server = TernServer(
            configuration: settings, metrics: registry, logger: logger,
            embeddedAPNs: BuiltInSimulator.factory(
                stateDirectory: URL(fileURLWithPath: settings.simulator.stateDirectory, isDirectory: true), logger: logger))
        do {
            try await server.run { banner in
                // Unbuffered: whoever reads stdout (a pipe, a journal) gets the banner now, not at exit.
                FileHandle.standardOutput.write(Data(Self.describe(banner).utf8))
            }
        } catch let error as TernServerConfigurationError {
            // One line that says what could not be bound, opened or reached; nothing else has started.
            FileHandle.standardError.write(Data("tern serve: cannot start: \(error.description)\n".utf8))
            throw ExitCode(1)
        }
    }

    static func describe(_ banner: TernServer.Banner) -> String {
        var lines = ["Tern is serving on \(banner.url)  (data: \(banner.databasePath))"]
        if let console = banner.consoleURL {
            lines.append("  console          \(console)   (the operator's pages, in a browser)")
        }
        if let file = banner.newServerKeyFile {
            lines.append("  server key       created in \(file): it seals the apps' APNs credentials; back it up with the database")
        }
        if let simulator = banner.simulator {
            lines.append("  APNs simulator   https://127.0.0.1:\(simulator.port)" + (simulator.controlPort.map { "  (control API http://127.0.0.1:\($0))" } ?? ""))
        }
        if let token = banner.newAdminToken {
            lines.append("  admin token      \(token)   (shown once; it manages apps)")
        }
        if let demo = banner.demo {
            lines += [
                "  demo app         \(TernServer.demoAppID) (topic \(TernServer.demoTopic), delivers to the simulator)",
                "    app key          \(demo.appKey)   (for devices)",
                "    master secret    \(demo.masterSecret)   (for your backend)",
                "    identity secret  \(demo.identitySecret)   (for your backend: signs alias tokens)",
                "",
                "Try it (the alias token binds the device to \(TernServer.demoAlias) for the next hour; your backend mints these):",
                "  curl -X PUT \(banner.url)/v1/apps/demo/devices/6f1c1f9e-8d7a-4d44-9d2e-3c5a3c1d2e01 \\",
                "    -H 'Authorization: Bearer \(demo.appKey)' -H 'Content-Type: application/json' \\",
                "    -d '{\"token\": \"\(String(repeating: "ab", count: 32))\", \"environment\": \"production\", \"alias\": \"\(TernServer.demoAlias)\",",
                "         \"aliasToken\": \"\(demo.aliasToken)\"}'",
                "  curl -X POST '\(banner.url)/v1/apps/demo/pushes?wait=5' \\",
                "    -H 'Authorization: Bearer \(demo.masterSecret)' -H 'Content-Type: application/json' \\",
                "    -d '{\"audience\": {\"aliases\": [\"user-42\"]}, \"notification\": {\"title\": \"Hello\", \"body\": \"from Tern\"}}'",
            ]
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
