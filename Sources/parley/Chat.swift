import ArgumentParser
import Foundation
import ParleyAPI
import ParleyDomain
import ParleyKit
import ParleyKitNIO
import ParleyMedia
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `parley chat`: a consumer in the terminal, on ParleyKit: the conversation, text, voice notes and
/// files, receipts and typing, and the SDK's sealed outbox (it keeps working offline and after a
/// restart). How a brand's developer tries the SDK in two minutes.
struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat with a brand as a consumer, from the terminal (ParleyKit).",
        discussion: """
            Type a message and press Enter. /help lists the commands: voice notes and files to send, \
            voice notes to play or save, read marks, ratings and app events. What is not sent when \
            you leave is kept (sealed) and sent next time.
            """)

    @Option(help: "The Parley server's address, with http:// or https://.")
    var server: String = "http://127.0.0.1:8080"

    @Option(help: "The app to chat with (an app id, app_...; an in-app app chats as the brand's app would).")
    var app: String

    @Option(help: "The brand the app belongs to (checked when given).")
    var brand: String?

    @Option(help: "Your name, as the agents see it.")
    var name: String?

    @Option(help: "Sign in as a user of the brand's app: a JWT signed with one of the app's keys (else anonymous).")
    var jwt: String?

    @Option(help: "Where the sealed conversation data and its key are kept.")
    var dataDir: String?

    static let help = """
        Commands:
          /voice <file>     send an audio file as a voice note
          /file <file>      send an image or a file
          /play             play the latest voice note (ffplay)
          /save [file]      save the latest voice note's audio (M4A)
          /read             mark the conversation read
          /rate <1-5> [comment]  rate a closed conversation
          /event <name> [key=value ...]  report what an app would (ParleyKit's report)
          /help             this list
          /quit             leave (what is not sent yet is kept and sent next time)
        Anything else is sent as a message.
        """

    func validate() throws {
        guard Self.serverURL(server) != nil else {
            throw ValidationError("--server is an address with http:// or https://, like https://chat.example.com")
        }
    }

    /// The server's address, only with an http(s) scheme and a host.
    static func serverURL(_ text: String) -> URL? {
        guard let url = URL(string: text.hasSuffix("/") ? text : text + "/"), let scheme = url.scheme?.lowercased(),
            ["http", "https"].contains(scheme), url.host?.isEmpty == false
        else { return nil }
        return url
    }

    /// `~` and `~/...` are the home directory, as in a shell.
    static func expand(_ path: String) -> URL {
        let home = ProcessInfo.processInfo.environment["HOME"].map { URL(fileURLWithPath: $0) } ?? FileManager.default.homeDirectoryForCurrentUser
        if path == "~" { return home }
        if path.hasPrefix("~/") { return home.appendingPathComponent(String(path.dropFirst(2))) }
        return URL(fileURLWithPath: path)
    }

    func run() async throws {
        guard let appID = AppID(app) else { throw ValidationError("--app is an app id like app_...") }
        let brandID = try brand.map { text -> BrandID in
            guard let id = BrandID(text) else { throw ValidationError("--brand is a brand id like brd_...") }
            return id
        }
        guard let serverURL = Self.serverURL(server) else { throw ValidationError("--server is an http(s) address") }
        let root = dataDir.map(Self.expand) ?? Self.expand("~/.parley-chat/\(appID.rawValue)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let identity: ParleyKit.Parley.Identity = jwt.map { token in .authenticated { token } } ?? .anonymous(displayName: name)
        let parley = try await ParleyKit.Parley.configure(
            brandID: brandID, appID: appID, server: serverURL, identity: identity,
            storage: ParleyStorage(directory: root.appendingPathComponent("data"), key: .file(root.appendingPathComponent("key"))), transport: NIOTransport())
        let screen = Screen()

        // The conversation so far (when the server can be reached).
        let current = CurrentConversation()
        // The closed conversation waiting for a rating, if any.
        let closed = CurrentConversation()
        do {
            if let conversation = try await parley.conversations().first {
                current.id.withLock { $0 = conversation.id }
                let history = try await parley.latestMessages(in: conversation.id, limit: 20)
                for message in history { screen.show(message) }
                if conversation.state == .resolved {
                    screen.note("This conversation has been closed. Writing again starts a new one.")
                    if conversation.survey == .offered {
                        closed.id.withLock { $0 = conversation.id }
                        screen.note("How did we do? /rate 1-5, and a comment if you like (/rate 5 quick and kind)")
                    }
                }
            }
            screen.note("Connected to \(serverURL.absoluteString). Type a message, or /help.")
        } catch ParleyClientError.api(let status, let detail) where detail.code == .appNotFound || detail.code == .invalidIdentityToken
            || detail.code == .identityNotConfigured || status == 403
        {
            // The server answered: a wrong app id or identity will not get better by waiting.
            FileHandle.standardError.write(Data("parley chat: \(serverURL.absoluteString) refused: \(detail.message) (\(detail.code))\n".utf8))
            throw ExitCode(1)
        } catch {
            screen.note("The server cannot be reached: what you write is kept and sent when it can.")
        }
        for message in await parley.outgoing where message.state == .pending {
            screen.note("waiting to be sent: \(Self.describe(message))")
        }

        await parley.start()
        await parley.connect()
        let events = Task {
            var typing: Set<String> = []
            var online: Bool?  // unknown until the first attempt ends
            for await event in parley.events {
                switch event {
                case .message(let message):
                    current.id.withLock { $0 = message.conversationId }
                    if message.senderKind != .consumer { screen.show(message) }
                case .event(let event) where event.kind == .voiceProcessed:
                    if let message = event.message, message.voice?.state == .ready { screen.remember(message) }
                case .outgoing(let message):
                    // Each of the consumer's messages as it moves: sent, delivered, read, or refused.
                    let what = Self.describe(message)
                    switch message.state {
                    case .sent: screen.note("✓ sent: \(what)")
                    case .delivered: screen.note("✓✓ delivered to the agent: \(what)")
                    case .read: screen.note("✓✓ read by the agent: \(what)")
                    case .failed(let code, let reason): screen.note("✗ not sent (\(code)): \(reason)")
                    case .pending: break
                    }
                case .uploadProgress(let id, let fraction) where fraction == 0:
                    let kind = await parley.outgoing.first { $0.clientMessageId == id }?.kind == .attachment ? "file" : "voice note"
                    screen.note("uploading the \(kind)…")
                case .prompt(let prompt):
                    screen.note("💬 \(prompt.text)")
                case .queue(let place):
                    if let position = place.position {
                        let wait = place.expectedWaitSeconds.map { " · about \(max(1, $0 / 60)) min" } ?? ""
                        screen.note((position == 1 ? "you're next in line" : "you're number \(position) in line") + wait)
                    }
                case .closed(let conversation):
                    closed.id.withLock { $0 = conversation.survey == .offered ? conversation.id : nil }
                    screen.note("This conversation has been closed. Writing again starts a new one.")
                    if conversation.survey == .offered { screen.note("How did we do? /rate 1-5, and a comment if you like (/rate 5 quick and kind)") }
                case .event(let event) where event.kind == .assigned && event.assigneeId != nil:
                    let agent = try? await parley.agent(event.assigneeId!)
                    screen.note("\(agent?.name ?? "an agent") has your conversation")
                case .typing(_, let participant, let isTyping) where participant.kind == .agent:
                    if isTyping, typing.insert(participant.id).inserted { screen.note("the agent is typing…") }
                    if !isTyping { typing.remove(participant.id) }
                case .call(let call) where call.state == .ringing:
                    screen.note("📞 \(call.inviterName) is calling (\(call.media == .video ? "video" : "voice")): answer in the app or the web chat")
                case .connection(.connected):
                    if online != true { screen.note("online") }
                    online = true
                case .connection(.disconnected(let retrying)) where retrying:
                    // One line per outage, however many attempts it takes.
                    if online != false { screen.note("offline: messages are kept and sent when the connection is back") }
                    online = false
                default:
                    break
                }
            }
        }

        for await line in StandardInput.lines() {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            guard text.hasPrefix("/") else {
                try await parley.send(text)
                continue
            }
            let command = text.split(separator: " ", maxSplits: 1).first.map(String.init) ?? text
            let argument = text.dropFirst(command.count).trimmingCharacters(in: .whitespaces)
            switch command {
            case "/quit":
                events.cancel()
                await parley.disconnect()
                await parley.stop()
                _ = await parley.flush()
                return
            case "/help":
                screen.block(Self.help)
            case "/read":
                if let id = current.id.withLock({ $0 }) { await parley.markRead(id) }
            case "/rate":
                guard let id = closed.id.withLock({ $0 }) else {
                    screen.note("nothing to rate: a closed conversation asks for a rating")
                    continue
                }
                let words = argument.split(separator: " ", maxSplits: 1).map(String.init)
                guard let score = words.first.flatMap(Int.init) else {
                    screen.note("/rate takes a score from 1 to 5")
                    continue
                }
                do {
                    try await parley.rate(id, score: score, comment: words.count > 1 ? words[1] : nil)
                    closed.id.withLock { $0 = nil }
                    screen.note("thanks for your rating")
                } catch {
                    screen.note("cannot rate it: \(error)")
                }
            case "/event":
                // `/event cart_value value=129.90 currency=EUR`: what an app reports with `report`.
                var words = argument.split(separator: " ").map(String.init)
                guard !words.isEmpty else {
                    screen.note("/event takes a name, then key=value pairs")
                    continue
                }
                let name = words.removeFirst()
                var properties: [String: ActivityValue] = [:]
                for word in words {
                    let pair = word.split(separator: "=", maxSplits: 1).map(String.init)
                    guard pair.count == 2 else { continue }
                    properties[pair[0]] = Double(pair[1]).map(ActivityValue.number) ?? (["true", "false"].contains(pair[1]) ? .bool(pair[1] == "true") : .string(pair[1]))
                }
                do {
                    try await parley.report(.custom(name, properties))
                    screen.note("reported \(name)")
                } catch {
                    screen.note("cannot report it: \(error)")
                }
            case "/voice", "/file":
                guard !argument.isEmpty else {
                    screen.note("\(command) takes a file's path")
                    continue
                }
                let file = Self.expand(argument)
                do {
                    if command == "/voice" {
                        try await parley.sendVoice(file: file)
                        screen.note("sending voice note \(argument)…")
                    } else {
                        try await parley.sendAttachment(file: file)
                        screen.note("sending \(file.lastPathComponent)…")
                    }
                } catch {
                    screen.note("cannot read \(argument): \(error.localizedDescription)")
                }
            case "/save", "/play":
                guard let note = screen.latestVoiceNote else {
                    screen.note("no voice note yet")
                    continue
                }
                do {
                    let audio = try await parley.voiceAudio(for: note)
                    let file = argument.isEmpty
                        ? (command == "/save"
                            ? URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("voice-\(note.id.rawValue).m4a")
                            : FileManager.default.temporaryDirectory.appendingPathComponent("parley-play-\(note.id.rawValue).m4a"))
                        : Self.expand(argument)
                    try audio.write(to: file)
                    if command == "/save" {
                        screen.note("saved \(VoiceRules.clock(milliseconds: note.voice?.durationMs ?? 0)) to \(file.path)")
                    } else if let player = ProcessRunner.locate("ffplay") {
                        screen.note("▶ playing \(VoiceRules.clock(milliseconds: note.voice?.durationMs ?? 0))…")
                        let outcome = try await ProcessRunner(executable: player).run(
                            ["-nodisp", "-autoexit", "-loglevel", "error", file.path], timeout: .seconds(180))
                        try? FileManager.default.removeItem(at: file)
                        if outcome.status != 0 { screen.note("ffplay could not play it: \(outcome.stderrTail)") }
                    } else {
                        screen.note("nothing here plays audio (ffplay): /save it and open the file")
                    }
                } catch {
                    screen.note("cannot fetch the voice note: \(error)")
                }
            default:
                screen.note("unknown command \(command): /help lists them (not sent)")
            }
        }
        events.cancel()
        await parley.disconnect()
        await parley.stop()
        _ = await parley.flush()
    }

    static func describe(_ message: ParleyKit.Parley.OutgoingMessage) -> String {
        switch message.kind {
        case .voice: "voice note \(message.text)"
        case .attachment: "file \(message.text)"
        case .text: message.text
        }
    }
}

/// The conversation on screen (the latest one a message came in).
final class CurrentConversation: Sendable {
    let id = Mutex<ConversationID?>(nil)
}

/// Lines for the terminal, one writer at a time.
final class Screen: Sendable {
    private let time: DateFormatter = {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm"
        return formatter
    }()
    private let lock = NSLock()
    private let voiceNote = Mutex<MessageDTO?>(nil)

    /// The latest voice note shown (for /play and /save).
    var latestVoiceNote: MessageDTO? { voiceNote.withLock { $0 } }

    func remember(_ message: MessageDTO) {
        guard message.kind == .voice else { return }
        voiceNote.withLock { current in
            if current == nil || current!.seq <= message.seq { current = message }
        }
    }

    func show(_ message: MessageDTO) {
        remember(message)
        let who = switch message.senderKind {
        case .agent: message.senderName ?? "Agent"
        case .system: "Automatic"
        case .consumer: "You"
        }
        let body: String
        switch message.kind {
        case .text: body = message.text
        // Rounded as the server rounds it in histories ("[audio message 0:42]").
        case .voice: body = "🎤 voice note \(VoiceRules.clock(milliseconds: message.voice?.durationMs ?? 0)) (/play, /save)"
        case .attachment: body = "📎 \(message.attachment?.fileName ?? "file")"
        }
        write("[\(lock.withLock { time.string(from: message.createdAt) })] \(who): \(body)")
    }

    func note(_ text: String) { write("  · \(text)") }

    func block(_ text: String) { write(text) }

    private func write(_ line: String) {
        lock.withLock { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    }
}

/// Standard input's lines, read on a thread of their own (reading blocks).
enum StandardInput {
    static func lines() -> AsyncStream<String> {
        AsyncStream { continuation in
            let thread = Thread {
                while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                continuation.finish()
            }
            thread.start()
        }
    }
}
