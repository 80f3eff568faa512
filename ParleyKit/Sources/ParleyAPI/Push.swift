import Foundation

/// Where a consumer's device gets notifications from.
public enum PushProvider: String, Codable, Sendable, Hashable, CaseIterable {
    /// Apple Push Notification service (iOS and macOS apps): a device token.
    case apns
    /// Firebase Cloud Messaging (Android apps): a registration token.
    case fcm
    /// Web Push (the widget in a browser): a subscription's endpoint and keys.
    case webpush
}

/// What a notification shows: the message's text, or only that there is one ("New message from
/// Acme"), as the brand chooses (the default keeps the text off lock screens).
public enum PushPreview: String, Codable, Sendable, Hashable, CaseIterable {
    case masked
    case text
}

/// `POST /v1/consumer/push`: the consumer's device registers for notifications (the same token
/// registered again is an update; a token registered by another consumer moves to this one).
public struct RegisterPushRequest: Codable, Sendable, Hashable {
    public var provider: PushProvider
    /// APNs: the device token (hex); FCM: the registration token; Web Push: the endpoint URL.
    public var token: String
    /// APNs: `sandbox` for development builds (default `production`).
    public var environment: String?
    /// Web Push: the subscription's keys.
    public var keys: WebPushKeys?

    public init(provider: PushProvider, token: String, environment: String? = nil, keys: WebPushKeys? = nil) {
        self.provider = provider
        self.token = token
        self.environment = environment
        self.keys = keys
    }
}

/// A Web Push subscription's keys, as `PushSubscription.toJSON()` gives them (base64url): the
/// browser's P-256 public key and its 16-byte authentication secret.
public struct WebPushKeys: Codable, Sendable, Hashable {
    public var p256dh: String
    public var auth: String

    public init(p256dh: String, auth: String) {
        self.p256dh = p256dh
        self.auth = auth
    }
}

public struct PushRegistrationDTO: Codable, Sendable, Hashable {
    public var id: String
    public var provider: PushProvider
    public var createdAt: Date
    public init(id: String, provider: PushProvider, createdAt: Date) {
        (self.id, self.provider, self.createdAt) = (id, provider, createdAt)
    }
}

/// `PUT /v1/apps/{appId}/push/apns`: the brand's APNs credentials for its iOS app (token-based
/// authentication). The key is stored encrypted and never returned.
public struct ConnectAPNsRequest: Codable, Sendable {
    /// The Apple Developer team id (10 characters).
    public var teamId: String
    /// The APNs auth key's id (10 characters).
    public var keyId: String
    /// The auth key (.p8), PEM.
    public var privateKey: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String

    public init(teamId: String, keyId: String, privateKey: String, topic: String) {
        (self.teamId, self.keyId, self.privateKey, self.topic) = (teamId, keyId, privateKey, topic)
    }
}

/// `PUT /v1/apps/{appId}/push/fcm`: the brand's Firebase service account for its Android app. The
/// key is stored encrypted and never returned.
public struct ConnectFCMRequest: Codable, Sendable {
    /// The service account key file's JSON (Firebase console → Project settings → Service
    /// accounts → Generate new private key): `project_id`, `client_email` and `private_key` are used.
    public var serviceAccount: String

    public init(serviceAccount: String) { self.serviceAccount = serviceAccount }
}

/// An app's push set-up, as admins see it (never its keys).
public struct PushConnectionDTO: Codable, Sendable, Hashable {
    public var appId: AppID
    public var provider: PushProvider
    /// APNs: the topic (bundle id); FCM: the Firebase project id.
    public var topic: String?
    public var updatedAt: Date

    public init(appId: AppID, provider: PushProvider, topic: String?, updatedAt: Date) {
        (self.appId, self.provider, self.topic, self.updatedAt) = (appId, provider, topic, updatedAt)
    }
}
