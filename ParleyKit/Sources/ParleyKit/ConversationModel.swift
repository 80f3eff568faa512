import Foundation
import Observation
import ParleyAPI

/// A conversation screen's model: bind a SwiftUI view to it (`@Observable`) and run `open()` in
/// the view's `.task`. It holds what the screen shows (the messages with the consumer's pending
/// ones, the agent's name and typing, the place in the queue, closed and survey state, uploads,
/// voice playback and recording) and keeps it current from Parley's events until the task ends.
///
/// ```swift
/// struct ChatScreen: View {
///     @State var chat: ConversationModel
///     var body: some View {
///         List(chat.entries) { MessageRow(entry: $0, player: chat.player) }
///             .task { await chat.open() }
///     }
/// }
/// ```
@MainActor @Observable
public final class ConversationModel {
    /// The conversation as the consumer sees it (`Parley.timeline(in:)`).
    public private(set) var entries: [ConversationEntry] = []
    /// The conversation shown: the one asked for, else the consumer's latest once known.
    public private(set) var conversationId: ConversationID?
    public private(set) var conversation: ConversationDTO?
    /// The agent who has the conversation (their name as the consumer sees it), once one has.
    public private(set) var agentName: String?
    public private(set) var agentIsTyping = false
    /// The place in the queue while waiting for an agent (nil once one has it, or unknown).
    public private(set) var queue: QueuePositionDTO?
    /// Closed (resolved); the next message starts a new conversation.
    public private(set) var isClosed = false
    /// Once closed: whether a rating is asked for (`offered`), given, or not asked.
    public private(set) var survey: SurveyState?
    public private(set) var connection: ParleyEvent.ConnectionState = .disconnected(retrying: false)
    /// Uploads under way (images, files, voice notes): the fraction sent, by client message id.
    public private(set) var uploads: [String: Double] = [:]
    /// A call ringing for the consumer (answer it in the drop-in screen, or `declineCall()`).
    public private(set) var ringingCall: CallDTO?
    /// Whether earlier messages may exist before the first shown (`loadEarlier()`).
    public private(set) var hasEarlier = true
    /// The last thing that went wrong, in a sentence, for a banner; nil when all is well.
    public private(set) var problem: String?
    /// What the consumer is typing.
    public var draft = ""

    /// Voice notes in this conversation play here.
    public let player: VoiceNotePlayer
    /// Recording a voice note: its state, for the recorder's row.
    public private(set) var recording: RecordingState = .idle

    public enum RecordingState: Sendable, Equatable {
        case idle
        /// Recording (or paused), this long so far, of at most `limit` (the brand's).
        case recording(elapsed: Duration, limit: Duration, paused: Bool)
    }

    public let parley: Parley
    private let askedFor: ConversationID?
    private var recorder: (any VoiceRecorder)?
    private var typingSent = false

    /// `conversationId` nil: the consumer's current conversation (and a new one when they write
    /// after it closed). `output` plays voice notes (`AudioPlayerOutput()` on Apple platforms).
    public init(parley: Parley, conversationId: ConversationID? = nil, output: any VoiceOutput) {
        self.parley = parley
        self.askedFor = conversationId
        self.conversationId = conversationId
        self.player = VoiceNotePlayer(parley: parley, output: output)
    }

    /// Loads the latest messages, connects (which also sends what waits), and follows the events
    /// until the task running it is cancelled (the view went away); then disconnects.
    public func open() async {
        let events = parley.events
        await load()
        await parley.connect()
        for await event in events {
            await handle(event)
        }
        await parley.disconnect()
    }

    /// Reads the conversation from the server (its latest page and its state).
    public func load() async {
        do {
            if askedFor == nil {
                let latest = try await parley.conversations().first
                if conversationId == nil || latest?.state != .resolved { conversationId = latest?.id ?? conversationId }
            }
            if let id = conversationId {
                let conversation = try await parley.conversation(id)
                apply(conversation)
                let page = try await parley.latestMessages(in: id, limit: 50)
                hasEarlier = page.count == 50
                agentName = page.last(where: { $0.senderKind == .agent })?.senderName ?? agentName
                if conversation.state != .resolved, conversation.assigneeId == nil {
                    queue = try? await parley.queuePosition(in: id)
                }
            }
            problem = nil
        } catch {
            problem = "The conversation could not be loaded. It will be shown when the connection is back."
        }
        await refresh()
    }

    /// Scrolling back: the page before the first message shown.
    public func loadEarlier() async {
        guard let id = conversationId, let first = entries.first(where: { $0.seq != nil })?.seq else { return }
        do {
            let page = try await parley.messages(in: id, before: first, limit: 50)
            hasEarlier = page.count == 50
            await refresh()
        } catch {
            problem = "Earlier messages could not be loaded."
        }
    }

    /// Sends the draft (in the list at once, pending until the server has it).
    public func send() async {
        let text = draft.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return }
        draft = ""
        await setTyping(false)
        do {
            // After the conversation closed, the next message starts a new one.
            _ = try await parley.send(text, in: isClosed ? nil : askedFor)
        } catch {
            draft = text
            problem = "The message could not be stored on the device."
        }
        await refresh()
    }

    /// Sends an image or a file through the outbox.
    public func sendAttachment(file: URL, fileName: String? = nil) async {
        do {
            _ = try await parley.sendAttachment(file: file, fileName: fileName, in: isClosed ? nil : askedFor)
        } catch {
            problem = "\(error)"
        }
        await refresh()
    }

    /// The consumer typed (call it as the draft changes): the agents see "typing" while it is
    /// not empty.
    public func draftChanged() async {
        await setTyping(!draft.isEmpty)
    }

    private func setTyping(_ typing: Bool) async {
        guard typing != typingSent, let id = conversationId else { return }
        typingSent = typing
        await parley.typing(typing, in: id)
    }

    /// The newest message is on screen: the agents see "read".
    public func markRead() async {
        guard let id = conversationId else { return }
        await parley.markRead(id)
    }

    public func resend(_ entry: ConversationEntry) async {
        _ = try? await parley.resend(entry.id)
        await refresh()
    }

    public func discard(_ entry: ConversationEntry) async {
        _ = try? await parley.discard(entry.id)
        await refresh()
    }

    /// Rates the closed conversation (1-5, and a comment).
    public func rate(_ score: Int, comment: String? = nil) async {
        guard let id = conversationId else { return }
        do {
            apply(try await parley.rate(id, score: score, comment: comment))
        } catch {
            problem = "The rating could not be sent."
        }
    }

    public func declineCall() async {
        guard let call = ringingCall else { return }
        await parley.declineCall(call.id)
    }

    // MARK: Recording

    /// Starts recording a voice note, up to the brand's limit.
    public func startRecording(with recorder: any VoiceRecorder) async {
        do {
            let settings = try await parley.settings()
            guard settings.voiceEnabled else {
                problem = "Voice notes are off for this conversation."
                return
            }
            let limit = Duration.seconds(settings.voiceMaxSeconds)
            try await recorder.start(limit: limit)
            self.recorder = recorder
            recording = .recording(elapsed: .zero, limit: limit, paused: false)
        } catch {
            problem = "The recording could not start: \(error)"
        }
    }

    /// Reads the recorder's elapsed time (call it while recording, for the timer).
    public func recordingTick() async {
        guard let recorder, case .recording(_, let limit, let paused) = recording else { return }
        recording = .recording(elapsed: await recorder.elapsed(), limit: limit, paused: paused)
    }

    public func pauseRecording() async {
        guard let recorder, case .recording(_, let limit, _) = recording else { return }
        await recorder.pause()
        recording = .recording(elapsed: await recorder.elapsed(), limit: limit, paused: true)
    }

    public func resumeRecording() async {
        guard let recorder, case .recording(_, let limit, true) = recording else { return }
        try? await recorder.resume()
        recording = .recording(elapsed: await recorder.elapsed(), limit: limit, paused: false)
    }

    /// Stops and sends the note through the outbox.
    public func finishRecording() async {
        guard let recorder else { return }
        self.recorder = nil
        recording = .idle
        do {
            let note = try await recorder.stop()
            _ = try await parley.sendVoice(note, in: isClosed ? nil : askedFor)
            try? FileManager.default.removeItem(at: note.file)
        } catch {
            problem = "The voice note could not be sent: \(error)"
        }
        await refresh()
    }

    /// Throws the recording away.
    public func cancelRecording() async {
        await recorder?.cancel()
        recorder = nil
        recording = .idle
    }

    // MARK: Events

    func handle(_ event: ParleyEvent) async {
        switch event {
        case .message(let message):
            guard follows(message.conversationId) else { return }
            if message.senderKind == .agent {
                agentIsTyping = false
                if let name = message.senderName { agentName = name }
                queue = nil
            }
            await refresh()
        case .outgoing(let message):
            if case .sent = message.state { uploads[message.clientMessageId] = nil }
            if askedFor == nil, message.conversationId == nil, let stored = message.state.stored, stored.conversationId != conversationId {
                // The consumer's first message, or the first after a close, opened a conversation.
                conversationId = stored.conversationId
                (isClosed, survey, queue) = (false, nil, nil)
                if let conversation = try? await parley.conversation(stored.conversationId) { apply(conversation) }
            }
            await refresh()
        case .uploadProgress(let id, let fraction):
            uploads[id] = fraction < 1 ? fraction : nil
        case .typing(let id, let participant, let isTyping):
            if follows(id), participant.kind == .agent { agentIsTyping = isTyping }
        case .queue(let place):
            if follows(place.conversationId) { queue = place.position == nil ? nil : place }
        case .closed(let conversation):
            if follows(conversation.id) { apply(conversation) }
        case .conversation(let conversation):
            if follows(conversation.id) { apply(conversation) }
        case .event(let event):
            guard follows(event.conversationId) else { return }
            if event.kind == .assigned, let agent = event.assigneeId {
                queue = nil
                agentName = (try? await parley.agent(agent))?.name ?? agentName
            }
            if event.kind == .receipt || event.kind == .voiceProcessed { await refresh() }
        case .call(let call):
            guard follows(call.conversationId) else { return }
            ringingCall = call.state == .ringing ? call : (ringingCall?.id == call.id ? nil : ringingCall)
        case .connection(let state):
            connection = state
            if state == .connected { problem = nil }
        case .prompt:
            break
        }
    }

    private func follows(_ id: ConversationID) -> Bool {
        conversationId == nil || conversationId == id
    }

    private func apply(_ conversation: ConversationDTO) {
        self.conversation = conversation
        isClosed = conversation.state == .resolved
        survey = conversation.survey
        if conversation.state == .resolved { (queue, agentIsTyping) = (nil, false) }
    }

    private func refresh() async {
        entries = await parley.timeline(in: askedFor ?? conversationId)
    }
}
