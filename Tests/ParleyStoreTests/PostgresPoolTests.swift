import Foundation
import Logging
import PostgresNIO
import Synchronization
import SQLKit
import Testing

@testable import ParleyStore

/// The pool keeps every connection open and runs no keep-alive queries: PostgresNIO's pool started
/// (and cancelled) two timers, each a task group with two child tasks, every time a connection came
/// back to it, three times a message (bench/RESULTS.md, "Across nodes").
@Suite struct PostgresPoolTests {
    @Test func thePoolKeepsNoTimers() throws {
        let settings = try PostgresSettings(url: "postgres://parley@127.0.0.1:5432/parley")
        let configuration = try settings.clientConfiguration(poolSize: 6, connectTimeout: .seconds(10))
        #expect(configuration.options.maximumConnections == 6)
        #expect(configuration.options.minimumConnections == 6)
        #expect(configuration.options.keepAliveBehavior == nil)
    }

    /// Against PostgreSQL: the pool opens all its connections and uses the same ones throughout.
    @Test func everyConnectionOpensAtOnceAndStays() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await Backend.postgres.withStore(poolSize: 4) { store in
            struct Session: Decodable, Hashable { var pid: Int64 }
            let backends: @Sendable () async throws -> Set<Session> = {
                try await Set(
                    store.database.read { db in
                        try await db.raw(
                            "SELECT pid::bigint AS pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
                        ).all(decoding: Session.self)
                    })
            }
            // Connections open in the background: wait for them (a network event, not a timer).
            let deadline = ContinuousClock.now + .seconds(20)
            var opened = try await backends()
            while opened.count < 4 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                opened = try await backends()
            }
            #expect(opened.count == 4)
            for _ in 0..<40 {
                _ = try await store.database.read { db in try await db.raw("SELECT 1 AS ok").run() }
            }
            #expect(try await backends() == opened)
        }
    }

    /// Opening the pool leases a connection only once the pool runs: PostgresNIO warned "Trying to
    /// lease connection from `PostgresClient`, but `PostgresClient.run()` hasn't been called yet"
    /// 639 times in one CI run when the first lease raced the task that starts it.
    @Test func openingLeasesOnlyOnceThePoolRuns() async throws {
        guard let url = ProcessInfo.processInfo.environment["TEST_POSTGRES_URL"] else { return }
        let lines = Recorded()
        let logger = Logger(label: "pool-test") { _ in RecordingLogHandler(lines: lines) }
        for _ in 0..<20 {
            let database = try await PostgresDatabaseClient.open(url: url, poolSize: 2, logger: logger)
            await database.close()
        }
        let warnings = lines.all.filter { $0.level >= .warning }
        #expect(warnings.isEmpty, "\(warnings.map(\.message))")
    }
}

final class Recorded: Sendable {
    private let lines = Mutex<[(level: Logger.Level, message: String)]>([])
    func append(_ level: Logger.Level, _ message: String) { lines.withLock { $0.append((level, message)) } }
    var all: [(level: Logger.Level, message: String)] { lines.withLock { $0 } }
}

struct RecordingLogHandler: LogHandler {
    let lines: Recorded
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.append(event.level, "\(event.message)")
    }
}
