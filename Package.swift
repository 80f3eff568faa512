// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]
/// The server's modules: a nonisolated async function runs on its caller's executor
/// (`nonisolated(nonsending)`, SE-0461) unless it says `@concurrent`. A message's path is some
/// twenty async calls deep, and each call into and back out of a function that hops to the generic
/// executor was a `swift_task_switch`, which reads the task's executor preference under a lock
/// (docs/architecture.md, "Async calls on the message path").
let serverSettings = swiftSettings + [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]

let package = Package(
    name: "parley",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .executable(name: "parley", targets: ["parley"]),
        .executable(name: "parley-bench", targets: ["parley-bench"]),
        .library(name: "ParleyServer", targets: ["ParleyServer"]),
    ],
    dependencies: [
        // The SDK and the wire types, a package of their own (ParleyKit/Package.swift).
        .package(path: "ParleyKit"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/vapor/sqlite-kit.git", from: "4.5.2"),
        .package(url: "https://github.com/vapor/postgres-kit.git", from: "2.17.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // HTTP/1 <-> swift-http-types for the real-time channel (already built for Hummingbird).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Outbound calls to messaging providers (WhatsApp, Messenger, Apple, Twilio) and media fetches.
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // multipart/form-data for providers' media uploads (WhatsApp's /media endpoint).
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
        // gzip for Apple Messages for Business (its gateway's bodies); already built for WebSocket compression.
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        // Extra trust roots for providers' HTTPS (a local APNs endpoint in tests; already built for AsyncHTTPClient).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // Traces over OTLP/HTTP only (its gRPC exporter would add grpc-swift to every build).
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .target(name: "ParleyDomain", dependencies: [.product(name: "ParleyAPI", package: "ParleyKit")], swiftSettings: serverSettings),
        // A VFS that gathers a commit's WAL writes into one (Sources/CParleySQLite/wal_writes.c);
        // SQLite's header comes with SQLiteKit.
        .target(name: "CParleySQLite", dependencies: [.product(name: "SQLiteKit", package: "sqlite-kit")]),
        .target(
            name: "ParleyStore",
            dependencies: [
                .product(name: "ParleyAPI", package: "ParleyKit"), "ParleyDomain", "CParleySQLite",
                .product(name: "SQLiteKit", package: "sqlite-kit"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                // sslmode's certificate checks (TLS to PostgreSQL); already built for PostgresNIO.
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // The operating system's reason when PostgreSQL cannot be reached (NIOConnectionError).
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: serverSettings
        ),
        .target(
            name: "ParleyMedia",
            dependencies: [
                .product(name: "ParleyAPI", package: "ParleyKit"), "ParleyDomain",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: serverSettings
        ),
        .target(
            name: "ParleyServer",
            dependencies: [
                .product(name: "ParleyAPI", package: "ParleyKit"), "ParleyDomain", "ParleyStore", "ParleyMedia",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                // AES-CTR for Apple Messages for Business attachments.
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            swiftSettings: serverSettings
        ),
        // ParleyKit's transport on SwiftNIO, for Linux (`parley chat`, the tests): not part of the SDK.
        .target(
            name: "ParleyKitNIO",
            dependencies: [
                .product(name: "ParleyAPI", package: "ParleyKit"), .product(name: "ParleyKit", package: "ParleyKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSCompression", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "parley",
            dependencies: [
                .product(name: "ParleyAPI", package: "ParleyKit"), "ParleyDomain", "ParleyMedia", "ParleyServer", "ParleyStore",
                .product(name: "ParleyKit", package: "ParleyKit"), "ParleyKitNIO",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: serverSettings
        ),
        // The benchmarks (bench/README.md): a load generator that runs `parley serve` as a separate process.
        .executableTarget(
            name: "parley-bench",
            dependencies: [
                .product(name: "ParleyAPI", package: "ParleyKit"), "ParleyDomain", "ParleyMedia", .product(name: "ParleyKit", package: "ParleyKit"), "ParleyKitNIO",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSCompression", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The durable-message floor (relay-floor-server): SQLite as Parley opens it.
                "CParleySQLite", .product(name: "SQLiteKit", package: "sqlite-kit"),
            ],
            path: "bench/Sources/parley-bench",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "ParleyDomainTests", dependencies: [.product(name: "ParleyAPI", package: "ParleyKit"), "ParleyDomain"], swiftSettings: serverSettings),
        .testTarget(
            name: "ParleyMediaTests", dependencies: ["ParleyDomain", "ParleyMedia"],
            // Real read speech for the transcriber (Fixtures/speech/SOURCES.md), read from the source tree.
            exclude: ["Fixtures"], swiftSettings: serverSettings),
        .testTarget(name: "ParleyStoreTests", dependencies: [.product(name: "ParleyAPI", package: "ParleyKit"), "ParleyDomain", "ParleyStore", "CParleySQLite", .product(name: "SQLiteKit", package: "sqlite-kit")], swiftSettings: serverSettings),
        .testTarget(
            name: "ParleyServerTests",
            dependencies: [
                "ParleyServer", .product(name: "ParleyKit", package: "ParleyKit"), "ParleyKitNIO", "ParleyMedia", "ParleyDomain", "ParleyStore",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                // A local APNs endpoint: HTTP/2 over TLS.
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // The real-time socket in an EmbeddedChannel.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            // Providers' documented payloads, read from the source tree (see Fixtures/*/SOURCES.md).
            exclude: ["Fixtures"],
            swiftSettings: serverSettings
        ),
    ]
)
