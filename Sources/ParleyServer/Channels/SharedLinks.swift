import Crypto
import Foundation
import Hummingbird
import NIOCore
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore

/// Short-lived signed links to one agent message's voice note or file: how a voice note reaches an
/// SMS customer whose number takes no MMS (a text with the link to a player page), and the address
/// Twilio fetches an MMS's media from.
///
/// A link is `/l/<brand>.<message>.<expiry>.<signature>`: the signature is an HMAC-SHA256 (first 16
/// bytes, base64url) with a key derived from the server's secret key, so nothing is stored per link
/// and a link cannot be made for another message or extended. Rotating the secret key ends every
/// link at once.
struct SharedLinks: Sendable {
    let key: SymmetricKey
    let lifetime: TimeInterval
    let clock: any WallClock

    init(secrets: SecretBox, hours: Int, clock: any WallClock) {
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: secrets.key, info: Data("parley shared links v1".utf8), outputByteCount: 32)
        lifetime = TimeInterval(hours * 3600)
        self.clock = clock
    }

    /// The path of a new link to the message's media (`/l/...`).
    func path(brandId: BrandID, messageId: MessageID) -> String {
        let expiry = Int64(clock.now().addingTimeInterval(lifetime).timeIntervalSince1970)
        let payload = "\(brandId).\(messageId).\(expiry)"
        return "/l/\(payload).\(signature(payload))"
    }

    enum Opened {
        case valid(BrandID, MessageID)
        case expired
        case invalid
    }

    func open(_ token: String) -> Opened {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard token.utf8.count <= 200, parts.count == 4, let brand = BrandID(parts[0]), let message = MessageID(parts[1]),
            let expiry = Int64(parts[2]),
            Data(parts[3].utf8).constantTimeEquals(Data(signature("\(parts[0]).\(parts[1]).\(parts[2])").utf8))
        else { return .invalid }
        guard Double(expiry) > clock.now().timeIntervalSince1970 else { return .expired }
        return .valid(brand, message)
    }

    private func signature(_ payload: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data(payload.utf8), using: key)
        return Data(code.prefix(16)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// `GET /l/{token}`: the page a link opens (a player for a voice note, a download for a file), and
/// `GET /l/{token}/media`: its bytes (the AAC rendition of a voice note, which every browser and
/// phone plays; the original of a file), with ranges and ETags like any media.
struct SharedLinkController {
    let links: SharedLinks
    let store: Store
    let blobs: any BlobStore

    func addRoutes(to routes: RouteGroups) {
        routes.open.get("/l/{token}", use: page)
        routes.open.get("/l/{token}/media", use: media)
    }

    /// What a link leads to, when it still may be shown.
    private enum Target {
        case voice(VoiceRecord, brand: String)
        case file(AttachmentRecord, brand: String)
    }

    private func target(_ context: ParleyRequestContext) async throws -> Target {
        let token = context.parameters.get("token") ?? ""
        switch links.open(token) {
        case .invalid: throw ParleyError.notFound("Link")
        case .expired: throw ParleyError(.gone, code: .linkExpired, message: "This link has expired.")
        case .valid(let brandId, let messageId):
            let found = try await store.read { repo -> Target? in
                // Only what an agent sent: a link never exposes a customer's upload.
                guard let message = try await repo.message(brandId: brandId, id: messageId), message.senderKind == .agent,
                    let brand = try await repo.brand(id: brandId)
                else { return nil }
                if let voice = try await repo.voice(messageId: messageId, brandId: brandId), voice.state == .ready, voice.rendition(.aac) != nil,
                    voice.scan == .clean || voice.scan == .unscanned
                {
                    return .voice(voice, brand: brand.name)
                }
                if let file = try await repo.attachment(messageId: messageId, brandId: brandId), file.scan == .clean || file.scan == .unscanned {
                    return .file(file, brand: brand.name)
                }
                return nil
            }
            guard let found else { throw ParleyError.notFound("Link") }
            return found
        }
    }

    @Sendable func media(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        switch try await target(context) {
        case .voice(let voice, _):
            guard let (key, bytes) = voice.rendition(.aac) else { throw ParleyError.notFound("Link") }
            return try await MediaResponse.make(
                request, blobs: blobs, key: key, contentType: VoiceRendition.aac.contentType, bytes: bytes, etag: "\"\(voice.messageId)-aac\"",
                disposition: "inline; filename=\"voice-message.m4a\"")
        case .file(let file, _):
            let name = file.fileName.replacingOccurrences(of: "\"", with: "")
            return try await MediaResponse.make(
                request, blobs: blobs, key: file.originalKey, contentType: file.type.contentType, bytes: file.bytes,
                etag: "\"\(file.messageId)\"", disposition: "\(file.type.isImage ? "inline" : "attachment"); filename=\"\(name)\"")
        }
    }

    @Sendable func page(_ request: Request, context: ParleyRequestContext) async throws -> Response {
        let token = context.parameters.get("token") ?? ""
        let body: String
        let status: HTTPResponse.Status
        do {
            switch try await target(context) {
            case .voice(let voice, let brand):
                let seconds = max(1, (voice.durationMs + 500) / 1000)
                body = Self.document(title: "Voice message from \(brand)", """
                    <p class="kicker">\(Self.escape(brand))</p>
                    <h1>Voice message</h1>
                    <p class="meta">\(seconds / 60):\(String(format: "%02d", seconds % 60))</p>
                    <audio controls preload="metadata" src="/l/\(Self.escape(token))/media"></audio>
                    <p><a class="button" href="/l/\(Self.escape(token))/media" download="voice-message.m4a">Download</a></p>
                    <p class="note">Reply by text message to answer.</p>
                    """)
            case .file(let file, let brand):
                let preview = file.type.isImage ? "<img src=\"/l/\(Self.escape(token))/media\" alt=\"\(Self.escape(file.fileName))\">" : ""
                body = Self.document(title: "\(file.fileName) from \(brand)", """
                    <p class="kicker">\(Self.escape(brand))</p>
                    <h1>\(Self.escape(file.fileName))</h1>
                    <p class="meta">\(ChannelInbox.size(file.bytes))</p>
                    \(preview)
                    <p><a class="button" href="/l/\(Self.escape(token))/media" download="\(Self.escape(file.fileName))">Download</a></p>
                    """)
            }
            status = .ok
        } catch let error as ParleyError where error.code == .linkExpired {
            body = Self.document(title: "Link expired", """
                <h1>This link has expired</h1>
                <p class="note">Links in text messages work for a few days. Reply to the text to ask for it again.</p>
                """)
            status = .gone
        } catch let error as ParleyError where error.kind == .notFound {
            body = Self.document(title: "Link not found", """
                <h1>Nothing here</h1>
                <p class="note">This link is not valid. Check that it was copied completely.</p>
                """)
            status = .notFound
        }
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func document(title: String, _ content: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="robots" content="noindex">
        <title>\(escape(title))</title>
        <link rel="icon" href="/favicon.svg">
        <link rel="stylesheet" href="/css/parley.css">
        <link rel="stylesheet" href="/css/shared.css">
        </head>
        <body class="shared">
        <main class="shared-card">
        \(content)
        </main>
        </body>
        </html>
        """
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
