import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyServer
import ParleyStore
import SQLKit
import ServiceLifecycle
import Testing

/// A real Parley server on 127.0.0.1 and an ephemeral port, with its own database and media
/// directory, stopped and removed when the test ends.
///
/// The database is a SQLite file, or, when `TEST_SERVER_POSTGRES_URL` names a PostgreSQL
/// server (the test script runs the whole server suite a second time so), a database of its own
/// created on that server for the test and dropped afterwards.
struct TestServer: Sendable {
    let port: Int
    let services: ParleyServices
    let dataDirectory: URL
    /// The PostgreSQL server the suite runs on, if any.
    static let postgresURL = ProcessInfo.processInfo.environment["TEST_SERVER_POSTGRES_URL"]
    /// Where several nodes can share a database in either run (the test script starts it).
    static let clusterPostgresURL = ProcessInfo.processInfo.environment["TEST_SERVER_POSTGRES_URL"] ?? ProcessInfo.processInfo.environment["TEST_POSTGRES_URL"]
    var onPostgres: Bool { Self.postgresURL != nil }

    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }

    /// `database`: one the caller made (and drops) to keep across several runs, as a restart would;
    /// otherwise each run gets a new one.
    static func run(
        database kept: TestDatabase? = nil,
        clock: any WallClock = SystemClock(),
        recording: RecordingDatabase? = nil,
        transcriber: (any Transcriber)? = nil,
        bus: (any EventBus)? = nil,
        configure: (inout ParleyConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database: TestDatabase
        if let kept { database = kept } else { database = try await TestDatabase.make() }
        let owned = kept == nil ? database : TestDatabase(url: nil, name: nil)
        var configuration = ParleyConfiguration()
        configuration.databaseURL = database.url
        // A pool opens all its connections at start (`PostgresSettings.clientConfiguration`): the
        // suite runs a dozen servers at once on one PostgreSQL, and 16 each made the start of the run
        // a storm of backend start-ups.
        configuration.databasePoolSize = 4
        configuration.port = 0
        configuration.dataDirectory = directory.path
        configuration.bcryptCost = 4
        configuration.seedDemo = false
        configuration.clamd = "off"  // tests that scan start their own clamd
        configuration.transcriber = "off"  // tests that transcribe give their own engine
        // Tests send faster than people do; the rate-limit tests turn limits back on.
        configuration.rateConsumerMessages = 0
        configuration.rateIPWrites = 0
        configuration.rateConsumerSessions = 0
        configuration.rateLogins = 0
        configuration.publicDirectory = repositoryRoot.appendingPathComponent("Public").path
        configure(&configuration)
        var logger = Logger(label: "parley-test-server")
        logger.logLevel = .warning
        let services: ParleyServices
        do {
            services = try await ParleyServices.make(
                configuration: configuration, bus: bus, clock: clock, wrapDatabase: { recording?.wrap($0) ?? $0 },
                transcriber: transcriber, logger: logger)
        } catch {
            await owned.drop()
            throw TestFailure("the server did not start: \(String(reflecting: error))")
        }
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let app = buildApplication(services, logger: logger) { port in portContinuation.yield(port) }
        let group = makeServiceGroup(app, services, gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw TestFailure("server did not start") }
        let server = TestServer(port: port, services: services, dataDirectory: directory)
        do {
            try await body(server)
        } catch {
            await group.triggerGracefulShutdown()
            _ = try? await running.value
            await services.close()
            await owned.drop()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await running.value
        await services.close()
        await owned.drop()
    }

    // MARK: HTTP

    struct Reply: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: Data

        func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
            do {
                return try ParleyJSON.makeDecoder().decode(T.self, from: body)
            } catch {
                throw TestFailure("could not decode \(T.self) from \(status.code): \(String(decoding: body, as: UTF8.self))")
            }
        }

        /// The error body; fails the test when the response has none.
        var error: ErrorBody.Detail {
            get throws { try decode(ErrorBody.self).error }
        }

        var text: String { String(decoding: body, as: UTF8.self) }
    }

    @discardableResult
    func request(
        _ method: HTTPRequest.Method, _ path: String, token: String? = nil, json: (any Encodable)? = nil, raw: String? = nil,
        data: Data? = nil, headers extra: HTTPFields = [:]
    ) async throws -> Reply {
        var headers = extra
        if let token { headers[.authorization] = "Bearer \(token)" }
        var body: ByteBuffer?
        if let json {
            body = ByteBuffer(bytes: try ParleyJSON.makeEncoder().encode(json))
        } else if let raw {
            body = ByteBuffer(string: raw)
        }
        if body != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        if let data {
            body = ByteBuffer(bytes: data)
            if headers[.contentType] == nil { headers[.contentType] = "application/octet-stream" }
        }
        let request = TestClient.Request(path, method: method, authority: "127.0.0.1:\(port)", headers: headers, body: body)
        // 60 s without a byte before the client gives up: a deadline for a 2-core machine running the
        // whole suite in parallel (on PostgreSQL a request once waited more than the default 15 s), not a measure.
        let response = try await TestClient.withClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(60))) { client in
            try await client.execute(request)
        }
        return Reply(status: response.status, headers: response.headers, body: response.body.map { Data(buffer: $0) } ?? Data())
    }

    func get(_ path: String, token: String? = nil) async throws -> Reply {
        try await request(.get, path, token: token)
    }

    func post(_ path: String, token: String? = nil, json: (any Encodable)? = nil) async throws -> Reply {
        try await request(.post, path, token: token, json: json)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The database of one test server: nil (a SQLite file in its data directory), or a PostgreSQL
/// database made for it on `TEST_SERVER_POSTGRES_URL`'s server.
struct TestDatabase: Sendable {
    let url: String?
    let name: String?

    /// A PostgreSQL database for several nodes, on the server suite's PostgreSQL or, in the SQLite
    /// run, the repository suite's (`TEST_POSTGRES_URL`).
    static func makeShared() async throws -> TestDatabase {
        guard let admin = TestServer.postgresURL ?? TestServer.clusterPostgresURL else { throw TestFailure("no PostgreSQL for a cluster") }
        return try await make(on: admin)
    }

    static func make() async throws -> TestDatabase {
        guard let admin = TestServer.postgresURL else { return TestDatabase(url: nil, name: nil) }
        return try await make(on: admin)
    }

    private static func make(on admin: String) async throws -> TestDatabase {
        let name = "parley_server_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))"
        try await run(admin, "CREATE DATABASE \(name)")
        var components = URLComponents(string: admin)!
        components.path = "/\(name)"
        return TestDatabase(url: components.string!, name: name)
    }

    /// Drops the test's database (its server has closed its connections by then).
    func drop() async {
        guard let name, let admin = TestServer.postgresURL ?? TestServer.clusterPostgresURL else { return }
        try? await Self.run(admin, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    private static func run(_ url: String, _ statement: String) async throws {
        let database = try await openDatabase(.postgres(url: url), poolSize: 1, logger: Logger(label: "parley-test-database"))
        do {
            try await database.read { db in try await db.raw(SQLQueryString(stringLiteral: statement)).run() }
        } catch {
            await database.close()
            throw TestFailure("\(statement): \(String(reflecting: error))")
        }
        await database.close()
    }
}

extension TestServer {
    /// Returns once every job due now has run, here or on the runner's own schedule: what a
    /// webhook, a retry or a timer started has finished (a test of "nothing happened twice" waits
    /// for this, not for a fixed time).
    func jobsSettled(within seconds: Double = 30) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            try await services.jobRunner.runDue()
            let now = StoredTime.millis(services.clock.now())
            let busy = try await services.store.database.read { db in
                try await db.raw(
                    "SELECT COUNT(*) AS n FROM jobs WHERE state = 'running' OR (state = 'queued' AND run_at <= \(bind: now))"
                ).first(decoding: Count.self)?.n ?? 0
            }
            if busy == 0 { return }
            guard Date() < deadline else { throw TestFailure("\(busy) jobs were still due or running after \(seconds) s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    private struct Count: Decodable { var n: Int }
}
