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
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        // Protocol core: values, rules, codecs and JWT. No I/O.
        .target(
            name: "TernAPNs",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // HTTP/2 frames on a ByteBuffer: what the simulator's server framing and the client's framing share.
        .target(
            name: "TernHTTP2",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // A local APNs: HTTP/2 over TLS, token and certificate auth, scenarios, control API.
        .target(
            name: "TernSimulator",
            dependencies: [
                "TernAPNs",
                "TernHTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
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
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The `tern` command.
        .executableTarget(
            name: "TernCLI",
            dependencies: [
                "TernAPNs",
                "TernAPNsClient",
                "TernSimulator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "TernCLITests",
            dependencies: ["TernCLI"]
        ),
        .testTarget(
            name: "TernAPNsTests",
            dependencies: ["TernAPNs"]
        ),
        // Helpers every test target shares (timeouts).
        .target(
            name: "TernTestSupport",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
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
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
