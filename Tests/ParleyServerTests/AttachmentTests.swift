import Foundation
import HTTPTypes
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyServer
import Synchronization
import Testing

/// Images and files made for the tests with ffmpeg and libheif, once per run.
enum ImageFixtures {
    struct Files: Sendable {
        let directory: URL
        func data(_ name: String) throws -> Data { try Data(contentsOf: directory.appendingPathComponent(name)) }
    }

    private static let made = Mutex<Files?>(nil)

    static func files() throws -> Files {
        try made.withLock { cached in
            if let cached { return cached }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-images-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            func run(_ tool: String, _ arguments: [String]) throws {
                let outcome = try ProcessRunner(executable: ProcessRunner.locate(tool) ?? "/usr/bin/\(tool)").runBlocking(arguments, timeout: .seconds(120))
                guard outcome.status == 0 else { throw TestFailure("\(tool) failed: \(outcome.stderrTail)") }
            }
            let path = { (name: String) in directory.appendingPathComponent(name).path }
            let ffmpeg = { (source: String, name: String) in
                try run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", source, "-frames:v", "1", path(name)])
            }
            try ffmpeg("testsrc=size=1200x800:rate=1", "photo.png")
            try ffmpeg("testsrc=size=1200x800:rate=1", "photo.jpg")
            try ffmpeg("testsrc=size=320x200:rate=1", "small.webp")
            try ffmpeg("testsrc=size=320x200:rate=1", "small.gif")
            // 7,000 x 6,000 = 42 megapixels of one colour: a small file that would decode to 168 MB.
            try ffmpeg("color=c=white:s=7000x6000", "huge.png")
            try run("heif-enc", ["-q", "50", "-o", path("photo.heic"), path("photo.png")])
            try Data("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n".utf8)
                .write(to: directory.appendingPathComponent("invoice.pdf"))
            try Data("Order 1234\nDelivered to the wrong address.\n".utf8).write(to: directory.appendingPathComponent("notes.txt"))
            try Data([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 200)).write(to: directory.appendingPathComponent("program.pdf"))
            let files = Files(directory: directory)
            cached = files
            return files
        }
    }
}

@Suite("Attachments: images and files from both sides")
struct AttachmentTests {
    static func upload(
        _ server: TestServer, _ data: Data, token: String, name: String, clientMessageId: String = UUID().uuidString,
        conversationId: ConversationID? = nil, agentConversation: ConversationID? = nil, contentType: String = "application/octet-stream"
    ) async throws -> TestServer.Reply {
        var path = agentConversation.map { "/v1/conversations/\($0)/attachments" } ?? "/v1/consumer/attachments"
        path += "?clientMessageId=\(clientMessageId)&name=\(name.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        if let conversationId { path += "&conversationId=\(conversationId)" }
        return try await server.request(.post, path, token: token, data: data, headers: [.contentType: contentType])
    }

    @Test("an image from the consumer: sniffed, measured, a thumbnail made; served inline with ranges to the agent, never to another brand")
    func consumerImage() async throws {
        let files = try ImageFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let globex = try await BrandScenario.make(server, name: "Globex")
            let (token, _) = try await acme.consumer(name: "Ana")
            let (otherToken, _) = try await acme.consumer(name: "Ben")
            let photo = try files.data("photo.jpg")
            let reply = try await Self.upload(server, photo, token: token, name: "../../holiday photo.jpg", clientMessageId: "img-1")
            #expect(reply.status == .created, "\(reply.text)")
            let sent = try reply.decode(SendMessageResponse.self)
            let message = sent.message
            #expect(message.kind == .attachment)
            #expect(message.text == "[image]")
            #expect(sent.conversation.lastMessagePreview == "Image")
            #expect(sent.conversation.lastMessageKind == .attachment)
            let attachment = try #require(message.attachment)
            #expect(attachment.type == .jpeg && attachment.contentType == "image/jpeg")
            #expect(attachment.fileName == "holiday photo.jpg")
            #expect(attachment.width == 1200 && attachment.height == 800)
            #expect(attachment.bytes == photo.count)
            #expect(attachment.scan == .unscanned)
            // A retry returns the same message and stores nothing more.
            let again = try await Self.upload(server, photo, token: token, name: "holiday photo.jpg", clientMessageId: "img-1")
            #expect(again.status == .ok)
            #expect(try again.decode(SendMessageResponse.self).message.id == message.id)

            // The agent gets the original (inline, with ranges and an ETag) and a JPEG thumbnail 480 px wide.
            let original = try await server.get(attachment.url, token: acme.adminToken)
            #expect(original.status == .ok && original.body == photo)
            #expect(original.headers[.contentDisposition] == "inline")
            #expect(original.headers[.xContentTypeOptions] == "nosniff")
            let range = try await server.request(.get, attachment.url, token: acme.adminToken, headers: [.range: "bytes=0-99"])
            #expect(range.status == .partialContent && range.body.count == 100)
            let etag = try #require(original.headers[.eTag])
            #expect(try await server.request(.get, attachment.url, token: acme.adminToken, headers: [.ifNoneMatch: etag]).status == .notModified)
            let thumbnailURL = try #require(attachment.thumbnailUrl)
            let thumbnail = try await server.get(thumbnailURL, token: acme.adminToken)
            #expect(thumbnail.status == .ok && thumbnail.headers[.contentType] == "image/jpeg")
            #expect(AttachmentRules.sniff([UInt8](thumbnail.body.prefix(16))) == .jpeg)
            #expect(thumbnail.body.count < photo.count)
            // History carries it.
            let history = try await server.get("/v1/conversations/\(message.conversationId)/messages", token: acme.adminToken)
                .decode(ListResponse<MessageDTO>.self).items
            #expect(history.first?.attachment == attachment)
            // Another consumer, and another brand, get nothing.
            for (who, other) in [("Ben", otherToken), ("Globex", globex.adminToken)] {
                #expect(try await server.get(attachment.url, token: other).status == .notFound, "\(who)")
                #expect(try await server.get(thumbnailURL, token: other).status == .notFound, "\(who)")
            }
            #expect(try await server.get(attachment.url).status == .unauthorized)
            #expect(try await server.get("/v1/files/\(message.id)/other", token: acme.adminToken).status == .notFound)
        }
    }

    @Test("every image format gets a thumbnail: PNG, GIF, WebP and HEIC (decoded with libheif)")
    func imageFormats() async throws {
        let files = try ImageFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            for (name, type, width) in [("photo.png", AttachmentType.png, 1200), ("small.gif", .gif, 320), ("small.webp", .webp, 320), ("photo.heic", .heic, 1200)] {
                let reply = try await Self.upload(server, try files.data(name), token: token, name: name)
                #expect(reply.status == .created, "\(name): \(reply.text)")
                let attachment = try #require(try reply.decode(SendMessageResponse.self).message.attachment)
                #expect(attachment.type == type, "\(name)")
                #expect(attachment.width == width, "\(name)")
                let thumbnail = try await server.get(try #require(attachment.thumbnailUrl, "\(name)"), token: acme.adminToken)
                #expect(AttachmentRules.sniff([UInt8](thumbnail.body.prefix(16))) == .jpeg, "\(name)")
            }
        }
    }

    @Test("a file from the agent: a PDF the consumer downloads (never shown inline), with its name")
    func agentFile() async throws {
        let files = try ImageFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let conversation = try await acme.send("Can I have the invoice?", as: token).conversation
            let pdf = try files.data("invoice.pdf")
            let reply = try await Self.upload(server, pdf, token: acme.adminToken, name: "Facture n°42.pdf", agentConversation: conversation.id)
            #expect(reply.status == .created, "\(reply.text)")
            let message = try reply.decode(SendMessageResponse.self).message
            #expect(message.text == "[file Facture n°42.pdf]")
            #expect(message.senderName == "Acme Admin")
            let attachment = try #require(message.attachment)
            #expect(attachment.type == .pdf && attachment.thumbnailUrl == nil && attachment.width == nil)
            let download = try await server.get(attachment.url, token: token)
            #expect(download.status == .ok && download.body == pdf)
            #expect(download.headers[.contentType] == "application/pdf")
            let disposition = try #require(download.headers[.contentDisposition])
            #expect(disposition.hasPrefix("attachment; filename=\"Facture n_42.pdf\""))
            #expect(disposition.contains("filename*=UTF-8''Facture%20n%C2%B042%2Epdf") || disposition.contains("filename*=UTF-8''Facture"))
            let text = try await Self.upload(server, try files.data("notes.txt"), token: token, name: "notes.txt")
            #expect(try text.decode(SendMessageResponse.self).message.attachment?.type == .text)

            // A right-to-left override would show "invoice\u{202E}fdp.exe" as "invoiceexe.pdf": removed, in every place the name goes.
            let spoofed = try await Self.upload(server, pdf, token: token, name: "invoice\u{202E}fdp.exe")
            let stored = try spoofed.decode(SendMessageResponse.self).message
            #expect(stored.text == "[file invoicefdp.exe]")
            #expect(stored.attachment?.fileName == "invoicefdp.exe")
            let agentCopy = try await server.get(try #require(stored.attachment?.url), token: acme.adminToken)
            let header = try #require(agentCopy.headers[.contentDisposition])
            #expect(header.contains("filename=\"invoicefdp.exe\"") && header.contains("filename*=UTF-8''invoicefdp%2Eexe"), "\(header)")
            #expect(!header.contains("%E2%80%AE"))
        }
    }

    @Test("refused: other kinds of file, what the brand does not allow, over the brand's size, decompression bombs; nothing stored")
    func refusals() async throws {
        let files = try ImageFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            _ = try await acme.send("hello", as: token)
            let before = try await HTTPErrorTests.rowCounts(server)
            // A program named .pdf is what its bytes say.
            var reply = try await Self.upload(server, try files.data("program.pdf"), token: token, name: "invoice.pdf", contentType: "application/pdf")
            #expect(reply.status == .unsupportedMediaType)
            #expect(try reply.error.code == "unsupported_attachment")
            // 42 megapixels: refused before anything decodes it.
            reply = try await Self.upload(server, try files.data("huge.png"), token: token, name: "huge.png")
            #expect(reply.status == .unprocessableContent)
            #expect(try reply.error.code == "image_too_large")
            // Empty.
            reply = try await Self.upload(server, Data(), token: token, name: "empty.txt")
            #expect(try reply.error.code == "empty_attachment")
            // The brand allows only images, of at most 1 MB.
            let changed = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken,
                json: UpdateBrandSettingsRequest(attachmentGroups: [.images], attachmentMaxMegabytes: 1))
            #expect(changed.status == .ok)
            reply = try await Self.upload(server, try files.data("invoice.pdf"), token: token, name: "invoice.pdf")
            #expect(reply.status == .unsupportedMediaType)
            #expect(try reply.error.code == "attachment_type_not_allowed")
            reply = try await Self.upload(server, Data(repeating: 0xFF, count: 1024 * 1024 + 1), token: token, name: "big.jpg")
            #expect(reply.status == .contentTooLarge)
            #expect(try reply.error.code == "attachment_too_large")
            // No attachments at all; and settings are checked.
            _ = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(attachmentGroups: []))
            reply = try await Self.upload(server, try files.data("photo.jpg"), token: token, name: "photo.jpg")
            #expect(try reply.error.code == "attachments_disabled")
            let bad = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(attachmentMaxMegabytes: 26))
            #expect(bad.status == .badRequest)
            #expect(try await HTTPErrorTests.rowCounts(server) == before)
            let attachments = try await server.services.store.database.read { db in
                try await db.raw("SELECT COUNT(*) AS n FROM attachments").first()?.decode(column: "n", as: Int.self) ?? -1
            }
            #expect(attachments == 0)
        }
    }

    @Test("the server's cap holds whatever the brand allows")
    func serverCap() async throws {
        try await TestServer.run(configure: { $0.maxAttachmentBytes = 64 * 1024 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let reply = try await Self.upload(server, Data(repeating: 0x41, count: 64 * 1024 + 1), token: token, name: "long.txt")
            #expect(reply.status == .contentTooLarge)
            #expect(try reply.error.code == "attachment_too_large")
        }
    }
}

@Suite("The brand's logo")
struct LogoTests {
    @Test("admins upload a logo (stored as a PNG at most 256 px wide), anyone may fetch it, a new one gets a new URL, removal removes it")
    func logo() async throws {
        let files = try ImageFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (agentToken, _) = try await acme.agent()
            let (consumerToken, _) = try await acme.consumer()
            let photo = try files.data("photo.png")
            #expect(try await server.request(.put, "/v1/brand/logo", token: agentToken, data: photo).status == .forbidden)
            let refused = try await server.request(.put, "/v1/brand/logo", token: acme.adminToken, data: Data("%PDF-1.4".utf8))
            #expect(try refused.error.code == "unsupported_image")
            let huge = try await server.request(.put, "/v1/brand/logo", token: acme.adminToken, data: try files.data("huge.png"))
            #expect(try huge.error.code == "image_too_large")

            let first = try await server.request(.put, "/v1/brand/logo", token: acme.adminToken, data: photo).decode(BrandSettingsDTO.self)
            let url = try #require(first.logoUrl)
            #expect(url == "/v1/logos/\(acme.brand.id)?v=1")
            let logo = try await server.get(url)  // no session: logos are public
            #expect(logo.status == .ok && logo.headers[.contentType] == "image/png")
            let width = logo.body.dropFirst(16).prefix(4).reduce(0) { $0 << 8 | Int($1) }  // PNG IHDR width
            #expect(width == 256)
            #expect(try await server.get("/v1/consumer/settings", token: consumerToken).decode(ConsumerSettingsDTO.self).logoUrl == url)
            // A PATCH of other settings keeps it.
            let patched = try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(widgetColor: "#112233"))
            #expect(try patched.decode(BrandSettingsDTO.self).logoUrl == url)

            let second = try await server.request(.put, "/v1/brand/logo", token: acme.adminToken, data: try files.data("small.gif")).decode(BrandSettingsDTO.self)
            #expect(second.logoUrl == "/v1/logos/\(acme.brand.id)?v=2")
            let removed = try await server.request(.delete, "/v1/brand/logo", token: acme.adminToken).decode(BrandSettingsDTO.self)
            #expect(removed.logoUrl == nil)
            #expect(try await server.get("/v1/logos/\(acme.brand.id)").status == .notFound)
            #expect(try await server.get("/v1/logos/nonsense").status == .notFound)
        }
    }
    @Test("a 58 KB HEIC declaring 16000 x 16000 is refused from its ispe property before anything decodes it (no child process near its 1.1 GB); decoders run under PARLEY_IMAGE_MEMORY_MB")
    func heicBomb() async throws {
        let bomb = try Data(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Tests/ParleyServerTests/Fixtures/images/bomb-16000x16000.heic"))
        #expect(bomb.count < 60_000)
        let files = try ImageFixtures.files()
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer(name: "Bo")
            // The resident memory of this process's image decoders, sampled while the bomb is uploaded
            // (heif-convert decoding it held 1.1 GB for seconds).
            let watch = DecoderMemoryWatch()
            let started = Date()
            let reply = try await AttachmentTests.upload(server, bomb, token: token, name: "holiday.heic")
            let elapsed = Date().timeIntervalSince(started)
            let peak = await watch.stop()
            #expect(reply.status == .unprocessableContent)
            #expect(try reply.error.code == "image_too_large")
            print("HEIC bomb (\(bomb.count) bytes) refused in \(Int(elapsed * 1000)) ms; image decoders' peak memory meanwhile: \(peak / 1_048_576) MB")
            #expect(peak < 400 * 1_048_576, "an image decoder held \(peak / 1_048_576) MB")
            // A real HEIC still gets its thumbnail.
            let photo = try await AttachmentTests.upload(server, try files.data("photo.heic"), token: token, name: "photo.heic")
            #expect(photo.status == .created, "\(photo.text)")
        }
        // With 64 MB, even a small photo cannot be decoded: the limit holds, and says so as a corrupt image.
        try await TestServer.run(configure: { $0.imageMemoryMegabytes = 64 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer(name: "Cy")
            let reply = try await AttachmentTests.upload(server, try files.data("photo.png"), token: token, name: "photo.png")
            #expect(try reply.error.code == "corrupt_image")
        }
    }

}

/// Samples, every 10 ms, the resident memory of this process's child processes that decode images
/// (heif-convert, ffmpeg, ffprobe), from /proc, and keeps the largest. (The kernel's own peak for a
/// child, `ru_maxrss`, counts the parent's memory when the child is made with posix_spawn.)
final class DecoderMemoryWatch: Sendable {
    final class Peak: Sendable { let bytes = Mutex(0) }
    private let peak = Peak()
    private let task: Task<Void, Never>

    init() {
        let peak = self.peak
        let parent = getpid()
        task = Task.detached {
            while !Task.isCancelled {
                for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.allSatisfy(\.isNumber) {
                    guard let status = try? String(contentsOfFile: "/proc/\(entry)/status", encoding: .utf8) else { continue }
                    let fields = Dictionary(status.split(separator: "\n").compactMap { line -> (String, String)? in
                        let parts = line.split(separator: ":", maxSplits: 1)
                        return parts.count == 2 ? (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces)) : nil
                    }, uniquingKeysWith: { a, _ in a })
                    guard fields["PPid"] == "\(parent)", let name = fields["Name"], ["heif-convert", "ffmpeg", "ffprobe"].contains(name),
                        let rss = fields["VmRSS"]?.split(separator: " ").first.flatMap({ Int($0) })
                    else { continue }
                    peak.bytes.withLock { $0 = max($0, rss * 1024) }
                }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// Stops sampling; the largest resident memory seen, in bytes.
    func stop() async -> Int {
        task.cancel()
        await task.value
        return peak.bytes.withLock { $0 }
    }
}
