import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain
import ParleyMedia

/// One way in for media. A voice note or an attachment, uploaded over HTTP or fetched from a
/// messaging provider, goes through the same steps at the door before its kind's own (a voice
/// note's scan, analysis and renditions; a file's type rules, scan and thumbnail):
///
/// 1. the rate limits and the uploads in progress (per sender and per address);
/// 2. the client message id, the brand's settings and whether this kind may be sent here;
/// 3. a retry returns the original message without reading the body;
/// 4. the conversation exists for the sender (404 before the body is read);
/// 5. the size: a `Content-Length` over the cap is refused at once, and the body is cut at it
///    while it streams in (stalls, trickles and the drain deadline end it);
/// 6. the whole file in a scratch file, removed afterwards whatever happens.
///
/// Voice and attachments each said all of this themselves; they now say only what differs
/// (`Rules`) and what comes after (`ingest`).
struct MediaIntake: Sendable {
    /// What one kind of media decides at the door.
    struct Rules: Sendable {
        /// The kind of message a retry is looked up as.
        let kind: MessageKind
        /// Whether the sender may send this kind here, under the brand's settings.
        let authorize: @Sendable (Principal, BrandSettingsDTO) throws -> Void
        /// The largest file accepted under the brand's settings, and the refusal past it.
        let cap: @Sendable (BrandSettingsDTO) -> Int
        let tooLarge: @Sendable (BrandSettingsDTO) -> ParleyError
        /// The refusal of an empty body.
        let empty: String
        let emptyCode: ErrorCode
    }

    /// A file received whole, with what its kind's own steps need.
    struct Received: Sendable {
        let file: URL
        let size: Int
        let principal: Principal
        let request: SendMessageRequest
        let settings: BrandSettingsDTO
    }

    let settings: @Sendable (BrandID) async throws -> BrandSettingsDTO
    let conversations: ConversationService
    let blobs: any BlobStore
    let receiver: UploadReceiver
    let uploads: UploadGate
    let limits: RateLimits

    /// An upload over HTTP (the widget, ParleyKit, the workspace).
    func upload(
        _ principal: Principal, clientMessageId: String, conversationId: ConversationID?, contentLength: Int?, body: RequestBody,
        clientAddress: String?, rules: Rules, ingest: @Sendable (Received) async throws -> SendMessageResponse
    ) async throws -> SendMessageResponse {
        try await limits.admitMessage(from: principal, address: clientAddress)
        return try await uploads.run(consumer: principal.participant.id, address: clientAddress) {
            try MessageRules.validateClientMessageId(clientMessageId)
            let settings = try await settings(principal.brandId)
            try rules.authorize(principal, settings)
            if let original = try await conversations.retriedUpload(principal, clientMessageId: clientMessageId, kind: rules.kind) { return original }
            if let conversationId {
                _ = try await conversations.conversation(principal, id: conversationId)  // 404 before reading the body
            }
            let cap = rules.cap(settings)
            if let contentLength, contentLength > cap { throw rules.tooLarge(settings) }
            let partial = blobs.scratchFile()
            defer { try? FileManager.default.removeItem(at: partial) }
            let size = try await receiver.receiveWhole(
                body, into: partial, maxBytes: cap, tooLarge: rules.tooLarge(settings), empty: rules.empty, emptyCode: rules.emptyCode)
            let request = SendMessageRequest(clientMessageId: clientMessageId, text: "", conversationId: conversationId)
            return try await ingest(Received(file: partial, size: size, principal: principal, request: request, settings: settings))
        }
    }

    /// A file a messaging channel delivered, already fetched from the provider into `file`: the
    /// provider's message id is its client message id (a redelivery returns the stored message).
    func fromChannel(
        _ consumer: ConsumerPrincipal, clientMessageId: String, file: URL, size: Int, rules: Rules,
        ingest: @Sendable (Received) async throws -> SendMessageResponse
    ) async throws -> SendMessageResponse {
        let principal = Principal.consumer(consumer)
        if let original = try await conversations.retriedUpload(principal, clientMessageId: clientMessageId, kind: rules.kind) { return original }
        let settings = try await settings(consumer.brandId)
        try rules.authorize(principal, settings)
        guard size <= rules.cap(settings) else { throw rules.tooLarge(settings) }
        let request = SendMessageRequest(clientMessageId: clientMessageId, text: "")
        return try await uploads.run(consumer: principal.participant.id, address: nil, waiting: true) {
            try await ingest(Received(file: file, size: size, principal: principal, request: request, settings: settings))
        }
    }
}
