import AsyncHTTPClient
import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyDomain
import ParleyStore
import Synchronization

/// Firebase Cloud Messaging's HTTP v1 API: an OAuth 2.0 access token obtained with the service
/// account's key (an RS256 JWT with the `firebase.messaging` scope, exchanged at the token
/// endpoint with the `jwt-bearer` grant, kept until five minutes before it expires), then
/// `POST /v1/projects/{project_id}/messages:send` with the registration token, the notification,
/// Android's collapse key and tag, and data.
struct FCMSender: Sendable {
    let http: ProviderHTTP
    /// `https://fcm.googleapis.com`, or a local endpoint.
    let apiURL: String
    /// `https://oauth2.googleapis.com/token` (the service account file's `token_uri` is not
    /// followed: the endpoint is a setting, so a credentials file cannot point Parley elsewhere).
    let tokenURL: String
    let tokens: FCMTokens

    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    /// The parts of a Google service account key file Parley uses.
    struct ServiceAccount: Codable {
        var projectId: String
        var clientEmail: String
        var privateKey: String
        enum CodingKeys: String, CodingKey { case projectId = "project_id", clientEmail = "client_email", privateKey = "private_key" }
    }

    enum Outcome {
        case sent
        /// The token is dead (the app was uninstalled): delete the registration.
        case unregistered
    }

    func send(
        token: String, account: ServiceAccount, appId: AppID, credentialsAt: Date, now: Date, alert: (title: String, body: String),
        announcement: PushService.Announcement, badge: Int
    ) async throws -> Outcome {
        let access = try await tokens.token(appId: appId, credentialsAt: credentialsAt, now: now) {
            try await self.exchange(account, now: now)
        }
        let conversation = announcement.conversationId.rawValue
        let message: [String: Any] = [
            "message": [
                "token": token,
                "notification": ["title": alert.title, "body": alert.body],
                "android": ["collapse_key": conversation, "priority": "HIGH", "notification": ["tag": conversation, "notification_count": badge]],
                "data": ["conversationId": conversation, "kind": announcement.kind.rawValue],
            ]
        ]
        var request = HTTPClientRequest(url: "\(apiURL)/v1/projects/\(account.projectId)/messages:send")
        request.method = .POST
        request.headers = HTTPHeaders([("Authorization", "Bearer \(access)"), ("Content-Type", "application/json; charset=UTF-8")])
        request.body = .bytes(ByteBuffer(data: try JSONSerialization.data(withJSONObject: message, options: [.sortedKeys])))
        let answer: ProviderHTTP.Answer
        do {
            answer = try await http.send(request, maxBytes: 64 * 1024)
        } catch {
            throw JobFailure.retry("FCM: \(error)")
        }
        if (200..<300).contains(answer.status) { return .sent }
        // `{"error": {"code", "message", "status", "details": [{"@type": "...FcmError", "errorCode": "UNREGISTERED"}]}}`
        struct Failure: Decodable {
            struct Body: Decodable {
                struct Detail: Decodable { var errorCode: String? }
                var status: String?
                var message: String?
                var details: [Detail]?
            }
            var error: Body
        }
        let failure = try? JSONDecoder().decode(Failure.self, from: answer.body)
        let code = failure?.error.details?.compactMap(\.errorCode).first ?? failure?.error.status ?? "HTTP \(answer.status)"
        switch (answer.status, code) {
        case (_, "UNREGISTERED"), (404, _):
            return .unregistered
        case (400, "INVALID_ARGUMENT") where failure?.error.message?.lowercased().contains("registration token") == true:
            return .unregistered
        case (401, _), (_, "THIRD_PARTY_AUTH_ERROR"):
            tokens.forget(appId)
            throw JobFailure.retry("FCM: \(code)")
        case (429, _), (500..., _):
            throw JobFailure.retry("FCM: \(code)", after: answer.retryAfter)
        default:
            throw JobFailure.permanent("FCM refused the notification: \(code)")
        }
    }

    struct Assertion: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// The service account's signed assertion for an access token (RFC 7523's `jwt-bearer` grant).
    private func exchange(_ account: ServiceAccount, now: Date) async throws -> (String, TimeInterval) {
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: account.privateKey), digestAlgorithm: .sha256)
        let assertion = try await keys.sign(Assertion(
            iss: IssuerClaim(value: account.clientEmail), scope: Self.scope, aud: AudienceClaim(value: tokenURL), iat: IssuedAtClaim(value: now),
            exp: ExpirationClaim(value: now.addingTimeInterval(3600))))
        var request = HTTPClientRequest(url: tokenURL)
        request.method = .POST
        request.headers = HTTPHeaders([("Content-Type", "application/x-www-form-urlencoded")])
        request.body = .bytes(ByteBuffer(string: FormBody.encode([
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion),
        ])))
        let answer: ProviderHTTP.Answer
        do {
            answer = try await http.send(request, maxBytes: 64 * 1024)
        } catch {
            throw JobFailure.retry("Google's token endpoint: \(error)")
        }
        struct Token: Decodable {
            var accessToken: String
            var expiresIn: Int?
            enum CodingKeys: String, CodingKey { case accessToken = "access_token", expiresIn = "expires_in" }
        }
        guard answer.status == 200, let token = try? JSONDecoder().decode(Token.self, from: answer.body) else {
            if answer.status == 429 || answer.status >= 500 { throw JobFailure.retry("Google's token endpoint answered \(answer.status)") }
            throw JobFailure.permanent("Google refused the service account (HTTP \(answer.status)): an admin must check the FCM credentials")
        }
        return (token.accessToken, TimeInterval(token.expiresIn ?? 3600))
    }
}

/// FCM access tokens, one per app, until five minutes before they expire. Jobs that need one at
/// the same moment share one exchange.
final class FCMTokens: Sendable {
    private struct State {
        var cached: [AppID: (token: String, expires: Date, credentialsAt: Date)] = [:]
        var exchanging: [AppID: Task<(String, TimeInterval), any Error>] = [:]
    }
    private let state = Mutex(State())

    func token(
        appId: AppID, credentialsAt: Date, now: Date, fetch: @escaping @Sendable () async throws -> (String, TimeInterval)
    ) async throws -> String {
        let found = state.withLock { state -> Lookup in
            if let cached = state.cached[appId], cached.credentialsAt == credentialsAt, now < cached.expires { return .cached(cached.token) }
            if let running = state.exchanging[appId] { return .exchanging(running) }
            let task = Task { try await fetch() }
            state.exchanging[appId] = task
            return .exchanging(task)
        }
        let exchange: Task<(String, TimeInterval), any Error>
        switch found {
        case .cached(let token): return token
        case .exchanging(let task): exchange = task
        }
        defer { state.withLock { _ = $0.exchanging.removeValue(forKey: appId) } }
        let (token, lifetime) = try await exchange.value
        state.withLock { $0.cached[appId] = (token, now.addingTimeInterval(max(60, lifetime - 300)), credentialsAt) }
        return token
    }

    func forget(_ appId: AppID) {
        state.withLock { _ = $0.cached.removeValue(forKey: appId) }
    }

    private enum Lookup {
        case cached(String)
        case exchanging(Task<(String, TimeInterval), any Error>)
    }
}
