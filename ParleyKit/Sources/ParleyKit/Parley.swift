import Foundation
import ParleyAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ParleyKit's entry point: one per app. It keeps the consumer's session, and an outbox of what the
/// consumer wrote that survives bad networks and restarts: each message is stored (encrypted) before
/// `send` returns, then sent in order, with the same client message id on every attempt, so the
/// agents get it exactly once.
///
/// ```swift
/// let parley = try await Parley.configure(
///     brandID: "brd_...", appID: "app_...", server: URL(string: "https://chat.example.com")!,
///     identity: .authenticated { try await backend.freshParleyJWT() },
///     storage: ParleyStorage(directory: cacheDirectory, key: .bytes(keyFromKeychain)))
/// let message = try await parley.send("Where is my order?")   // .pending until the server has it
/// await parley.start()                                        // sends now and after network failures
/// ```
public actor Parley {
    /// Who the consumer is.
    public enum Identity: Sendable {
        /// An anonymous consumer; the same one across restarts (the session is kept, sealed).
        case anonymous(displayName: String? = nil)
        /// A user of the brand's app, vouched for by a JWT from the brand's backend. The closure is
        /// called whenever a session is needed (first use, expiry); ParleyKit never stores the
        /// brand's credentials, only the session Parley gives in exchange.
        case authenticated(@Sendable () async throws -> String)
    }

    /// A message the consumer wrote, and where it is.
    public struct OutgoingMessage: Codable, Sendable, Hashable, Identifiable {
        public enum State: Codable, Sendable, Hashable {
            /// Stored on the device, not yet taken by the server.
            case pending
            /// The server has it.
            case sent(messageId: MessageID, conversationId: ConversationID, seq: Int64)
            /// An agent's device has it (a receipt heard while connected).
            case delivered(messageId: MessageID, conversationId: ConversationID, seq: Int64)
            /// An agent read it.
            case read(messageId: MessageID, conversationId: ConversationID, seq: Int64)
            /// The server refused it (a stable code and a sentence); it will not be sent again.
            case failed(code: ErrorCode, message: String)

            /// Where the server stored it, once it has it (sent, delivered or read).
            public var stored: (messageId: MessageID, conversationId: ConversationID, seq: Int64)? {
                switch self {
                case .sent(let id, let conversation, let seq), .delivered(let id, let conversation, let seq), .read(let id, let conversation, let seq):
                    (id, conversation, seq)
                case .pending, .failed: nil
                }
            }
        }

        public var id: String { clientMessageId }
        public let clientMessageId: String
        /// `.text`, or `.voice` (the recording is kept sealed on the device until it is sent).
        public let kind: MessageKind
        public let text: String
        /// The conversation it was written to; nil: the consumer's latest (continued, or a new one
        /// opened when there is none).
        public let conversationId: ConversationID?
        /// Written to open a new conversation (where the brand allows several open at once).
        public let newConversation: Bool?
        public let createdAt: Date
        public internal(set) var state: State
        /// Attempts that did not reach the server or got no answer.
        public internal(set) var attempts: Int
        public internal(set) var lastError: String?
    }

    struct Session: Codable {
        var token: String
        var consumer: ConsumerDTO
        /// The conversation a message written without one goes to (the latest one), once known.
        var latestConversation: ConversationID?
    }

    /// The brand the app belongs to: checked against the session (nil: learned from it).
    public let brandID: BrandID?
    public let appID: AppID
    private let identity: Identity
    let store: SecureStore
    let storage: ParleyStorage
    let client: ParleyClient
    var session: Session?
    var outbox: [OutgoingMessage]
    /// The devices registered for push with this session (unregistered on sign-out), sealed.
    var pushRegistrations: [RegisterPushRequest]
    /// What the app reported and the server has not acknowledged yet (Parley+Activity.swift), sealed.
    var activity: [ActivityEventInput]
    /// The outbox pass under way, which a `flush` arriving meanwhile waits for.
    private var drainTask: Task<Bool, Never>?
    private var startingSession: Task<Void, any Error>?
    /// The message `flush` is sending now (it cannot be discarded meanwhile).
    private var delivering: String?
    private var loop: Task<Void, Never>?
    var loopRunning: Bool { loop != nil }
    /// The sending loop was started by `connect()` (and ends with `disconnect()`), not by `start()`.
    var loopStartedByConnect = false
    // Following the app's lifecycle (Parley+Lifecycle.swift).
    var lifecycleTask: Task<Void, Never>?
    var lifecycleObservers: [any NSObjectProtocol] = []
    var lifecycleCenter: NotificationCenter?
    /// The first retry's delay after a network failure; each next one doubles, up to a minute.
    let retryDelay: Duration

    // Real time (Parley+Realtime.swift).
    let serverURL: URL
    let transport: any ParleyTransport
    var realtime: Task<Void, Never>?
    var wantsConnection = false
    /// Frames to send on the open connection.
    var frames: AsyncStream<String>.Continuation?
    var greeted = false
    /// Frames sent on the connection that wait for the server's `ack` or `error`, by frame id.
    var pendingReplies: [String: CheckedContinuation<ServerFrame?, Never>] = [:]
    var frameCounter = 0
    /// Per conversation, the last sequence number this device has seen (sealed, kept across restarts).
    var cursors: [String: Int64]
    /// Per conversation, the numbers this process received lately (out-of-order frames, replays).
    var recentSeqs: [String: Set<Int64>] = [:]
    /// The cursors as this process found them: what was seen before it started.
    let startCursors: [String: Int64]
    let encoder = ParleyJSON.makeEncoder()
    let decoder = ParleyJSON.makeDecoder()
    /// Every open `events` stream's continuation, by subscription.
    let subscribers = Locked<[UUID: AsyncStream<ParleyEvent>.Continuation]>([:])
    /// What happens while connected: messages, receipts, typing, the connection's state.
    ///
    /// Each read of `events` is a stream of its own, for one screen or one badge: every stream gets
    /// every event from the moment it was made (up to 1,000 waiting unread), and ending one (the
    /// task iterating it cancelled, as SwiftUI's `.task` does when a view goes) never ends another.
    public nonisolated var events: AsyncStream<ParleyEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ParleyEvent.self, bufferingPolicy: .bufferingNewest(1000))
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [subscribers] _ in subscribers.withLock { _ = $0.removeValue(forKey: id) } }
        return stream
    }

    static let sessionFile = "session.sealed"
    static let outboxFile = "outbox.sealed"
    static let cursorsFile = "cursors.sealed"
    static let activityFile = "activity.sealed"
    static let pushFile = "push.sealed"
    /// Sent messages kept for the app to show their state; the oldest go first.
    static let keptSent = 100

    /// Opens (or creates) the app's sealed storage and what it kept: the session and the outbox.
    public static func configure(
        brandID: BrandID?, appID: AppID, server: URL, identity: Identity, storage: ParleyStorage, session urlSession: URLSession = .shared,
        retryDelay: Duration = .seconds(1)
    ) async throws -> Parley {
        try await configure(
            brandID: brandID, appID: appID, server: server, identity: identity, storage: storage,
            transport: URLSessionTransport(session: urlSession), retryDelay: retryDelay)
    }

    /// The same with another transport than URLSession (`ParleyTransport`).
    public static func configure(
        brandID: BrandID?, appID: AppID, server: URL, identity: Identity, storage: ParleyStorage, transport: any ParleyTransport,
        retryDelay: Duration = .seconds(1)
    ) async throws -> Parley {
        let store = try SecureStore(storage)
        let kept = try store.read(sessionFile, as: Session.self)
        let outbox = try store.read(outboxFile, as: [OutgoingMessage].self) ?? []
        let cursors = try store.read(cursorsFile, as: [String: Int64].self) ?? [:]
        let activity = try store.read(activityFile, as: [ActivityEventInput].self) ?? []
        let push = try store.read(pushFile, as: [RegisterPushRequest].self) ?? []
        return Parley(
            brandID: brandID, appID: appID, identity: identity, store: store, storage: storage, server: server, transport: transport,
            client: ParleyClient(baseURL: server, transport: transport, token: kept?.token), session: kept, outbox: outbox, cursors: cursors,
            activity: activity, pushRegistrations: push, retryDelay: retryDelay)
    }

    private init(
        brandID: BrandID?, appID: AppID, identity: Identity, store: SecureStore, storage: ParleyStorage, server: URL, transport: any ParleyTransport,
        client: ParleyClient, session: Session?, outbox: [OutgoingMessage], cursors: [String: Int64], activity: [ActivityEventInput],
        pushRegistrations: [RegisterPushRequest], retryDelay: Duration
    ) {
        self.activity = activity
        self.pushRegistrations = pushRegistrations
        // The server's URL as a directory, like the client's (a reverse proxy's path prefix).
        let server = ParleyClient.directory(server)
        self.storage = storage
        (self.brandID, self.appID, self.identity, self.store, self.client) = (brandID, appID, identity, store, client)
        (self.session, self.outbox, self.retryDelay, self.cursors, self.startCursors) = (session, outbox, retryDelay, cursors, cursors)
        (self.serverURL, self.transport) = (server, transport)
    }

    /// The signed-in consumer, once a session exists.
    public var consumer: ConsumerDTO? { session?.consumer }

    /// Every message still pending, failed, or recently sent, oldest first.
    public var outgoing: [OutgoingMessage] { outbox }

    /// Stores the message (sealed) and returns it `.pending`; it is sent by `flush()`, by the
    /// background loop after `start()`, or while connected (`connect()`). It is in the conversation's
    /// `timeline` at once. Without `conversationId` it goes to the consumer's latest conversation
    /// (continued, or a new one when there is none); `newConversation` opens another one where the
    /// brand allows several open at once.
    @discardableResult
    public func send(
        _ text: String, in conversationId: ConversationID? = nil, newConversation: Bool = false, clientMessageId: String = UUID().uuidString
    ) throws -> OutgoingMessage {
        if let existing = outbox.first(where: { $0.clientMessageId == clientMessageId }) { return existing }
        let message = OutgoingMessage(
            clientMessageId: clientMessageId, kind: .text, text: text, conversationId: conversationId,
            newConversation: newConversation && conversationId == nil ? true : nil, createdAt: Date(), state: .pending, attempts: 0)
        outbox.append(message)
        try persistOutbox()
        loop.map { _ in wakeLoop() }
        return message
    }

    /// Stores a recorded voice note (sealed, so a failed upload is sent again without recording it
    /// again, also after a restart) and returns it `.pending`.
    @discardableResult
    public func sendVoice(
        file: URL, contentType: String = "application/octet-stream", in conversationId: ConversationID? = nil,
        clientMessageId: String = UUID().uuidString
    ) throws -> OutgoingMessage {
        if let existing = outbox.first(where: { $0.clientMessageId == clientMessageId }) { return existing }
        let audio = try Data(contentsOf: file)
        try store.write(Self.voiceFile(clientMessageId), VoiceDraft(audio: audio, contentType: contentType))
        let message = OutgoingMessage(
            clientMessageId: clientMessageId, kind: .voice, text: file.lastPathComponent, conversationId: conversationId, newConversation: nil,
            createdAt: Date(), state: .pending, attempts: 0)
        outbox.append(message)
        try persistOutbox()
        loop.map { _ in wakeLoop() }
        return message
    }

    /// Sends a finished recording (`VoiceRecorder.stop()`); the file can go once this returns.
    @discardableResult
    public func sendVoice(_ recording: VoiceRecording, in conversationId: ConversationID? = nil, clientMessageId: String = UUID().uuidString) throws
        -> OutgoingMessage
    {
        try sendVoice(file: recording.file, contentType: recording.contentType, in: conversationId, clientMessageId: clientMessageId)
    }

    /// Sends a failed message again (the server refused it, say, while the brand's voice notes were
    /// off): it is pending again, with the same client message id. False when there is no such
    /// failed message.
    @discardableResult
    public func resend(_ clientMessageId: String) throws -> Bool {
        guard let index = outbox.firstIndex(where: { $0.clientMessageId == clientMessageId }), case .failed = outbox[index].state else { return false }
        outbox[index].state = .pending
        outbox[index].lastError = nil
        try persistOutbox()
        emit(.outgoing(outbox[index]))
        loop.map { _ in wakeLoop() }
        return true
    }

    /// Gives up on a message not sent yet (pending or failed): it leaves the outbox and the
    /// timeline. False when there is no such message, or the server has it already.
    @discardableResult
    public func discard(_ clientMessageId: String) throws -> Bool {
        guard let index = outbox.firstIndex(where: { $0.clientMessageId == clientMessageId }), outbox[index].state.stored == nil,
            delivering != clientMessageId
        else { return false }
        let message = outbox.remove(at: index)
        if message.kind == .voice { store.remove(Self.voiceFile(message.clientMessageId)) }
        if message.kind == .attachment { store.remove(Self.uploadFile(message.clientMessageId)) }
        try persistOutbox()
        return true
    }

    struct VoiceDraft: Codable {
        var audio: Data
        var contentType: String
    }

    /// The largest image or file the SDK takes into its outbox (the brand's own limit, at most
    /// 25 MB by default on the server, is checked there: `attachment_too_large`).
    public static let maxAttachmentBytes = 64 * 1024 * 1024

    /// Stores an image or a file (sealed, so a failed upload is sent again, also after a restart)
    /// and returns it `.pending`; `.uploadProgress` events follow while it uploads. The server reads
    /// its type from its bytes and applies the brand's allow-list and size limit (a refusal is
    /// `.failed` with the code). `fileName` (the file's own by default) is what the agents see.
    @discardableResult
    public func sendAttachment(
        file: URL, fileName: String? = nil, in conversationId: ConversationID? = nil, clientMessageId: String = UUID().uuidString
    ) throws -> OutgoingMessage {
        if let existing = outbox.first(where: { $0.clientMessageId == clientMessageId }) { return existing }
        let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
        guard size <= Self.maxAttachmentBytes else {
            throw ParleyKitError.invalid("The file has \(size) bytes; at most \(Self.maxAttachmentBytes) can be sent.")
        }
        let data = try Data(contentsOf: file)
        let name = fileName ?? file.lastPathComponent
        try store.write(Self.uploadFile(clientMessageId), AttachmentDraft(data: data, fileName: name))
        let message = OutgoingMessage(
            clientMessageId: clientMessageId, kind: .attachment, text: name, conversationId: conversationId, newConversation: nil,
            createdAt: Date(), state: .pending, attempts: 0)
        outbox.append(message)
        try persistOutbox()
        loop.map { _ in wakeLoop() }
        return message
    }

    struct AttachmentDraft: Codable {
        var data: Data
        var fileName: String
    }

    static func uploadFile(_ clientMessageId: String) -> String {
        draftFile("upload-", clientMessageId)
    }

    static func voiceFile(_ clientMessageId: String) -> String {
        draftFile("voice-", clientMessageId)
    }

    /// A sealed draft's file name: the prefix and the client message id, kept to letters, digits
    /// and "-" (at most 64), so that an id can never name a path.
    private static func draftFile(_ prefix: String, _ clientMessageId: String) -> String {
        prefix + String(clientMessageId.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == "-" }.prefix(64).map(Character.init))
            + ".sealed"
    }

    /// Registers this device's APNs token (from `didRegisterForRemoteNotificationsWithDeviceToken`):
    /// Parley notifies the device when an agent writes while the app is not connected.
    /// `sandbox` for development builds.
    public func registerForNotifications(apnsToken: Data, sandbox: Bool = false) async throws {
        try await register(RegisterPushRequest(
            provider: .apns, token: apnsToken.map { String(format: "%02x", $0) }.joined(), environment: sandbox ? "sandbox" : "production"))
    }

    /// Registers this device's Firebase Cloud Messaging registration token (Android builds, or an
    /// app that sends through FCM).
    public func registerForNotifications(fcmToken: String) async throws {
        try await register(RegisterPushRequest(provider: .fcm, token: fcmToken))
    }

    /// Registers, and remembers the device (sealed) so that `signOut` unregisters it.
    private func register(_ registration: RegisterPushRequest) async throws {
        try await ensureSession()
        try await client.registerPush(registration)
        pushRegistrations.removeAll { $0.provider == registration.provider && $0.token == registration.token }
        pushRegistrations.append(registration)
        try store.write(Self.pushFile, pushRegistrations)
    }

    /// The brand's settings for this consumer: whether voice notes are on and their longest length
    /// (`voiceMaxSeconds`, the limit to record to), the brand's name, colour and availability.
    public func settings() async throws -> ConsumerSettingsDTO {
        try await ensureSession()
        return try await client.settings()
    }

    /// Where the conversation is in the queue for an agent (then `.queue` events while connected).
    public func queuePosition(in conversationId: ConversationID) async throws -> QueuePositionDTO {
        try await ensureSession()
        return try await client.queuePosition(conversationId: conversationId)
    }

    /// Rates a closed conversation: 1 (bad) to 5 (great), with an optional comment. Offer it when a
    /// `.closed` event's conversation has `survey == .offered`; once per conversation (the same rating
    /// again is accepted, another is refused with `already_rated`).
    @discardableResult
    public func rate(_ conversationId: ConversationID, score: Int, comment: String? = nil) async throws -> ConversationDTO {
        try await ensureSession()
        return try await client.rate(conversationId: conversationId, score: score, comment: comment)
    }

    /// The consumer's earlier conversations, newest first, a page at a time (as far back, and in the
    /// states, the brand lets customers see; open ones always); `cursor` is the previous page's `nextCursor`.
    public func history(cursor: String? = nil, limit: Int = 20) async throws -> Page<ConversationDTO> {
        try await ensureSession()
        return try await client.history(cursor: cursor, limit: limit)
    }

    /// The consumer's conversations, newest first.
    public func conversations() async throws -> [ConversationDTO] {
        try await ensureSession()
        let list = try await client.conversations()
        if let latest = list.first { noteLatestConversation(latest.id) }
        return list
    }

    /// A conversation's messages after `afterSeq`.
    /// A conversation's messages after `afterSeq` (kept on the device, sealed: `cachedMessages(in:)`).
    public func messages(in conversationId: ConversationID, afterSeq: Int64 = 0, limit: Int = 100) async throws -> [MessageDTO] {
        try await ensureSession()
        let messages = try await client.messages(conversationId: conversationId, afterSeq: afterSeq, limit: limit)
        cache(messages, in: conversationId)
        return messages
    }

    /// The latest `limit` messages of a conversation, oldest first (cached): where a chat screen
    /// starts before it scrolls back with `messages(in:before:)`.
    public func latestMessages(in conversationId: ConversationID, limit: Int = 50) async throws -> [MessageDTO] {
        try await messages(in: conversationId, before: Int64(Int32.max), limit: limit)
    }

    /// The `limit` messages just before sequence number `seq`, oldest first (cached): scrolling back
    /// through a conversation. Empty at its beginning.
    public func messages(in conversationId: ConversationID, before seq: Int64, limit: Int = 50) async throws -> [MessageDTO] {
        try await ensureSession()
        let messages = try await client.messages(conversationId: conversationId, beforeSeq: seq, limit: limit)
        cache(messages, in: conversationId)
        return messages
    }

    /// An agent as the consumer sees them (name and initials): who an `assigned` event names.
    public func agent(_ id: AgentID) async throws -> PublicAgentDTO {
        try await ensureSession()
        return try await client.agent(id: id)
    }

    /// A conversation of the consumer's, with its state and unread count.
    public func conversation(_ id: ConversationID) async throws -> ConversationDTO {
        try await ensureSession()
        return try await client.conversation(id: id)
    }

    /// How many of the agents' messages the consumer has not read, in all their conversations
    /// (`ConversationDTO.unread` has it per conversation): for a badge. `markRead` lowers it.
    public func unreadCount() async throws -> Int {
        try await conversations().reduce(0) { $0 + ($1.unread ?? 0) }
    }

    /// Sends what is pending, in order, until the outbox is empty or the network fails (the next
    /// message waits for the one before it). Returns whether anything is still pending.
    /// While a send is under way (the background loop's, or another caller's), it waits for that
    /// one, then sends what is still pending.
    @discardableResult
    public func flush() async -> Bool {
        while let running = drainTask { _ = await running.value }
        // The pass clears itself before it ends, so that those waiting on it find it gone (waiting
        // on a finished task does not suspend: a waiter that found it still set would spin).
        let drain = Task { () -> Bool in
            let stillPending = await self.drain()
            self.drainEnded()
            return stillPending
        }
        drainTask = drain
        return await drain.value
    }

    private func drainEnded() {
        drainTask = nil
    }

    /// One pass over the outbox, in order; only `flush` runs it, one at a time.
    private func drain() async -> Bool {
        var index = 0
        while index < outbox.count {
            guard outbox[index].state == .pending else {
                index += 1
                continue
            }
            let id = outbox[index].clientMessageId
            let outcome = await deliver(outbox[index])
            // The outbox may have changed while this waited (a message discarded): find it again.
            guard let found = outbox.firstIndex(where: { $0.clientMessageId == id }) else { continue }
            index = found
            switch outcome {
            case .sent(let stored):
                outbox[index].state = .sent(messageId: stored.id, conversationId: stored.conversationId, seq: stored.seq)
                outbox[index].lastError = nil
                // The server's copy, in the conversation's cache: the timeline shows it in place.
                cache([stored], in: stored.conversationId)
                if outbox[index].conversationId == nil { noteLatestConversation(stored.conversationId) }
            case .refused(let code, let message):
                outbox[index].state = .failed(code: code, message: message)
            case .later(let reason):
                outbox[index].attempts += 1
                outbox[index].lastError = reason
                try? persistOutbox()
                emit(.outgoing(outbox[index]))
                return true
            }
            try? persistOutbox()
            emit(.outgoing(outbox[index]))
            index += 1
        }
        pruneSent()
        try? persistOutbox()
        return await flushActivity()
    }

    /// Sends in the background: now, and again after a failure with back-off (1 s doubling to a
    /// minute), and whenever `send` adds a message. `stop()` ends it (the app went to the background).
    public func start() {
        loopStartedByConnect = false
        guard loop == nil else { return }
        loop = Task { [retryDelay] in
            var delay = retryDelay
            while !Task.isCancelled {
                if await self.flush() {
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(60))
                } else {
                    delay = retryDelay
                    await self.waitForWork()
                }
            }
        }
    }

    public func stop() {
        loopStartedByConnect = false
        loop?.cancel()
        loop = nil
        wakeup?.resume()
        wakeup = nil
    }

    /// Signing out (the next user of a shared device must see and get nothing of this one): the
    /// devices registered for push are unregistered, the session is ended on the server (its token
    /// is refused from then on, everywhere), then everything stored on the device is wiped, the
    /// outbox too. Returns whether the server was told; when it cannot be reached the device is
    /// wiped all the same, and the token, gone from the device, expires on its own.
    @discardableResult
    public func signOut() async throws -> Bool {
        stopFollowingAppLifecycle()
        stop()
        disconnect()
        let told = session == nil ? true : await endServerSession()
        session = nil
        outbox = []
        activity = []
        pushRegistrations = []
        cursors = [:]
        recentSeqs = [:]
        await client.forget()
        try store.wipe()
        return told
    }

    /// Unregisters push and ends the session on the server; false when it could not be reached.
    private func endServerSession() async -> Bool {
        do {
            for registration in pushRegistrations {
                do {
                    try await client.unregisterPush(registration)
                } catch ParleyClientError.api(404, _) {
                    // Gone already (the server dropped a token the provider called dead).
                }
            }
            try await client.endSession()
            return true
        } catch ParleyClientError.api(401, _) {
            // The session had ended already: nothing to revoke. (Its push registrations belong to
            // the consumer; an authenticated consumer's next session could remove them, but this
            // one cannot, and the next user of the device signs in as someone else.)
            return true
        } catch {
            return false
        }
    }

    // MARK: Delivery

    private enum Outcome {
        case sent(MessageDTO)
        case refused(code: ErrorCode, message: String)
        case later(String)
    }

    private func deliver(_ message: OutgoingMessage) async -> Outcome {
        delivering = message.clientMessageId
        defer { delivering = nil }
        for _ in 0..<2 {
            do {
                try await ensureSession()
                if message.kind == .attachment {
                    guard let draft = try store.read(Self.uploadFile(message.clientMessageId), as: AttachmentDraft.self) else {
                        return .refused(code: .fileLost, message: "The file is no longer on the device.")
                    }
                    let id = message.clientMessageId
                    let response = try await client.sendAttachment(
                        draft.data, fileName: draft.fileName, conversationId: message.conversationId, clientMessageId: id
                    ) { [weak self] fraction in
                        self?.emit(.uploadProgress(clientMessageId: id, fraction: fraction))
                    }
                    store.remove(Self.uploadFile(message.clientMessageId))
                    return .sent(response.message)
                }
                if message.kind == .voice {
                    guard let draft = try store.read(Self.voiceFile(message.clientMessageId), as: VoiceDraft.self) else {
                        return .refused(code: .recordingLost, message: "The recording is no longer on the device.")
                    }
                    let id = message.clientMessageId
                    let response = try await client.sendVoice(
                        draft.audio, contentType: draft.contentType, conversationId: message.conversationId, clientMessageId: id
                    ) { [weak self] fraction in
                        self?.emit(.uploadProgress(clientMessageId: id, fraction: fraction))
                    }
                    try? FileManager.default.removeItem(at: store.directory.appendingPathComponent(Self.voiceFile(message.clientMessageId)))
                    return .sent(response.message)
                }
                // Connected: over the socket (no HTTP round trip, and the server does not echo the
                // message back to this connection); else over HTTP. Either way with the same client
                // message id, so a send that got no answer is never stored twice.
                let frameId = nextFrameId()
                if let answer = await realtimeRequest(
                    .send(id: frameId, SendMessageRequest(
                        clientMessageId: message.clientMessageId, text: message.text, conversationId: message.conversationId,
                        newConversation: message.newConversation)), id: frameId)
                {
                    switch answer {
                    case .ack(_, let stored?, _, _):
                        return .sent(stored)
                    case .error(_, let detail) where [.rateLimited, .internalError].contains(detail.code):
                        return .later(detail.code.rawValue)
                    case .error(_, let detail):
                        return .refused(code: detail.code, message: detail.message)
                    default:
                        return .later("an unexpected answer")
                    }
                }
                return .sent(try await client.send(
                    message.text, conversationId: message.conversationId, newConversation: message.newConversation == true,
                    clientMessageId: message.clientMessageId, attempts: 1
                ).message)
            } catch {
                switch SendFailure(error) {
                case .sessionEnded:
                    session = nil  // expired or revoked: a new one, then once more
                    continue
                case .later(let reason):
                    return .later(reason)
                case .refused(let code, let message):
                    return .refused(code: code, message: message)
                }
            }
        }
        return .later("the server refused the session")
    }

    /// Raises the consumer's sent messages in a conversation up to `seq` to what an agent's receipt says.
    func applyReceipt(_ state: DeliveryState, upTo seq: Int64, in conversationId: ConversationID) {
        var changed = false
        for index in outbox.indices {
            guard let stored = outbox[index].state.stored, stored.conversationId == conversationId, stored.seq <= seq else { continue }
            let raised: OutgoingMessage.State
            switch (outbox[index].state, state) {
            case (.sent, .delivered): raised = .delivered(messageId: stored.messageId, conversationId: conversationId, seq: stored.seq)
            case (.sent, .read), (.delivered, .read): raised = .read(messageId: stored.messageId, conversationId: conversationId, seq: stored.seq)
            default: continue
            }
            outbox[index].state = raised
            emit(.outgoing(outbox[index]))
            changed = true
        }
        if changed { try? persistOutbox() }
    }

    /// What a failed call means for something waiting on the device to be sent (a message, a batch
    /// of activity): the session ended (get a new one), try again later (no network, 429, 5xx),
    /// or refused for good with the server's reason.
    enum SendFailure {
        case sessionEnded
        case later(String)
        case refused(code: ErrorCode, message: String)

        init(_ error: any Error) {
            switch error {
            case ParleyClientError.api(401, _): self = .sessionEnded
            case ParleyClientError.api(let status, let detail) where status == 429 || status >= 500: self = .later("\(status) \(detail.code)")
            case ParleyClientError.api(_, let detail): self = .refused(code: detail.code, message: detail.message)
            default: self = .later("\(error)")
            }
        }
    }

    /// A session, made once however many callers ask at the same time (the sending loop and the
    /// connection both start by asking: two anonymous sessions would be two consumers).
    func ensureSession() async throws {
        if session != nil { return }
        if let starting = startingSession { return try await starting.value }
        let starting = Task { try await self.startSession() }
        startingSession = starting
        defer { startingSession = nil }
        try await starting.value
    }

    private func startSession() async throws {
        if session != nil { return }
        let consumer: ConsumerDTO
        switch identity {
        case .anonymous(let name):
            consumer = try await client.startSession(appId: appID, displayName: name)
        case .authenticated(let freshToken):
            consumer = try await client.startSession(appId: appID, identityToken: try await freshToken())
        }
        guard let token = await client.token else { throw ParleyClientError.transport("no session token") }
        if let brandID, consumer.brandId != brandID {
            throw ParleyKitError.misconfigured("app \(appID) belongs to another brand than \(brandID)")
        }
        session = Session(token: token, consumer: consumer, latestConversation: nil)
        try store.write(Self.sessionFile, session)
    }

    /// The session's token, made when there is none: what the drop-in conversation screen
    /// (`ParleyChatView`) hands to the page it hosts. Never log or store it elsewhere.
    public func sessionToken() async throws -> String {
        try await ensureSession()
        guard let token = session?.token else { throw ParleyClientError.transport("no session token") }
        return token
    }

    /// A new session after the server refused the last one (it expired or was revoked), and its token.
    public func renewSessionToken() async throws -> String {
        session = nil
        return try await sessionToken()
    }

    /// The server's address, as configured (a directory: its path ends with "/").
    public nonisolated var server: URL { serverURL }

    /// The conversation a message written without one went to: the one shown by `timeline(in: nil)`.
    func noteLatestConversation(_ conversationId: ConversationID) {
        guard session != nil, session?.latestConversation != conversationId else { return }
        session?.latestConversation = conversationId
        try? store.write(Self.sessionFile, session)
    }

    func persistOutbox() throws {
        try store.write(Self.outboxFile, outbox)
    }

    private func pruneSent() {
        let sent = outbox.indices.filter { outbox[$0].state.stored != nil }
        guard sent.count > Self.keptSent else { return }
        let drop = Set(sent.prefix(sent.count - Self.keptSent))
        outbox = outbox.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
    }

    // MARK: Waiting for work

    private var wakeup: CheckedContinuation<Void, Never>?

    private func waitForWork() async {
        if outbox.contains(where: { $0.state == .pending }) || !activity.isEmpty { return }
        await withCheckedContinuation { wakeup = $0 }
    }

    func wakeLoop() {
        wakeup?.resume()
        wakeup = nil
    }
}
