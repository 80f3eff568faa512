import Crypto
import Foundation
import Logging
import ParleyAPI
import ParleyDomain
import ParleyStore
import ServiceLifecycle
import Synchronization

extension CallService {
    // MARK: ICE

    /// STUN and TURN settings for one side of one call. TURN credentials follow coturn's REST API
    /// format: the user name is `<expiry unix time>:<call id>.<side>` and the password is
    /// base64(HMAC-SHA1(secret, user name)), so coturn checks them without asking Parley.
    func iceConfiguration(callId: CallID, party: CallParty, now: Date) -> IceConfigurationDTO {
        Self.iceConfiguration(configuration, callId: callId, party: party, now: now)
    }

    static func iceConfiguration(_ configuration: ParleyConfiguration, callId: CallID, party: CallParty, now: Date) -> IceConfigurationDTO {
        var servers: [IceServerDTO] = []
        if !configuration.stunURLs.isEmpty {
            servers.append(IceServerDTO(urls: configuration.stunURLs))
        }
        var expiresAt: Date?
        if !configuration.turnURLs.isEmpty, let secret = configuration.turnSecret {
            let expiry = Int(now.timeIntervalSince1970) + configuration.turnCredentialSeconds
            let username = "\(expiry):\(callId).\(party.rawValue)"
            servers.append(IceServerDTO(urls: configuration.turnURLs, username: username, credential: turnPassword(username: username, secret: secret)))
            expiresAt = Date(timeIntervalSince1970: TimeInterval(expiry))
        }
        return IceConfigurationDTO(
            iceServers: servers, iceTransportPolicy: configuration.callRelayOnly ? "relay" : "all", expiresAt: expiresAt)
    }

    static func turnPassword(username: String, secret: String) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(username.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return Data(mac).base64EncodedString()
    }
}
