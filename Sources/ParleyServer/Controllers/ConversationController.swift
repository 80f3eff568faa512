import Foundation
import Hummingbird
import ParleyAPI
import ParleyDomain
import ParleyStore

/// Conversations and messages over HTTP, for agents (`/v1/conversations`) and consumers
/// (`/v1/consumer/...`). The same `ConversationService` serves the real-time frames.
struct ConversationController {
    let conversations: ConversationService
    let identity: IdentityService
    let configuration: ParleyConfiguration

    func addRoutes(to routes: RouteGroups) {
        // Agents
        routes.agents.get("/v1/conversations", use: list)
        routes.agents.get("/v1/conversations/{conversationId}", use: show)
        routes.agents.get("/v1/conversations/{conversationId}/messages", use: messages)
        routes.agents.post("/v1/conversations/{conversationId}/messages", use: agentSend)
        routes.agents.get("/v1/conversations/{conversationId}/events", use: events)
        routes.agents.post("/v1/conversations/{conversationId}/receipts", use: receipt)
        routes.agents.post("/v1/conversations/{conversationId}/assign", use: assign)
        routes.agents.post("/v1/conversations/{conversationId}/resolve", use: resolve)
        routes.agents.post("/v1/conversations/{conversationId}/reopen", use: reopen)
        routes.agents.post("/v1/conversations/{conversationId}/notes", use: addNote)
        routes.agents.get("/v1/consumers/{consumerId}", use: consumer)
        // Consumers
        routes.consumers.get("/v1/consumer/conversations", use: consumerList)
        routes.consumers.post("/v1/consumer/messages", use: consumerSend)
        routes.consumers.get("/v1/consumer/conversations/{conversationId}", use: show)
        routes.consumers.get("/v1/consumer/conversations/{conversationId}/messages", use: messages)
        routes.consumers.get("/v1/consumer/conversations/{conversationId}/events", use: events)
        routes.consumers.post("/v1/consumer/conversations/{conversationId}/receipts", use: receipt)
    }

    private func conversationId(_ context: ParleyRequestContext) throws -> ConversationID {
        try context.id("conversationId", as: ConversationID.self, what: "Conversation")
    }


    // MARK: Agents

    @Sendable func list(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<Page<ConversationDTO>> {
        let agent = try context.requireAgent()
        var filter = ConversationFilter()
        filter.limit = try request.queryInt("limit", default: 50, range: 1...ConversationService.maxPage)
        if let states = request.queryString("state") {
            filter.states = try states.split(separator: ",").map { raw throws(ParleyError) in
                guard let state = ConversationState(rawValue: String(raw)) else {
                    throw .invalidField("state", "'\(raw)' is not a state; use open, resolved or reopened (comma-separated).")
                }
                return state
            }
        }
        switch request.queryString("assignee") {
        case nil, "any": filter.assignee = .any
        case "me": filter.assignee = .agent(agent.agentId)
        case "unassigned": filter.assignee = .unassigned
        case let id?:
            guard AgentID.isWellFormed(id) else {
                throw ParleyError.invalidField("assignee", "'assignee' is me, unassigned, any or an agent id.")
            }
            filter.assignee = .agent(AgentID(rawValue: id))
        }
        if let channel = request.queryString("channel") {
            guard let value = Channel(rawValue: channel) else {
                throw ParleyError.invalidField("channel", "'\(channel)' is not a channel; use one of \(Channel.allCases.map(\.rawValue).joined(separator: ", ")).")
            }
            filter.channel = value
        }
        if let consumer = request.queryString("consumer") {
            // Another brand's consumer (or a malformed id) simply has no conversations here.
            guard ConsumerID.isWellFormed(consumer) else {
                throw ParleyError.invalidField("consumer", "'consumer' is a consumer id (csm_...).")
            }
            filter.consumerId = ConsumerID(rawValue: consumer)
        }
        if let cursor = request.queryString("cursor") {
            filter.before = try Self.parseCursor(cursor)
        }
        let items = try await conversations.conversations(agent, filter: filter)
        let next = items.count == filter.limit ? items.last.map { Self.cursor(for: $0) } : nil
        return JSONResponse(.ok, Page(items: items, nextCursor: next))
    }

    static func cursor(for conversation: ConversationDTO) -> String {
        "\(StoredTime.millis(conversation.updatedAt)).\(conversation.id)"
    }

    static func parseCursor(_ cursor: String) throws(ParleyError) -> (updatedAt: Int64, id: ConversationID) {
        let parts = cursor.split(separator: ".", maxSplits: 1)
        guard parts.count == 2, let millis = Int64(parts[0]), ConversationID.isWellFormed(String(parts[1])) else {
            throw .invalidField("cursor", "'cursor' is not a cursor from a previous page.")
        }
        return (millis, ConversationID(rawValue: String(parts[1])))
    }

    @Sendable func show(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConversationDTO> {
        JSONResponse(.ok, try await conversations.conversation(context.requirePrincipal(), id: conversationId(context)))
    }

    @Sendable func messages(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<MessageDTO>> {
        let principal = try context.requirePrincipal()
        let limit = try request.queryInt("limit", default: 100, range: 1...ConversationService.maxPage)
        // Backwards: the messages just before `before` (the latest ones with a number past the end).
        if request.queryString("before") != nil {
            guard request.queryString("after") == nil else {
                throw ParleyError.invalidField("before", "Give 'after' (reading forwards) or 'before' (backwards), not both.")
            }
            let before = try request.queryInt("before", default: 0, range: 1...Int(Int32.max))
            let items = try await conversations.messages(principal, conversationId: conversationId(context), beforeSeq: Int64(before), limit: limit)
            return JSONResponse(.ok, ListResponse(items: items))
        }
        let after = try request.queryInt("after", default: 0, range: 0...Int(Int32.max))
        let items = try await conversations.messages(principal, conversationId: conversationId(context), afterSeq: Int64(after), limit: limit)
        return JSONResponse(.ok, ListResponse(items: items))
    }

    @Sendable func events(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ListResponse<ConversationEventDTO>> {
        let principal = try context.requirePrincipal()
        let after = try request.queryInt("after", default: 0, range: 0...Int(Int32.max))
        let limit = try request.queryInt("limit", default: 100, range: 1...ConversationService.maxPage)
        let items = try await conversations.events(principal, conversationId: conversationId(context), afterSeq: Int64(after), limit: limit)
        return JSONResponse(.ok, ListResponse(items: items))
    }

    @Sendable func agentSend(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<SendMessageResponse> {
        let agent = try context.requireAgent()
        let id = try conversationId(context)
        var body = try await request.decodeJSON(SendMessageRequest.self, limit: configuration.maxJSONBodyBytes)
        if let given = body.conversationId, given != id {
            throw ParleyError.invalidField("conversationId", "'conversationId' in the body differs from the one in the path.")
        }
        body.conversationId = id
        let response = try await conversations.send(.agent(agent), body)
        return JSONResponse(response.created ? .created : .ok, response)
    }

    @Sendable func receipt(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ReceiptResponse> {
        let principal = try context.requirePrincipal()
        let body = try await request.decodeJSON(ReceiptRequest.self, limit: configuration.maxJSONBodyBytes)
        let event = try await conversations.receipt(principal, conversationId: conversationId(context), body)
        return JSONResponse(.ok, ReceiptResponse(event: event))
    }

    @Sendable func assign(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConversationDTO> {
        let agent = try context.requireAgent()
        let body = try await request.decodeJSON(AssignRequest.self, limit: configuration.maxJSONBodyBytes)
        return JSONResponse(.ok, try await conversations.assign(agent, conversationId: conversationId(context), to: body.agentId))
    }

    @Sendable func resolve(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConversationDTO> {
        JSONResponse(.ok, try await conversations.resolve(context.requireAgent(), conversationId: conversationId(context)))
    }

    @Sendable func reopen(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConversationDTO> {
        JSONResponse(.ok, try await conversations.reopen(context.requireAgent(), conversationId: conversationId(context)))
    }

    @Sendable func consumer(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConsumerDTO> {
        let agent = try context.requireAgent()
        let id = try context.id("consumerId", as: ConsumerID.self, what: "Consumer")
        return JSONResponse(.ok, try await identity.consumer(agent, id: id))
    }

    @Sendable func addNote(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<ConversationEventDTO> {
        let agent = try context.requireAgent()
        let id = try conversationId(context)
        let body = try await request.decodeJSON(AddNoteRequest.self, limit: configuration.maxJSONBodyBytes)
        let (note, created) = try await conversations.addNote(agent, conversationId: id, body)
        return JSONResponse(created ? .created : .ok, note)
    }

    // MARK: Consumers

    @Sendable func consumerList(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<Page<ConversationDTO>> {
        let consumer = try context.requireConsumer()
        let limit = try request.queryInt("limit", default: 50, range: 1...ConversationService.maxPage)
        let before = try request.queryString("cursor").map { cursor throws(ParleyError) in try Self.parseCursor(cursor) }
        let items = try await conversations.conversations(consumer, limit: limit, before: before)
        let next = items.count == limit ? items.last.map { Self.cursor(for: $0) } : nil
        return JSONResponse(.ok, Page(items: items, nextCursor: next))
    }

    @Sendable func consumerSend(_ request: Request, context: ParleyRequestContext) async throws -> JSONResponse<SendMessageResponse> {
        let consumer = try context.requireConsumer()
        let body = try await request.decodeJSON(SendMessageRequest.self, limit: configuration.maxJSONBodyBytes)
        let response = try await conversations.send(
            .consumer(consumer), body, from: context.clientIP(request, trustProxy: configuration.trustProxy))
        return JSONResponse(response.created ? .created : .ok, response)
    }
}
