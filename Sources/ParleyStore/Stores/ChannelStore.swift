import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// An app's connection to a messaging provider: its provider id and its sealed secrets.
public struct ChannelConnectionRecord: Sendable, Hashable {
    public var appId: AppID
    public var brandId: BrandID
    public var channel: Channel
    public var externalId: String
    /// JSON of the secrets, sealed by the server's key (never stored in the clear).
    public var sealedSecrets: String
    public var createdAt: Date
    public var updatedAt: Date
    /// Settings that are not secret (WhatsApp: its templates), JSON.
    public var settings: String?

    public init(
        appId: AppID, brandId: BrandID, channel: Channel, externalId: String, sealedSecrets: String, createdAt: Date, updatedAt: Date,
        settings: String? = nil
    ) {
        self.settings = settings
        (self.appId, self.brandId, self.channel, self.externalId) = (appId, brandId, channel, externalId)
        (self.sealedSecrets, self.createdAt, self.updatedAt) = (sealedSecrets, createdAt, updatedAt)
    }
}

public protocol ChannelStore: Sendable {
    /// Inserts or replaces the app's connection. Fails with a unique violation when another app has
    /// the same provider id on the channel.
    func saveChannelConnection(_ connection: ChannelConnectionRecord) async throws
    /// By app id alone: webhooks name the app in their path and carry no brand.
    func channelConnection(appId: AppID) async throws -> ChannelConnectionRecord?
    /// Every connection (for re-sealing secrets under a new key).
    func channelConnections() async throws -> [ChannelConnectionRecord]
    /// A brand's connections.
    func channelConnections(brandId: BrandID) async throws -> [ChannelConnectionRecord]

    /// An outbound message's delivery through its channel: inserted when the message is appended,
    /// updated by the sender job and by the provider's status callbacks.
    func saveChannelDelivery(_ delivery: ChannelDeliveryRecord) async throws
    func channelDelivery(messageId: MessageID) async throws -> ChannelDeliveryRecord?
    /// By the provider's id for the message (status callbacks carry only that).
    func channelDelivery(channel: Channel, providerMessageId: String) async throws -> ChannelDeliveryRecord?
    func channelDeliveries(messageIds: [MessageID]) async throws -> [MessageID: ChannelDeliveryRecord]
}

/// An outbound message's delivery through a messaging channel.
public struct ChannelDeliveryRecord: Sendable, Hashable {
    public var messageId: MessageID
    public var brandId: BrandID
    public var conversationId: ConversationID
    public var channel: Channel
    public var state: ChannelDeliveryState
    public var providerMessageId: String?
    public var errorCode: String?
    public var errorMessage: String?
    public var retryable: Bool
    public var updatedAt: Date
    /// For a template (WhatsApp): its name, language and parameters, JSON, so that a retry sends it again.
    public var template: String?

    public init(
        messageId: MessageID, brandId: BrandID, conversationId: ConversationID, channel: Channel, state: ChannelDeliveryState,
        providerMessageId: String? = nil, errorCode: String? = nil, errorMessage: String? = nil, retryable: Bool = false, updatedAt: Date,
        template: String? = nil
    ) {
        self.template = template
        (self.messageId, self.brandId, self.conversationId, self.channel, self.state) = (messageId, brandId, conversationId, channel, state)
        (self.providerMessageId, self.errorCode, self.errorMessage, self.retryable, self.updatedAt) =
            (providerMessageId, errorCode, errorMessage, retryable, updatedAt)
    }

    public var dto: ChannelDeliveryDTO {
        ChannelDeliveryDTO(
            state: state, errorCode: errorCode, errorMessage: errorMessage, retryable: state == .failed ? retryable : nil, updatedAt: updatedAt)
    }
}

extension SQLRepository: ChannelStore {
    public func saveChannelConnection(_ connection: ChannelConnectionRecord) async throws {
        try await db.raw("DELETE FROM channel_connections WHERE app_id = \(bind: connection.appId)").run()
        try await db.insert(ChannelConnectionRow(connection))
    }

    public func channelConnection(appId: AppID) async throws -> ChannelConnectionRecord? {
        try await db.raw("SELECT * FROM channel_connections WHERE app_id = \(bind: appId)").first(ChannelConnectionRow.self)?.record
    }

    public func channelConnections() async throws -> [ChannelConnectionRecord] {
        try await db.raw("SELECT * FROM channel_connections ORDER BY app_id").all(ChannelConnectionRow.self).map(\.record)
    }

    public func channelConnections(brandId: BrandID) async throws -> [ChannelConnectionRecord] {
        try await db.raw("SELECT * FROM channel_connections WHERE brand_id = \(bind: brandId) ORDER BY app_id").all(ChannelConnectionRow.self).map(\.record)
    }

    public func saveChannelDelivery(_ delivery: ChannelDeliveryRecord) async throws {
        try await db.raw("DELETE FROM channel_deliveries WHERE message_id = \(bind: delivery.messageId)").run()
        try await db.insert(ChannelDeliveryRow(delivery))
    }

    public func channelDelivery(messageId: MessageID) async throws -> ChannelDeliveryRecord? {
        try await db.raw("SELECT * FROM channel_deliveries WHERE message_id = \(bind: messageId)").first(ChannelDeliveryRow.self)?.record
    }

    public func channelDelivery(channel: Channel, providerMessageId: String) async throws -> ChannelDeliveryRecord? {
        try await db.raw(
            "SELECT * FROM channel_deliveries WHERE channel = \(bind: channel.rawValue) AND provider_message_id = \(bind: providerMessageId)"
        ).first(ChannelDeliveryRow.self)?.record
    }

    public func channelDeliveries(messageIds: [MessageID]) async throws -> [MessageID: ChannelDeliveryRecord] {
        guard !messageIds.isEmpty else { return [:] }
        let rows = try await db.select().column("*").from(ChannelDeliveryRow.table).where("message_id", .in, messageIds).all(ChannelDeliveryRow.self)
        return Dictionary(rows.map { ($0.messageId, $0.record) }, uniquingKeysWith: { first, _ in first })
    }
}

struct ChannelConnectionRow: TableRow {
    static let table = "channel_connections"
    var appId: AppID
    var brandId: BrandID
    var channel: Channel
    var externalId: String
    var sealedSecrets: String
    var createdAt: Int64
    var updatedAt: Int64
    var settings: String?

    init(_ record: ChannelConnectionRecord) {
        settings = record.settings
        (appId, brandId, channel, externalId, sealedSecrets) = (record.appId, record.brandId, record.channel, record.externalId, record.sealedSecrets)
        createdAt = StoredTime.millis(record.createdAt)
        updatedAt = StoredTime.millis(record.updatedAt)
    }

    var record: ChannelConnectionRecord {
        ChannelConnectionRecord(
            appId: appId, brandId: brandId, channel: channel, externalId: externalId, sealedSecrets: sealedSecrets,
            createdAt: StoredTime.date(createdAt), updatedAt: StoredTime.date(updatedAt), settings: settings)
    }
}

struct ChannelDeliveryRow: TableRow {
    static let table = "channel_deliveries"
    var messageId: MessageID
    var brandId: BrandID
    var conversationId: ConversationID
    var channel: Channel
    var state: ChannelDeliveryState
    var providerMessageId: String?
    var errorCode: String?
    var errorMessage: String?
    /// 0 or 1 (one integer type on both engines).
    var retryable: Int
    var updatedAt: Int64
    var template: String?

    init(_ r: ChannelDeliveryRecord) {
        template = r.template
        (messageId, brandId, conversationId, channel, state) = (r.messageId, r.brandId, r.conversationId, r.channel, r.state)
        (providerMessageId, errorCode, errorMessage, retryable) = (r.providerMessageId, r.errorCode, r.errorMessage, r.retryable ? 1 : 0)
        updatedAt = StoredTime.millis(r.updatedAt)
    }

    var record: ChannelDeliveryRecord {
        ChannelDeliveryRecord(
            messageId: messageId, brandId: brandId, conversationId: conversationId, channel: channel, state: state,
            providerMessageId: providerMessageId, errorCode: errorCode, errorMessage: errorMessage, retryable: retryable != 0,
            updatedAt: StoredTime.date(updatedAt), template: template)
    }
}
