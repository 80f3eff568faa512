import Crypto
import Foundation
import HTTPTypes
import JWTKit
import ParleyAPI
import ParleyStore
@testable import ParleyServer
import SQLKit
import Testing

/// Key rotation, as an operator does it (docs/channels.md): every sealed value moves to the new key,
/// and what was sealed keeps working once the old key is gone.
@Suite("Secret key rotation")
struct SecretRotationTests {
    static let old = Data(repeating: 1, count: 32).base64EncodedString()
    static let new = Data(repeating: 2, count: 32).base64EncodedString()

    @Test("after reseal-secrets no value anywhere in the database needs the old key: channel secrets and APNs/FCM credentials; push still works with the new key alone")
    func rotation() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-rotation-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await TestDatabase.make()
        defer { Task { await database.drop() } }
        let key = ES256PrivateKey()
        let apns = try await FakeAPNs.start(publicKey: key.publicKey)
        let (account, fcm) = try await PushTests.fcmAccount()
        defer { Task { await apns.stop(); await fcm.stop() } }
        let configure = { (configuration: inout ParleyConfiguration, keys: [String]) in
            configuration.dataDirectory = directory.path
            configuration.secretKey = keys[0]
            configuration.previousSecretKeys = Array(keys.dropFirst())
            configuration.apnsAPIURL = apns.baseURL
            configuration.providerCAFile = apns.certificateFile
            configuration.fcmAPIURL = fcm.baseURL
            configuration.fcmTokenURL = fcm.tokenURL
        }
        struct Setup: Sendable { var acme: BrandScenario; var consumerToken: String; var conversation: ConversationID }
        let (setups, continuation) = AsyncStream<Setup>.makeStream()
        // setup: sealed with the old key: a WhatsApp connection, APNs and FCM credentials, a device.
        try await TestServer.run(database: database, configure: { configure(&$0, [Self.old]) }) { server in
            let (acme, _) = try await WhatsAppTests.connected(server)
            let credentials = ConnectAPNsRequest(teamId: "ABCDE12345", keyId: "KEY1234567", privateKey: key.pemRepresentation, topic: "com.acme.shop")
            #expect(try await server.request(.put, "/v1/apps/\(acme.app.id)/push/apns", token: acme.adminToken, json: credentials).status == .ok)
            #expect(try await server.request(.put, "/v1/apps/\(acme.app.id)/push/fcm", token: acme.adminToken, json: ConnectFCMRequest(serviceAccount: account)).status == .ok)
            let (consumerToken, _) = try await acme.consumer(name: "Rae")
            let sent = try await acme.send("Is it shipped?", as: consumerToken)
            #expect(try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .apns, token: PushTests.deviceToken)).status == .ok)
            continuation.yield(Setup(acme: acme, consumerToken: consumerToken, conversation: sent.conversation.id))
            continuation.finish()
        }
        var iterator = setups.makeAsyncIterator()
        let setup = try #require(await iterator.next())

        // MUT: the new key, the old one still given; reseal.
        try await TestServer.run(database: database, configure: { configure(&$0, [Self.new, Self.old]) }) { server in
            let first = try await server.services.resealSecrets()
            let again = try await server.services.resealSecrets()
            #expect(first == 3 && again == 0, "re-sealed \(first), then \(again)")
        }

        // validate: with the new key alone, every sealed value in every table opens, and push works.
        try await TestServer.run(database: database, configure: { configure(&$0, [Self.new]) }) { server in
            let box = try SecretBox.load(server.services.configuration)
            let sealed = try await Self.everySealedValue(server)
            #expect(sealed.count >= 3)
            for (place, value) in sealed {
                #expect((try? box.open(value)) != nil, "\(place) needs a key that is gone")
            }
            // Every column found holding sealed values is in the registry that reseal walks.
            let columns = Set(sealed.map { $0.place.split(separator: "#").first.map(String.init) ?? "" })
            #expect(columns.isSubset(of: Set(SealedColumns.all.map(\.description))), "\(columns)")
            // (The scenario's own helpers talk to the first server; the same session works on this one.)
            let reply = try await server.post(
                "/v1/conversations/\(setup.conversation)/messages", token: setup.acme.adminToken,
                json: SendMessageRequest(clientMessageId: "after-rotation", text: "Yes, this morning"))
            #expect(reply.status == .created, "\(reply.text)")
            let pushed = try await PushTests.wait(apns, count: 1)
            #expect(pushed.token == PushTests.deviceToken)
        }
    }

    @Test("a value no given key opens stops reseal, names its column, and changes nothing")
    func unopenable() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-rotation-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = try await TestDatabase.make()
        defer { Task { await database.drop() } }
        try await TestServer.run(database: database, configure: { $0.dataDirectory = directory.path; $0.secretKey = Self.old }) { server in
            _ = try await WhatsAppTests.connected(server)
        }
        // The old key was lost: only a third key is given.
        let other = Data(repeating: 3, count: 32).base64EncodedString()
        try await TestServer.run(database: database, configure: { $0.dataDirectory = directory.path; $0.secretKey = other }) { server in
            let before = try await Self.everySealedValue(server)
            await #expect {
                _ = try await server.services.resealSecrets()
            } throws: { error in
                "\(error)".contains("channel_connections.sealed_secrets") && "\(error)".contains("PARLEY_PREVIOUS_SECRET_KEYS")
            }
            #expect(try await Self.everySealedValue(server).map(\.value) == before.map(\.value))
        }
    }

    /// Every text value in every table of the database that looks sealed (`v1:` and base64), as
    /// `table.column#row` and the value: found by scanning, not from the registry.
    static func everySealedValue(_ server: TestServer) async throws -> [(place: String, value: String)] {
        try await server.services.store.database.read { db in
            let columns: [(String, String)]
            if server.onPostgres {
                columns = try await db.raw(
                    """
                    SELECT table_name, column_name FROM information_schema.columns
                    WHERE table_schema = 'public' AND data_type IN ('text', 'character varying')
                    """
                ).all().map { (try $0.decode(column: "table_name", as: String.self), try $0.decode(column: "column_name", as: String.self)) }
            } else {
                var found: [(String, String)] = []
                let tables = try await db.raw("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE '%VIRTUAL%'")
                    .all().map { try $0.decode(column: "name", as: String.self) }
                for table in tables {
                    for column in try await db.raw("SELECT name, type FROM pragma_table_info(\(bind: table))").all()
                    where try column.decode(column: "type", as: String.self).uppercased() == "TEXT" {
                        found.append((table, try column.decode(column: "name", as: String.self)))
                    }
                }
                columns = found
            }
            var values: [(String, String)] = []
            for (table, column) in columns {
                let rows = try await db.raw("SELECT \(unsafeRaw: column) AS v FROM \(unsafeRaw: table) WHERE \(unsafeRaw: column) LIKE 'v1:%'").all()
                for (index, row) in rows.enumerated() {
                    if let value = try row.decode(column: "v", as: String?.self), value.count > 40, Data(base64Encoded: String(value.dropFirst(3))) != nil {
                        values.append(("\(table).\(column)#\(index)", value))
                    }
                }
            }
            return values
        }
    }
}
