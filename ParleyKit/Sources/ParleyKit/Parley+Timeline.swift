import Foundation
import ParleyAPI

/// One line of a conversation as the app shows it: a message from the server, or one the consumer
/// wrote on this device, from the moment it was written.
public struct ConversationEntry: Sendable, Hashable, Identifiable {
    /// Stable for a list's identity: the consumer's own messages keep their client message id from
    /// the moment they are written to when the server has them; others have the message's id.
    public let id: String
    /// The server's copy, once the device has it.
    public let message: MessageDTO?
    /// The consumer's own message written on this device, and where it is (pending, sent,
    /// delivered, read, failed with the server's reason).
    public let outgoing: Parley.OutgoingMessage?

    /// Written by the consumer (on this device or another).
    public var isMine: Bool { outgoing != nil || message?.senderKind == .consumer }
    /// The text, or a voice note's or file's transcript line.
    public var text: String { message?.text ?? outgoing?.text ?? "" }
    /// Where the server put it in the conversation; nil while it waits on the device.
    public var seq: Int64? { message?.seq ?? outgoing?.state.stored?.seq }
    public var kind: MessageKind { message?.kind ?? outgoing?.kind ?? .text }
}

extension Parley {
    /// The conversation messages written without one go to: the consumer's latest, once known (a
    /// message sent, or `conversations()`).
    public var currentConversationId: ConversationID? {
        session?.latestConversation
            ?? outbox.last(where: { $0.conversationId == nil && $0.state.stored != nil })?.state.stored?.conversationId
    }

    /// A conversation as the app shows it: the messages this device has (`messages(in:)`, real
    /// time, the sealed cache) in the server's order, the consumer's own among them once the server
    /// has them (each once: the server's copy, with its state from the outbox), then what the
    /// consumer wrote that waits on the device or failed, in the order written.
    ///
    /// `nil` is the conversation a message written without one goes to (`currentConversationId`);
    /// before there is one it holds only what waits to open it.
    public func timeline(in conversationId: ConversationID?) -> [ConversationEntry] {
        let current = currentConversationId
        let target = conversationId ?? current
        let mine = Dictionary(outbox.map { ($0.clientMessageId, $0) }, uniquingKeysWith: { first, _ in first })
        var stored: [(seq: Int64, entry: ConversationEntry)] = []
        var shown = Set<String>()
        if let target {
            for message in cachedMessages(in: target) {
                if message.senderKind == .consumer {
                    guard shown.insert(message.clientMessageId).inserted else { continue }
                    stored.append((message.seq, ConversationEntry(id: message.clientMessageId, message: message, outgoing: mine[message.clientMessageId])))
                } else {
                    stored.append((message.seq, ConversationEntry(id: message.id.rawValue, message: message, outgoing: nil)))
                }
            }
            // Sent from this device but not in the cache (caching off, or evicted): from the outbox.
            for message in outbox where message.state.stored?.conversationId == target && !shown.contains(message.clientMessageId) {
                stored.append((message.state.stored?.seq ?? 0, ConversationEntry(id: message.clientMessageId, message: nil, outgoing: message)))
            }
        }
        let waiting = outbox.filter { message in
            guard message.state.stored == nil else { return false }
            if let goesTo = message.conversationId { return goesTo == target }
            if message.newConversation == true { return conversationId == nil }
            return conversationId == nil || conversationId == current
        }
        return stored.sorted { $0.seq < $1.seq }.map(\.entry)
            + waiting.map { ConversationEntry(id: $0.clientMessageId, message: nil, outgoing: $0) }
    }
}
