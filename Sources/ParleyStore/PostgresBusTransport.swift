import Foundation
import ParleyDomain
import Logging
import NIOPosix
import PostgresNIO
import SQLKit
import Synchronization

/// How an event bus's envelopes travel between nodes: every envelope sent reaches every node's
/// `receive` (the sender's too), in the order each node sent them.
public protocol BusTransport: Sendable {
    /// Sends envelopes, in order, in one go.
    func send(_ payloads: [String]) async throws
    /// Runs until cancelled, handing every envelope received to `receive`, one at a time, in order.
    /// `reconnected` is called when the transport had lost its connection and has it again:
    /// envelopes sent meanwhile are lost, and the bus makes its clients resume from the log.
    func run(receive: @escaping @Sendable (String) async -> Void, reconnected: @escaping @Sendable () async -> Void) async throws
    /// Whether it is receiving now.
    var isConnected: Bool { get }
}

/// PostgreSQL LISTEN/NOTIFY as a bus transport: no other component to run.
///
/// Sending: one `pg_notify` per envelope, a batch in one statement (PostgreSQL delivers one
/// transaction's notifications in order, and a sender's transactions in commit order). A
/// notification's payload must stay under 8,000 bytes: a larger envelope is stored in
/// `bus_payloads` and the notification carries `@` and its id; receivers read it from there (rows
/// older than a minute are pruned by the senders). Receiving: one connection of its own that
/// LISTENs, reconnecting with back-off when it is lost.
public final class PostgresBusTransport: BusTransport {
    public static let channel = "parley_bus"
    /// The largest envelope sent inline (PostgreSQL's limit is 8,000 bytes, with the channel name).
    public static let inlineLimit = 7_900

    private let database: any DatabaseClient
    private let settings: PostgresSettings
    private let logger: Logger
    private let sentByReference = Atomic<Int>(0)
    private let listening = Atomic<Bool>(false)
    public var isConnected: Bool { listening.load(ordering: .relaxed) }

    public init(url: String, database: any DatabaseClient, logger: Logger) throws {
        self.settings = try PostgresSettings(url: url)
        self.database = database
        self.logger = logger
    }

    public func send(_ payloads: [String]) async throws {
        guard !payloads.isEmpty else { return }
        let large = payloads.contains { $0.utf8.count > Self.inlineLimit }
        let notify: @Sendable (any SQLDatabase, [String]) async throws -> Void = { db, notes in
            try await db.prepared(
                "SELECT pg_notify(\(bind: Self.channel), note) FROM unnest(\(bind: notes)::text[]) WITH ORDINALITY AS t(note, n) ORDER BY n"
            ).run()
        }
        guard large else {
            // One statement is one transaction of its own: its notifications go out together, in
            // order, when it ends. One round trip, where BEGIN ... COMMIT around it took three.
            try await database.alone { db in try await notify(db, payloads) }
            return
        }
        try await database.write { db in
            var notes: [String] = []
            for payload in payloads {
                if payload.utf8.count > Self.inlineLimit {
                    let row = try await db.raw(
                        "INSERT INTO bus_payloads (payload, created_at) VALUES (\(bind: payload), \(bind: StoredTime.millis(Date()))) RETURNING id"
                    ).first(decoding: Stored.self)
                    guard let id = row?.id else { throw StoreError.configuration("bus_payloads gave no id") }
                    notes.append("@\(id)")
                } else {
                    notes.append(payload)
                }
            }
            try await notify(db, notes)
        }
        if large, sentByReference.add(1, ordering: .relaxed).newValue % 100 == 0 {
            let cutoff = StoredTime.millis(Date().addingTimeInterval(-60))
            try? await database.write { db in try await db.raw("DELETE FROM bus_payloads WHERE created_at < \(bind: cutoff)").run() }
        }
    }

    private struct Stored: Decodable { var id: Int64 }
    private struct Payload: Decodable { var payload: String }

    public func run(receive: @escaping @Sendable (String) async -> Void, reconnected: @escaping @Sendable () async -> Void) async throws {
        var lost = false
        var delay = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                // The next loop in turn, not always the caller's (`LoopPools`).
                let connection = try await PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try settings.connectionConfiguration(connectTimeout: .seconds(5)), id: 1, logger: logger)
                defer { Task { try? await connection.close() } }
                try await connection.listen(on: Self.channel) { notifications in
                    listening.store(true, ordering: .relaxed)
                    defer { listening.store(false, ordering: .relaxed) }
                    if lost {
                        logger.notice("the event bus is connected again; clients resume from the log")
                        await reconnected()
                        lost = false
                    }
                    delay = .milliseconds(100)
                    for try await notification in notifications {
                        await receive(try await self.resolve(notification.payload))
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                logger.warning("the event bus lost its connection; reconnecting", metadata: ["error": "\(String(reflecting: error))"])
            }
            lost = true
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }

    /// An envelope sent by reference (`@id`) is read back from `bus_payloads`.
    private func resolve(_ note: String) async throws -> String {
        guard note.hasPrefix("@"), let id = Int64(note.dropFirst()) else { return note }
        let row = try await database.read { db in
            try await db.raw("SELECT payload FROM bus_payloads WHERE id = \(bind: id)").first(decoding: Payload.self)
        }
        guard let row else { throw StoreError.configuration("bus payload \(id) is gone") }
        return row.payload
    }
}
