import Foundation
import Logging
import NIOCore
import NIOPosix
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

/// A pool per event loop (`LoopPools`). PostgresNIO opens each connection on the group's `any()`,
/// which NIO answers with the caller's own loop; `parley serve` runs its tasks on NIO's loops, so
/// every connection landed on one loop and nearly all of a node's work ran on one thread
/// (bench/RESULTS.md, "Across nodes").
@Suite struct EventLoopPoolTests {
    /// Code running on a loop gets that loop's pool; off the loops, the pools in turn.
    @Test func eachLoopUsesItsOwnPool() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let settings = try PostgresSettings(url: "postgres://parley@127.0.0.1:5432/parley")
        let loops = Array(group.makeIterator())
        let pools = try LoopPools(loops: loops, poolSize: 5, logger: Logger(label: "pool-test")) { size in
            try settings.clientConfiguration(poolSize: size, connectTimeout: .seconds(10))
        }
        #expect(pools.all.count == 2)
        #expect(pools.all.map(\.size) == [3, 2])
        for (index, loop) in loops.enumerated() {
            let chosen = try await loop.submit { ObjectIdentifier(pools.current) }.get()
            #expect(chosen == ObjectIdentifier(pools.all[index].client))
            #expect(pools.all[index].loop === loop)
        }
        let offLoop = Set((0..<4).map { _ in ObjectIdentifier(pools.current) })
        #expect(offLoop.count == 2)
        // Fewer connections than loops: one pool of one connection.
        let single = try LoopPools(loops: loops, poolSize: 1, logger: Logger(label: "pool-test")) { size in
            try settings.clientConfiguration(poolSize: size, connectTimeout: .seconds(10))
        }
        #expect(single.all.count == 1)
        try await group.shutdownGracefully()
    }

    /// A group whose `any()` is always its first loop: NIO's answer when the pool opens from a task
    /// running on that loop, as it does in `parley serve`.
    final class CallerOnFirstLoop: EventLoopGroup {
        let base: MultiThreadedEventLoopGroup
        let first: any EventLoop
        init(_ base: MultiThreadedEventLoopGroup) {
            self.base = base
            var loops = base.makeIterator()
            first = loops.next()!
        }
        func next() -> any EventLoop { base.next() }
        func any() -> any EventLoop { first }
        func makeIterator() -> EventLoopIterator { base.makeIterator() }
        func shutdownGracefully(queue: DispatchQueue, _ callback: @escaping @Sendable ((any Error)?) -> Void) {
            base.shutdownGracefully(queue: queue, callback)
        }
    }

    /// Against PostgreSQL: four connections held at once are on both loops, not all on the caller's
    /// (with one pool, opened from a loop, they were all on that loop).
    @Test func thePoolsConnectionsSpreadOverTheLoops() async throws {
        guard let url = ProcessInfo.processInfo.environment["TEST_POSTGRES_URL"] else { return }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let database = try await PostgresDatabaseClient.open(
            url: url, poolSize: 4, eventLoopGroup: CallerOnFirstLoop(group), logger: Logger(label: "pool-test"))
        let holding = Count()
        let loops = try await withThrowingTaskGroup(of: ObjectIdentifier.self) { tasks in
            for _ in 0..<4 {
                tasks.addTask {
                    try await database.read { db in
                        // Hold this connection until all four are leased (each lease is a new connection).
                        holding.add()
                        let deadline = ContinuousClock.now + .seconds(20)
                        while holding.value < 4 && ContinuousClock.now < deadline {
                            try await Task.sleep(for: .milliseconds(5))
                        }
                        return ObjectIdentifier(db.eventLoop)
                    }
                }
            }
            var loops: [ObjectIdentifier] = []
            for try await loop in tasks { loops.append(loop) }
            return loops
        }
        await database.close()
        try await group.shutdownGracefully()
        #expect(holding.value == 4)
        #expect(Set(loops).count == 2, "the four connections were on \(Set(loops).count) loop(s)")
    }
}

final class Count: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
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
