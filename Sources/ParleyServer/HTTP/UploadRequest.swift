import Hummingbird
import ParleyAPI
import ParleyDomain

/// What every raw-body upload route (voice notes, attachments) reads before the body: who sends,
/// to which conversation, under which client message id, the declared length and the address.
/// A consumer names the conversation in the query (or leaves it to be found); an agent in the path.
struct UploadRequest {
    let principal: Principal
    let conversationId: ConversationID?
    let clientMessageId: String
    let contentLength: Int?
    let clientAddress: String

    init(_ request: Request, context: ParleyRequestContext, trustProxy: Bool) throws {
        switch try context.requirePrincipal() {
        case .consumer(let consumer):
            principal = .consumer(consumer)
            let raw = request.queryString("conversationId")
            if let raw, !ConversationID.isWellFormed(raw) { throw ParleyError.notFound("Conversation") }
            conversationId = raw.map(ConversationID.init(rawValue:))
        case .agent(let agent):
            principal = .agent(agent)
            conversationId = try context.id("conversationId", as: ConversationID.self, what: "Conversation")
        }
        guard let clientMessageId = request.queryString("clientMessageId") else { throw ParleyError.missingField("clientMessageId") }
        self.clientMessageId = clientMessageId
        contentLength = request.headers[.contentLength].flatMap { Int($0) }
        clientAddress = context.clientIP(request, trustProxy: trustProxy)
    }
}
