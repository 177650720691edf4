// swift-tools-version:6.0
// TernKit: the Swift package an iOS app adds to use Tern. The library has no dependencies: Foundation (URLSession)
// and, on Apple platforms, the Security framework, so adding it to an app pulls in nothing else.
//
// The one dependency below is for the tests alone, and on Linux alone: Foundation's URLSessionWebSocketTask fails
// there ("WebSockets not supported by libcurl"), so the tests reach the online channel through a WebSocket client on
// SwiftNIO (Tests/TernKitTests/Support/NIOChannelTransport.swift). SwiftPM does not fetch a package's test-only
// dependencies for the apps that depend on it.
import PackageDescription

let package = Package(
    name: "TernKit",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [.library(name: "TernKit", targets: ["TernKit"])],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
    ],
    targets: [
        .target(name: "TernKit"),
        .testTarget(
            name: "TernKitTests",
            dependencies: [
                "TernKit",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket", condition: .when(platforms: [.linux])),
            ]
        ),
    ]
)
