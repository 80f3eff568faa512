import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import SQLKit
import Testing

/// The databases the repository suite runs against: always a SQLite file; PostgreSQL too when
/// `TEST_POSTGRES_URL` names a server (the test script starts one).
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgres

    static var available: [Backend] {
        ProcessInfo.processInfo.environment["TEST_POSTGRES_URL"] == nil ? [.sqlite] : [.sqlite, .postgres]
    }

    var testDescription: String { rawValue }

    /// A fresh, migrated, empty database for one test, removed afterwards. `poolSize`: PostgreSQL's
    /// connections, opened at start (1: every statement on the same connection).
    func withStore(poolSize: Int = 4, _ body: (Store) async throws -> Void) async throws {
        let logger = Logger(label: "parley-test")
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-store-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let database = try await openDatabase(.sqliteFile(path: directory.appendingPathComponent("test.sqlite").path), logger: logger)
            try await run(database, logger: logger, body)
        case .postgres:
            guard let adminURL = ProcessInfo.processInfo.environment["TEST_POSTGRES_URL"] else { return }
            let name = "parley_test_\(Identifier.random(12))"
            let admin = try await openDatabase(.postgres(url: adminURL), poolSize: 1, logger: logger)
            try await admin.read { db in try await db.raw("CREATE DATABASE \(unsafeRaw: name)").run() }
            var components = URLComponents(string: adminURL)!
            components.path = "/\(name)"
            do {
                let database = try await openDatabase(.postgres(url: components.string!), poolSize: poolSize, logger: logger)
                try await run(database, logger: logger, body)
            } catch {
                try? await admin.read { db in try await db.raw("DROP DATABASE IF EXISTS \(unsafeRaw: name)").run() }
                await admin.close()
                throw error
            }
            try await admin.read { db in try await db.raw("DROP DATABASE IF EXISTS \(unsafeRaw: name)").run() }
            await admin.close()
        }
    }

    private func run(_ database: any DatabaseClient, logger: Logger, _ body: (Store) async throws -> Void) async throws {
        let store = Store(database: database)
        do {
            try await Migrations.apply(to: database, logger: logger)
            try await body(store)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}

/// A brand with an app, an agent and a consumer, written straight through the repository.
struct Fixture: Sendable {
    var brand: BrandDTO
    var app: AppDTO
    var agent: AgentDTO
    var consumer: ConsumerDTO

    static func make(in store: Store, name: String = "Acme") async throws -> Fixture {
        let now = SystemClock().now()
        let brand = BrandDTO(id: BrandID.make(), name: name, createdAt: now)
        let app = AppDTO(id: AppID.make(), brandId: brand.id, name: "\(name) web", channel: .web, createdAt: now)
        let agent = AgentDTO(
            id: AgentID.make(), brandId: brand.id, email: "agent-\(Identifier.random(6))@\(name.lowercased()).test",
            name: "Agent of \(name)", role: .agent, permissions: [.sendAudio], createdAt: now)
        let consumer = ConsumerDTO(
            id: ConsumerID.make(), brandId: brand.id, appId: app.id, externalId: nil, displayName: "Visitor 1234",
            anonymous: true, createdAt: now)
        try await store.write { repo in
            try await repo.insertBrand(brand)
            try await repo.insertApp(app)
            try await repo.insertAgent(AgentRecord(agent: agent, passwordHash: "hash"))
            try await repo.insertConsumer(consumer)
        }
        return Fixture(brand: brand, app: app, agent: agent, consumer: consumer)
    }

    func conversation(state: ConversationState = .open, updatedAt: Date = SystemClock().now()) -> ConversationDTO {
        ConversationDTO(
            id: ConversationID.make(), brandId: brand.id, appId: app.id, consumerId: consumer.id, channel: .web,
            state: state, assigneeId: nil, lastSeq: 0, lastMessagePreview: nil, lastMessageAt: nil, createdAt: updatedAt,
            updatedAt: updatedAt)
    }

    func message(in conversation: ConversationDTO, seq: Int64, from kind: ParticipantKind, text: String = "hello") -> MessageDTO {
        MessageDTO(
            id: MessageID.make(), conversationId: conversation.id, seq: seq, senderKind: kind,
            senderId: kind == .agent ? agent.id.rawValue : consumer.id.rawValue, clientMessageId: "c-\(seq)-\(Identifier.random(4))", kind: .text,
            text: text, deliveryState: .sent, createdAt: SystemClock().now())
    }

    /// Writes the consumer's next message in `conversation` (as a send does: the conversation's
    /// row and the message) and returns the conversation as written.
    func append(_ text: String, to conversation: ConversationDTO, in store: Store) async throws -> ConversationDTO {
        let message = message(in: conversation, seq: conversation.lastSeq + 1, from: .consumer, text: text)
        var next = conversation
        next.lastSeq = message.seq
        let written = next
        try await store.write { repo in try await repo.updateConversation(written, from: conversation, inserting: message) }
        return written
    }
}
