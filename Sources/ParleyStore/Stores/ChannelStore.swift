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

    public init(
        appId: AppID, brandId: BrandID, channel: Channel, externalId: String, sealedSecrets: String, createdAt: Date, updatedAt: Date
    ) {
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
}

extension SQLRepository: ChannelStore {
    public func saveChannelConnection(_ connection: ChannelConnectionRecord) async throws {
        try await db.raw("DELETE FROM channel_connections WHERE app_id = \(bind: connection.appId)").run()
        try await db.insert(ChannelConnectionRow(connection))
    }

    public func channelConnection(appId: AppID) async throws -> ChannelConnectionRecord? {
        try await db.raw("SELECT * FROM channel_connections WHERE app_id = \(bind: appId)").first(ChannelConnectionRow.self)?.record
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

    init(_ record: ChannelConnectionRecord) {
        (appId, brandId, channel, externalId, sealedSecrets) = (record.appId, record.brandId, record.channel, record.externalId, record.sealedSecrets)
        createdAt = StoredTime.millis(record.createdAt)
        updatedAt = StoredTime.millis(record.updatedAt)
    }

    var record: ChannelConnectionRecord {
        ChannelConnectionRecord(
            appId: appId, brandId: brandId, channel: channel, externalId: externalId, sealedSecrets: sealedSecrets,
            createdAt: StoredTime.date(createdAt), updatedAt: StoredTime.date(updatedAt))
    }
}
