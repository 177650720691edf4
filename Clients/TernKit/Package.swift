// swift-tools-version:6.0
// TernKit: the Swift package an iOS app adds to use Tern. No dependencies: Foundation (URLSession) and, on Apple
// platforms, the Security framework, so adding it to an app pulls in nothing else.
import PackageDescription

let package = Package(
    name: "TernKit",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [.library(name: "TernKit", targets: ["TernKit"])],
    targets: [
        .target(name: "TernKit"),
        .testTarget(name: "TernKitTests", dependencies: ["TernKit"]),
    ]
)
