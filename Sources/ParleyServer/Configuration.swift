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
    /// Base64 of the 32-byte key that encrypts channel secrets at rest; nil: `<dataDirectory>/secret.key`.
    public var secretKey: String?
    /// Earlier keys (base64, comma-separated) that still open secrets sealed before a rotation;
    /// `parley reseal-secrets` seals everything with `secretKey` again.
    public var previousSecretKeys: [String] = []
    /// The WhatsApp Cloud API's base URL with its version (a local endpoint in tests, or a sandbox).
    public var whatsappAPIURL: String = "https://graph.facebook.com/v24.0"
    /// Where WhatsApp media may be downloaded from: hosts (HTTPS) or full origins.
    public var whatsappMediaHosts: [String] = ["lookaside.fbsbx.com"]
    /// The Messenger Platform's Graph API base URL with its version.
    public var messengerAPIURL: String = "https://graph.facebook.com/v24.0"
    /// Where Messenger attachments may be downloaded from (`*.fbcdn.net`: any HTTPS subdomain).
    public var messengerMediaHosts: [String] = ["*.fbcdn.net", "*.fbsbx.com"]
    /// Apple Messages for Business: the messaging service provider gateway's base URL.
    public var appleAPIURL: String = "https://mspgw.push.apple.com/v1"
    /// Where Apple's encrypted attachments are downloaded from and uploaded to (MMCS, on iCloud).
    public var appleMediaHosts: [String] = ["*.icloud.com", "*.icloud-content.com"]
    /// How old the JWT on a request from Apple's gateway may be (its `iat`), in seconds.
    public var appleTokenMaxAgeSeconds: Int = 300
    /// Twilio's REST API base URL (Programmable Messaging, SMS/MMS).
    public var twilioAPIURL: String = "https://api.twilio.com"
    /// Where Twilio MMS media may be downloaded from, redirects included (Twilio answers a media URL
    /// with a redirect to a short-lived address on its CDN).
    public var twilioMediaHosts: [String] = ["api.twilio.com", "*.twiliocdn.com", "s3-external-1.amazonaws.com"]
    /// The address providers and customers reach this server at (`https://support.example.com`);
    /// nil: the address an admin connected a channel from.
    public var publicURL: String?
    /// Hours a link to a voice note or file sent by SMS works.
    public var sharedLinkHours: Int = 72
    /// Replaces APNs' hosts (api.push.apple.com, api.sandbox.push.apple.com): a sandbox or a test endpoint.
    public var apnsAPIURL: String?
    /// Firebase Cloud Messaging's API and Google's OAuth 2.0 token endpoint (local endpoints in tests).
    public var fcmAPIURL: String = "https://fcm.googleapis.com"
    public var fcmTokenURL: String = "https://oauth2.googleapis.com/token"
    /// The VAPID private key for Web Push (base64url of 32 bytes); nil: `<dataDirectory>/vapid.key`.
    public var vapidPrivateKey: String?
    /// The VAPID `sub`: how push services can reach the operator (`mailto:` or an https URL).
    public var vapidSubject: String = "mailto:push@parley.invalid"
    /// The push services browsers' subscriptions may point to.
    public var webPushHosts: [String] = [
        "fcm.googleapis.com", "updates.push.services.mozilla.com", "*.push.services.mozilla.com", "web.push.apple.com", "*.notify.windows.com",
    ]
    /// A PEM file of extra certificate authorities trusted for providers' HTTPS (a corporate proxy,
    /// or a local endpoint in tests), beside the system's.
    public var providerCAFile: String?
    /// Longest a call to a provider (API request or media download) may take.
    public var providerTimeoutSeconds: Int = 30
    /// Durable jobs (channel delivery, media fetches, webhook processing) run at once on this node.
    public var jobConcurrency: Int = 4
    /// Attempts before a failing job is given up on (retries back off from 5 s to an hour).
    public var jobMaxAttempts: Int = 8
    /// nil: `sqlite://<dataDirectory>/parley.sqlite`.
    public var databaseURL: String?
    /// SQLite fsyncs every commit (survives power loss) instead of at checkpoints (survives a crash).
    public var sqliteFullSync = false
    /// How much the SQLite WAL may hold before writes wait a moment for a checkpoint that lets it
    /// start again from its beginning (`SQLiteDatabaseClient.CheckpointPolicy`).
    public var sqliteWALMegabytes = 128
    /// The web pages' directory; nil: found next to the binary or where the package installs them (`PublicPages`).
    public var publicDirectory: String? = nil
    public var logLevel: Logger.Level = .info
    /// `text` (swift-log's lines) or `json` (one object a line, `JSONLogHandler`).
    public var logFormat: LogFormat = .text
    /// An OpenTelemetry collector's OTLP/HTTP address: traces on when set (`Tracing.swift`).
    public var otlpEndpoint: String?
    public var otlpEncoding: OTLPEncoding = .protobuf
    /// Whether spans are made (for the collector at `otlpEndpoint`).
    public var tracing: Bool { otlpEndpoint != nil }
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
    /// Largest image or file upload, in bytes, whatever a brand allows (brands allow 1-25 MB, 10 by default).
    public var maxAttachmentBytes: Int = 25 * 1024 * 1024
    /// Voice notes transcoded at once.
    public var voiceWorkers: Int = 2
    /// Which engine transcribes voice notes for brands that turn transcription on: `embedded`
    /// (PocketSphinx through `transcriberPython`; none when it is not installed), `openai` (the
    /// endpoint below) or `off`.
    public var transcriber: String = "embedded"
    /// The Python that has PyPI's `pocketsphinx` (scripts/serve.sh installs it into .venv).
    public var transcriberPython: String = "python3"
    /// An OpenAI-compatible endpoint's base URL (`http://127.0.0.1:8178` for whisper.cpp's server;
    /// `/v1/audio/transcriptions` is added), its model and its key (sent as a bearer token; none when empty).
    public var transcriptionURL: String?
    public var transcriptionModel: String = "whisper-1"
    public var transcriptionAPIKey: String?
    /// Voice notes transcribed at once on a node.
    public var transcriberWorkers: Int = 1
    /// Longest one note's transcription may take (the child process, or the endpoint's answer).
    public var transcriberTimeoutSeconds: Int = 120
    /// The address space the embedded engine may map, in MB.
    public var transcriberMemoryMB: Int = 1024
    /// The niceness of the embedded engine's process and of the ffmpeg that prepares its audio:
    /// transcripts can wait, messages cannot (bench/RESULTS.md, "Transcription").
    public var transcriberNiceness: Int = 10
    /// Longest an ffmpeg run may take before it is killed and its note fails (decoding gets at most 30 s).
    public var ffmpegTimeoutSeconds: Int = 120
    /// The address space each image decoder (ffprobe, ffmpeg, heif-convert on a photo) may map, in MB.
    public var imageMemoryMegabytes: Int = 1024
    /// Seconds open requests may take to finish once shutdown begins (SIGTERM); then they are cut.
    public var drainDeadlineSeconds: Int = 25
    /// PostgreSQL connections this node keeps at most (its pool).
    public var databasePoolSize: Int = 16
    /// One node of several on the same PostgreSQL database: real-time events, presence and the
    /// shared limits cross nodes (PostgreSQL LISTEN/NOTIFY and tables).
    public var cluster: Bool = false
    /// An S3-compatible object store for every media file (voice notes and renditions, attachments,
    /// thumbnails, logos), e.g. `https://s3.eu-west-1.amazonaws.com` or `http://127.0.0.1:8333`
    /// (SeaweedFS); nil keeps them on local disk under the data directory.
    public var s3Endpoint: String?
    public var s3Bucket: String = "parley-media"
    /// A folder inside the bucket for this deployment's media (none by default).
    public var s3Prefix: String = ""
    public var s3Region: String = "us-east-1"
    public var s3AccessKey: String?
    public var s3SecretKey: String?
    /// Longest one request to the object store may take (each is retried twice).
    public var s3TimeoutSeconds: Int = 30
    var imageMemoryBytes: Int { imageMemoryMegabytes * 1024 * 1024 }
    /// Seconds a call rings before it counts as missed.
    public var callRingSeconds: Int = 45
    /// Largest page one co-browse snapshot may be (its parts together); a larger page ends the
    /// session with `page_too_large`, and both sides are told.
    public var cobrowseSnapshotBytes: Int = 4 * 1024 * 1024
    /// Bytes of page changes per second one co-browse session may relay; past it changes are
    /// dropped and the page is asked for a new snapshot.
    public var cobrowseBytesPerSecond: Int = 256 * 1024
    /// Clicks and typing one agent in control may send to a customer's page per second (a burst of
    /// as many); past it an input is refused with `rate_limited`.
    public var cobrowseInputsPerSecond: Int = 20
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
    /// Activity batches (ParleyKit's `report`, at most 50 events each) one consumer may send per minute.
    public var rateConsumerActivity: Int = 30
    /// Push registrations (a device's token) per minute per consumer.
    public var rateConsumerPush: Int = 10
    /// Date-range transcript exports one brand may run at once (each streams a page at a time).
    public var transcriptExports: Int = 2
    /// Hours between two runs of each brand's retention job (what is older than the brand's period goes).
    public var retentionIntervalHours: Int = 24
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
    /// The key file used when `secretKey` is not set.
    public var secretKeyFile: String { "\(dataDirectory)/secret.key" }

    /// Reads settings from `PARLEY_*` variables over the defaults. Unknown `PARLEY_*` names are refused
    /// so that a typo does not silently leave a setting at its default.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> ParleyConfiguration {
        var configuration = ParleyConfiguration()
        try configuration.apply(environment: environment)
        return configuration
    }

    public mutating func apply(environment: [String: String]) throws(ConfigurationError) {
        // PARLEY_TEST_CLOCK_FILE is read by `parley serve` itself (end-to-end tests move its clock).
        let known = Set(Self.settings.map(\.environment)).union(["PARLEY_TEST_CLOCK_FILE"])
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
        if transcriber == "openai", transcriptionURL == nil {
            throw ConfigurationError(setting: "PARLEY_TRANSCRIPTION_URL", message: "is needed with PARLEY_TRANSCRIBER=openai")
        }
        if s3Endpoint != nil, s3AccessKey == nil || s3SecretKey == nil {
            throw ConfigurationError(setting: "PARLEY_S3_ACCESS_KEY, PARLEY_S3_SECRET_KEY", message: "are needed when PARLEY_S3_ENDPOINT is set")
        }
        if let endpoint = s3Endpoint, URL(string: endpoint)?.host == nil || !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) {
            throw ConfigurationError(setting: "PARLEY_S3_ENDPOINT (--s3-endpoint)", message: "'\(endpoint)' is not an http(s) URL")
        }
        if cluster, s3Endpoint == nil {
            throw ConfigurationError(setting: "PARLEY_CLUSTER (--cluster)", message: "needs an object store every node shares (PARLEY_S3_ENDPOINT): media on one node's disk cannot be served by the others")
        }
        if cluster, !resolvedDatabaseURL.hasPrefix("postgres") {
            throw ConfigurationError(setting: "PARLEY_CLUSTER (--cluster)", message: "needs a PostgreSQL database (PARLEY_DATABASE_URL=postgres://…) that every node shares")
        }
        if callRelayOnly, turnURLs.isEmpty {
            throw ConfigurationError(setting: "PARLEY_CALL_RELAY_ONLY (--call-relay-only)", message: "needs TURN servers (PARLEY_TURN_URLS)")
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

/// How logs are written.
public enum OTLPEncoding: String, Sendable, CaseIterable {
    case protobuf
    case json
}

public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json
}
