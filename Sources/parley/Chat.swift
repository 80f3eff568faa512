import ArgumentParser
import Foundation
import ParleyAPI
import ParleyKit
import ParleyKitNIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `parley chat`: a consumer in the terminal, on ParleyKit: the conversation, text and voice files,
/// receipts and typing, and the SDK's sealed outbox (it keeps working offline and after a restart).
/// How a brand's developer tries the SDK in two minutes.
struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat with a brand as a consumer, from the terminal (ParleyKit).",
        discussion: """
            Type a message and press Enter. Commands: /voice <file> sends an audio file as a voice \
            note; /read marks the conversation read; /rate <1-5> [comment] rates a closed conversation; /event <name> [key=value ...] reports what an app would \
            (ParleyKit's report); /quit leaves (what is not sent yet is kept and \
            sent next time).
            """)

    @Option(help: "The Parley server's address.")
    var server: String = "http://127.0.0.1:8080"

    @Option(help: "The app to chat with (an app id, app_...).")
    var app: String

    @Option(help: "The brand the app belongs to (checked when given).")
    var brand: String?

    @Option(help: "Your name, as the agents see it.")
    var name: String?

    @Option(help: "Where the sealed conversation data and its key are kept.")
    var dataDir: String?

    func run() async throws {
        guard let appID = AppID(app) else { throw ValidationError("--app is an app id like app_...") }
        let brandID = try brand.map { text -> BrandID in
            guard let id = BrandID(text) else { throw ValidationError("--brand is a brand id like brd_...") }
            return id
        }
        guard let serverURL = URL(string: server.hasSuffix("/") ? server : server + "/"), serverURL.scheme != nil else {
            throw ValidationError("--server is an http(s) address")
        }
        let home = FileManager.default.homeDirectoryForCurrentUser
        let root = dataDir.map { URL(fileURLWithPath: $0) } ?? home.appendingPathComponent(".parley-chat").appendingPathComponent(appID.rawValue)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let parley = try await ParleyKit.Parley.configure(
            brandID: brandID, appID: appID, server: serverURL, identity: .anonymous(displayName: name),
            storage: ParleyStorage(directory: root.appendingPathComponent("data"), key: .file(root.appendingPathComponent("key"))), transport: NIOTransport())
        let screen = Screen()

        // The conversation so far (when the server can be reached).
        let current = CurrentConversation()
        // The closed conversation waiting for a rating, if any.
        let closed = CurrentConversation()
        do {
            if let conversation = try await parley.conversations().first {
                current.id.withLock { $0 = conversation.id }
                let history = try await parley.messages(in: conversation.id)
                for message in history.suffix(20) { screen.show(message) }
                if conversation.state == .resolved {
                    screen.note("This conversation has been closed. Writing again starts a new one.")
                    if conversation.survey == .offered {
                        closed.id.withLock { $0 = conversation.id }
                        screen.note("How did we do? /rate 1-5, and a comment if you like (/rate 5 quick and kind)")
                    }
                }
            }
            screen.note("Connected to \(serverURL.absoluteString). Type a message; /voice <file>, /event <name> [key=value], /read, /rate <1-5> [comment], /quit.")
        } catch {
            screen.note("The server cannot be reached: what you write is kept and sent when it can.")
        }
        for message in await parley.outgoing where message.state == .pending {
            screen.note("waiting to be sent: \(message.kind == .voice ? "voice note " : "")\(message.text)")
        }

        await parley.start()
        await parley.connect()
        let events = Task {
            var typing: Set<String> = []
            for await event in parley.events {
                switch event {
                case .message(let message):
                    current.id.withLock { $0 = message.conversationId }
                    if message.senderKind != .consumer { screen.show(message) }
                case .outgoing(let message):
                    // Each of the consumer's messages as it moves: sent, delivered, read, or refused.
                    let what = (message.kind == .voice ? "voice note " : "") + message.text
                    switch message.state {
                    case .sent: screen.note("✓ sent: \(what)")
                    case .delivered: screen.note("✓✓ delivered to the agent")
                    case .read: screen.note("✓✓ read by the agent")
                    case .failed(let code, let reason): screen.note("✗ not sent (\(code)): \(reason)")
                    case .pending: break
                    }
                case .uploadProgress(_, let fraction) where fraction == 0:
                    screen.note("uploading the voice note…")
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
                    screen.note("an agent has your conversation")
                case .typing(_, let participant, let isTyping) where participant.kind == .agent:
                    if isTyping, typing.insert(participant.id).inserted { screen.note("the agent is typing…") }
                    if !isTyping { typing.remove(participant.id) }
                case .connection(.connected):
                    screen.note("online")
                case .connection(.disconnected(let retrying)) where retrying:
                    screen.note("offline: messages are kept and sent when the connection is back")
                default:
                    break
                }
            }
        }

        for await line in StandardInput.lines() {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            if text == "/quit" { break }
            if text == "/read" {
                if let id = current.id.withLock({ $0 }) { await parley.markRead(id) }
                continue
            }
            if text.hasPrefix("/rate ") {
                guard let id = closed.id.withLock({ $0 }) else {
                    screen.note("nothing to rate: a closed conversation asks for a rating")
                    continue
                }
                let words = text.dropFirst(6).split(separator: " ", maxSplits: 1).map(String.init)
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
                continue
            }
            if text.hasPrefix("/event ") {
                // `/event cart_value value=129.90 currency=EUR`: what an app reports with `report`.
                var words = text.dropFirst(7).split(separator: " ").map(String.init)
                let name = words.isEmpty ? "" : words.removeFirst()
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
                continue
            }
            if text.hasPrefix("/voice ") {
                let path = String(text.dropFirst(7)).trimmingCharacters(in: .whitespaces)
                do {
                    try await parley.sendVoice(file: URL(fileURLWithPath: path))
                    screen.note("sending voice note \(path)…")
                } catch {
                    screen.note("cannot read \(path): \(error.localizedDescription)")
                }
                continue
            }
            try await parley.send(text)
        }
        events.cancel()
        await parley.disconnect()
        await parley.stop()
        _ = await parley.flush()
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

    func show(_ message: MessageDTO) {
        let who = switch message.senderKind {
        case .agent: "Agent"
        case .system: "Automatic"
        case .consumer: "You"
        }
        let body: String
        switch message.kind {
        case .text: body = message.text
        case .voice:
            let seconds = (message.voice?.durationMs ?? 0) / 1000
            body = "🎤 voice note \(seconds / 60):\(String(format: "%02d", seconds % 60))"
        case .attachment: body = "📎 \(message.attachment?.fileName ?? "file")"
        }
        write("[\(lock.withLock { time.string(from: message.createdAt) })] \(who): \(body)")
    }

    func note(_ text: String) { write("  · \(text)") }

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
