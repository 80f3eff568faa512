import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Hummingbird
import Logging
import Metrics
import NIOCore
import NIOPosix
import ParleyAPI
import ParleyServer
import ParleyStore
import Prometheus
import ServiceLifecycle

@main
enum ParleyMain {
    static func main() async {
        // Swift Concurrency's jobs run on NIO's event loops instead of a pool of their own: a frame
        // read from a socket is handled, written to SQLite and fanned out to other sockets on the
        // thread that read it, instead of hopping between the two pools (two thread wake-ups per
        // hop, which cost more than the work itself). Nothing in the server blocks a thread for
        // long: ffmpeg, bcrypt, SQLite's writer and its WAL checkpoints run on threads of their own.
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await Parley.main()
    }
}

struct Parley: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley",
        abstract: "Parley: self-hosted customer messaging with voice.",
        subcommands: [Serve.self, Migrate.self, Admin.self],
        defaultSubcommand: Serve.self)
}

/// The settings every command that opens the database shares, as flags over `PARLEY_*` variables.
struct ServerOptions: ParsableArguments {
    @Option(help: "Address to listen on (PARLEY_HOST, default 127.0.0.1).") var host: String?
    @Option(help: "Port to listen on, 0 for any free port (PARLEY_PORT, default 8080).") var port: String?
    @Option(name: .customLong("data-dir"), help: "Directory for the SQLite file and media (PARLEY_DATA_DIR, default ./data).") var dataDir: String?
    @Option(name: .customLong("database-url"), help: "sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DB (PARLEY_DATABASE_URL).") var databaseURL: String?
    @Option(name: .customLong("public-dir"), help: "Directory of the web pages (PARLEY_PUBLIC_DIR, default ./Public).") var publicDir: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (PARLEY_LOG_LEVEL).") var logLevel: String?
    @Option(name: .customLong("bcrypt-cost"), help: "bcrypt work factor, 4-31 (PARLEY_BCRYPT_COST, default 12).") var bcryptCost: String?
    @Option(name: .customLong("secure-cookies"), help: "Mark the session cookie Secure: true behind HTTPS (PARLEY_SECURE_COOKIES).") var secureCookies: String?
    @Option(name: .customLong("seed-demo"), help: "Create a demo brand on first run (PARLEY_SEED_DEMO, default true).") var seedDemo: String?
    @Option(name: .customLong("agent-session-ttl"), help: "Seconds an agent stays signed in (PARLEY_AGENT_SESSION_TTL, default 43200).") var agentSessionTTL: String?
    @Option(name: .customLong("consumer-session-ttl"), help: "Seconds a consumer token is valid (PARLEY_CONSUMER_SESSION_TTL, default 2592000).") var consumerSessionTTL: String?
    @Option(help: "The ffmpeg program, by name or path (PARLEY_FFMPEG, default ffmpeg).") var ffmpeg: String?
    @Option(name: .customLong("max-voice-bytes"), help: "Largest voice upload in bytes (PARLEY_MAX_VOICE_BYTES, default 16777216).") var maxVoiceBytes: String?
    @Option(name: .customLong("voice-workers"), help: "Voice notes transcoded at once (PARLEY_VOICE_WORKERS, default 2).") var voiceWorkers: String?
    @Option(name: .customLong("ffmpeg-timeout"), help: "Seconds an ffmpeg run may take (PARLEY_FFMPEG_TIMEOUT, default 120).") var ffmpegTimeout: String?
    @Option(name: .customLong("realtime-queue-limit"), help: "Frames waiting per WebSocket before it is closed with 4000 (PARLEY_REALTIME_QUEUE_LIMIT, default 512).") var realtimeQueueLimit: String?
    @Option(name: .customLong("call-ring-timeout"), help: "Seconds a call rings before it is missed (PARLEY_CALL_RING_TIMEOUT, default 45).") var callRingTimeout: String?
    @Option(name: .customLong("call-connect-timeout"), help: "Seconds from answer to connected media (PARLEY_CALL_CONNECT_TIMEOUT, default 30).") var callConnectTimeout: String?
    @Option(name: .customLong("stun-urls"), help: "Comma-separated stun: URLs for calls (PARLEY_STUN_URLS).") var stunURLs: String?
    @Option(name: .customLong("turn-urls"), help: "Comma-separated turn:/turns: URLs of coturn for calls (PARLEY_TURN_URLS).") var turnURLs: String?
    @Option(name: .customLong("turn-secret"), help: "coturn's static-auth-secret; prefer PARLEY_TURN_SECRET, which ps does not show.") var turnSecret: String?
    @Option(name: .customLong("turn-credential-ttl"), help: "Seconds a call's TURN credentials are valid (PARLEY_TURN_CREDENTIAL_TTL, default 14400).") var turnCredentialTTL: String?
    @Option(name: .customLong("call-relay-only"), help: "Send all call media through TURN (PARLEY_CALL_RELAY_ONLY, default false).") var callRelayOnly: String?
    @Option(name: .customLong("upload-idle-timeout"), help: "Seconds an upload may send nothing before it is abandoned (PARLEY_UPLOAD_IDLE_TIMEOUT, default 15).") var uploadIdleTimeout: String?
    @Option(name: .customLong("rate-consumer-messages"), help: "Messages per minute per consumer, 0 for no limit (PARLEY_RATE_CONSUMER_MESSAGES, default 60).") var rateConsumerMessages: String?
    @Option(name: .customLong("rate-ip-writes"), help: "Consumer writes per minute per IP address (PARLEY_RATE_IP_WRITES, default 600).") var rateIPWrites: String?
    @Option(name: .customLong("rate-consumer-sessions"), help: "New consumer sessions per minute per IP address (PARLEY_RATE_CONSUMER_SESSIONS, default 30).") var rateConsumerSessions: String?
    @Option(name: .customLong("rate-logins"), help: "Sign-in attempts per minute per IP address (PARLEY_RATE_LOGINS, default 20).") var rateLogins: String?
    @Option(name: .customLong("trust-proxy"), help: "Take client addresses from X-Forwarded-For (PARLEY_TRUST_PROXY, default false).") var trustProxy: String?
    @Option(help: "Malware scanner: auto, off, tcp://HOST:PORT or unix:///PATH (PARLEY_CLAMD, default auto).") var clamd: String?
    @Option(name: .customLong("clamd-timeout"), help: "Seconds a malware scan may take (PARLEY_CLAMD_TIMEOUT, default 10).") var clamdTimeout: String?
    @Option(name: .customLong("scan-retry"), help: "Seconds before an unscanned note is tried again, doubling (PARLEY_SCAN_RETRY, default 10).") var scanRetry: String?
    @Option(name: .customLong("scan-max-attempts"), help: "Scans tried before an unscannable note is blocked (PARLEY_SCAN_MAX_ATTEMPTS, default 40).") var scanMaxAttempts: String?
    @Option(name: .customLong("header-timeout"), help: "Seconds a new connection has to send its first request head (PARLEY_HEADER_TIMEOUT, default 10).") var headerTimeout: String?
    @Option(name: .customLong("idle-timeout"), help: "Seconds a keep-alive connection may sit idle (PARLEY_IDLE_TIMEOUT, default 60).") var idleTimeout: String?
    @Option(name: .customLong("max-header-bytes"), help: "Largest request head in bytes (PARLEY_MAX_HEADER_BYTES, default 32768).") var maxHeaderBytes: String?
    @Option(name: .customLong("max-connections-per-address"), help: "Open connections per client address, 0 for no limit (PARLEY_MAX_CONNECTIONS_PER_ADDRESS, default 512).") var maxConnectionsPerAddress: String?
    @Option(name: .customLong("upload-min-rate"), help: "Slowest upload in bytes per second over 10 s windows (PARLEY_UPLOAD_MIN_RATE, default 1024).") var uploadMinRate: String?
    @Option(name: .customLong("upload-deadline"), help: "Seconds a whole upload may take (PARLEY_UPLOAD_DEADLINE, default 300).") var uploadDeadline: String?
    @Option(name: .customLong("voice-analyses"), help: "Voice notes decoded for analysis at once (PARLEY_VOICE_ANALYSES, default 2).") var voiceAnalyses: String?
    @Option(name: .customLong("voice-queue"), help: "Voice notes that may wait for analysis before 503 (PARLEY_VOICE_QUEUE, default 8).") var voiceQueue: String?
    @Option(name: .customLong("uploads-per-consumer"), help: "Voice uploads in progress per consumer (PARLEY_UPLOADS_PER_CONSUMER, default 2).") var uploadsPerConsumer: String?
    @Option(name: .customLong("uploads-per-address"), help: "Voice uploads in progress per client address (PARLEY_UPLOADS_PER_ADDRESS, default 4).") var uploadsPerAddress: String?
    @Option(name: .customLong("realtime-frame-rate"), help: "Frames per second one WebSocket may send (PARLEY_REALTIME_FRAME_RATE, default 20).") var realtimeFrameRate: String?
    @Option(name: .customLong("realtime-write-timeout"), help: "Seconds a WebSocket write may wait before the socket is closed (PARLEY_REALTIME_WRITE_TIMEOUT, default 10).") var realtimeWriteTimeout: String?
    @Option(name: .customLong("allowed-origins"), help: "Comma-separated origins that may use the session cookie besides the server's own (PARLEY_ALLOWED_ORIGINS).") var allowedOrigins: String?
    @Option(name: .customLong("metrics-token"), help: "Bearer token for /metrics; prefer PARLEY_METRICS_TOKEN (default: loopback only).") var metricsToken: String?
    @Option(name: .customLong("orphan-media-age"), help: "Seconds before a media file no row refers to is removed (PARLEY_ORPHAN_MEDIA_AGE, default 3600).") var orphanMediaAge: String?

    /// Defaults, then the environment, then flags; exits with a message naming the setting on error.
    func resolve() throws -> ParleyConfiguration {
        do {
            var configuration = try ParleyConfiguration.fromEnvironment()
            let flags: [(String, String?)] = [
                ("host", host), ("port", port), ("data-dir", dataDir), ("database-url", databaseURL),
                ("public-dir", publicDir), ("log-level", logLevel), ("bcrypt-cost", bcryptCost),
                ("secure-cookies", secureCookies), ("seed-demo", seedDemo), ("agent-session-ttl", agentSessionTTL),
                ("consumer-session-ttl", consumerSessionTTL), ("ffmpeg", ffmpeg), ("max-voice-bytes", maxVoiceBytes),
                ("voice-workers", voiceWorkers), ("ffmpeg-timeout", ffmpegTimeout), ("realtime-queue-limit", realtimeQueueLimit),
                ("call-ring-timeout", callRingTimeout), ("call-connect-timeout", callConnectTimeout), ("stun-urls", stunURLs),
                ("turn-urls", turnURLs), ("turn-secret", turnSecret), ("turn-credential-ttl", turnCredentialTTL),
                ("call-relay-only", callRelayOnly), ("clamd", clamd), ("clamd-timeout", clamdTimeout), ("scan-retry", scanRetry),
                ("scan-max-attempts", scanMaxAttempts), ("rate-consumer-messages", rateConsumerMessages),
                ("rate-ip-writes", rateIPWrites), ("rate-consumer-sessions", rateConsumerSessions), ("rate-logins", rateLogins),
                ("trust-proxy", trustProxy), ("upload-idle-timeout", uploadIdleTimeout),
                ("header-timeout", headerTimeout),
                ("idle-timeout", idleTimeout),
                ("max-header-bytes", maxHeaderBytes),
                ("max-connections-per-address", maxConnectionsPerAddress),
                ("upload-min-rate", uploadMinRate),
                ("upload-deadline", uploadDeadline),
                ("voice-analyses", voiceAnalyses),
                ("voice-queue", voiceQueue),
                ("uploads-per-consumer", uploadsPerConsumer),
                ("uploads-per-address", uploadsPerAddress),
                ("realtime-frame-rate", realtimeFrameRate),
                ("realtime-write-timeout", realtimeWriteTimeout),
                ("allowed-origins", allowedOrigins),
                ("metrics-token", metricsToken),
                ("orphan-media-age", orphanMediaAge),
            ]
            for case let (flag, value?) in flags {
                try configuration.apply(flag: flag, value: value)
            }
            try configuration.validate()
            return configuration
        } catch {
            FileHandle.standardError.write(Data("parley: \(error)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }
    }

    func logger(_ configuration: ParleyConfiguration) -> Logger {
        var logger = Logger(label: "parley")
        logger.logLevel = configuration.logLevel
        return logger
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the Parley server (HTTP API, real-time, web pages).")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = options.logger(configuration)
        raiseDescriptorLimit(logger: logger)
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let services: ParleyServices
        do {
            services = try await ParleyServices.make(configuration: configuration, metrics: ParleyMetrics(registry: registry), logger: logger)
        } catch {
            FileHandle.standardError.write(Data("parley: cannot start: \(error)\n".utf8))
            throw ExitCode(1)
        }
        if configuration.seedDemo, let demo = try await services.identity.seedDemoIfEmpty() {
            say(
                """

                Parley created a demo brand on first run. These credentials are shown only once:
                  brand     \(demo.brand.name) (\(demo.brand.id))
                  web app   \(demo.app.name) (\(demo.app.id))
                  admin     \(demo.admin.email)
                  password  \(demo.adminPassword)

                """)
        }
        let app = buildApplication(services, logger: logger) { port in
            say("Parley is listening on http://\(configuration.host):\(port)")
        }
        do {
            try await makeServiceGroup(app, services, logger: logger).run()
        } catch {
            await services.close()
            throw error
        }
        await services.close()
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and exit.")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = options.logger(configuration)
        raiseDescriptorLimit(logger: logger)
        let database = try await openDatabase(DatabaseLocation(url: configuration.resolvedDatabaseURL), logger: logger)
        let applied = try await Migrations.apply(to: database, logger: logger)
        let all = try await Migrations.appliedVersions(in: database)
        await database.close()
        say(applied.isEmpty ? "Database is up to date (schema version \(all.last ?? 0))." : "Applied migrations \(applied.map(String.init).joined(separator: ", ")).")
    }
}

struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operator tasks: create brands, apps and agents.",
        subcommands: [CreateBrand.self, CreateApp.self, CreateAgent.self])
}

struct CreateBrand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create-brand", abstract: "Create a brand with a web app and an admin agent.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The brand's name.") var name: String
    @Option(name: .customLong("admin-email"), help: "Email of the brand's first admin.") var adminEmail: String
    @Option(name: .customLong("admin-name"), help: "Name of the brand's first admin.") var adminName: String = "Admin"
    @Option(name: .customLong("app-name"), help: "Name of the brand's web app.") var appName: String = "Website"

    func run() async throws {
        try await withServices(options) { services in
            let created = try await services.identity.createBrand(name: name, adminEmail: adminEmail, adminName: adminName, appName: appName)
            say("brand \(created.brand.id)\napp \(created.app.id)\nadmin \(created.admin.email)\npassword \(created.adminPassword)")
        }
    }
}

struct CreateApp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create-app", abstract: "Create an app (web widget or mobile app) for a brand.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The brand id (brd_...).") var brand: String
    @Option(help: "The app's name.") var name: String
    @Option(help: "web, in_app, whatsapp, messenger, apple or sms.") var channel: String = "web"

    func run() async throws {
        guard let channel = Channel(rawValue: channel) else {
            throw ValidationError("'\(channel)' is not a channel: use web, in_app, whatsapp, messenger, apple or sms.")
        }
        try await withServices(options) { services in
            let app = try await services.identity.createApp(brandId: brand, CreateAppRequest(name: name, channel: channel))
            say("app \(app.id)")
        }
    }
}

struct CreateAgent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create-agent", abstract: "Create an agent; the password is generated and printed once.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The brand id (brd_...).") var brand: String
    @Option(help: "The agent's email.") var email: String
    @Option(help: "The agent's name.") var name: String
    @Option(help: "agent, manager or admin.") var role: String = "agent"
    @Option(name: .customLong("permission"), help: "send_audio, initiate_voice_call or initiate_video_call; repeat for several.") var permissions: [String] = []

    func run() async throws {
        guard let role = AgentRole(rawValue: role) else { throw ValidationError("'\(role)' is not a role: use agent, manager or admin.") }
        let parsed = try permissions.map { raw in
            guard let permission = AgentPermission(rawValue: raw) else { throw ValidationError("'\(raw)' is not a permission.") }
            return permission
        }
        try await withServices(options) { services in
            let password = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(20))
            let agent = try await services.identity.createAgent(
                brandId: brand, CreateAgentRequest(email: email, name: name, password: password, role: role, permissions: parsed))
            say("agent \(agent.id)\nemail \(agent.email)\npassword \(password)")
        }
    }
}

/// Opens the services for a one-off command and closes them afterwards.
func withServices(_ options: ServerOptions, _ body: (ParleyServices) async throws -> Void) async throws {
    var configuration = try options.resolve()
    configuration.seedDemo = false
    let services = try await ParleyServices.make(configuration: configuration, logger: options.logger(configuration))
    do {
        try await body(services)
    } catch {
        await services.close()
        FileHandle.standardError.write(Data("parley: \(error)\n".utf8))
        throw ExitCode(1)
    }
    await services.close()
}

/// Writes a line to standard output unbuffered, so that it reaches a log file at once.
func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// Every connection costs a file descriptor; the common soft limit of 1,024 is far below what a
/// server with thousands of WebSockets needs. Raise the soft limit to the hard one (which the
/// service manager sets: `LimitNOFILE=` in systemd, `ulimit -Hn` in a shell).
func raiseDescriptorLimit(logger: Logger) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    let before = limit.rlim_cur
    limit.rlim_cur = limit.rlim_max
    if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
        logger.info("raised the file descriptor limit", metadata: ["from": "\(before)", "to": "\(limit.rlim_max)"])
    }
    if limit.rlim_max < 4096 {
        logger.warning("the file descriptor limit is low: each connection needs one", metadata: ["limit": "\(limit.rlim_max)"])
    }
}
