import ParleyAPI

/// The conversation state machine.
///
/// ```
///  (first consumer message) -> open --resolve / auto-close--> resolved --agent reopens--> reopened
///                                                                 ^                          |
///                                                                 +---------resolve----------+
/// ```
///
/// A customer never writes into a resolved conversation: their next message starts a new one that
/// links to it (`previousConversationId`), so a closed conversation's record and rating stay as they were.
public enum ConversationRules {
    public enum Action: Sendable, Hashable {
        case consumerWrites
        case agentWrites
        case resolve
        case reopen
    }

    /// The state after `action`, or an error if the action is not allowed in `state`.
    /// Returns the same state when the action does not change it.
    public static func transition(from state: ConversationState, on action: Action) throws(ParleyError) -> ConversationState {
        switch (state, action) {
        case (.open, .consumerWrites), (.reopened, .consumerWrites):
            return state
        case (.resolved, .consumerWrites):
            throw ParleyError(
                .conflict, code: .conversationClosed,
                message: "This conversation has been closed. A new message starts a new conversation.")
        case (.open, .agentWrites), (.reopened, .agentWrites):
            return state
        case (.resolved, .agentWrites):
            throw ParleyError(
                .conflict, code: .conversationResolved,
                message: "This conversation is resolved. Reopen it before writing to the consumer.")
        case (.open, .resolve), (.reopened, .resolve):
            return .resolved
        case (.resolved, .resolve):
            throw ParleyError(.conflict, code: .alreadyResolved, message: "This conversation is already resolved.")
        case (.resolved, .reopen):
            return .reopened
        case (.open, .reopen), (.reopened, .reopen):
            throw ParleyError(.conflict, code: .notResolved, message: "Only a resolved conversation can be reopened.")
        }
    }

    /// The brand setting `openConversationsPerConsumer` may be from 1 to 20.
    public static let openConversationsRange = 1...20

    /// Whether a consumer with `openCount` conversations open (not resolved) in one app may open another.
    public static func validateNewConversation(openCount: Int, limit: Int) throws(ParleyError) {
        guard openCount < limit else {
            let allowed = limit == 1 ? "one open conversation" : "\(limit) open conversations"
            throw ParleyError(
                .conflict, code: .conversationLimit,
                message: "This brand allows \(allowed) per customer at a time; continue one, or wait until it is resolved.",
                field: "newConversation")
        }
    }

    /// The side whose receipts move a message's delivery state: the recipient, never the sender.
    public static func recipient(of sender: ParticipantKind) -> ParticipantKind {
        sender == .consumer ? .agent : .consumer
    }

    /// Validates a receipt: only `delivered` and `read` can be reported, for a sequence that exists.
    public static func validateReceipt(_ receipt: ReceiptRequest, lastSeq: Int64) throws(ParleyError) {
        if receipt.state == .sent {
            throw .invalidField("state", "A receipt reports 'delivered' or 'read'.")
        }
        if receipt.upToSeq < 1 {
            throw .invalidField("upToSeq", "'upToSeq' must be at least 1.")
        }
        if receipt.upToSeq > lastSeq {
            throw ParleyError(
                .unprocessable, code: .sequenceOutOfRange,
                message: "'upToSeq' \(receipt.upToSeq) is past the last sequence \(lastSeq) of this conversation.",
                field: "upToSeq")
        }
    }
}
