import ArgumentParser
import CParleySQLite
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import ParleyDomain
import Synchronization
import VaporCSQLite

/// The floor for a durable message: the least a server can do for each `send` and still promise
/// what Parley promises (the ack goes out after the message is committed, and the agent gets it).
/// SwiftNIO's own WebSocket handlers, one SQLite connection with Parley's settings (WAL,
/// `synchronous=NORMAL`, foreign keys, Parley's WAL write gathering) and Parley's two tables with
/// every index they have, so a message dirties the same b-tree pages; per message one transaction of
/// two statements (the conversation's next sequence number, checked against the sender, and the
/// message row, whose unique key makes a retry find the first), run on the socket's event loop,
/// then the ack to the sender and a copy to the agent in Parley's frame shapes and sizes.
///
/// What it leaves out is everything else a product needs: sessions and tokens, limits, the
/// conversation's state and assignment, card masking, the hub, presence, metrics. The text section
/// measures it beside Parley and the echo (issue 28: the CPU target is 2× the echo, and a message
/// that must reach a disk cannot cost what an echo costs; this says what it can cost).
struct RelayFloorServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-floor-server", abstract: "The durable-message floor: a WebSocket relay that commits each message to SQLite first.")

    @Option(help: "The SQLite database file (made if missing).") var database: String

    func run() async throws {
        let store = try FloorStore(path: database)
        let agents = NIOLockedValueBox<[any Channel]>([])
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: 1 << 16,
            shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
            upgradePipelineHandler: { channel, head in
                channel.eventLoop.makeCompletedFuture {
                    // `/relay?agent` or `/relay?conversation=<id>`: who this socket is, as a token would say.
                    let query = head.uri.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
                    if query == "agent" {
                        agents.withLockedValue { $0.append(channel) }
                        channel.closeFuture.whenComplete { _ in agents.withLockedValue { $0.removeAll { $0 === channel } } }
                        try channel.pipeline.syncOperations.addHandler(RelayHandler(store: store, agents: agents, conversation: nil))
                    } else {
                        let conversation = query.hasPrefix("conversation=") ? String(query.dropFirst("conversation=".count)) : ""
                        // Letters, digits and `_` only: the id goes into SQL text and JSON as it is.
                        guard !conversation.isEmpty, conversation.utf8.count <= 64,
                            conversation.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) || $0 == 0x5f })
                        else { throw FloorError("no conversation") }
                        try store.open(conversation: conversation)
                        try channel.pipeline.syncOperations.addHandler(RelayHandler(store: store, agents: agents, conversation: conversation))
                    }
                }
            })
        try await NIOEchoServer.serve(upgrader, announcing: "relay floor")
    }

    struct FloorError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// A consumer's socket (`conversation` set) sends; an agent's receives.
    final class RelayHandler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame

        let store: FloorStore
        let agents: NIOLockedValueBox<[any Channel]>
        let conversation: String?

        init(store: FloorStore, agents: NIOLockedValueBox<[any Channel]>, conversation: String?) {
            self.store = store
            self.agents = agents
            self.conversation = conversation
        }

        func handlerAdded(context: ChannelHandlerContext) {
            send(#"{"type":"ready"}"#, on: context)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.opcode {
            case .text:
                guard let conversation else { return }
                let data = frame.unmaskedData
                guard let id = Self.field(#""id":""#, in: data), let clientId = Self.field(#""clientMessageId":""#, in: data),
                    let body = Self.field(#""text":""#, in: data)
                else {
                    send(#"{"type":"error","code":"bad_frame"}"#, on: context)
                    return
                }
                let message: String
                do {
                    message = try store.append(conversation: conversation, clientMessageId: clientId, text: body)
                } catch {
                    send(#"{"type":"error","code":"not_saved","id":""# + id + #""}"#, on: context)
                    return
                }
                send(#"{"type":"ack","id":""# + id + #"","message":"# + message + "}", on: context)
                let copy = #"{"type":"message","message":"# + message + "}"
                for agent in agents.withLockedValue({ $0 }) {
                    let buffer = agent.allocator.buffer(string: copy)
                    agent.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, data: buffer), promise: nil)
                }
            default:
                NIOEchoServer.answerControlFrame(frame, context: context)
            }
        }

        private func send(_ text: String, on context: ChannelHandlerContext) {
            let buffer = context.channel.allocator.buffer(string: text)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: buffer)), promise: nil)
        }

        /// A string field of a `send` frame, by scanning its bytes: the bench sends no escapes, and a
        /// frame with one is refused rather than read wrong (a real server decodes; Parley's
        /// `SendFrameReader` costs about 2 µs a message).
        static func field(_ key: StaticString, in frame: ByteBuffer) -> String? {
            frame.withUnsafeReadableBytes { bytes -> String? in
                let pattern = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
                guard pattern.count <= bytes.count else { return nil }
                var start = 0
                while start + pattern.count <= bytes.count {
                    if memcmp(bytes.baseAddress! + start, pattern.baseAddress!, pattern.count) == 0 { break }
                    start += 1
                }
                guard start + pattern.count <= bytes.count else { return nil }
                let valueStart = start + pattern.count
                var end = valueStart
                while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
                    if bytes[end] == UInt8(ascii: "\\") { return nil }
                    end += 1
                }
                guard end < bytes.count else { return nil }
                return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[valueStart..<end]), as: UTF8.self)
            }
        }
    }
}

/// One SQLite connection with Parley's settings, its statements prepared once, used under a lock
/// from whichever event loop's socket sends (Parley also writes one transaction at a time).
final class FloorStore: Sendable {
    private struct Connection {
        var handle: OpaquePointer
        var statements: [String: OpaquePointer] = [:]
    }

    private let connection: Mutex<Connection>
    private static let brand = "brd_floor0000000000000000"
    private static let app = "app_floor0000000000000000"

    init(path: String) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite_nio_sqlite3_open_v2(path, &handle, flags, parley_wal_writes_vfs()) == SQLITE_OK, let handle else {
            throw RelayFloorServer.FloorError("could not open \(path)")
        }
        connection = Mutex(Connection(handle: handle))
        // Parley's settings (SQLiteDatabaseClient) and the columns and indexes of Parley's two tables
        // as its migrations leave them (V002 and the columns and indexes added since); the tables they
        // reference hold the one brand, app and consumer each conversation points at.
        try execute(
            """
            PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;
            PRAGMA cache_size = -16384;
            CREATE TABLE IF NOT EXISTS brands (id TEXT PRIMARY KEY);
            CREATE TABLE IF NOT EXISTS apps (id TEXT PRIMARY KEY);
            CREATE TABLE IF NOT EXISTS consumers (id TEXT PRIMARY KEY);
            CREATE TABLE IF NOT EXISTS conversations (
                id TEXT PRIMARY KEY, brand_id TEXT NOT NULL REFERENCES brands(id), app_id TEXT NOT NULL REFERENCES apps(id),
                consumer_id TEXT NOT NULL REFERENCES consumers(id), channel TEXT NOT NULL, state TEXT NOT NULL, assignee_id TEXT,
                last_seq BIGINT NOT NULL DEFAULT 0, last_message_preview TEXT, last_message_at BIGINT, created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL, last_message_kind TEXT, last_consumer_message_at BIGINT, reply_window_ends_at BIGINT,
                previous_conversation_id TEXT, rated_at BIGINT, first_reply_at BIGINT);
            CREATE INDEX IF NOT EXISTS conversations_by_brand ON conversations (brand_id, updated_at, id);
            CREATE INDEX IF NOT EXISTS conversations_by_consumer ON conversations (consumer_id, app_id, channel);
            CREATE INDEX IF NOT EXISTS conversations_begun ON conversations (brand_id, created_at, id);
            CREATE INDEX IF NOT EXISTS conversations_rated ON conversations (brand_id, rated_at);
            CREATE TABLE IF NOT EXISTS messages (
                id TEXT PRIMARY KEY, brand_id TEXT NOT NULL, conversation_id TEXT NOT NULL REFERENCES conversations(id),
                seq BIGINT NOT NULL, sender_kind TEXT NOT NULL, sender_id TEXT NOT NULL, client_message_id TEXT NOT NULL,
                kind TEXT NOT NULL, body TEXT NOT NULL, delivery_state INTEGER NOT NULL DEFAULT 0, created_at BIGINT NOT NULL,
                delivered_at BIGINT, read_at BIGINT, sender_name TEXT,
                UNIQUE (conversation_id, seq), UNIQUE (sender_id, client_message_id));
            CREATE INDEX IF NOT EXISTS messages_by_time ON messages (brand_id, created_at);
            INSERT OR IGNORE INTO brands VALUES ('\(Self.brand)');
            INSERT OR IGNORE INTO apps VALUES ('\(Self.app)');
            """)
    }

    /// Makes the conversation (and its consumer) if it is new.
    func open(conversation: String) throws {
        let now = Self.nowMillis()
        try execute(
            """
            INSERT OR IGNORE INTO consumers VALUES ('\(conversation)-consumer');
            INSERT OR IGNORE INTO conversations (id, brand_id, app_id, consumer_id, channel, state, created_at, updated_at)
            VALUES ('\(conversation)', '\(Self.brand)', '\(Self.app)', '\(conversation)-consumer', 'web', 'open', \(now), \(now));
            """)
    }

    /// Commits the consumer's message to its conversation (or finds the one a retry already
    /// committed) and returns its JSON, as Parley's `MessageJSON` writes it.
    func append(conversation: String, clientMessageId: String, text: String) throws -> String {
        let now = Self.nowMillis()
        let sender = conversation + "-consumer"
        let fresh = "msg_" + Identifier.random(24)
        let (id, seq): (String, Int64) = try connection.withLock { connection in
            let handle = connection.handle
            func statement(_ sql: String) throws -> OpaquePointer {
                if let prepared = connection.statements[sql] { return prepared }
                var prepared: OpaquePointer?
                guard sqlite_nio_sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil) == SQLITE_OK, let prepared else {
                    throw RelayFloorServer.FloorError(String(cString: sqlite_nio_sqlite3_errmsg(handle)))
                }
                connection.statements[sql] = prepared
                return prepared
            }
            func step(_ sql: String, _ values: [Value], row: (OpaquePointer) -> Void = { _ in }) throws -> Int32 {
                let prepared = try statement(sql)
                defer { sqlite_nio_sqlite3_reset(prepared); sqlite_nio_sqlite3_clear_bindings(prepared) }
                for (index, value) in values.enumerated() {
                    switch value {
                    case .text(let string): sqlite_nio_sqlite3_bind_text(prepared, Int32(index + 1), string, -1, transient)
                    case .integer(let number): sqlite_nio_sqlite3_bind_int64(prepared, Int32(index + 1), number)
                    }
                }
                var result = sqlite_nio_sqlite3_step(prepared)
                while result == SQLITE_ROW {
                    row(prepared)
                    result = sqlite_nio_sqlite3_step(prepared)
                }
                return result
            }
            guard try step("BEGIN IMMEDIATE", []) == SQLITE_DONE else { throw RelayFloorServer.FloorError("begin") }
            var seq: Int64 = 0
            let updated = try step(
                """
                UPDATE conversations SET last_seq = last_seq + 1, last_message_preview = ?1, last_message_kind = 'text', last_message_at = ?2,
                last_consumer_message_at = ?2, updated_at = ?2 WHERE id = ?3 AND consumer_id = ?4 AND state = 'open' RETURNING last_seq
                """, [.text(String(text.prefix(140))), .integer(now), .text(conversation), .text(sender)]
            ) { seq = sqlite_nio_sqlite3_column_int64($0, 0) }
            guard updated == SQLITE_DONE, seq > 0 else {
                _ = try? step("ROLLBACK", [])
                throw RelayFloorServer.FloorError("no such open conversation")
            }
            let inserted = try step(
                """
                INSERT INTO messages (id, brand_id, conversation_id, seq, sender_kind, sender_id, client_message_id, kind, body, created_at)
                VALUES (?1, ?2, ?3, ?4, 'consumer', ?5, ?6, 'text', ?7, ?8)
                """, [.text(fresh), .text(Self.brand), .text(conversation), .integer(seq), .text(sender), .text(clientMessageId), .text(text), .integer(now)])
            if inserted == SQLITE_CONSTRAINT {
                // A retry: the first one's row, sequence number and all.
                _ = try step("ROLLBACK", [])
                var found: (String, Int64) = ("", 0)
                _ = try step("SELECT id, seq FROM messages WHERE sender_id = ?1 AND client_message_id = ?2", [.text(sender), .text(clientMessageId)]) {
                    found = (sqlite_nio_sqlite3_column_text($0, 0).map { String(cString: $0) } ?? "", sqlite_nio_sqlite3_column_int64($0, 1))
                }
                return found
            }
            guard inserted == SQLITE_DONE, try step("COMMIT", []) == SQLITE_DONE else {
                _ = try? step("ROLLBACK", [])
                throw RelayFloorServer.FloorError(String(cString: sqlite_nio_sqlite3_errmsg(handle)))
            }
            return (fresh, seq)
        }
        // Parley's message fields in its order; the bench's texts need no escaping.
        return #"{"id":""# + id + #"","conversationId":""# + conversation + #"","seq":"# + String(seq)
            + #","senderKind":"consumer","senderId":""# + sender + #"","clientMessageId":""# + clientMessageId
            + #"","kind":"text","text":""# + text + #"","deliveryState":"sent","createdAt":""# + Self.iso8601(millis: now) + #""}"#
    }

    private enum Value {
        case text(String)
        case integer(Int64)
    }

    private func execute(_ sql: String) throws {
        try connection.withLock { connection in
            var error: UnsafeMutablePointer<CChar>?
            guard sqlite_nio_sqlite3_exec(connection.handle, sql, nil, nil, &error) == SQLITE_OK else {
                let message = error.map { String(cString: $0) } ?? "?"
                sqlite_nio_sqlite3_free(error)
                throw RelayFloorServer.FloorError(message)
            }
        }
    }

    private static func nowMillis() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    /// `2026-11-28T01:02:03.456Z`, by arithmetic.
    private static func iso8601(millis: Int64) -> String {
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = millis % 1000
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))."
            + (fraction < 10 ? "00" : fraction < 100 ? "0" : "") + "\(fraction)Z"
    }
}

/// SQLite's `SQLITE_TRANSIENT` (a macro Swift does not import): bind copies the value.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
