import Foundation
import ParleyAPI

/// What a push notification from Parley is about, read from its payload: the app's notification
/// delegate hands over `userInfo`, and opens the conversation it names.
///
/// The payload, as Parley sends it:
/// - APNs: `{"aps": {"alert": {"title", "body"}, "badge", "sound", "thread-id": "<conversation id>"},
///   "parley": {"conversationId": "cnv_...", "kind": "text"}}`
/// - FCM (data message keys, also what an iOS app using Firebase gets in `userInfo`):
///   `{"conversationId": "cnv_...", "kind": "text"}` beside the notification's title and body.
///
/// `kind` is `text`, `voice`, `attachment` or `call` (an agent rings: open the conversation and
/// connect, the call is still ringing). The alert's text is the brand's choice: the message, or a
/// masked "New message from <brand>". `badge` is the consumer's unread count.
public struct ParleyNotification: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case text, voice, attachment, call
    }

    public let conversationId: ConversationID
    public let kind: Kind

    /// Nil for a notification that is not Parley's (another service of the app's).
    public init?(userInfo: [AnyHashable: Any]) {
        let fields = (userInfo["parley"] as? [String: Any]) ?? (userInfo["parley"] as? [AnyHashable: Any]).map(Self.strings) ?? Self.strings(userInfo)
        guard let id = fields["conversationId"] as? String, ConversationID.isWellFormed(ConversationID(rawValue: id)),
            let kind = (fields["kind"] as? String).flatMap(Kind.init(rawValue:))
        else { return nil }
        self.conversationId = ConversationID(rawValue: id)
        self.kind = kind
    }

    private static func strings(_ dictionary: [AnyHashable: Any]) -> [String: Any] {
        Dictionary(dictionary.compactMap { key, value in (key as? String).map { ($0, value) } }, uniquingKeysWith: { first, _ in first })
    }
}
