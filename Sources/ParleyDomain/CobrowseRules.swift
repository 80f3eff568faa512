import Foundation
import ParleyAPI

/// Co-browse: who may offer it, where it may run, the brand's mask selectors, and the state machine
/// of a session (offered → active → ended; offered → ended).
public enum CobrowseRules {
    /// How long an offer waits for the customer's answer.
    public static let offerSeconds = 60
    /// How long an active session waits for a page of the customer's to come back (moving to
    /// another page of the site, a reconnect) before it ends.
    public static let returnSeconds = 30
    public static let maxMaskSelectors = 20
    public static let maxMaskSelectorLength = 200
    /// A pointer or highlight from the agent: a few coordinates or an element path.
    public static let maxPointBytes = 2_048

    /// The agent's click or typing: an element's id and at most a field's worth of text.
    public static let maxInputBytes = 16 * 1024

    /// Asking to click and type on the customer's page needs its own permission.
    public static func requireControlPermission(_ agent: AgentPrincipal) throws(ParleyError) {
        guard agent.permissions.contains(.cobrowseControl) else {
            throw ParleyError(
                .forbidden, code: .cobrowsePermissionMissing,
                message: "Your profile does not allow taking control of a customer's page (cobrowse_control).")
        }
    }

    public static func requirePermission(_ agent: AgentPrincipal) throws(ParleyError) {
        guard agent.permissions.contains(.cobrowse) else {
            throw ParleyError(.forbidden, code: .cobrowsePermissionMissing, message: "Your profile does not allow co-browse (cobrowse).")
        }
    }

    /// Co-browse may be offered in web conversations (where the widget runs on the brand's page).
    public static func authorizeOffer(settings: BrandSettingsDTO, channel: Channel, conversationState: ConversationState) throws(ParleyError) {
        guard settings.cobrowseEnabled else { throw disabled }
        guard channel == .web else {
            throw ParleyError(
                .unprocessable, code: .cobrowseNeedsWeb,
                message: "Co-browse needs a web conversation: it shows the page of the brand's site where the customer chats.")
        }
        guard conversationState != .resolved else {
            throw ParleyError(.conflict, code: .conversationResolved, message: "This conversation is resolved. Reopen it before offering co-browse.")
        }
    }

    /// The page's site, as the widget reports it, must be one the brand lists (when it lists any).
    public static func authorizeOrigin(_ origin: String?, settings: BrandSettingsDTO) throws(ParleyError) {
        guard settings.cobrowseEnabled else { throw disabled }
        if settings.cobrowseOrigins.isEmpty { return }
        guard let origin, settings.cobrowseOrigins.contains(origin.lowercased()) else {
            throw ParleyError(.forbidden, code: .cobrowseDisabled, message: "Co-browse is not allowed on this site.")
        }
    }

    static let disabled = ParleyError(.forbidden, code: .cobrowseDisabled, message: "Co-browse is off for this brand.")

    public static func validate(_ change: UpdateBrandSettingsRequest) throws(ParleyError) -> (origins: [String]?, selectors: [String]?) {
        let origins = try change.cobrowseOrigins.map { list throws(ParleyError) in try WorkspaceRules.origins(list, field: "cobrowseOrigins") }
        guard let selectors = change.cobrowseMaskSelectors else { return (origins, nil) }
        if selectors.count > maxMaskSelectors {
            throw .invalidField("cobrowseMaskSelectors", "'cobrowseMaskSelectors' has at most \(maxMaskSelectors) selectors.")
        }
        var kept: [String] = []
        for raw in selectors {
            let selector = raw.trimmingCharacters(in: .whitespaces)
            // A selector, not a rule: the page applies it with querySelectorAll, nothing else.
            let forbidden = selector.contains { "{};<>\n\r\\".contains($0) }
            guard !selector.isEmpty, selector.count <= maxMaskSelectorLength, !forbidden else {
                throw .invalidField(
                    "cobrowseMaskSelectors", "'\(raw.prefix(80))' is not a CSS selector (such as #account-number or .secret, at most \(maxMaskSelectorLength) characters).")
            }
            if !kept.contains(selector) { kept.append(selector) }
        }
        return (origins, kept)
    }
}

/// A co-browse session's state machine. Pure: the service stores what it returns.
public struct CobrowseMachine: Sendable, Equatable {
    public private(set) var session: CobrowseSessionDTO

    public init(_ session: CobrowseSessionDTO) {
        self.session = session
    }

    public enum Event: Sendable, Equatable {
        case accept(origin: String?)
        case decline
        /// `by`: who stopped it.
        case stop(ParticipantKind)
        case expire
        case agentLeft
        case consumerLeft
        case consumerReturned
        case pageTooLarge
        case notAllowed
        case shutdown
        /// The agent asks to click and type.
        case requestControl
        /// The customer's answer to the request.
        case answerControl(Bool)
        /// Either side gives control back (the agent releases, the customer takes it back).
        case releaseControl
    }

    /// Applies `event` at `now`; throws when the session cannot take it (the error a client gets).
    public mutating func apply(_ event: Event, now: Date) throws(ParleyError) {
        switch (session.state, event) {
        case (.ended, _):
            throw ParleyError(.conflict, code: .cobrowseNotActive, message: "This co-browse session is over.")
        case (.offered, .requestControl), (.offered, .answerControl), (.offered, .releaseControl):
            throw ParleyError(.conflict, code: .cobrowseNotActive, message: "The customer has not accepted co-browse yet.")
        case (.active, .requestControl):
            guard session.control == .none else { return }  // asked already, or granted
            session.control = .requested
        case (.active, .answerControl(let yes)):
            guard session.control == .requested else {
                throw ParleyError(.conflict, code: .cobrowseControlNotGranted, message: "There is no request for control to answer.")
            }
            session.control = yes ? .granted : .none
            if yes, session.controlGrantedAt == nil { session.controlGrantedAt = now }
        case (.active, .releaseControl):
            guard session.control != .none else { return }
            session.control = .none
        case (.offered, .accept(let origin)):
            session.state = .active
            session.startedAt = now
            session.origin = origin
            session.consumerConnected = true
        case (.active, .accept(let origin)):
            // The customer's next page (or another tab) takes over the session.
            session.origin = origin
            session.consumerConnected = true
        case (.offered, .decline):
            end(.declined, now)
        case (.active, .decline):
            end(.stoppedByConsumer, now)
        case (_, .stop(let by)):
            end(by == .consumer ? .stoppedByConsumer : .stoppedByAgent, now)
        case (.offered, .expire):
            end(.unanswered, now)
        case (.active, .expire):
            throw ParleyError(.conflict, code: .cobrowseNotActive, message: "This co-browse session was answered.")
        case (_, .agentLeft):
            end(.agentLeft, now)
        case (.active, .consumerLeft):
            end(.consumerLeft, now)
        case (.offered, .consumerLeft):
            throw ParleyError(.conflict, code: .cobrowseNotActive, message: "This co-browse offer is not answered yet.")
        case (.active, .consumerReturned), (.offered, .consumerReturned):
            session.consumerConnected = session.state == .active
        case (_, .pageTooLarge):
            end(.pageTooLarge, now)
        case (_, .notAllowed):
            end(.notAllowed, now)
        case (_, .shutdown):
            end(.serverShutdown, now)
        }
        session.version += 1
    }

    /// The customer's page went away (the connection sharing it closed); the session waits for it.
    public mutating func pageLeft() {
        guard session.state == .active, session.consumerConnected else { return }
        session.consumerConnected = false
        session.version += 1
    }

    private mutating func end(_ reason: CobrowseEndReason, _ now: Date) {
        session.state = .ended
        session.endedAt = now
        session.endReason = reason
        session.consumerConnected = false
        session.control = .none
    }
}
