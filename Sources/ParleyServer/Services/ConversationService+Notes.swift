import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore

extension ConversationService {
    /// Adds an agent's private note to a conversation: a sequenced entry of its log that agents see
    /// (live, in history and in a resume) and the consumer never does. A retry with the same
    /// `clientNoteId` returns the stored note (`created == false`); the same id with other text is
    /// a conflict.
    public func addNote(
        _ agent: AgentPrincipal, conversationId: ConversationID, _ request: AddNoteRequest
    ) async throws -> (note: ConversationEventDTO, created: Bool) {
        try MessageRules.validateClientMessageId(request.clientNoteId, field: "clientNoteId")
        let text = try MessageRules.validateNote(request.text)
        let author = ParticipantRef(kind: .agent, id: agent.agentId.rawValue)
        let result = try await withUniqueRetry {
            try await conversationLog.write { repo, appends -> (ConversationEventDTO, Bool) in
                let conversation = try await Self.authorizedConversation(.agent(agent), id: conversationId, in: repo, lock: true)
                if let stored = try await repo.note(brandId: agent.brandId, actorId: author.id, clientNoteId: request.clientNoteId) {
                    guard stored.conversationId == conversation.id, stored.text == text else {
                        throw ParleyError(
                            .conflict, code: .clientNoteIdReused, message: "This client note id was already used for another note.",
                            field: "clientNoteId")
                    }
                    return (stored, false)
                }
                var log = ConversationAppend(conversation, now: clock.now())
                let note = log.logNote(text, clientNoteId: request.clientNoteId, by: author)
                try await appends.write(&log, in: repo)
                return (note, true)
            }.value
        }
        return (result.0, result.1)
    }
}
