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
import ParleyDomain
import ParleyServer
import ParleyStore
import Prometheus
import ServiceLifecycle
import Synchronization

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
        version: BuildInfo.current.description,
        subcommands: [
            Serve.self, Migrate.self, Admin.self, ResealSecrets.self, Seal.self, Backup.self, Restore.self, Check.self, Chat.self, Version.self,
        ],
        defaultSubcommand: Serve.self)
}

/// The settings every command that opens the database shares, as flags over `PARLEY_*` variables.
/// Both come from the one table, `ParleyConfiguration.settings`, which also writes `--help`; a
/// flag is not declared here a second time.
struct ServerOptions: ParsableArguments {
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Settings as --name value (listed below).", valueName: "setting"))
    var settings: [String] = []

    /// Defaults, then the environment, then flags; exits with a message naming the setting on error.
    func resolve() throws -> ParleyConfiguration {
        do {
            var configuration = try ParleyConfiguration.fromEnvironment()
            try configuration.apply(arguments: settings)
            try configuration.validate()
            bootstrapLogging(configuration.logFormat)
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
    static let configuration = CommandConfiguration(
        abstract: "Run the Parley server (HTTP API, real-time, web pages).", discussion: ParleyConfiguration.settingsHelp)
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = options.logger(configuration)
        raiseDescriptorLimit(logger: logger)
        // The address first: a port in use is said in words before anything else starts.
        do {
            try await Self.checkListening(host: configuration.host, port: configuration.port)
        } catch {
            FileHandle.standardError.write(Data("parley: cannot start: \(Self.describeListenFailure(error, configuration))\n".utf8))
            throw ExitCode(1)
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let services: ParleyServices
        do {
            var clock: any WallClock = SystemClock()
            if let file = ProcessInfo.processInfo.environment["PARLEY_TEST_CLOCK_FILE"] {
                logger.warning("the clock is moved by the offset in a file: for end-to-end tests only", metadata: ["file": "\(file)"])
                clock = FileOffsetClock(path: file)
            }
            services = try await ParleyServices.make(
                configuration: configuration, metrics: ParleyMetrics(registry: registry), clock: clock, logger: logger)
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
                  in-app    \(demo.inAppApp.map { "\($0.name) (\($0.id)): parley chat --app \($0.id)" } ?? "none")
                  admin     \(demo.admin.email)
                  password  \(demo.adminPassword)

                """)
        }
        let traces: (any Service)?
        do {
            traces = try Traces.bootstrap(configuration, logger: logger)
        } catch {
            FileHandle.standardError.write(Data("parley: cannot start the trace exporter: \(error)\n".utf8))
            throw ExitCode(1)
        }
        let app = buildApplication(services, logger: logger) { port in
            say("Parley is listening on http://\(configuration.host):\(port)")
        }
        do {
            try await makeServiceGroup(
                app, services, drainDeadline: .seconds(configuration.drainDeadlineSeconds), also: traces.map { [$0] } ?? [], logger: logger
            ).run()
        } catch {
            await services.close()
            // Another program may have taken the port since the check.
            if error is IOError {
                FileHandle.standardError.write(Data("parley: cannot start: \(Self.describeListenFailure(error, configuration))\n".utf8))
                throw ExitCode(1)
            }
            throw error
        }
        await services.close()
    }

    /// Binds the address once and lets it go (port 0 picks a free one: nothing to check).
    static func checkListening(host: String, port: Int) async throws {
        guard port != 0 else { return }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: host, port: port).get()
        try await channel.close()
    }

    /// One line for an address that cannot be listened on.
    static func describeListenFailure(_ error: any Error, _ configuration: ParleyConfiguration) -> String {
        let address = "\(configuration.host):\(configuration.port)"
        guard let io = error as? IOError else { return "cannot listen on \(address): \(error)" }
        switch io.errnoCode {
        case EADDRINUSE: return "\(address) is already in use by another program (choose another with --port or PARLEY_PORT)"
        case EACCES: return "listening on \(address) is not permitted (ports below 1024 need privileges)"
        case EADDRNOTAVAIL: return "\(configuration.host) is not an address of this machine (--host or PARLEY_HOST)"
        default: return "cannot listen on \(address): \(String(cString: strerror(io.errnoCode)))"
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending database migrations and exit.", discussion: ParleyConfiguration.settingsHelp)
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.resolve()
        let logger = options.logger(configuration)
        raiseDescriptorLimit(logger: logger)
        // Migrations run one after another: a pool of one (a pool opens all its connections at start).
        let database = try await openDatabase(
            DatabaseLocation(url: configuration.resolvedDatabaseURL), fullSync: configuration.sqliteFullSync, poolSize: 1, logger: logger)
        let applied = try await Migrations.apply(to: database, logger: logger)
        let all = try await Migrations.appliedVersions(in: database)
        await database.close()
        say(applied.isEmpty ? "Database is up to date (schema version \(all.last ?? 0))." : "Applied migrations \(applied.map(String.init).joined(separator: ", ")).")
    }
}

struct ResealSecrets: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reseal-secrets",
        abstract: "Seal every stored secret (channel secrets, push credentials) with the current PARLEY_SECRET_KEY (after a key rotation) and exit.",
        discussion: """
            Rotation: start Parley with the new key in PARLEY_SECRET_KEY and the old one in \
            PARLEY_PREVIOUS_SECRET_KEYS (both work at once), run this command, then drop the old key.
            """ + "\n\n" + ParleyConfiguration.settingsHelp)
    @OptionGroup var options: ServerOptions

    func run() async throws {
        try await Self.reseal(options)
    }

    static func reseal(_ options: ServerOptions) async throws {
        let configuration = try options.resolve()
        let logger = options.logger(configuration)
        let services = try await ParleyServices.make(configuration: configuration, logger: logger)
        do {
            let count = try await services.resealSecrets()
            await services.close()
            say("Re-sealed \(count) stored secret\(count == 1 ? "" : "s") (\(SealedColumns.all.map(\.description).joined(separator: ", "))) with the current key.")
        } catch {
            await services.close()
            throw error
        }
    }
}

struct Seal: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Seal a secret read from standard input with the server's secret key, for a setting that takes sealed values (PARLEY_TRANSCRIPTION_API_KEY).",
        discussion: """
            echo -n "$KEY" | parley seal   prints v1:...; put that in the setting instead of the key. \
            It opens only with the same PARLEY_SECRET_KEY (or <data-dir>/secret.key); after a key \
            rotation, seal it again.
            """ + "\n\n" + ParleyConfiguration.settingsHelp)
    @OptionGroup var options: ServerOptions

    func run() async throws {
        let configuration = try options.resolve()
        let input = FileHandle.standardInput.readDataToEndOfFile()
        let secret = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .newlines)
        guard !secret.isEmpty, input.count <= 64 * 1024 else {
            FileHandle.standardError.write(Data("parley seal: give the secret on standard input (at most 64 KB)\n".utf8))
            throw ExitCode(64)
        }
        print(try SecretBox.sealSetting(secret, configuration: configuration))
    }
}

struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operator tasks: brands, apps and agents; passwords; the secret key.",
        discussion: """
            These work on the database directly, while the server runs or not. What ends sessions \
            (reset-password, disable) closes the agent's open connections on every running node within \
            2 s.
            """,
        subcommands: [
            CreateBrand.self, CreateApp.self, CreateAgent.self, ListBrands.self, ListAgents.self, ResetPassword.self, DisableAgent.self,
            EnableAgent.self, RotateSecretKey.self,
        ])
}

struct ListBrands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list-brands", abstract: "List every brand: id, agents, created, name.")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        try await withServices(options) { services in
            let brands = try await services.identity.operatorBrands()
            let dates = ISO8601DateFormatter()
            say(table(["BRAND", "AGENTS", "CREATED", "NAME"], brands.map { [$0.brand.id.rawValue, String($0.agents), dates.string(from: $0.brand.createdAt), $0.brand.name] }))
        }
    }
}

struct ListAgents: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list-agents", abstract: "List a brand's agents: id, email, role, state, name.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The brand id (brd_...).") var brand: String

    func run() async throws {
        try await withServices(options) { services in
            let agents = try await services.identity.operatorAgents(brandId: try CreateApp.brandId(brand))
            say(table(
                ["AGENT", "EMAIL", "ROLE", "STATE", "NAME"],
                agents.map { [$0.id.rawValue, $0.email, $0.role.rawValue, $0.disabled ? "disabled" : "active", $0.name] }))
        }
    }
}

struct ResetPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset-password", abstract: "Give an agent a new generated password, printed once; every session of theirs ends.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The agent's email.") var email: String

    func run() async throws {
        try await withServices(options) { services in
            let (agent, password) = try await services.identity.operatorResetPassword(email: email)
            say("agent \(agent.id)\nemail \(agent.email)\npassword \(password)")
        }
    }
}

struct DisableAgent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable", abstract: "Disable an agent: they cannot sign in, their sessions end, their conversations go back to the queue.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The agent's email.") var email: String

    func run() async throws {
        try await withServices(options) { services in
            let agent = try await services.identity.operatorSetDisabled(email: email, true)
            say("agent \(agent.id) (\(agent.email)) disabled")
        }
    }
}

struct EnableAgent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "enable", abstract: "Enable a disabled agent: they can sign in again.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The agent's email.") var email: String

    func run() async throws {
        try await withServices(options) { services in
            let agent = try await services.identity.operatorSetDisabled(email: email, false)
            say("agent \(agent.id) (\(agent.email)) enabled")
        }
    }
}

/// `reseal-secrets` under the name an operator looks for.
struct RotateSecretKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-secret-key",
        abstract: "After setting a new PARLEY_SECRET_KEY (the old one in PARLEY_PREVIOUS_SECRET_KEYS): seal every stored secret with the new key.",
        discussion: ResealSecrets.configuration.discussion)
    @OptionGroup var options: ServerOptions

    func run() async throws {
        try await ResealSecrets.reseal(options)
    }
}

/// Columns padded to their widest cell, for a terminal.
func table(_ header: [String], _ rows: [[String]]) -> String {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
    return all.map { row in
        row.enumerated().map { index, cell in index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0) }
            .joined(separator: "  ")
    }.joined(separator: "\n")
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

    /// The brand id given on the command line, checked like any id that enters from outside.
    static func brandId(_ text: String) throws -> BrandID {
        guard let id = BrandID(text) else { throw ValidationError("'\(text)' is not a brand id (brd_...).") }
        return id
    }

    func run() async throws {
        guard let channel = Channel(rawValue: channel) else {
            throw ValidationError("'\(channel)' is not a channel: use web, in_app, whatsapp, messenger, apple or sms.")
        }
        try await withServices(options) { services in
            let app = try await services.identity.createApp(brandId: try Self.brandId(brand), CreateAppRequest(name: name, channel: channel))
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
    @Option(name: .customLong("permission"), help: "send_audio, initiate_voice_call, initiate_video_call, cobrowse, cobrowse_control or share_screen; repeat for several.") var permissions: [String] = []

    func run() async throws {
        guard let role = AgentRole(rawValue: role) else { throw ValidationError("'\(role)' is not a role: use agent, manager or admin.") }
        let parsed = try permissions.map { raw in
            guard let permission = AgentPermission(rawValue: raw) else { throw ValidationError("'\(raw)' is not a permission.") }
            return permission
        }
        try await withServices(options) { services in
            let password = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(20))
            let agent = try await services.identity.createAgent(
                brandId: try CreateApp.brandId(brand), CreateAgentRequest(email: email, name: name, password: password, role: role, permissions: parsed))
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

/// Logs as `format` says, once per process (swift-log allows one bootstrap).
func bootstrapLogging(_ format: LogFormat) {
    guard loggingBootstrapped.withLock({ done in defer { done = true }; return !done }) else { return }
    // Either format carries the id of the request, frame or job a line was written for (`request_id`).
    switch format {
    case .json: LoggingSystem.bootstrap({ label, provider in JSONLogHandler(label: label, metadataProvider: provider) }, metadataProvider: RequestID.metadataProvider)
    case .text: LoggingSystem.bootstrap({ label, provider in StreamLogHandler.standardError(label: label, metadataProvider: provider) }, metadataProvider: RequestID.metadataProvider)
    }
}

private let loggingBootstrapped = Mutex(false)

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

/// `parley version`: the release, the commit and the build date (also `parley --version`).
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "version", abstract: "Print the version, the commit and the build date.")

    @Flag(help: "As JSON.") var json = false

    func run() throws {
        if json {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(BuildInfo.current), as: UTF8.self))
        } else {
            print(BuildInfo.current.description)
        }
    }
}

/// `parley backup --to DIR`: a consistent backup while the server runs (docs/operations.md).
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Back up the database, the media on local disk and the secret keys into a new folder, with a manifest of checksums.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The folder to write (new, or empty).") var to: String

    func run() async throws {
        try await withServices(options) { services in
            let manifest = try await Backups.create(services, to: URL(fileURLWithPath: to))
            let bytes = manifest.files.reduce(0) { $0 + $1.bytes }
            say("Backed up \(manifest.database) (schema \(manifest.schema)), \(manifest.files.count) files, \(bytes / 1024) KB, to \(to).")
            if manifest.media == "s3" { say("The media are in the object store: protect the bucket with versioning and replication.") }
        }
    }
}

/// `parley restore --from DIR`: into an empty data directory (and an empty database).
struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Restore a backup into an empty data directory (and, for PostgreSQL, an empty database), after checking every file.")
    @OptionGroup var options: ServerOptions
    @Option(help: "The backup folder.") var from: String

    func run() async throws {
        let configuration = try options.resolve()
        do {
            let manifest = try await Backups.restore(from: URL(fileURLWithPath: from), into: configuration)
            say("Restored the backup of \(ISO8601DateFormatter().string(from: manifest.createdAt)) (\(manifest.files.count) files) into \(configuration.dataDirectory).")
        } catch {
            FileHandle.standardError.write(Data("parley: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// `parley check`: the database's integrity and every media file its rows name.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Verify a data directory: the database's integrity and that every media file a row refers to is there.")
    @OptionGroup var options: ServerOptions

    func run() async throws {
        var healthy = true
        try await withServices(options) { services in
            let report = try await Backups.check(services)
            say("database: \(report.database)")
            say("media: \(report.referenced - report.missing.count) of \(report.referenced) referenced files present")
            for key in report.missing.prefix(20) { say("  missing: \(key)") }
            healthy = report.database == "ok" && report.missing.isEmpty
        }
        if !healthy { throw ExitCode(1) }
    }
}
