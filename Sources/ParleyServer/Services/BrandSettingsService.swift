import Foundation
import ParleyAPI
import ParleyDomain
import ParleyStore

/// The brand's settings, with one owner: every change (the admin's PATCH, the logo, and each new
/// setting) goes through `change`, which reads, applies and writes them in one transaction. Other
/// services read them where they need them (inside their own transactions when it matters) and
/// never write them.
public struct BrandSettingsService: Sendable {
    typealias Stores = any IdentityStore

    let store: StoreAccess<Stores>
    let clock: any WallClock
    /// Whether this server has a transcriber: a brand may turn transcription on only then.
    let transcriberAvailable: Bool

    init(store: Store, clock: any WallClock, transcriberAvailable: Bool = false) {
        self.store = store.access { $0 as Stores }
        self.clock = clock
        self.transcriberAvailable = transcriberAvailable
    }

    public func settings(brandId: BrandID) async throws -> BrandSettingsDTO {
        withServerFacts(try await store.read { repo in try await repo.brandSettings(brandId: brandId) })
    }

    /// What the stored settings cannot say: whether this server has a transcriber. Every answer
    /// with the settings goes through here (`settings` and `change`).
    private func withServerFacts(_ stored: BrandSettingsDTO) -> BrandSettingsDTO {
        var settings = stored
        settings.transcriberAvailable = transcriberAvailable
        return settings
    }

    /// An admin's change: every field checked by the rules of what it governs before anything is
    /// written; absent fields stay as they are.
    public func update(_ admin: AgentPrincipal, _ change: UpdateBrandSettingsRequest) async throws -> BrandSettingsDTO {
        try admin.require(.admin)
        try VoiceRules.validate(change)
        try WorkspaceRules.validate(change)
        try AttachmentRules.validate(change)
        let cobrowse = try CobrowseRules.validate(change)
        let previewOrigins = try change.previewOrigins.map { origins throws(ParleyError) in try WorkspaceRules.origins(origins) }
        if change.transcription == true, !transcriberAvailable {
            throw ParleyError(
                .conflict, code: .transcriberUnavailable,
                message: "This server has no transcriber, so voice notes cannot be transcribed. The operator sets PARLEY_TRANSCRIBER.")
        }
        return try await self.change(brandId: admin.brandId) { settings in
            if let value = change.voiceMaxSeconds { settings.voiceMaxSeconds = value }
            if let value = change.voiceMinSeconds { settings.voiceMinSeconds = value }
            if let value = change.voiceFromConsumers { settings.voiceFromConsumers = value }
            if let value = change.voiceFromAgents { settings.voiceFromAgents = value }
            if let value = change.scanFailurePolicy { settings.scanFailurePolicy = value }
            if let value = change.cardMasking { settings.cardMasking = value }
            if let value = change.openConversationsPerConsumer { settings.openConversationsPerConsumer = value }
            if let value = change.autoAwayMinutes { settings.autoAwayMinutes = value }
            if let value = change.exposedClaims { settings.exposedClaims = value }
            if let value = change.widgetColor { settings.widgetColor = value.lowercased() }
            if let value = change.pushPreview { settings.pushPreview = value }
            if let value = change.availableText { settings.availableText = value }
            if let value = change.awayText { settings.awayText = value }
            if let value = change.attachmentGroups { settings.attachmentGroups = AttachmentGroup.allCases.filter(value.contains) }
            if let value = change.attachmentMaxMegabytes { settings.attachmentMaxMegabytes = value }
            if let value = previewOrigins { settings.previewOrigins = value }
            if let value = change.cobrowseEnabled { settings.cobrowseEnabled = value }
            if let value = cobrowse.origins { settings.cobrowseOrigins = value }
            if let value = cobrowse.selectors { settings.cobrowseMaskSelectors = value }
            if let value = change.screenShareFromConsumers { settings.screenShareFromConsumers = value }
            if let value = change.transcription { settings.transcription = value }
            if let value = change.transcriptionLanguage { settings.transcriptionLanguage = value }
        }.settings
    }

    /// Reads the brand's settings, lets `apply` change them (it may do work that must happen with
    /// the change, such as storing a logo's file), and writes them, all in one transaction.
    /// Returns the settings written and what `apply` returned.
    @discardableResult
    func change<Result: Sendable>(
        brandId: BrandID, _ apply: @escaping @Sendable (inout BrandSettingsDTO) async throws -> Result
    ) async throws -> (settings: BrandSettingsDTO, result: Result) {
        let now = clock.now()
        let (settings, result) = try await store.write { repo in
            var settings = try await repo.brandSettings(brandId: brandId)
            let result = try await apply(&settings)
            try await repo.saveBrandSettings(settings, brandId: brandId, at: now)
            return (settings, result)
        }
        return (withServerFacts(settings), result)
    }
}
