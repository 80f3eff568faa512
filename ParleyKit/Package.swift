// swift-tools-version:6.0
// ParleyKit, the Swift SDK for brands' apps, and ParleyAPI, the wire types it shares with the
// server. A package of its own so that an app adding it resolves swift-crypto and nothing of the
// server's (Hummingbird, PostgreSQL, SQLite...): the server's package uses it by path.
import PackageDescription

let package = Package(
    name: "ParleyKit",
    // The one floor (README, DocC and code agree): Observation and the SDK's APIs need iOS 17 / macOS 14.
    platforms: [.iOS(.v17), .macOS(.v14), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "ParleyKit", targets: ["ParleyKit"]),
        .library(name: "ParleyAPI", targets: ["ParleyAPI"]),
    ],
    dependencies: [
        // Sealing what the SDK stores on the device (AES-GCM); CryptoKit on Apple platforms.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        .target(name: "ParleyAPI", swiftSettings: [.enableUpcomingFeature("ExistentialAny")]),
        .target(
            name: "ParleyKit",
            dependencies: ["ParleyAPI", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]),
    ],
    swiftLanguageModes: [.v6]
)
