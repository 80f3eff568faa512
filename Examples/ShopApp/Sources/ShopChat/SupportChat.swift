import Foundation
import ParleyKit

/// The shop's support chat, as a brand's app wires ParleyKit: configured once at launch with the
/// app's ids, signed in as the shop's customer (a JWT from the shop's backend), sending through the
/// sealed outbox and listening for what agents write.
public actor SupportChat {
    public let parley: Parley

    public init(server: URL, brand: BrandID, app: AppID, customerToken: @escaping @Sendable () async throws -> String) async throws {
        let folder = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0].appendingPathComponent("support-chat")
        #if canImport(Security)
        let key = ParleyStorage.Key.keychain()
        #else
        let key = ParleyStorage.Key.file(folder.appendingPathComponent("storage.key"))
        #endif
        parley = try await Parley.configure(
            brandID: brand, appID: app, server: server, identity: .authenticated(customerToken),
            storage: ParleyStorage(directory: folder, key: key))
    }

    /// Queues the customer's question (sent now if online, else when the network is back).
    public func ask(_ question: String) async throws -> Parley.OutgoingMessage {
        let message = try await parley.send(question)
        await parley.start()
        return message
    }

    /// The model the shop's chat screen binds to (`@Observable`): messages with the customer's
    /// pending ones, the agent's name and typing, the queue, the survey, voice notes.
    @MainActor public func screen() -> ConversationModel {
        #if canImport(AVFoundation) && !os(watchOS)
        ConversationModel(parley: parley, output: AudioPlayerOutput())
        #else
        ConversationModel(parley: parley, output: ClockVoiceOutput())
        #endif
    }

    /// The number on the shop's Help tab.
    public func unread() async throws -> Int {
        try await parley.unreadCount()
    }

    /// A tapped notification: the conversation to open, when it is the chat's.
    public nonisolated func conversation(forNotification userInfo: [AnyHashable: Any]) -> ConversationID? {
        ParleyNotification(userInfo: userInfo)?.conversationId
    }

    /// The customer signs out of the shop: push unregistered, the session ended, the device wiped.
    public func signOut() async throws {
        _ = try await parley.signOut()
    }

    /// The agents' replies, as they arrive.
    public func replies() -> AsyncStream<String> {
        let events = parley.events
        return AsyncStream { continuation in
            let task = Task {
                for await event in events {
                    if case .message(let message) = event, message.senderKind == .agent { continuation.yield(message.text) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
