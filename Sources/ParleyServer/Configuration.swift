import Foundation
import Logging
import ParleyMedia
import ParleyStore

/// Everything `parley serve` can be told. Each setting has a flag, a `PARLEY_*` environment variable
/// and a default; a flag wins over the environment, which wins over the default.
public struct ParleyConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var dataDirectory: String = "./data"
    /// nil: `sqlite://<dataDirectory>/parley.sqlite`.
    public var databaseURL: String?
    /// SQLite fsyncs every commit (survives power loss) instead of at checkpoints (survives a crash).
    public var sqliteFullSync = false
    public var publicDirectory: String = "./Public"
    public var logLevel: Logger.Level = .info
    public var bcryptCost: Int = 12
    public var agentSessionTTL: TimeInterval = 12 * 3600
    public var consumerSessionTTL: TimeInterval = 30 * 24 * 3600
    /// Marks the session cookie `Secure`. Turn on whenever Parley is served over HTTPS.
    public var secureCookies: Bool = false
    /// Creates a demo brand, app and admin when the database has no brand yet.
    public var seedDemo: Bool = true
    /// Frames a real-time connection may have waiting before it is closed as too slow to keep up.
    public var realtimeQueueLimit: Int = 512
    /// Largest JSON request body, in bytes.
    public var maxJSONBodyBytes: Int = 64 * 1024
    /// Largest inbound WebSocket frame, in bytes.
    public var maxRealtimeFrameBytes: Int = 64 * 1024
    /// The ffmpeg program: a name looked up in PATH, or an absolute path.
    public var ffmpeg: String = "ffmpeg"
    /// Largest voice upload, in bytes; larger uploads are cut off with 413 while they stream in.
    public var maxVoiceBytes: Int = 16 * 1024 * 1024
    /// Voice notes transcoded at once.
    public var voiceWorkers: Int = 2
    /// Longest an ffmpeg run may take before it is killed and its note fails (decoding gets at most 30 s).
    public var ffmpegTimeoutSeconds: Int = 120
    /// Seconds a call rings before it counts as missed.
    public var callRingSeconds: Int = 45
    /// Seconds from the answer until media must be connected, else the call fails.
    public var callConnectSeconds: Int = 30
    /// STUN servers handed to browsers, e.g. `stun:turn.example.com:3478`.
    public var stunURLs: [String] = []
    /// TURN servers handed to browsers, e.g. `turn:turn.example.com:3478?transport=udp`, `turns:turn.example.com:5349`.
    public var turnURLs: [String] = []
    /// The secret shared with coturn (`static-auth-secret`); TURN needs it.
    public var turnSecret: String?
    /// Seconds a call's TURN credentials stay valid. coturn checks them again on every allocation
    /// refresh, so this is also the longest a relayed call can last.
    public var turnCredentialSeconds: Int = 4 * 3600
    /// Forces every call's media through TURN (`iceTransportPolicy: relay`): the two sides never
    /// learn each other's IP addresses.
    public var callRelayOnly: Bool = false
    /// The malware scanner: `auto` (clamd at Debian's socket if it exists, else none), `off`, or
    /// `tcp://HOST:PORT` / `unix:///path/clamd.ctl`.
    public var clamd: String = "auto"
    /// Longest a scan may take before the scanner counts as unavailable.
    public var clamdTimeoutSeconds: Int = 10
    /// Delay before a note that could not be scanned is tried again (then doubling, up to 5 minutes).
    public var scanRetrySeconds: Int = 10
    /// Scans tried before a note the scanner never answered for is blocked (fail-closed brands).
    public var scanMaxAttempts: Int = 40
    /// Seconds an upload may go without sending bytes before it is abandoned (408).
    public var uploadIdleTimeoutSeconds: Int = 15
    /// Messages one consumer may send per minute (0: no limit).
    public var rateConsumerMessages: Int = 60
    /// Consumer writes (messages, uploads, new sessions) per minute from one IP address.
    public var rateIPWrites: Int = 600
    /// New consumer sessions per minute from one IP address.
    public var rateConsumerSessions: Int = 30
    /// Sign-in attempts per minute from one IP address (and half of it per 5 minutes for one email).
    public var rateLogins: Int = 20
    /// Take the client's address from X-Forwarded-For (only behind a proxy that sets it).
    public var trustProxy: Bool = false
    /// Seconds a new connection has to send its first request head whole, else 408 and closed.
    public var headerTimeoutSeconds: Int = 10
    /// Seconds a keep-alive connection may sit between requests before it is closed.
    public var idleTimeoutSeconds: Int = 60
    /// Largest request head (request line and headers), in bytes; larger gets 431.
    public var maxHeaderBytes: Int = 32 * 1024
    /// Open connections from one client address (0: no limit; not applied behind a trusted proxy).
    public var maxConnectionsPerAddress: Int = 512
    /// Slowest an upload may arrive, in bytes per second, measured over 10-second windows.
    public var uploadMinBytesPerSecond: Int = 1024
    /// Longest a whole upload may take, in seconds.
    public var uploadDeadlineSeconds: Int = 300
    /// Voice notes decoded for analysis at once; more wait in the queue.
    public var voiceAnalyses: Int = 2
    /// Voice notes that may wait for analysis; beyond that uploads get 503 with Retry-After.
    public var voiceQueue: Int = 8
    /// Voice uploads one consumer may have in progress at once.
    public var uploadsPerConsumer: Int = 2
    /// Voice uploads one client address may have in progress at once (anonymous sessions share it).
    public var uploadsPerAddress: Int = 4
    /// Frames per second one real-time connection may send (twice that at once).
    public var realtimeFramesPerSecond: Int = 20
    /// Seconds a write to a real-time connection may wait (a client that stopped reading) before the socket is closed.
    public var realtimeWriteTimeoutSeconds: Int = 10
    /// Seconds a session closed with 4008 for flooding may not open the real-time WebSocket (0: off).
    public var realtimeFloodCooldownSeconds: Int = 10
    /// Origins besides the server's own whose pages may use an agent's session cookie (and open its WebSocket).
    public var allowedOrigins: [String] = []
    /// A bearer token for `/metrics`; without one, metrics answer only on the loopback address.
    public var metricsToken: String?
    /// Media files with no row refer to them are removed once they are this old (seconds).
    public var orphanMediaAgeSeconds: Int = 3600
    /// Debian's clamav-daemon socket, used by `auto`.
    public static let debianClamdSocket = "/var/run/clamav/clamd.ctl"

    public init() {}

    /// The scanner endpoint the settings name, or nil for none.
    public var clamdEndpoint: ClamdScanner.Endpoint? {
        switch ClamdChoice(clamd) {
        case .off, nil: return nil
        case .auto:
            return FileManager.default.fileExists(atPath: Self.debianClamdSocket) ? .unix(path: Self.debianClamdSocket) : nil
        case .endpoint(let endpoint): return endpoint
        }
    }

    /// What `PARLEY_CLAMD` says, parsed in one place.
    enum ClamdChoice {
        /// Debian's clamav-daemon socket when it exists, else none.
        case auto
        case off
        case endpoint(ClamdScanner.Endpoint)

        /// nil: not `auto`, `off`, `tcp://HOST:PORT` or `unix:///PATH`.
        init?(_ text: String) {
            switch text {
            case "auto": self = .auto
            case "off": self = .off
            default:
                guard let endpoint = ClamdScanner.Endpoint(url: text) else { return nil }
                self = .endpoint(endpoint)
            }
        }
    }

    public var resolvedDatabaseURL: String {
        databaseURL ?? "sqlite://\(dataDirectory)/parley.sqlite"
    }

    public var mediaDirectory: String { "\(dataDirectory)/media" }

    /// Reads settings from `PARLEY_*` variables over the defaults. Unknown `PARLEY_*` names are refused
    /// so that a typo does not silently leave a setting at its default.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> ParleyConfiguration {
        var configuration = ParleyConfiguration()
        try configuration.apply(environment: environment)
        return configuration
    }

    public mutating func apply(environment: [String: String]) throws(ConfigurationError) {
        let known = Set(Self.settings.map(\.environment))
        for name in environment.keys.sorted() where name.hasPrefix("PARLEY_") && !known.contains(name) {
            throw ConfigurationError(setting: name, message: "is not a Parley setting. Known settings: \(Self.settings.map(\.environment).joined(separator: ", "))")
        }
        for setting in Self.settings {
            if let value = environment[setting.environment] {
                try setting.apply(&self, value, setting.environment)
            }
        }
    }

    /// Applies one setting given by its flag name (without dashes), e.g. `port`.
    public mutating func apply(flag: String, value: String) throws(ConfigurationError) {
        guard let setting = Self.settings.first(where: { $0.flag == flag }) else {
            throw ConfigurationError(setting: "--\(flag)", message: "is not a Parley setting")
        }
        try setting.apply(&self, value, "--\(flag)")
    }

    /// Applies command-line settings, `--flag value` or `--flag=value`, each a flag of `settings`.
    public mutating func apply(arguments: [String]) throws(ConfigurationError) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw ConfigurationError(setting: argument, message: "is not a setting; settings are given as --name value")
            }
            let body = argument.dropFirst(2)
            if let equals = body.firstIndex(of: "=") {
                try apply(flag: String(body[..<equals]), value: String(body[body.index(after: equals)...]))
                index += 1
            } else {
                guard index + 1 < arguments.count else {
                    throw ConfigurationError(setting: argument, message: "needs a value")
                }
                try apply(flag: String(body), value: arguments[index + 1])
                index += 2
            }
        }
    }

    /// Every setting as `--help` shows it: flag, variable and what it does, from the one table, in
    /// lines short enough that the help printer never wraps them again.
    public static var settingsHelp: String {
        var lines = ["Settings (a flag wins over its environment variable):"]
        for setting in settings {
            lines.append("  --\(setting.flag) <value>   \(setting.environment)")
            var line = "      "
            for word in setting.help.split(separator: " ") {
                if line.count + word.count > 76, line.count > 6 {
                    lines.append(line)
                    line = "      "
                }
                line += (line.count > 6 ? " " : "") + word
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// The flag and variable of every setting, for checks that the documentation lists each one.
    public static var settingNames: [(flag: String, environment: String)] { settings.map { ($0.flag, $0.environment) } }

    /// Checks the settings together; the database URL is parsed here so that a bad one names its setting.
    public func validate() throws(ConfigurationError) {
        do {
            _ = try DatabaseLocation(url: resolvedDatabaseURL)
        } catch {
            throw ConfigurationError(setting: "PARLEY_DATABASE_URL (--database-url)", message: error.description)
        }
        if host.isEmpty {
            throw ConfigurationError(setting: "PARLEY_HOST (--host)", message: "cannot be empty")
        }
        if !turnURLs.isEmpty, turnSecret == nil {
            throw ConfigurationError(setting: "PARLEY_TURN_SECRET (--turn-secret)", message: "is needed when TURN servers are set")
        }
        if ClamdChoice(clamd) == nil {
            throw ConfigurationError(setting: "PARLEY_CLAMD (--clamd)", message: "'\(clamd)' is not auto, off, tcp://HOST:PORT or unix:///PATH")
        }
        if callRelayOnly, turnURLs.isEmpty {
            throw ConfigurationError(setting: "PARLEY_CALL_RELAY_ONLY (--call-relay-only)", message: "needs TURN servers (PARLEY_TURN_URLS)")
        }
    }

    struct Setting: Sendable {
        var flag: String
        var environment: String
        var help: String
        var apply: @Sendable (inout ParleyConfiguration, String, String) throws(ConfigurationError) -> Void
    }

    static let settings: [Setting] = [
        Setting(flag: "host", environment: "PARLEY_HOST", help: "address to listen on (default 127.0.0.1)") { c, v, _ in c.host = v },
        Setting(flag: "port", environment: "PARLEY_PORT", help: "port to listen on, 0 for any free port (default 8080)") { c, v, name throws(ConfigurationError) in
            c.port = try parseInt(v, name, range: 0...65535, what: "a port number")
        },
        Setting(flag: "data-dir", environment: "PARLEY_DATA_DIR", help: "directory for the SQLite file and media (default ./data)") { c, v, name throws(ConfigurationError) in
            guard !v.isEmpty else { throw ConfigurationError(setting: name, message: "cannot be empty") }
            c.dataDirectory = v
        },
        Setting(flag: "database-url", environment: "PARLEY_DATABASE_URL", help: "sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DB") { c, v, _ in c.databaseURL = v },
        Setting(flag: "sqlite-synchronous", environment: "PARLEY_SQLITE_SYNCHRONOUS", help: "normal (a commit survives a crash) or full (also a power loss; every commit fsyncs) (default normal)") { c, v, name throws(ConfigurationError) in
            switch v.lowercased() {
            case "normal": c.sqliteFullSync = false
            case "full": c.sqliteFullSync = true
            default: throw ConfigurationError(setting: name, message: "'\(v)' is not normal or full")
            }
        },
        Setting(flag: "public-dir", environment: "PARLEY_PUBLIC_DIR", help: "directory of the web pages (default ./Public)") { c, v, _ in c.publicDirectory = v },
        Setting(flag: "log-level", environment: "PARLEY_LOG_LEVEL", help: "trace, debug, info, notice, warning, error or critical") { c, v, name throws(ConfigurationError) in
            guard let level = Logger.Level(rawValue: v.lowercased()) else {
                throw ConfigurationError(setting: name, message: "'\(v)' is not a log level (trace, debug, info, notice, warning, error, critical)")
            }
            c.logLevel = level
        },
        Setting(flag: "bcrypt-cost", environment: "PARLEY_BCRYPT_COST", help: "bcrypt work factor for passwords, 4-31 (default 12)") { c, v, name throws(ConfigurationError) in
            c.bcryptCost = try parseInt(v, name, range: 4...31, what: "a bcrypt cost")
        },
        Setting(flag: "agent-session-ttl", environment: "PARLEY_AGENT_SESSION_TTL", help: "seconds an agent stays signed in (default 43200)") { c, v, name throws(ConfigurationError) in
            c.agentSessionTTL = TimeInterval(try parseInt(v, name, range: 60...31_536_000, what: "a number of seconds"))
        },
        Setting(flag: "consumer-session-ttl", environment: "PARLEY_CONSUMER_SESSION_TTL", help: "seconds a consumer token is valid (default 2592000)") { c, v, name throws(ConfigurationError) in
            c.consumerSessionTTL = TimeInterval(try parseInt(v, name, range: 60...31_536_000, what: "a number of seconds"))
        },
        Setting(flag: "secure-cookies", environment: "PARLEY_SECURE_COOKIES", help: "mark the session cookie Secure (true behind HTTPS)") { c, v, name throws(ConfigurationError) in
            c.secureCookies = try parseBool(v, name)
        },
        Setting(flag: "seed-demo", environment: "PARLEY_SEED_DEMO", help: "create a demo brand on first run (default true)") { c, v, name throws(ConfigurationError) in
            c.seedDemo = try parseBool(v, name)
        },
        Setting(flag: "ffmpeg", environment: "PARLEY_FFMPEG", help: "the ffmpeg program, by name or path (default ffmpeg)") { c, v, _ in c.ffmpeg = v },
        Setting(flag: "max-voice-bytes", environment: "PARLEY_MAX_VOICE_BYTES", help: "largest voice upload in bytes (default 16777216)") { c, v, name throws(ConfigurationError) in
            c.maxVoiceBytes = try parseInt(v, name, range: 1024...1_073_741_824, what: "a byte count")
        },
        Setting(flag: "voice-workers", environment: "PARLEY_VOICE_WORKERS", help: "voice notes transcoded at once (default 2)") { c, v, name throws(ConfigurationError) in
            c.voiceWorkers = try parseInt(v, name, range: 1...64, what: "a worker count")
        },
        Setting(flag: "ffmpeg-timeout", environment: "PARLEY_FFMPEG_TIMEOUT", help: "seconds an ffmpeg run may take (default 120)") { c, v, name throws(ConfigurationError) in
            c.ffmpegTimeoutSeconds = try parseInt(v, name, range: 1...3600, what: "a number of seconds")
        },
        Setting(flag: "realtime-queue-limit", environment: "PARLEY_REALTIME_QUEUE_LIMIT", help: "frames waiting per WebSocket before it is closed with 4000 (default 512)") { c, v, name throws(ConfigurationError) in
            c.realtimeQueueLimit = try parseInt(v, name, range: 8...1_000_000, what: "a frame count")
        },
        Setting(flag: "call-ring-timeout", environment: "PARLEY_CALL_RING_TIMEOUT", help: "seconds a call rings before it is missed (default 45)") { c, v, name throws(ConfigurationError) in
            c.callRingSeconds = try parseInt(v, name, range: 1...600, what: "a number of seconds")
        },
        Setting(flag: "call-connect-timeout", environment: "PARLEY_CALL_CONNECT_TIMEOUT", help: "seconds from answer to connected media (default 30)") { c, v, name throws(ConfigurationError) in
            c.callConnectSeconds = try parseInt(v, name, range: 1...600, what: "a number of seconds")
        },
        Setting(flag: "stun-urls", environment: "PARLEY_STUN_URLS", help: "comma-separated stun: URLs for calls (default none)") { c, v, name throws(ConfigurationError) in
            c.stunURLs = try parseURLs(v, name, schemes: ["stun", "stuns"])
        },
        Setting(flag: "turn-urls", environment: "PARLEY_TURN_URLS", help: "comma-separated turn:/turns: URLs of coturn for calls (default none)") { c, v, name throws(ConfigurationError) in
            c.turnURLs = try parseURLs(v, name, schemes: ["turn", "turns"])
        },
        Setting(flag: "turn-secret", environment: "PARLEY_TURN_SECRET", help: "coturn's static-auth-secret, for short-lived TURN credentials") { c, v, name throws(ConfigurationError) in
            guard v.utf8.count >= 16 else { throw ConfigurationError(setting: name, message: "must be at least 16 characters") }
            c.turnSecret = v
        },
        Setting(flag: "turn-credential-ttl", environment: "PARLEY_TURN_CREDENTIAL_TTL", help: "seconds a call's TURN credentials are valid (default 14400)") { c, v, name throws(ConfigurationError) in
            c.turnCredentialSeconds = try parseInt(v, name, range: 60...86_400, what: "a number of seconds")
        },
        Setting(flag: "call-relay-only", environment: "PARLEY_CALL_RELAY_ONLY", help: "send all call media through TURN (default false)") { c, v, name throws(ConfigurationError) in
            c.callRelayOnly = try parseBool(v, name)
        },
        Setting(flag: "upload-idle-timeout", environment: "PARLEY_UPLOAD_IDLE_TIMEOUT", help: "seconds an upload may send nothing before it is abandoned (default 15)") { c, v, name throws(ConfigurationError) in
            c.uploadIdleTimeoutSeconds = try parseInt(v, name, range: 1...600, what: "a number of seconds")
        },
        Setting(flag: "rate-consumer-messages", environment: "PARLEY_RATE_CONSUMER_MESSAGES", help: "messages per minute per consumer, 0 for no limit (default 60)") { c, v, name throws(ConfigurationError) in
            c.rateConsumerMessages = try parseInt(v, name, range: 0...1_000_000, what: "a count")
        },
        Setting(flag: "rate-ip-writes", environment: "PARLEY_RATE_IP_WRITES", help: "consumer writes per minute per IP address (default 600)") { c, v, name throws(ConfigurationError) in
            c.rateIPWrites = try parseInt(v, name, range: 0...10_000_000, what: "a count")
        },
        Setting(flag: "rate-consumer-sessions", environment: "PARLEY_RATE_CONSUMER_SESSIONS", help: "new consumer sessions per minute per IP address (default 30)") { c, v, name throws(ConfigurationError) in
            c.rateConsumerSessions = try parseInt(v, name, range: 0...1_000_000, what: "a count")
        },
        Setting(flag: "rate-logins", environment: "PARLEY_RATE_LOGINS", help: "sign-in attempts per minute per IP address (default 20)") { c, v, name throws(ConfigurationError) in
            c.rateLogins = try parseInt(v, name, range: 0...1_000_000, what: "a count")
        },
        Setting(flag: "trust-proxy", environment: "PARLEY_TRUST_PROXY", help: "take client addresses from X-Forwarded-For (default false)") { c, v, name throws(ConfigurationError) in
            c.trustProxy = try parseBool(v, name)
        },
        Setting(flag: "header-timeout", environment: "PARLEY_HEADER_TIMEOUT", help: "seconds a new connection has to send its first request head (default 10)") { c, v, name throws(ConfigurationError) in
            c.headerTimeoutSeconds = try parseInt(v, name, range: 1...300, what: "a number of seconds")
        },
        Setting(flag: "idle-timeout", environment: "PARLEY_IDLE_TIMEOUT", help: "seconds a keep-alive connection may sit idle (default 60)") { c, v, name throws(ConfigurationError) in
            c.idleTimeoutSeconds = try parseInt(v, name, range: 1...3600, what: "a number of seconds")
        },
        Setting(flag: "max-header-bytes", environment: "PARLEY_MAX_HEADER_BYTES", help: "largest request head in bytes (default 32768)") { c, v, name throws(ConfigurationError) in
            c.maxHeaderBytes = try parseInt(v, name, range: 1024...1_048_576, what: "a byte count")
        },
        Setting(flag: "max-connections-per-address", environment: "PARLEY_MAX_CONNECTIONS_PER_ADDRESS", help: "open connections per client address, 0 for no limit (default 512)") { c, v, name throws(ConfigurationError) in
            c.maxConnectionsPerAddress = try parseInt(v, name, range: 0...1_000_000, what: "a count")
        },
        Setting(flag: "upload-min-rate", environment: "PARLEY_UPLOAD_MIN_RATE", help: "slowest upload in bytes per second over 10 s windows (default 1024)") { c, v, name throws(ConfigurationError) in
            c.uploadMinBytesPerSecond = try parseInt(v, name, range: 0...100_000_000, what: "a byte rate")
        },
        Setting(flag: "upload-deadline", environment: "PARLEY_UPLOAD_DEADLINE", help: "seconds a whole upload may take (default 300)") { c, v, name throws(ConfigurationError) in
            c.uploadDeadlineSeconds = try parseInt(v, name, range: 1...3600, what: "a number of seconds")
        },
        Setting(flag: "voice-analyses", environment: "PARLEY_VOICE_ANALYSES", help: "voice notes decoded for analysis at once (default 2)") { c, v, name throws(ConfigurationError) in
            c.voiceAnalyses = try parseInt(v, name, range: 1...64, what: "a count")
        },
        Setting(flag: "voice-queue", environment: "PARLEY_VOICE_QUEUE", help: "voice notes that may wait for analysis before 503 (default 8)") { c, v, name throws(ConfigurationError) in
            c.voiceQueue = try parseInt(v, name, range: 0...10_000, what: "a count")
        },
        Setting(flag: "uploads-per-consumer", environment: "PARLEY_UPLOADS_PER_CONSUMER", help: "voice uploads in progress per consumer (default 2)") { c, v, name throws(ConfigurationError) in
            c.uploadsPerConsumer = try parseInt(v, name, range: 1...1000, what: "a count")
        },
        Setting(flag: "uploads-per-address", environment: "PARLEY_UPLOADS_PER_ADDRESS", help: "voice uploads in progress per client address (default 4)") { c, v, name throws(ConfigurationError) in
            c.uploadsPerAddress = try parseInt(v, name, range: 1...100_000, what: "a count")
        },
        Setting(flag: "realtime-frame-rate", environment: "PARLEY_REALTIME_FRAME_RATE", help: "frames per second one WebSocket may send (default 20)") { c, v, name throws(ConfigurationError) in
            c.realtimeFramesPerSecond = try parseInt(v, name, range: 1...100_000, what: "a frame rate")
        },
        Setting(flag: "realtime-write-timeout", environment: "PARLEY_REALTIME_WRITE_TIMEOUT", help: "seconds a WebSocket write may wait before the socket is closed (default 10)") { c, v, name throws(ConfigurationError) in
            c.realtimeWriteTimeoutSeconds = try parseInt(v, name, range: 1...600, what: "a number of seconds")
        },
        Setting(flag: "realtime-flood-cooldown", environment: "PARLEY_REALTIME_FLOOD_COOLDOWN", help: "seconds a session closed with 4008 for flooding is refused new real-time connections, 0 for none (default 10)") { c, v, name throws(ConfigurationError) in
            c.realtimeFloodCooldownSeconds = try parseInt(v, name, range: 0...3600, what: "a number of seconds")
        },
        Setting(flag: "allowed-origins", environment: "PARLEY_ALLOWED_ORIGINS", help: "comma-separated origins allowed to use the session cookie besides the server's own") { c, v, name throws(ConfigurationError) in
            c.allowedOrigins = try parseOrigins(v, name)
        },
        Setting(flag: "metrics-token", environment: "PARLEY_METRICS_TOKEN", help: "bearer token for /metrics (default: loopback only)") { c, v, name throws(ConfigurationError) in
            guard v.utf8.count >= 16 else { throw ConfigurationError(setting: name, message: "must be at least 16 characters") }
            c.metricsToken = v
        },
        Setting(flag: "orphan-media-age", environment: "PARLEY_ORPHAN_MEDIA_AGE", help: "seconds before a media file no row refers to is removed (default 3600)") { c, v, name throws(ConfigurationError) in
            c.orphanMediaAgeSeconds = try parseInt(v, name, range: 60...31_536_000, what: "a number of seconds")
        },
        Setting(flag: "clamd", environment: "PARLEY_CLAMD", help: "malware scanner: auto, off, tcp://HOST:PORT or unix:///PATH (default auto)") { c, v, _ in
            c.clamd = v
        },
        Setting(flag: "clamd-timeout", environment: "PARLEY_CLAMD_TIMEOUT", help: "seconds a malware scan may take (default 10)") { c, v, name throws(ConfigurationError) in
            c.clamdTimeoutSeconds = try parseInt(v, name, range: 1...300, what: "a number of seconds")
        },
        Setting(flag: "scan-retry", environment: "PARLEY_SCAN_RETRY", help: "seconds before an unscanned note is tried again, doubling (default 10)") { c, v, name throws(ConfigurationError) in
            c.scanRetrySeconds = try parseInt(v, name, range: 1...3600, what: "a number of seconds")
        },
        Setting(flag: "scan-max-attempts", environment: "PARLEY_SCAN_MAX_ATTEMPTS", help: "scans tried before an unscannable note is blocked (default 40)") { c, v, name throws(ConfigurationError) in
            c.scanMaxAttempts = try parseInt(v, name, range: 1...10_000, what: "a count")
        },
    ]

    private static func parseURLs(_ value: String, _ name: String, schemes: Set<String>) throws(ConfigurationError) -> [String] {
        let urls = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for url in urls {
            guard let scheme = url.split(separator: ":").first.map(String.init), schemes.contains(scheme), url.count > scheme.count + 1 else {
                throw ConfigurationError(setting: name, message: "'\(url)' is not a \(schemes.sorted().joined(separator: " or ")) URL")
            }
        }
        return urls
    }

    private static func parseOrigins(_ value: String, _ name: String) throws(ConfigurationError) -> [String] {
        let origins = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for origin in origins {
            guard let url = URL(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil,
                url.path.isEmpty, url.query == nil
            else {
                throw ConfigurationError(setting: name, message: "'\(origin)' is not an origin like https://app.example.com")
            }
        }
        return origins.map { $0.lowercased() }
    }

    private static func parseInt(_ value: String, _ name: String, range: ClosedRange<Int>, what: String) throws(ConfigurationError) -> Int {
        guard let number = Int(value.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
            throw ConfigurationError(setting: name, message: "'\(value)' is not \(what) (\(range.lowerBound)-\(range.upperBound))")
        }
        return number
    }

    private static func parseBool(_ value: String, _ name: String) throws(ConfigurationError) -> Bool {
        switch value.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(setting: name, message: "'\(value)' is not true or false")
        }
    }

    /// The flags `parley serve` accepts, with their variables, for `--help`.
    public static var helpText: String {
        settings.map { "  --\($0.flag) (\($0.environment)): \($0.help)" }.joined(separator: "\n")
    }
}

/// A setting that stops start-up; the message names it.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var setting: String
    public var message: String
    public var description: String { "configuration error: \(setting) \(message)" }
}
