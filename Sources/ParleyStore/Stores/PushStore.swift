import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// A consumer's device registered for notifications.
public struct PushRegistrationRecord: Sendable, Hashable {
    public var id: String
    public var brandId: BrandID
    public var appId: AppID
    public var consumerId: ConsumerID
    public var provider: PushProvider
    public var token: String
    public var environment: String?
    /// Web Push: the subscription's keys, JSON.
    public var keys: String?
    public var createdAt: Date
    public var updatedAt: Date

    public init(
        id: String, brandId: BrandID, appId: AppID, consumerId: ConsumerID, provider: PushProvider, token: String, environment: String?,
        keys: String? = nil, createdAt: Date, updatedAt: Date
    ) {
        self.keys = keys
        (self.id, self.brandId, self.appId, self.consumerId, self.provider, self.token) = (id, brandId, appId, consumerId, provider, token)
        (self.environment, self.createdAt, self.updatedAt) = (environment, createdAt, updatedAt)
    }
}

/// An app's credentials for one push provider, sealed by the server's key.
public struct PushCredentialsRecord: Sendable, Hashable {
    public var appId: AppID
    public var provider: PushProvider
    public var brandId: BrandID
    public var sealedSecrets: String
    /// What is not secret (APNs: the topic), JSON.
    public var settings: String?
    public var updatedAt: Date

    public init(appId: AppID, provider: PushProvider, brandId: BrandID, sealedSecrets: String, settings: String?, updatedAt: Date) {
        (self.appId, self.provider, self.brandId, self.sealedSecrets, self.settings, self.updatedAt) =
            (appId, provider, brandId, sealedSecrets, settings, updatedAt)
    }
}

public protocol PushStore: Sendable {
    /// Inserts the registration, or moves an existing one with the same provider and token to this
    /// consumer (a device changes hands, or registers again).
    /// `keepingAtMost`: the consumer's registrations beyond that many are deleted, the ones updated longest ago first.
    func savePushRegistration(keepingAtMost: Int, _ registration: PushRegistrationRecord) async throws -> PushRegistrationRecord
    func pushRegistrations(consumerId: ConsumerID) async throws -> [PushRegistrationRecord]
    func deletePushRegistration(id: String) async throws
    func deletePushRegistration(consumerId: ConsumerID, provider: PushProvider, token: String) async throws -> Bool
    func savePushCredentials(_ credentials: PushCredentialsRecord) async throws
    func pushCredentials(appId: AppID, provider: PushProvider) async throws -> PushCredentialsRecord?
    func pushCredentials(brandId: BrandID) async throws -> [PushCredentialsRecord]
}

extension SQLRepository: PushStore {
    public func savePushRegistration(keepingAtMost limit: Int, _ registration: PushRegistrationRecord) async throws -> PushRegistrationRecord {
        let saved = try await savePushRegistration(registration)
        try await db.raw(
            """
            DELETE FROM push_registrations WHERE consumer_id = \(bind: registration.consumerId) AND id NOT IN (
                SELECT id FROM push_registrations WHERE consumer_id = \(bind: registration.consumerId)
                ORDER BY updated_at DESC, created_at DESC, id DESC LIMIT \(bind: limit))
            """
        ).run()
        return saved
    }

    private func savePushRegistration(_ registration: PushRegistrationRecord) async throws -> PushRegistrationRecord {
        if var existing = try await db.raw(
            "SELECT * FROM push_registrations WHERE provider = \(bind: registration.provider.rawValue) AND token = \(bind: registration.token)"
        ).first(PushRegistrationRow.self)?.record {
            (existing.brandId, existing.appId, existing.consumerId) = (registration.brandId, registration.appId, registration.consumerId)
            (existing.environment, existing.keys, existing.updatedAt) = (registration.environment, registration.keys, registration.updatedAt)
            try await db.update(PushRegistrationRow(existing), where: "id = \(bind: existing.id)").run()
            return existing
        }
        try await db.insert(PushRegistrationRow(registration))
        return registration
    }

    public func pushRegistrations(consumerId: ConsumerID) async throws -> [PushRegistrationRecord] {
        try await db.raw("SELECT * FROM push_registrations WHERE consumer_id = \(bind: consumerId) ORDER BY created_at, id")
            .all(PushRegistrationRow.self).map(\.record)
    }

    public func deletePushRegistration(id: String) async throws {
        try await db.raw("DELETE FROM push_registrations WHERE id = \(bind: id)").run()
    }

    public func deletePushRegistration(consumerId: ConsumerID, provider: PushProvider, token: String) async throws -> Bool {
        let rows = try await db.raw(
            """
            DELETE FROM push_registrations WHERE consumer_id = \(bind: consumerId) AND provider = \(bind: provider.rawValue) AND token = \(bind: token)
            RETURNING id
            """
        ).all()
        return !rows.isEmpty
    }

    public func savePushCredentials(_ credentials: PushCredentialsRecord) async throws {
        try await db.raw(
            "DELETE FROM push_credentials WHERE app_id = \(bind: credentials.appId) AND provider = \(bind: credentials.provider.rawValue)"
        ).run()
        try await db.insert(PushCredentialsRow(credentials))
    }

    public func pushCredentials(appId: AppID, provider: PushProvider) async throws -> PushCredentialsRecord? {
        try await db.raw("SELECT * FROM push_credentials WHERE app_id = \(bind: appId) AND provider = \(bind: provider.rawValue)")
            .first(PushCredentialsRow.self)?.record
    }

    public func pushCredentials(brandId: BrandID) async throws -> [PushCredentialsRecord] {
        try await db.raw("SELECT * FROM push_credentials WHERE brand_id = \(bind: brandId) ORDER BY app_id, provider")
            .all(PushCredentialsRow.self).map(\.record)
    }
}

struct PushRegistrationRow: TableRow {
    static let table = "push_registrations"
    var id: String
    var brandId: BrandID
    var appId: AppID
    var consumerId: ConsumerID
    var provider: PushProvider
    var token: String
    var environment: String?
    var keys: String?
    var createdAt: Int64
    var updatedAt: Int64

    init(_ r: PushRegistrationRecord) {
        keys = r.keys
        (id, brandId, appId, consumerId, provider, token, environment) = (r.id, r.brandId, r.appId, r.consumerId, r.provider, r.token, r.environment)
        createdAt = StoredTime.millis(r.createdAt)
        updatedAt = StoredTime.millis(r.updatedAt)
    }

    var record: PushRegistrationRecord {
        PushRegistrationRecord(
            id: id, brandId: brandId, appId: appId, consumerId: consumerId, provider: provider, token: token, environment: environment,
            keys: keys, createdAt: StoredTime.date(createdAt), updatedAt: StoredTime.date(updatedAt))
    }
}

struct PushCredentialsRow: TableRow {
    static let table = "push_credentials"
    var appId: AppID
    var provider: PushProvider
    var brandId: BrandID
    var sealedSecrets: String
    var settings: String?
    var updatedAt: Int64

    init(_ r: PushCredentialsRecord) {
        (appId, provider, brandId, sealedSecrets, settings) = (r.appId, r.provider, r.brandId, r.sealedSecrets, r.settings)
        updatedAt = StoredTime.millis(r.updatedAt)
    }

    var record: PushCredentialsRecord {
        PushCredentialsRecord(
            appId: appId, provider: provider, brandId: brandId, sealedSecrets: sealedSecrets, settings: settings, updatedAt: StoredTime.date(updatedAt))
    }
}
