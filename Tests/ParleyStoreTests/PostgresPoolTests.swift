import Foundation
import PostgresNIO
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
}
