import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore

/// Sign-in, sessions and the brand's administration of agents and apps.
public struct IdentityService: Sendable {
    let store: Store
    let hasher: PasswordHasher
    let configuration: ParleyConfiguration
    let metrics: ParleyMetrics
    let clock: any WallClock

    init(store: Store, configuration: ParleyConfiguration, metrics: ParleyMetrics, clock: any WallClock) {
        self.clock = clock
        self.store = store
        self.hasher = PasswordHasher(cost: configuration.bcryptCost)
        self.configuration = configuration
        self.metrics = metrics
    }

    // MARK: Agents

    public struct IssuedSession: Sendable {
        public var token: String
        public var expiresAt: Date
    }

    public func login(email rawEmail: String, password: String) async throws -> (IssuedSession, AgentDTO) {
        let email = try IdentityRules.normalizeEmail(rawEmail)
        let record = try await store.read { repo in try await repo.agent(email: email) }
        let matches = try await hasher.verify(password, hash: record?.passwordHash ?? hasher.decoy)
        guard let record, matches, record.deletedAt == nil else {
            metrics.failedLogins.increment()
            throw ParleyError(.unauthorized, code: .invalidCredentials, message: "The email or the password is wrong.")
        }
        // Said only to someone who knows the password.
        if record.disabledAt != nil {
            throw ParleyError(.forbidden, code: .agentDisabled, message: "This account is disabled. Ask an admin of your team to enable it.")
        }
        let session = try await issueSession(
            brandId: record.agent.brandId, subject: ParticipantRef(kind: .agent, id: record.agent.id.rawValue), appId: nil,
            ttl: configuration.agentSessionTTL)
        metrics.logins.increment()
        return (session, record.agent)
    }

    public func logout(tokenHash: String) async throws {
        try await store.write { repo in try await repo.revokeSession(tokenHash: tokenHash, at: clock.now()) }
    }

    public struct AuthenticatedSession: Sendable {
        public var principal: Principal
        public var tokenHash: String
        public var expiresAt: Date
    }

    /// Who a session token belongs to, or why it is refused.
    public func authenticate(token: String) async throws -> AuthenticatedSession {
        guard SessionTokens.isWellFormed(token) else {
            throw ParleyError(.unauthorized, code: .invalidToken, message: "The token is not a Parley session token.")
        }
        let tokenHash = SessionTokens.hash(token)
        let resolved = try await store.read { repo -> (SessionRecord, AgentRecord?)? in
            guard let session = try await repo.session(tokenHash: tokenHash) else { return nil }
            if session.subjectKind == .agent {
                return (session, try await repo.agent(brandId: session.brandId, id: AgentID(rawValue: session.subjectId)))
            }
            return (session, nil)
        }
        guard let (session, agent) = resolved else {
            throw ParleyError(.unauthorized, code: .invalidToken, message: "The token is not valid.")
        }
        if session.revokedAt != nil {
            throw ParleyError(.unauthorized, code: .sessionRevoked, message: "This session was signed out. Sign in again.")
        }
        if session.expiresAt <= clock.now() {
            throw ParleyError(.unauthorized, code: .sessionExpired, message: "This session has expired. Sign in again.")
        }
        switch session.subjectKind {
        case .agent:
            guard let agent, agent.isActive else {
                throw ParleyError(.unauthorized, code: .sessionRevoked, message: "This account was disabled or removed. Sign in again.")
            }
            let principal = Principal.agent(AgentPrincipal(
                agentId: agent.agent.id, brandId: agent.agent.brandId, role: agent.agent.role,
                permissions: Set(agent.agent.permissions), name: agent.agent.name))
            return AuthenticatedSession(principal: principal, tokenHash: tokenHash, expiresAt: session.expiresAt)
        case .consumer:
            guard let appId = session.appId else { throw StoreError.corrupt("consumer session without an app") }
            let principal = Principal.consumer(ConsumerPrincipal(consumerId: ConsumerID(rawValue: session.subjectId), brandId: session.brandId, appId: appId))
            return AuthenticatedSession(principal: principal, tokenHash: tokenHash, expiresAt: session.expiresAt)
        case .system:
            throw ParleyError(.unauthorized, code: .invalidToken, message: "The token is not valid.")
        }
    }

    private func issueSession(brandId: BrandID, subject: ParticipantRef, appId: AppID?, ttl: TimeInterval) async throws -> IssuedSession {
        let token = SessionTokens.make()
        let now = clock.now()
        let record = SessionRecord(
            tokenHash: SessionTokens.hash(token), brandId: brandId, subjectKind: subject.kind, subjectId: subject.id,
            appId: appId, createdAt: now, expiresAt: now.addingTimeInterval(ttl))
        try await store.write { repo in try await repo.insertSession(record) }
        return IssuedSession(token: token, expiresAt: record.expiresAt)
    }

    // MARK: Consumers

    public func startConsumerSession(_ request: ConsumerSessionRequest, userAgent: String? = nil) async throws -> ConsumerSessionResponse {
        guard AppID.isWellFormed(request.appId),
            let app = try await store.read({ repo in try await repo.app(id: request.appId) })
        else {
            throw ParleyError(.notFound, code: .appNotFound, message: "There is no app with this id.", field: "appId")
        }
        let requestedName = try request.displayName.map { name throws(ParleyError) in
            try IdentityRules.validateName(name, field: "displayName")
        }
        // Hints the browser or device volunteers (its language, the page it is on) never refuse a
        // session: one that does not parse is left out. A WebKit on a machine with LANG=C reports
        // "C" as its language, and a refusal here left the widget retrying for ever.
        let visit = request.pageUrl.flatMap { url in
            WorkspaceRules.visitHint(ConsumerVisitRequest(pageUrl: url, pageTitle: request.pageTitle))
        }
        let language = request.language.flatMap(LifecycleRules.languageHint)
        var consumer: ConsumerDTO
        if let identityToken = request.identityToken {
            let keys = try await store.read { repo in try await repo.appKeys(appId: app.id) }
            let claims = try await ConsumerIdentityVerifier.verify(token: identityToken, appId: app.id, keys: keys)
            let name = try claims.name.map { name throws(ParleyError) in try IdentityRules.validateName(name, field: "name") }
                ?? requestedName
            // Contact claims and the claims the brand exposes to agents, as the brand's backend signed them.
            let limit = WorkspaceRules.maxAttributeLength
            let email = claims.email.map { String($0.prefix(limit)) }
            let phone = claims.phoneNumber.map { String($0.prefix(limit)) }
            let exposed = try await store.read { repo in try await repo.brandSettings(brandId: app.brandId) }.exposedClaims
            let attributes = ConsumerIdentityClaims.exposed(exposed, of: identityToken)
            consumer = try await withUniqueRetry {
                try await store.write { repo in
                    if var existing = try await repo.consumer(brandId: app.brandId, externalId: claims.sub.value) {
                        let before = existing
                        if let name { existing.displayName = name }
                        if let language { existing.language = language }
                        (existing.email, existing.phone, existing.attributes) = (email, phone, attributes)
                        if existing != before { try await repo.updateConsumer(existing) }
                        return existing
                    }
                    let id = ConsumerID.make()
                    var created = ConsumerDTO(
                        id: id, brandId: app.brandId, appId: app.id, externalId: claims.sub.value,
                        displayName: name ?? IdentityRules.visitorName(for: id), anonymous: false, createdAt: clock.now(),
                        email: email, phone: phone, attributes: attributes)
                    created.language = language
                    try await repo.insertConsumer(created)
                    return created
                }
            }
        } else {
            let id = ConsumerID.make()
            var created = ConsumerDTO(
                id: id, brandId: app.brandId, appId: app.id, externalId: nil,
                displayName: requestedName ?? IdentityRules.visitorName(for: id), anonymous: true, createdAt: clock.now())
            created.language = language
            try await store.write { [created] repo in try await repo.insertConsumer(created) }
            consumer = created
        }
        if let visit {
            let (browser, now) = (userAgent.map { String($0.prefix(WorkspaceRules.maxBrowserLength)) }, clock.now())
            try await store.write { [consumer] repo in
                try await repo.recordVisit(
                    brandId: consumer.brandId, consumerId: consumer.id, pageUrl: visit.pageUrl, pageTitle: visit.pageTitle, browser: browser, at: now)
            }
            (consumer.lastPageUrl, consumer.lastPageTitle, consumer.lastBrowser, consumer.lastSeenAt) = (visit.pageUrl, visit.pageTitle, browser, now)
        }
        let session = try await issueSession(
            brandId: app.brandId, subject: ParticipantRef(kind: .consumer, id: consumer.id.rawValue), appId: app.id,
            ttl: configuration.consumerSessionTTL)
        return ConsumerSessionResponse(token: session.token, expiresAt: session.expiresAt, consumer: consumer.ownView)
    }

    public func consumer(_ principal: ConsumerPrincipal) async throws -> ConsumerDTO {
        guard let consumer = try await store.read({ repo in try await repo.consumer(brandId: principal.brandId, id: principal.consumerId) }) else {
            throw ParleyError.notFound("Consumer")
        }
        return consumer
    }

    /// A consumer of the agent's brand (another brand's consumer is not found).
    public func consumer(_ agent: AgentPrincipal, id: ConsumerID) async throws -> ConsumerDTO {
        guard let consumer = try await store.read({ repo in try await repo.consumer(brandId: agent.brandId, id: id) }) else {
            throw ParleyError.notFound("Consumer")
        }
        return consumer
    }

    // MARK: Administration

    public func agent(_ principal: AgentPrincipal) async throws -> AgentDTO {
        guard let record = try await store.read({ repo in try await repo.agent(brandId: principal.brandId, id: principal.agentId) }) else {
            throw ParleyError.notFound("Agent")
        }
        return record.agent
    }

    public func agents(_ principal: AgentPrincipal) async throws -> [AgentDTO] {
        try principal.require(.manager)
        return try await store.read { repo in try await repo.agents(brandId: principal.brandId) }
    }

    public func createAgent(_ principal: AgentPrincipal, _ request: CreateAgentRequest) async throws -> AgentDTO {
        try principal.require(.admin)
        return try await createAgent(brandId: principal.brandId, request)
    }

    /// Creates an agent in a brand; also used by `parley admin` and the first-run seed.
    public func createAgent(brandId: BrandID, _ request: CreateAgentRequest) async throws -> AgentDTO {
        let email = try IdentityRules.normalizeEmail(request.email)
        let name = try IdentityRules.validateName(request.name)
        try IdentityRules.validatePassword(request.password)
        let hash = try await hasher.hash(request.password)
        let agent = AgentDTO(
            id: AgentID.make(), brandId: brandId, email: email, name: name, role: request.role,
            permissions: Array(Set(request.permissions ?? [])).sorted { $0.rawValue < $1.rawValue }, createdAt: clock.now())
        do {
            try await store.write { repo in try await repo.insertAgent(AgentRecord(agent: agent, passwordHash: hash)) }
        } catch where isUniqueViolation(error) {
            throw ParleyError(.conflict, code: .emailTaken, message: "An agent with this email already exists.", field: "email")
        }
        return agent
    }

    /// What ends an agent's sessions: a new password (every session but the one that set it, when the
    /// agent set it), disabling and deleting (every session).
    public struct AgentChange: Sendable {
        public var agent: AgentDTO
        /// Sessions to end: all of the agent's, except `keeping`.
        public var endSessions: Bool
        public var keeping: String?
    }

    public func updateAgent(_ principal: AgentPrincipal, id: AgentID, _ request: UpdateAgentRequest, sessionTokenHash: String? = nil) async throws -> AgentChange {
        try principal.require(.admin)
        if id == principal.agentId, let role = request.role, role != principal.role {
            throw ParleyError(.conflict, code: .cannotChangeOwnRole, message: "Admins cannot change their own role; ask another admin.", field: "role")
        }
        if id == principal.agentId, request.disabled == true {
            throw ParleyError(.conflict, code: .cannotDisableSelf, message: "Admins cannot disable themselves; ask another admin.", field: "disabled")
        }
        let name = try request.name.map { name throws(ParleyError) in try IdentityRules.validateName(name) }
        if let password = request.password { try IdentityRules.validatePassword(password) }
        let newHash = try await request.password.asyncMap { try await hasher.hash($0) }
        let now = clock.now()
        let change = try await store.write { repo -> AgentChange in
            guard var record = try await repo.agent(brandId: principal.brandId, id: id), record.deletedAt == nil else {
                throw ParleyError.notFound("Agent")
            }
            var endSessions = newHash != nil
            if let disabled = request.disabled {
                if disabled, record.disabledAt == nil { endSessions = true }
                record.disabledAt = disabled ? (record.disabledAt ?? now) : nil
                record.agent.disabled = disabled
            }
            if let name { record.agent.name = name }
            if let role = request.role { record.agent.role = role }
            if let permissions = request.permissions {
                record.agent.permissions = Array(Set(permissions)).sorted { $0.rawValue < $1.rawValue }
            }
            if let newHash { record.passwordHash = newHash }
            try await repo.updateAgent(record)
            // An admin who resets their own password stays signed in on this device.
            let keeping = id == principal.agentId ? sessionTokenHash : nil
            if endSessions { try await repo.revokeSessions(subjectId: id.rawValue, except: keeping, at: now) }
            return AgentChange(agent: record.agent, endSessions: endSessions, keeping: keeping)
        }
        return change
    }

    /// Deletes an agent: signed out everywhere, unable to sign in, no longer listed; the row stays for
    /// the history that names them, and the email is freed.
    public func deleteAgent(_ principal: AgentPrincipal, id: AgentID) async throws {
        try principal.require(.admin)
        if id == principal.agentId {
            throw ParleyError(.conflict, code: .cannotDeleteSelf, message: "Admins cannot delete themselves; ask another admin.")
        }
        let now = clock.now()
        try await store.write { repo in
            guard var record = try await repo.agent(brandId: principal.brandId, id: id), record.deletedAt == nil else {
                throw ParleyError.notFound("Agent")
            }
            record.deletedAt = now
            record.agent.email = "deleted+\(record.agent.id)@deleted.invalid"
            try await repo.updateAgent(record)
            try await repo.revokeSessions(subjectId: id.rawValue, except: nil, at: now)
        }
    }

    /// An agent changes their own password, proving the current one; every other session ends.
    public func changePassword(_ principal: AgentPrincipal, _ request: ChangePasswordRequest, sessionTokenHash: String?) async throws {
        try IdentityRules.validatePassword(request.newPassword)
        guard let record = try await store.read({ repo in try await repo.agent(brandId: principal.brandId, id: principal.agentId) }),
            try await hasher.verify(request.currentPassword, hash: record.passwordHash)
        else {
            throw ParleyError(.forbidden, code: .wrongPassword, message: "The current password is wrong.", field: "currentPassword")
        }
        let hash = try await hasher.hash(request.newPassword)
        let now = clock.now()
        try await store.write { repo in
            guard var current = try await repo.agent(brandId: principal.brandId, id: principal.agentId) else { throw ParleyError.notFound("Agent") }
            current.passwordHash = hash
            try await repo.updateAgent(current)
            try await repo.revokeSessions(subjectId: principal.agentId.rawValue, except: sessionTokenHash, at: now)
        }
    }

    /// Signs an agent out of every device, this one included.
    public func logoutEverywhere(_ principal: AgentPrincipal) async throws {
        try await store.write { repo in try await repo.revokeSessions(subjectId: principal.agentId.rawValue, except: nil, at: clock.now()) }
    }

    public func apps(_ principal: AgentPrincipal) async throws -> [AppDTO] {
        try await store.read { repo in try await repo.apps(brandId: principal.brandId) }
    }

    public func createApp(_ principal: AgentPrincipal, _ request: CreateAppRequest) async throws -> AppDTO {
        try principal.require(.admin)
        return try await createApp(brandId: principal.brandId, request)
    }

    public func createApp(brandId: BrandID, _ request: CreateAppRequest) async throws -> AppDTO {
        let name = try IdentityRules.validateName(request.name)
        let app = AppDTO(id: AppID.make(), brandId: brandId, name: name, channel: request.channel, createdAt: clock.now())
        try await store.write { repo in try await repo.insertApp(app) }
        return app
    }

    public func addAppKey(_ principal: AgentPrincipal, appId: AppID, _ request: AddAppKeyRequest) async throws -> AppKeyDTO {
        try principal.require(.admin)
        let kid = try IdentityRules.validateName(request.kid, field: "kid", maxLength: 64)
        try await ConsumerIdentityVerifier.validateKey(algorithm: request.algorithm, key: request.key)
        do {
            return try await store.write { repo in
                guard let app = try await repo.app(id: appId), app.brandId == principal.brandId else { throw ParleyError.notFound("App") }
                let record = AppKeyRecord(
                    kid: kid, appId: app.id, brandId: app.brandId, algorithm: request.algorithm, keyMaterial: request.key,
                    createdAt: clock.now())
                try await repo.insertAppKey(record)
                return record.dto
            }
        } catch where isUniqueViolation(error) {
            throw ParleyError(.conflict, code: .keyExists, message: "The app already has a key with kid '\(kid)'.", field: "kid")
        }
    }

    public func appKeys(_ principal: AgentPrincipal, appId: AppID) async throws -> [AppKeyDTO] {
        try principal.require(.admin)
        return try await store.read { repo in
            guard let app = try await repo.app(id: appId), app.brandId == principal.brandId else { throw ParleyError.notFound("App") }
            return try await repo.appKeys(appId: app.id).map(\.dto)
        }
    }

    public func brand(_ principal: AgentPrincipal) async throws -> BrandDTO {
        guard let brand = try await store.read({ repo in try await repo.brand(id: principal.brandId) }) else {
            throw ParleyError.notFound("Brand")
        }
        return brand
    }

    public func brandName(_ brandId: BrandID) async throws -> String {
        try await store.read { repo in try await repo.brand(id: brandId)?.name } ?? ""
    }

    // MARK: Brands (operator tasks: CLI and first run)

    public struct NewBrand: Sendable {
        public var brand: BrandDTO
        public var app: AppDTO
        public var admin: AgentDTO
        public var adminPassword: String
        /// The demo brand's in-app app (what ParleyKit and `parley chat` sign in to).
        public var inAppApp: AppDTO?
    }

    /// Creates a brand with a web app and an admin whose password is generated and returned once.
    public func createBrand(name: String, adminEmail: String, adminName: String, appName: String) async throws -> NewBrand {
        let brandName = try IdentityRules.validateName(name)
        let brand = BrandDTO(id: BrandID.make(), name: brandName, createdAt: clock.now())
        try await store.write { repo in
            try await repo.insertBrand(brand)
            // A new brand has nothing to purge for a while: its first retention run is a day away.
            try await repo.enqueueJob(try RecordsService.retentionJob(brandId: brand.id, at: brand.createdAt, after: 86_400))
        }
        let app = try await createApp(brandId: brand.id, CreateAppRequest(name: appName, channel: .web))
        let password = Identifier.random(20)
        let admin = try await createAgent(
            brandId: brand.id,
            CreateAgentRequest(
                email: adminEmail, name: adminName, password: password, role: .admin,
                // Everything but taking control of a customer's page, which is off until an admin grants it.
                permissions: AgentPermission.allCases.filter { $0 != .cobrowseControl }))
        return NewBrand(brand: brand, app: app, admin: admin, adminPassword: password)
    }

    // MARK: The operator's (`parley admin`): any brand, no principal

    /// Every brand with its number of agents, oldest first.
    public func operatorBrands() async throws -> [(brand: BrandDTO, agents: Int)] {
        try await store.read { repo in try await repo.brands(limit: 100_000) }
    }

    /// A brand's agents (deleted ones are not listed).
    public func operatorAgents(brandId: BrandID) async throws -> [AgentDTO] {
        try await store.read { repo in
            guard try await repo.brand(id: brandId) != nil else { throw ParleyError.notFound("Brand") }
            return try await repo.agents(brandId: brandId)
        }
    }

    /// The agent with this email, whichever brand: the operator names agents by email.
    func operatorAgent(email: String) async throws -> AgentRecord {
        let normalized = email.trimmingCharacters(in: .whitespaces).lowercased()
        guard let record = try await store.read({ repo in try await repo.agent(email: normalized) }), record.deletedAt == nil else {
            throw ParleyError.notFound("An agent with the email \(normalized)")
        }
        return record
    }

    /// A new generated password for the agent, returned once; every session of theirs ends (their
    /// open connections close within `SessionRevocations.defaultInterval` on every node).
    public func operatorResetPassword(email: String) async throws -> (AgentDTO, password: String) {
        let record = try await operatorAgent(email: email)
        let password = Identifier.random(20)
        let hash = try await hasher.hash(password)
        let now = clock.now()
        try await store.write { repo in
            guard var current = try await repo.agent(brandId: record.agent.brandId, id: record.agent.id) else { throw ParleyError.notFound("Agent") }
            current.passwordHash = hash
            try await repo.updateAgent(current)
            try await repo.revokeSessions(subjectId: current.agent.id.rawValue, except: nil, at: now)
        }
        return (record.agent, password)
    }

    /// Disables or enables the agent. Disabling ends every session of theirs (their connections close
    /// on every node; with them gone, routing gives their conversations back to the queue after the
    /// brand's grace period, as when they go offline). A brand's last enabled admin is not disabled.
    public func operatorSetDisabled(email: String, _ disabled: Bool) async throws -> AgentDTO {
        let record = try await operatorAgent(email: email)
        let now = clock.now()
        return try await store.write { repo in
            guard var current = try await repo.agent(brandId: record.agent.brandId, id: record.agent.id) else { throw ParleyError.notFound("Agent") }
            if disabled, current.agent.role == .admin, current.disabledAt == nil {
                let admins = try await repo.agents(brandId: current.agent.brandId).filter { $0.role == .admin && !$0.disabled }
                if admins.count <= 1 {
                    throw ParleyError(
                        .conflict, code: .lastAdmin,
                        message: "\(current.agent.email) is the brand's last enabled admin; enable or create another admin first.")
                }
            }
            current.disabledAt = disabled ? (current.disabledAt ?? now) : nil
            current.agent.disabled = disabled
            try await repo.updateAgent(current)
            if disabled { try await repo.revokeSessions(subjectId: current.agent.id.rawValue, except: nil, at: now) }
            return current.agent
        }
    }

    /// On a database with no brand: the demo brand, its web and in-app apps and admin. Returns nil
    /// when there is a brand.
    public func seedDemoIfEmpty() async throws -> NewBrand? {
        guard try await store.read({ repo in try await repo.brandCount() }) == 0 else { return nil }
        var demo = try await createBrand(
            name: "Demo Brand", adminEmail: "admin@demo.parley.local", adminName: "Demo Admin", appName: "Demo Website")
        demo.inAppApp = try await createApp(brandId: demo.brand.id, CreateAppRequest(name: "Demo App", channel: .inApp))
        return demo
    }
}

/// Retries an operation that lost a race on a unique constraint (two first-time writes at once):
/// the second attempt finds the row the other one made.
func withUniqueRetry<T>(attempts: Int = 2, _ operation: () async throws -> T) async throws -> T {
    var attempt = 0
    while true {
        do {
            return try await operation()
        } catch where isUniqueViolation(error) && attempt + 1 < attempts {
            attempt += 1
        } catch where isUniqueViolation(error) {
            throw ParleyError(.conflict, code: .conflict, message: "Someone else changed this at the same time. Try again.")
        }
    }
}

extension Optional {
    func asyncMap<U>(_ transform: (Wrapped) async throws -> U) async rethrows -> U? {
        switch self {
        case .some(let value): try await transform(value)
        case .none: nil
        }
    }
}
