import Foundation
import ParleyAPI

/// What the device keeps to show offline, sealed like everything ParleyKit stores: the messages of
/// the most recent conversations (`ParleyStorage.cachedConversations`) and the audio of the most
/// recently played voice notes (`ParleyStorage.cachedVoiceNotes`).
extension Parley {
    struct CacheIndex: Codable {
        /// Conversations with cached messages, most recently updated last.
        var conversations: [String] = []
        /// Voice notes with cached audio, most recently used last.
        var voiceNotes: [String] = []
    }

    static let cacheIndexFile = "cache-index.sealed"
    /// Messages kept per conversation.
    static let cachedMessagesPerConversation = 200

    static func messagesFile(_ conversationId: ConversationID) -> String { "messages-\(conversationId.rawValue).sealed" }
    static func audioFile(_ messageId: MessageID) -> String { "audio-\(messageId.rawValue).sealed" }

    /// The messages this device has of a conversation, for showing it without a network.
    public func cachedMessages(in conversationId: ConversationID) -> [MessageDTO] {
        (try? store.read(Self.messagesFile(conversationId), as: [MessageDTO].self)) ?? []
    }

    /// Merges messages into the conversation's cache (by id, newest state wins, in sequence order)
    /// and keeps only the most recent conversations.
    func cache(_ messages: [MessageDTO], in conversationId: ConversationID) {
        guard storage.cachedConversations > 0, !messages.isEmpty else { return }
        var byId = Dictionary(cachedMessages(in: conversationId).map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        for message in messages { byId[message.id] = message }
        let kept = byId.values.sorted { $0.seq < $1.seq }.suffix(Self.cachedMessagesPerConversation)
        try? store.write(Self.messagesFile(conversationId), Array(kept))
        var index = (try? store.read(Self.cacheIndexFile, as: CacheIndex.self)) ?? CacheIndex()
        index.conversations.removeAll { $0 == conversationId.rawValue }
        index.conversations.append(conversationId.rawValue)
        while index.conversations.count > storage.cachedConversations {
            store.remove(Self.messagesFile(ConversationID(rawValue: index.conversations.removeFirst())))
        }
        try? store.write(Self.cacheIndexFile, index)
    }

    /// A voice note's audio for playing on this device: the AAC rendition (which Apple platforms and
    /// browsers play), from the sealed cache when it was fetched before.
    public func voiceAudio(for message: MessageDTO) async throws -> Data {
        var index = (try? store.read(Self.cacheIndexFile, as: CacheIndex.self)) ?? CacheIndex()
        defer { try? store.write(Self.cacheIndexFile, index) }
        if let cached = try? store.read(Self.audioFile(message.id), as: Data.self) {
            index.voiceNotes.removeAll { $0 == message.id.rawValue }
            index.voiceNotes.append(message.id.rawValue)
            return cached
        }
        guard let renditions = message.voice?.renditions, !renditions.isEmpty else { throw ParleyKitError.notAvailable("this message has no audio yet") }
        let rendition = renditions.first { $0.format == .aac } ?? renditions.first { $0.format == .original } ?? renditions[0]
        try await ensureSession()
        let audio = try await client.download(rendition.url)
        if storage.cachedVoiceNotes > 0 {
            try store.write(Self.audioFile(message.id), audio)
            index.voiceNotes.removeAll { $0 == message.id.rawValue }
            index.voiceNotes.append(message.id.rawValue)
            while index.voiceNotes.count > storage.cachedVoiceNotes {
                store.remove(Self.audioFile(MessageID(rawValue: index.voiceNotes.removeFirst())))
            }
        }
        return audio
    }
}
