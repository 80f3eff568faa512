import Foundation
import ParleyAPI
import ParleyDomain
@testable import ParleyServer
import Testing

@Suite("Media intake: one door for voice notes and attachments")
struct MediaIntakeTests {
    @Test("voice and attachments come in through MediaIntake: neither service repeats its steps")
    func oneDoor() throws {
        let sources = try ErrorCatalogueTests.sources(under: "Sources/ParleyServer", ending: ".swift")
        #expect(sources.filter { $0.text.contains(".retriedUpload(") }.map(\.path) == ["Sources/ParleyServer/Services/MediaIntake.swift"])
        for path in ["Sources/ParleyServer/Services/VoiceService.swift", "Sources/ParleyServer/Services/AttachmentService.swift"] {
            let text = try #require(sources.first { $0.path == path }?.text)
            // (The brand's logo is an admin's setting, not a message: it has a receiver of its own.)
            for step in ["admitMessage(", "uploads.run(", "validateClientMessageId(", "retriedUpload("] {
                #expect(!text.contains(step), "\(path) repeats \(step)")
            }
        }
    }

    @Test("the same steps for both kinds, each with its own refusals: a bad id, a body over the cap, another's conversation, a retry answered with the original without reading the body")
    func sameSteps() async throws {
        let note = try AudioFixtures.files().data("note.webm")
        try await TestServer.run(configure: { $0.maxVoiceBytes = 256 * 1024 }) { server in
            let acme = try await BrandScenario.make(server)
            _ = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(attachmentMaxMegabytes: 1))
            let (token, _) = try await acme.consumer(name: "Ana")
            let (otherToken, _) = try await acme.consumer(name: "Ben")
            let theirs = try await acme.send("Mine", as: otherToken).conversation.id
            struct Kind {
                let name: String
                let path: String
                let body: Data
                let oversized: Data
                let tooLarge: String
            }
            let kinds = [
                Kind(name: "voice", path: "/v1/consumer/voice-messages?", body: note, oversized: Data(count: 300 * 1024), tooLarge: "voice_too_large"),
                Kind(
                    name: "attachment", path: "/v1/consumer/attachments?name=notes.txt&", body: Data("Order 1234, blue, size M".utf8),
                    oversized: Data(repeating: 65, count: 1_100_000), tooLarge: "attachment_too_large"),
            ]
            for kind in kinds {
                func send(_ body: Data, id: String, conversation: ConversationID? = nil) async throws -> TestServer.Reply {
                    let query = "clientMessageId=\(id)" + (conversation.map { "&conversationId=\($0)" } ?? "")
                    return try await server.request(.post, kind.path + query, token: token, data: body)
                }
                #expect(try await send(kind.body, id: String(repeating: "x", count: 300)).error.code == "invalid_field", "\(kind.name)")
                let tooLarge = try await send(kind.oversized, id: UUID().uuidString)
                #expect(tooLarge.status == .contentTooLarge, "\(kind.name)")
                #expect(try tooLarge.error.code.rawValue == kind.tooLarge, "\(kind.name)")
                #expect(try await send(kind.body, id: UUID().uuidString, conversation: theirs).status == .notFound, "\(kind.name)")
                let id = UUID().uuidString
                let first = try await send(kind.body, id: id)
                #expect(first.status == .created, "\(kind.name): \(first.text)")
                // The retry's body is empty: it is never read, the original answers.
                let retry = try await send(Data(), id: id)
                #expect(retry.status == .ok, "\(kind.name): \(retry.text)")
                #expect(try retry.decode(SendMessageResponse.self).message.id == first.decode(SendMessageResponse.self).message.id)
            }
        }
    }
}

/// The uploads a sender has in progress (`UploadGate`): refused over HTTP at the limit, waited for by
/// a channel's jobs.
@Suite("Upload slots per sender")
struct UploadGateTests {
    /// Holds `count` of `consumer`'s slots until the returned continuation finishes.
    static func hold(_ gate: UploadGate, consumer: String, count: Int) async -> (Task<Void, any Error>, AsyncStream<Void>.Continuation) {
        let release = AsyncStream<Void>.makeStream()
        let holding = AsyncStream<Void>.makeStream()
        let task = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        try await gate.run(consumer: consumer, address: nil) {
                            holding.continuation.yield()
                            for await _ in release.stream {}
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        var holders = 0
        for await _ in holding.stream {
            holders += 1
            if holders == count { break }
        }
        return (task, release.continuation)
    }

    @Test("at the limit an upload is refused with 429 too_many_uploads; a channel's files wait and run as slots free; another sender is not held up")
    func waitersInOrder() async throws {
        let gate = UploadGate(perConsumer: 2, perAddress: 4)
        let (held, release) = await Self.hold(gate, consumer: "ana", count: 2)
        await #expect { try await gate.run(consumer: "ana", address: "10.0.0.1") { await Task.yield() } } throws: {
            ($0 as? ParleyError)?.code == .tooManyUploads
        }
        // Someone else's upload goes through at once.
        #expect(try await gate.run(consumer: "ben", address: nil) { "ben" } == "ben")

        let order = AsyncStream<Int>.makeStream()
        let waiters = (1...3).map { n in
            Task {
                try await gate.run(consumer: "ana", address: nil, waiting: true) { _ = order.continuation.yield(n) }
            }
        }
        // Nothing runs while the slots are held.
        try await Task.sleep(for: .milliseconds(100))
        #expect(gate.inProgress(consumer: "ana") == 2)
        release.finish()
        try await held.value
        for waiter in waiters { try await waiter.value }
        order.continuation.finish()
        var ran: [Int] = []
        for await n in order.stream { ran.append(n) }
        #expect(ran.sorted() == [1, 2, 3])
        #expect(gate.inProgress(consumer: "ana") == 0)
    }

    @Test("a waiter that is cancelled (the server stopping) leaves the queue and takes no slot")
    func cancelledWaiter() async throws {
        let gate = UploadGate(perConsumer: 1, perAddress: 4)
        let (held, release) = await Self.hold(gate, consumer: "ana", count: 1)
        let waiter = Task { try await gate.run(consumer: "ana", address: nil, waiting: true) { "ran" } }
        try await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        release.finish()
        try await held.value
        #expect(gate.inProgress(consumer: "ana") == 0)
        #expect(try await gate.run(consumer: "ana", address: nil) { "next" } == "next")
    }
}
