import Foundation
import ParleyAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Parley SDK for a brand's app: signs a consumer in and sends and reads their messages.
///
/// ```swift
/// let client = ParleyClient(baseURL: URL(string: "https://chat.example.com")!)
/// try await client.startSession(appId: "app_...", identityToken: jwtFromYourBackend)
/// let sent = try await client.send("Hello!")
/// ```
/// Sends are idempotent: `send` picks a client message id and reuses it on its own retries, so a
/// message is never delivered twice even when the network fails after the server stored it.
public actor ParleyClient {
    public let baseURL: URL
    private let transport: any ParleyTransport
    private let encoder = ParleyJSON.makeEncoder()
    private let decoder = ParleyJSON.makeDecoder()
    public private(set) var token: String?
    public private(set) var consumer: ConsumerDTO?

    public init(baseURL: URL, session: URLSession = .shared, token: String? = nil) {
        self.init(baseURL: baseURL, transport: URLSessionTransport(session: session), token: token)
    }

    /// With another transport than URLSession (`ParleyTransport`).
    public init(baseURL: URL, transport: any ParleyTransport, token: String? = nil) {
        self.baseURL = Self.directory(baseURL)
        self.transport = transport
        self.token = token
    }

    /// Signs in as a consumer of the brand's app: anonymous without `identityToken`, otherwise as the
    /// user the brand's backend vouches for in that JWT.
    /// `language` (BCP 47) picks the language of the brand's automatic messages; by default the
    /// device's first preferred language.
    @discardableResult
    public func startSession(
        appId: AppID, identityToken: String? = nil, displayName: String? = nil, language: String? = ParleyClient.deviceLanguage
    ) async throws -> ConsumerDTO {
        let response: ConsumerSessionResponse = try await request(
            "POST", "v1/consumer/session",
            body: ConsumerSessionRequest(appId: appId, identityToken: identityToken, displayName: displayName, language: language))
        token = response.token
        consumer = response.consumer
        return response.consumer
    }

    /// Sends a text. Without `conversationId` the consumer's current conversation continues (or a new
    /// one opens); `newConversation` opens another one where the brand allows several open at once.
    /// Network failures are retried with the same client message id.
    public func send(
        _ text: String, conversationId: ConversationID? = nil, newConversation: Bool = false, clientMessageId: String = UUID().uuidString,
        attempts: Int = 3
    ) async throws -> SendMessageResponse {
        let body = SendMessageRequest(
            clientMessageId: clientMessageId, text: text, conversationId: conversationId, newConversation: newConversation ? true : nil)
        var lastError: (any Error)?
        for attempt in 0..<max(1, attempts) {
            do {
                return try await request("POST", "v1/consumer/messages", body: body)
            } catch let error as ParleyClientError {
                throw error  // the server answered: retrying would get the same answer
            } catch {
                lastError = error
                try await Task.sleep(nanoseconds: UInt64(200_000_000 * (attempt + 1)))
            }
        }
        throw lastError ?? ParleyClientError.transport("send failed")
    }

    /// Uploads a voice note (the bytes of an audio file; the server sniffs the format). The client
    /// message id makes a repeated upload return the first one. `progress` hears the fraction of
    /// the bytes sent, from 0 to 1.
    public func sendVoice(
        _ audio: Data, contentType: String = "application/octet-stream", conversationId: ConversationID? = nil, clientMessageId: String,
        progress: (@Sendable (Double) -> Void)? = nil
    ) async throws -> SendMessageResponse {
        var path = "v1/consumer/voice-messages?clientMessageId=\(clientMessageId.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? clientMessageId)"
        if let conversationId { path += "&conversationId=\(conversationId)" }
        guard let url = URL(string: path, relativeTo: baseURL) else { throw ParleyClientError.transport("bad path \(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.httpBody = audio
        guard let progress else { return try await perform(request) }
        progress(0)
        let (data, status) = try await exchange(request, progress: progress)
        let decoded: SendMessageResponse = try decode(data, status)
        progress(1)
        return decoded
    }

    /// Uploads an image or a file (the bytes; the server reads the type from them, never from the
    /// name or the declared type). `fileName` is shown to the agents (cleaned by the server). The
    /// client message id makes a repeated upload return the first one.
    public func sendAttachment(
        _ data: Data, fileName: String?, conversationId: ConversationID? = nil, clientMessageId: String,
        progress: (@Sendable (Double) -> Void)? = nil
    ) async throws -> SendMessageResponse {
        var query = [URLQueryItem(name: "clientMessageId", value: clientMessageId)]
        if let conversationId { query.append(URLQueryItem(name: "conversationId", value: conversationId.rawValue)) }
        if let fileName { query.append(URLQueryItem(name: "name", value: fileName)) }
        var components = URLComponents()
        components.path = "v1/consumer/attachments"
        components.queryItems = query
        // URLComponents leaves "+" as it is; a server reads it as a space.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        guard let relative = components.string, let url = URL(string: relative, relativeTo: baseURL) else {
            throw ParleyClientError.transport("bad file name")
        }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        request.httpBody = data
        guard let progress else { return try await perform(request) }
        progress(0)
        let (body, status) = try await exchange(request, progress: progress)
        let decoded: SendMessageResponse = try decode(body, status)
        progress(1)
        return decoded
    }

    /// Reports what the consumer did in the app (a batch of at most 50 events).
    public func reportActivity(_ events: [ActivityEventInput]) async throws -> ReportActivityResponse {
        try await request("POST", "v1/consumer/activity", body: ReportActivityRequest(events: events))
    }

    /// The bytes at a path the server gave (a voice note's rendition), with the session.
    public func download(_ path: String, maxBytes: Int = 16 * 1024 * 1024) async throws -> Data {
        let relative = path.hasPrefix("/") ? String(path.dropFirst()) : path
        guard let url = URL(string: relative, relativeTo: baseURL) else { throw ParleyClientError.transport("bad path \(path)") }
        var request = URLRequest(url: url)
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, status) = try await exchange(request, maxBytes: maxBytes)
        guard (200..<300).contains(status) else {
            let detail = (try? decoder.decode(ErrorBody.self, from: data))?.error ?? .init(code: .http(status), message: "")
            throw ParleyClientError.api(status: status, detail)
        }
        guard data.count <= maxBytes else { throw ParleyClientError.transport("the file is larger than \(maxBytes) bytes") }
        return data
    }

    /// Registers the device for push notifications (the server sends them while the consumer has
    /// no live connection).
    @discardableResult
    public func registerPush(_ registration: RegisterPushRequest) async throws -> PushRegistrationDTO {
        try await request("POST", "v1/consumer/push", body: registration)
    }

    /// Unregisters a device registered with `registerPush` (the same provider and token): the
    /// server sends it no more notifications for this consumer.
    public func unregisterPush(_ registration: RegisterPushRequest) async throws {
        try await requestNoContent("DELETE", "v1/consumer/push", body: registration)
    }

    /// Ends the session on the server: its token is refused from now on, on every connection, and
    /// the consumer's real-time connections with it close. The client forgets the token.
    public func endSession() async throws {
        try await requestNoContent("DELETE", "v1/consumer/session", body: Optional<Empty>.none)
        token = nil
        consumer = nil
    }

    /// Forgets the session's token and consumer (signing out on the device).
    public func forget() {
        token = nil
        consumer = nil
    }

    /// Where the consumer's conversation is in the queue for an agent.
    public func queuePosition(conversationId: ConversationID) async throws -> QueuePositionDTO {
        try await request("GET", "v1/consumer/conversations/\(conversationId)/queue")
    }

    /// The brand's settings for the consumer (voice notes on, their longest length, name, colour).
    public func settings() async throws -> ConsumerSettingsDTO {
        try await request("GET", "v1/consumer/settings")
    }

    /// The device's first preferred language as a BCP 47 tag ("pt-BR"), when it is one.
    public static var deviceLanguage: String? {
        guard let preferred = Locale.preferredLanguages.first?.replacingOccurrences(of: "_", with: "-") else { return nil }
        let parts = preferred.split(separator: "-")
        guard let first = parts.first, (2...3).contains(first.count), first.allSatisfy({ $0.isASCII && $0.isLetter }),
            parts.dropFirst().allSatisfy({ (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } })
        else { return nil }
        return preferred
    }

    /// An agent of the brand as the consumer sees them: name and initials.
    public func agent(id: AgentID) async throws -> PublicAgentDTO {
        try await request("GET", "v1/consumer/agents/\(id)")
    }

    public func conversation(id: ConversationID) async throws -> ConversationDTO {
        try await request("GET", "v1/consumer/conversations/\(id)")
    }

    /// Rates a closed conversation whose `survey` is `offered`: 1 (bad) to 5 (great), and an optional comment.
    public func rate(conversationId: ConversationID, score: Int, comment: String? = nil) async throws -> ConversationDTO {
        try await request("POST", "v1/consumer/conversations/\(conversationId)/rating", body: RateConversationRequest(score: score, comment: comment))
    }

    /// The customer's conversations, newest first, a page at a time (as far back as the brand lets
    /// customers see); pass the page's `nextCursor` for the next.
    public func history(cursor: String? = nil, limit: Int = 20) async throws -> Page<ConversationDTO> {
        var path = "v1/consumer/conversations?limit=\(limit)"
        if let cursor, let escaped = cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "._-"))) {
            path += "&cursor=\(escaped)"
        }
        return try await request("GET", path)
    }

    public func conversations() async throws -> [ConversationDTO] {
        let list: ListResponse<ConversationDTO> = try await request("GET", "v1/consumer/conversations")
        return list.items
    }

    public func messages(conversationId: ConversationID, afterSeq: Int64 = 0, limit: Int = 100) async throws -> [MessageDTO] {
        let list: ListResponse<MessageDTO> = try await request(
            "GET", "v1/consumer/conversations/\(conversationId)/messages?after=\(afterSeq)&limit=\(limit)")
        return list.items
    }

    /// The `limit` messages just before `beforeSeq`, oldest first: reading a conversation backwards
    /// (`Int64(Int32.max)` for the latest ones).
    public func messages(conversationId: ConversationID, beforeSeq: Int64, limit: Int = 50) async throws -> [MessageDTO] {
        let list: ListResponse<MessageDTO> = try await request(
            "GET", "v1/consumer/conversations/\(conversationId)/messages?before=\(beforeSeq)&limit=\(limit)")
        return list.items
    }

    /// Tells the agents that the consumer has received or read their messages up to `seq`.
    @discardableResult
    public func acknowledge(conversationId: ConversationID, upToSeq: Int64, state: DeliveryState) async throws -> ConversationEventDTO? {
        let response: ReceiptResponse = try await request(
            "POST", "v1/consumer/conversations/\(conversationId)/receipts",
            body: ReceiptRequest(upToSeq: upToSeq, state: state))
        return response.event
    }

    // MARK: - Transport

    private struct Empty: Encodable {}

    private func request<Response: Decodable>(_ method: String, _ path: String) async throws -> Response {
        try await request(method, path, body: Optional<Empty>.none)
    }

    private func request<Body: Encodable, Response: Decodable>(
        _ method: String, _ path: String, body: Body?
    ) async throws -> Response {
        guard let url = URL(string: path, relativeTo: baseURL) else { throw ParleyClientError.transport("bad path \(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = try encoder.encode(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return try await perform(request)
    }

    /// A request answered with 204 No Content (any 2xx); refusals throw as for the others.
    private func requestNoContent<Body: Encodable>(_ method: String, _ path: String, body: Body?) async throws {
        let _: Ignored = try await request(method, path, body: body)
    }

    /// Any body, or none.
    private struct Ignored: Decodable {
        init() {}
        init(from decoder: any Decoder) throws {}
    }

    private func perform<Response: Decodable>(_ request: URLRequest) async throws -> Response {
        let (data, status) = try await exchange(request)
        return try decode(data, status)
    }

    private func decode<Response: Decodable>(_ data: Data, _ status: Int) throws -> Response {
        guard (200..<300).contains(status) else {
            if let error = try? decoder.decode(ErrorBody.self, from: data) {
                throw ParleyClientError.api(status: status, error.error)
            }
            throw ParleyClientError.api(status: status, .init(code: .http(status), message: String(decoding: data, as: UTF8.self)))
        }
        if let ignored = Ignored() as? Response { return ignored }
        return try decoder.decode(Response.self, from: data)
    }

    /// How long one request may take, answer included.
    static let requestTimeout: Duration = .seconds(60)

    /// One request and its answer (the body and the status), through the transport, under one
    /// deadline for the whole exchange.
    private func exchange(
        _ request: URLRequest, maxBytes: Int = 16 * 1024 * 1024, progress: (@Sendable (Double) -> Void)? = nil
    ) async throws -> (Data, Int) {
        var request = request
        request.timeoutInterval = Double(Self.requestTimeout.components.seconds)
        request.setValue(ParleyClient.userAgent, forHTTPHeaderField: "User-Agent")
        let answer = try await transport.exchange(request, maxBytes: maxBytes, progress: progress)
        return (answer.body, answer.status)
    }

    /// The server's URL as a directory (its path ends with "/"), so that relative paths resolve
    /// under it: behind a reverse proxy at `https://example.com/chat`, `v1/consumer/messages` is
    /// `https://example.com/chat/v1/consumer/messages`, not `https://example.com/v1/...`.
    static func directory(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true), !components.path.hasSuffix("/") else { return url }
        components.path += "/"
        return components.url ?? url
    }

    /// `ParleyKit/<version>`, in every request's User-Agent.
    public static let userAgent = "ParleyKit/\(ParleyKitVersion.current)"
}

/// The SDK's version (CHANGELOG.md), in its User-Agent.
public enum ParleyKitVersion {
    public static let current = "0.4.0"
}

/// What went wrong with a Parley call.
public enum ParleyClientError: Error, Sendable, Equatable {
    /// The server refused the request; `detail.code` is stable and documented.
    case api(status: Int, ErrorBody.Detail)
    case transport(String)
}
