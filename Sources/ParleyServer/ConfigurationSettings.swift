import Foundation
import Logging
import ParleyMedia

/// The settings table: every flag of `parley serve`, its `PARLEY_*` variable, its `--help` line and
/// how its value is parsed and checked. The flags, the environment, `--help` and the README's table
/// (a test compares them) all come from here. To add a setting: a property with its default in
/// `ParleyConfiguration`, a row here, a row in the README.
extension ParleyConfiguration {
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
        Setting(flag: "sqlite-wal-size", environment: "PARLEY_SQLITE_WAL_MB", help: "MB the SQLite WAL may hold before writes wait for a checkpoint that starts it again (default 128)") { c, v, name throws(ConfigurationError) in
            c.sqliteWALMegabytes = try parseInt(v, name, range: 8...4096, what: "a number of MB")
        },
        Setting(flag: "sqlite-synchronous", environment: "PARLEY_SQLITE_SYNCHRONOUS", help: "normal (a commit survives a crash) or full (also a power loss; every commit fsyncs) (default normal)") { c, v, name throws(ConfigurationError) in
            switch v.lowercased() {
            case "normal": c.sqliteFullSync = false
            case "full": c.sqliteFullSync = true
            default: throw ConfigurationError(setting: name, message: "'\(v)' is not normal or full")
            }
        },
        Setting(flag: "public-dir", environment: "PARLEY_PUBLIC_DIR", help: "directory of the web pages (default: next to the binary, /usr/share/parley/Public, or ./Public)") { c, v, _ in c.publicDirectory = v },
        Setting(flag: "log-level", environment: "PARLEY_LOG_LEVEL", help: "trace, debug, info, notice, warning, error or critical") { c, v, name throws(ConfigurationError) in
            guard let level = Logger.Level(rawValue: v.lowercased()) else {
                throw ConfigurationError(setting: name, message: "'\(v)' is not a log level (trace, debug, info, notice, warning, error, critical)")
            }
            c.logLevel = level
        },
        Setting(flag: "log-format", environment: "PARLEY_LOG_FORMAT", help: "text (default) or json: one JSON object a line, for a log shipper") { c, v, name throws(ConfigurationError) in
            guard let format = LogFormat(rawValue: v.lowercased()) else {
                throw ConfigurationError(setting: name, message: "'\(v)' is not a log format (text or json)")
            }
            c.logFormat = format
        },
        Setting(flag: "otlp-endpoint", environment: "PARLEY_OTLP_ENDPOINT", help: "an OpenTelemetry collector's OTLP/HTTP address (http://host:4318): a trace span per request, job and real-time frame is sent to <address>/v1/traces (default: no traces)") { c, v, name throws(ConfigurationError) in
            guard let url = URLComponents(string: v), url.scheme == "https" || url.scheme == "http", url.host != nil, url.query == nil else {
                throw ConfigurationError(setting: name, message: "must be an http(s) URL without a query")
            }
            c.otlpEndpoint = v
        },
        Setting(flag: "otlp-protocol", environment: "PARLEY_OTLP_PROTOCOL", help: "protobuf (default) or json: how spans are encoded for the collector") { c, v, name throws(ConfigurationError) in
            guard let format = OTLPEncoding(rawValue: v.lowercased()) else {
                throw ConfigurationError(setting: name, message: "'\(v)' is not an OTLP encoding (protobuf or json)")
            }
            c.otlpEncoding = format
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
        Setting(flag: "max-attachment-bytes", environment: "PARLEY_MAX_ATTACHMENT_BYTES", help: "largest image or file upload in bytes, whatever a brand allows (default 26214400)") { c, v, name throws(ConfigurationError) in
            c.maxAttachmentBytes = try parseInt(v, name, range: 1024...1_073_741_824, what: "a byte count")
        },
        Setting(flag: "voice-workers", environment: "PARLEY_VOICE_WORKERS", help: "voice notes transcoded at once (default 2)") { c, v, name throws(ConfigurationError) in
            c.voiceWorkers = try parseInt(v, name, range: 1...64, what: "a worker count")
        },
        Setting(flag: "transcriber", environment: "PARLEY_TRANSCRIBER", help: "voice-note transcription engine: embedded, openai or off (default embedded)") { c, v, name throws(ConfigurationError) in
            guard ["embedded", "openai", "off"].contains(v) else { throw ConfigurationError(setting: name, message: "'\(v)' is not embedded, openai or off") }
            c.transcriber = v
        },
        Setting(flag: "transcriber-python", environment: "PARLEY_TRANSCRIBER_PYTHON", help: "the Python with pocketsphinx, for the embedded transcriber (default python3)") { c, v, _ in
            c.transcriberPython = v
        },
        Setting(flag: "transcription-url", environment: "PARLEY_TRANSCRIPTION_URL", help: "an OpenAI-compatible transcription endpoint's base URL, for --transcriber openai") { c, v, name throws(ConfigurationError) in
            guard let url = URL(string: v), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ConfigurationError(setting: name, message: "'\(v)' is not an http or https URL")
            }
            c.transcriptionURL = v
        },
        Setting(flag: "transcription-model", environment: "PARLEY_TRANSCRIPTION_MODEL", help: "the endpoint's model (default whisper-1)") { c, v, _ in
            c.transcriptionModel = v
        },
        Setting(flag: "transcription-api-key", environment: "PARLEY_TRANSCRIPTION_API_KEY", help: "the endpoint's key, sent as a bearer token (default none)") { c, v, _ in
            c.transcriptionAPIKey = v.isEmpty ? nil : v
        },
        Setting(flag: "transcriber-workers", environment: "PARLEY_TRANSCRIBER_WORKERS", help: "voice notes transcribed at once per node (default 1)") { c, v, name throws(ConfigurationError) in
            c.transcriberWorkers = try parseInt(v, name, range: 1...64, what: "a worker count")
        },
        Setting(flag: "transcriber-timeout", environment: "PARLEY_TRANSCRIBER_TIMEOUT", help: "seconds one transcription may take (default 120)") { c, v, name throws(ConfigurationError) in
            c.transcriberTimeoutSeconds = try parseInt(v, name, range: 1...3600, what: "a number of seconds")
        },
        Setting(flag: "transcriber-memory", environment: "PARLEY_TRANSCRIBER_MEMORY_MB", help: "MB of address space the embedded transcriber may map (default 1024)") { c, v, name throws(ConfigurationError) in
            c.transcriberMemoryMB = try parseInt(v, name, range: 128...65536, what: "a number of MB")
        },
        Setting(flag: "transcriber-nice", environment: "PARLEY_TRANSCRIBER_NICE", help: "niceness of the embedded transcriber and its decoding, 0-19 (default 10)") { c, v, name throws(ConfigurationError) in
            c.transcriberNiceness = try parseInt(v, name, range: 0...19, what: "a niceness")
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
        Setting(flag: "cobrowse-snapshot-bytes", environment: "PARLEY_COBROWSE_SNAPSHOT_BYTES", help: "largest co-browse page snapshot, in bytes (default 4194304)") { c, v, name throws(ConfigurationError) in
            c.cobrowseSnapshotBytes = try parseInt(v, name, range: 65_536...67_108_864, what: "a number of bytes")
        },
        Setting(flag: "cobrowse-bytes-per-second", environment: "PARLEY_COBROWSE_BYTES_PER_SECOND", help: "page changes one co-browse session may relay per second, in bytes (default 262144)") { c, v, name throws(ConfigurationError) in
            c.cobrowseBytesPerSecond = try parseInt(v, name, range: 4_096...16_777_216, what: "a number of bytes")
        },
        Setting(flag: "cobrowse-inputs-per-second", environment: "PARLEY_COBROWSE_INPUTS_PER_SECOND", help: "clicks and typing an agent in control may send to a customer's page per second (default 20)") { c, v, name throws(ConfigurationError) in
            c.cobrowseInputsPerSecond = try parseInt(v, name, range: 1...1_000, what: "a number of inputs")
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
        Setting(flag: "rate-consumer-activity", environment: "PARLEY_RATE_CONSUMER_ACTIVITY", help: "activity batches (up to 50 events) per minute per consumer, 0 for no limit (default 30)") { c, v, name throws(ConfigurationError) in
            c.rateConsumerActivity = try parseInt(v, name, range: 0...1_000_000, what: "a count")
        },
        Setting(flag: "drain-deadline", environment: "PARLEY_DRAIN_DEADLINE", help: "seconds open requests may take to finish at shutdown before they are cut with 503 (default 25)") { c, v, name throws(ConfigurationError) in
            c.drainDeadlineSeconds = try parseInt(v, name, range: 1...3_600, what: "a number of seconds")
        },
        Setting(flag: "cluster", environment: "PARLEY_CLUSTER", help: "one node of several on the same PostgreSQL database: events, presence and limits cross nodes (default false)") { c, v, name throws(ConfigurationError) in
            c.cluster = try parseBool(v, name)
        },
        Setting(flag: "s3-endpoint", environment: "PARLEY_S3_ENDPOINT", help: "an S3-compatible object store for media, e.g. https://s3.eu-west-1.amazonaws.com (default: local disk)") { c, v, _ throws(ConfigurationError) in
            c.s3Endpoint = v.isEmpty ? nil : v
        },
        Setting(flag: "s3-bucket", environment: "PARLEY_S3_BUCKET", help: "the bucket media goes to, created if missing (default parley-media)") { c, v, name throws(ConfigurationError) in
            guard (3...63).contains(v.count), v.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" || $0 == "." }) else {
                throw ConfigurationError(setting: name, message: "'\(v)' is not a bucket name (3-63 of a-z, 0-9, '-', '.')")
            }
            c.s3Bucket = v
        },
        Setting(flag: "s3-prefix", environment: "PARLEY_S3_PREFIX", help: "a folder inside the bucket for this deployment's media (default none)") { c, v, name throws(ConfigurationError) in
            let trimmed = v.hasSuffix("/") ? String(v.dropLast()) : v
            guard trimmed.isEmpty || LocalBlobStore.isValidKey(trimmed) else {
                throw ConfigurationError(setting: name, message: "'\(v)' is not a folder name (a-z, 0-9, '-', '_', '.' segments separated by '/')")
            }
            c.s3Prefix = trimmed
        },
        Setting(flag: "s3-region", environment: "PARLEY_S3_REGION", help: "the object store's region, for signing (default us-east-1)") { c, v, _ throws(ConfigurationError) in
            c.s3Region = v
        },
        Setting(flag: "s3-access-key", environment: "PARLEY_S3_ACCESS_KEY", help: "the object store's access key id") { c, v, _ throws(ConfigurationError) in
            c.s3AccessKey = v
        },
        Setting(flag: "s3-secret-key", environment: "PARLEY_S3_SECRET_KEY", help: "the object store's secret access key") { c, v, _ throws(ConfigurationError) in
            c.s3SecretKey = v
        },
        Setting(flag: "s3-timeout", environment: "PARLEY_S3_TIMEOUT", help: "seconds one object-store request may take (default 30)") { c, v, name throws(ConfigurationError) in
            c.s3TimeoutSeconds = try parseInt(v, name, range: 1...600, what: "a number of seconds")
        },
        Setting(flag: "database-pool", environment: "PARLEY_DATABASE_POOL", help: "PostgreSQL connections this node opens when it starts and keeps open (default 16)") { c, v, name throws(ConfigurationError) in
            c.databasePoolSize = try parseInt(v, name, range: 1...1_000, what: "a count")
        },
        Setting(flag: "apple-token-max-age", environment: "PARLEY_APPLE_TOKEN_MAX_AGE", help: "seconds a JWT from Apple's gateway stays acceptable after its iat (default 300)") { c, v, name throws(ConfigurationError) in
            c.appleTokenMaxAgeSeconds = try parseInt(v, name, range: 10...86_400, what: "a number of seconds")
        },
        Setting(flag: "image-memory", environment: "PARLEY_IMAGE_MEMORY_MB", help: "memory each image decoder may use, in MB (default 1024)") { c, v, name throws(ConfigurationError) in
            c.imageMemoryMegabytes = try parseInt(v, name, range: 64...65_536, what: "a number of megabytes")
        },
        Setting(flag: "rate-consumer-push", environment: "PARLEY_RATE_CONSUMER_PUSH", help: "push registrations per minute per consumer, 0 for no limit (default 10)") { c, v, name throws(ConfigurationError) in
            c.rateConsumerPush = try parseInt(v, name, range: 0...1_000_000, what: "a count")
        },
        Setting(flag: "transcript-exports", environment: "PARLEY_TRANSCRIPT_EXPORTS", help: "date-range transcript exports one brand may run at once (default 2)") { c, v, name throws(ConfigurationError) in
            c.transcriptExports = try parseInt(v, name, range: 1...100, what: "a count")
        },
        Setting(flag: "retention-interval", environment: "PARLEY_RETENTION_INTERVAL_HOURS", help: "hours between two runs of each brand's retention (default 24)") { c, v, name throws(ConfigurationError) in
            c.retentionIntervalHours = try parseInt(v, name, range: 1...720, what: "a number of hours")
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
        Setting(flag: "secret-key", environment: "PARLEY_SECRET_KEY", help: "base64 of 32 bytes that encrypt channel secrets at rest (default: <data-dir>/secret.key, made on first start)") { c, v, _ in
            c.secretKey = v
        },
        Setting(flag: "previous-secret-keys", environment: "PARLEY_PREVIOUS_SECRET_KEYS", help: "comma-separated earlier secret keys that still open old secrets after a rotation (default none)") { c, v, _ in
            c.previousSecretKeys = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        },
        Setting(flag: "whatsapp-api-url", environment: "PARLEY_WHATSAPP_API_URL", help: "WhatsApp Cloud API base URL with version (default https://graph.facebook.com/v24.0)") { c, v, name throws(ConfigurationError) in
            c.whatsappAPIURL = try parseBaseURL(v, name)
        },
        Setting(flag: "whatsapp-media-hosts", environment: "PARLEY_WHATSAPP_MEDIA_HOSTS", help: "comma-separated hosts (HTTPS) or origins WhatsApp media may be downloaded from (default lookaside.fbsbx.com)") { c, v, _ in
            c.whatsappMediaHosts = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        },
        Setting(flag: "messenger-api-url", environment: "PARLEY_MESSENGER_API_URL", help: "Messenger Platform (Graph API) base URL with version (default https://graph.facebook.com/v24.0)") { c, v, name throws(ConfigurationError) in
            c.messengerAPIURL = try parseBaseURL(v, name)
        },
        Setting(flag: "messenger-media-hosts", environment: "PARLEY_MESSENGER_MEDIA_HOSTS", help: "comma-separated hosts (HTTPS; *.domain for its subdomains) or origins Messenger attachments may be downloaded from (default *.fbcdn.net,*.fbsbx.com)") { c, v, _ in
            c.messengerMediaHosts = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        },
        Setting(flag: "apple-api-url", environment: "PARLEY_APPLE_API_URL", help: "Apple Messages for Business gateway base URL (default https://mspgw.push.apple.com/v1)") { c, v, name throws(ConfigurationError) in
            c.appleAPIURL = try parseBaseURL(v, name)
        },
        Setting(flag: "apple-media-hosts", environment: "PARLEY_APPLE_MEDIA_HOSTS", help: "comma-separated hosts (HTTPS; *.domain for its subdomains) or origins Apple attachments may be downloaded from and uploaded to (default *.icloud.com,*.icloud-content.com)") { c, v, _ in
            c.appleMediaHosts = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        },
        Setting(flag: "apns-api-url", environment: "PARLEY_APNS_API_URL", help: "replaces APNs' hosts (default: api.push.apple.com, or api.sandbox.push.apple.com for sandbox tokens)") { c, v, name throws(ConfigurationError) in
            c.apnsAPIURL = try parseBaseURL(v, name)
        },
        Setting(flag: "fcm-api-url", environment: "PARLEY_FCM_API_URL", help: "Firebase Cloud Messaging API base URL (default https://fcm.googleapis.com)") { c, v, name throws(ConfigurationError) in
            c.fcmAPIURL = try parseBaseURL(v, name)
        },
        Setting(flag: "fcm-token-url", environment: "PARLEY_FCM_TOKEN_URL", help: "Google's OAuth 2.0 token endpoint for FCM service accounts (default https://oauth2.googleapis.com/token)") { c, v, name throws(ConfigurationError) in
            c.fcmTokenURL = try parseBaseURL(v, name)
        },
        Setting(flag: "vapid-private-key", environment: "PARLEY_VAPID_PRIVATE_KEY", help: "Web Push's VAPID private key, base64url of 32 bytes; every node needs the same (default: <data-dir>/vapid.key, made on first start)") { c, v, _ in
            c.vapidPrivateKey = v
        },
        Setting(flag: "vapid-subject", environment: "PARLEY_VAPID_SUBJECT", help: "how push services reach the operator: mailto: or an https URL (default mailto:push@parley.invalid)") { c, v, name throws(ConfigurationError) in
            guard v.hasPrefix("mailto:") || v.hasPrefix("https://") else { throw ConfigurationError(setting: name, message: "must start with mailto: or https://") }
            c.vapidSubject = v
        },
        Setting(flag: "webpush-hosts", environment: "PARLEY_WEBPUSH_HOSTS", help: "comma-separated push service hosts (HTTPS; *.domain for subdomains) or origins browsers' subscriptions may point to (default: Chrome's, Firefox's, Safari's and Edge's)") { c, v, _ in
            c.webPushHosts = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        },
        Setting(flag: "provider-ca-file", environment: "PARLEY_PROVIDER_CA_FILE", help: "a PEM file of extra certificate authorities trusted for providers' HTTPS (default: the system's only)") { c, v, name throws(ConfigurationError) in
            guard FileManager.default.isReadableFile(atPath: v) else { throw ConfigurationError(setting: name, message: "'\(v)' cannot be read") }
            c.providerCAFile = v
        },
        Setting(flag: "twilio-api-url", environment: "PARLEY_TWILIO_API_URL", help: "Twilio REST API base URL (default https://api.twilio.com)") { c, v, name throws(ConfigurationError) in
            c.twilioAPIURL = try parseBaseURL(v, name)
        },
        Setting(flag: "twilio-media-hosts", environment: "PARLEY_TWILIO_MEDIA_HOSTS", help: "comma-separated hosts (HTTPS; *.domain for its subdomains) or origins MMS media may be downloaded from, redirects included (default api.twilio.com,*.twiliocdn.com,s3-external-1.amazonaws.com)") { c, v, _ in
            c.twilioMediaHosts = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        },
        Setting(flag: "public-url", environment: "PARLEY_PUBLIC_URL", help: "the https address providers and customers reach this server at (default: the address an admin connects a channel from)") { c, v, name throws(ConfigurationError) in
            guard let url = URLComponents(string: v), url.scheme == "https" || url.scheme == "http", url.host != nil, url.query == nil else {
                throw ConfigurationError(setting: name, message: "must be an http(s) URL without a query")
            }
            c.publicURL = v.hasSuffix("/") ? String(v.dropLast()) : v
        },
        Setting(flag: "shared-link-hours", environment: "PARLEY_SHARED_LINK_HOURS", help: "hours a link to a voice note or file sent by SMS works (default 72)") { c, v, name throws(ConfigurationError) in
            c.sharedLinkHours = try parseInt(v, name, range: 1...720, what: "a number of hours")
        },
        Setting(flag: "provider-timeout", environment: "PARLEY_PROVIDER_TIMEOUT", help: "seconds a call to a messaging provider or a media download may take (default 30)") { c, v, name throws(ConfigurationError) in
            c.providerTimeoutSeconds = try parseInt(v, name, range: 1...600, what: "a number of seconds")
        },
        Setting(flag: "job-concurrency", environment: "PARLEY_JOB_CONCURRENCY", help: "durable jobs run at once on this node (default 4)") { c, v, name throws(ConfigurationError) in
            c.jobConcurrency = try parseInt(v, name, range: 1...64, what: "a job count")
        },
        Setting(flag: "job-max-attempts", environment: "PARLEY_JOB_MAX_ATTEMPTS", help: "attempts before a failing job is given up on (default 8)") { c, v, name throws(ConfigurationError) in
            c.jobMaxAttempts = try parseInt(v, name, range: 1...50, what: "an attempt count")
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

    fileprivate static func parseURLs(_ value: String, _ name: String, schemes: Set<String>) throws(ConfigurationError) -> [String] {
        let urls = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for url in urls {
            guard let scheme = url.split(separator: ":").first.map(String.init), schemes.contains(scheme), url.count > scheme.count + 1 else {
                throw ConfigurationError(setting: name, message: "'\(url)' is not a \(schemes.sorted().joined(separator: " or ")) URL")
            }
        }
        return urls
    }

    fileprivate static func parseOrigins(_ value: String, _ name: String) throws(ConfigurationError) -> [String] {
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

    /// An http(s) URL without its trailing slash (a provider's base URL).
    fileprivate static func parseBaseURL(_ value: String, _ name: String) throws(ConfigurationError) -> String {
        guard let url = URLComponents(string: value), url.scheme == "https" || url.scheme == "http", url.host != nil else {
            throw ConfigurationError(setting: name, message: "must be an http(s) URL")
        }
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }

    fileprivate static func parseInt(_ value: String, _ name: String, range: ClosedRange<Int>, what: String) throws(ConfigurationError) -> Int {
        guard let number = Int(value.trimmingCharacters(in: .whitespaces)), range.contains(number) else {
            throw ConfigurationError(setting: name, message: "'\(value)' is not \(what) (\(range.lowerBound)-\(range.upperBound))")
        }
        return number
    }

    fileprivate static func parseBool(_ value: String, _ name: String) throws(ConfigurationError) -> Bool {
        switch value.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(setting: name, message: "'\(value)' is not true or false")
        }
    }
}
