// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "tern",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tern", targets: ["TernCLI"]),
        .library(name: "TernAPNs", targets: ["TernAPNs"]),
        .library(name: "TernSimulator", targets: ["TernSimulator"]),
        .library(name: "TernAPNsClient", targets: ["TernAPNsClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/sql-kit.git", from: "3.36.0"),
        .package(url: "https://github.com/vapor/sqlite-kit.git", from: "4.5.2"),
        .package(url: "https://github.com/vapor/postgres-kit.git", from: "2.17.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // Protocol core: values, rules, codecs and JWT. No I/O.
        .target(
            name: "TernAPNs",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                // Apple's push certificates name their app and topics (`PushCertificateIdentity`).
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // HTTP/2 frames on a ByteBuffer: what the simulator's server framing and the client's framing share.
        .target(
            name: "TernHTTP2",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // What Tern's JSON APIs share: the error shape, body decoding.
        .target(
            name: "TernWeb",
            dependencies: [
                "TernAPNs",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // A local APNs: HTTP/2 over TLS, token and certificate auth, scenarios, control API.
        .target(
            name: "TernSimulator",
            dependencies: [
                "TernAPNs",
                "TernHTTP2",
                "TernWeb",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        // The APNs HTTP/2 client: connection pool, retries, deadlines, backpressure.
        .target(
            name: "TernAPNsClient",
            dependencies: [
                "TernAPNs",
                "TernHTTP2",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // What `tern serve` keeps: the storage protocol and its SQL implementation on SQLite and PostgreSQL (its records
        // hold TernAPNs' values: environments, reasons).
        .target(
            name: "TernStore",
            dependencies: [
                "TernAPNs",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "SQLiteKit", package: "sqlite-kit"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What `tern serve` asks of the C library's allocator (glibc): how much it holds free, and giving that back.
        .target(name: "CTernHeap"),
        // `tern serve`: apps, the device registry, pushes and their durable delivery, over HTTP.
        .target(
            name: "TernServer",
            dependencies: [
                "CTernHeap",
                "TernAPNs",
                "TernAPNsClient",
                "TernStore",
                "TernWeb",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                // The online channel's WebSockets: upgraded by NIO and served by Tern's own handler (Channel/).
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                // The operator's console (Console/): its pages are Mustache templates, kept in Swift strings so `tern` stays
                // one file to install.
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // The built-in APNs simulator as `tern serve`'s embedded APNs (TernServer does not know the simulator).
        .target(
            name: "TernEmbeddedSimulator",
            dependencies: [
                "TernAPNs",
                "TernServer",
                "TernSimulator",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The `tern` command.
        .executableTarget(
            name: "TernCLI",
            dependencies: [
                "TernAPNs",
                "TernAPNsClient",
                "TernEmbeddedSimulator",
                "TernServer",
                "TernSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `tern device`: registers over HTTP and connects as a device does, over a WebSocket.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "TernCLITests",
            // TernSimulator: a certificate authority for certificates `tern simulator issue-cert` does not make (expired).
            dependencies: ["TernCLI", "TernAPNs", "TernSimulator", "TernTestSupport"]
        ),
        .testTarget(
            name: "TernServerTests",
            dependencies: [
                "TernServer",
                "TernAPNsClient",
                "TernEmbeddedSimulator",
                "TernWeb",
                "TernStore",
                "TernAPNs",
                "TernSimulator",
                "TernTestSupport",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                // The API tests that need no sockets send their requests straight to the router.
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                // Counters read back in value tests (swift-metrics' own test factory).
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                // The online channel's tests connect as devices do, over real WebSockets.
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "TernStoreTests",
            dependencies: [
                "TernStore",
                "TernAPNs",
                "TernTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SQLKit", package: "sql-kit"),
            ]
        ),
        .testTarget(
            name: "TernAPNsTests",
            dependencies: [
                "TernAPNs", .product(name: "Crypto", package: "swift-crypto"), .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // Helpers every test target shares (timeouts, HTTP and HTTP/2 clients, the PostgreSQL test server).
        .target(
            name: "TernTestSupport",
            dependencies: [
                "TernAPNs",
                // The hostile legacy peer's certificates come from the simulator's CA.
                "TernSimulator",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Tests/TernTestSupport"
        ),
        .testTarget(
            name: "TernAPNsClientTests",
            dependencies: [
                "TernTestSupport",
                "TernAPNs",
                "TernAPNsClient",
                "TernHTTP2",
                "TernSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "TernSimulatorTests",
            dependencies: [
                "TernTestSupport",
                "TernAPNs",
                "TernSimulator",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Release builds of Tern's own modules use cross-module optimization: the bodies of TernAPNs', TernAPNsClient's and
// TernStore's functions are available to the modules that call them, so a push's path through TernServer is
// specialized and inlined across module boundaries as it would be within one module. A 300,000-device push used 4-6%
// less CPU with it (docs/benchmarks.md, 2026-11-28). SwiftPM 6.2 and later accept unsafe flags in dependencies too.
for target in package.targets where [.regular, .executable].contains(target.type) && !target.name.hasPrefix("CTern") {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]
}
