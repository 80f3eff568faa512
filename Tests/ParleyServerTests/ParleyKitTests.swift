import Foundation
import ParleyAPI
import ParleyKit
import Testing

@Suite("ParleyKit SDK")
struct ParleyKitTests {
    @Test("an app signs a consumer in, sends, reads history and acknowledges")
    func sdkRoundTrip() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let client = ParleyClient(baseURL: URL(string: "http://127.0.0.1:\(server.port)/")!)
            let consumer = try await client.startSession(appId: acme.app.id, displayName: "Ana from the app")
            #expect(consumer.displayName == "Ana from the app")

            let sent = try await client.send("Sent from ParleyKit", clientMessageId: "kit-1")
            #expect(sent.created)
            let retried = try await client.send("Sent from ParleyKit", clientMessageId: "kit-1")
            #expect(!retried.created)
            #expect(retried.message.id == sent.message.id)

            let answer = try await acme.reply("Hello from the agent", in: sent.conversation.id, as: acme.adminToken)
            #expect(try await client.conversations().map(\.id) == [sent.conversation.id])
            let history = try await client.messages(conversationId: sent.conversation.id)
            #expect(history.map(\.text) == ["Sent from ParleyKit", "Hello from the agent"])
            let event = try await client.acknowledge(conversationId: sent.conversation.id, upToSeq: answer.message.seq, state: .read)
            #expect(event?.deliveryState == .read)

            // Server refusals come back as typed errors with the stable code.
            await #expect(throws: ParleyClientError.api(status: 422, .init(
                code: "message_too_long",
                message: "The text has 2001 characters; web allows at most 2000 from a consumer.", field: "text"))) {
                try await client.send(String(repeating: "x", count: 2001))
            }
        }
    }
}
