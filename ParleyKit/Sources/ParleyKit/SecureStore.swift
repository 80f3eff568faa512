import Crypto
import Foundation

/// Where ParleyKit keeps what it stores on the device, and the key it seals it with.
public struct ParleyStorage: Sendable {
    /// The key that seals the files (AES-256-GCM).
    public enum Key: Sendable {
        /// 32 bytes the app keeps itself (in the Keychain, say).
        case bytes(Data)
        /// A key file, created with mode 0600 on first use (Linux, command-line tools).
        case file(URL)
        #if canImport(Security)
        /// A key in the Keychain (Apple platforms), created on first use, readable after the first
        /// unlock and never synced or restored to another device.
        case keychain(service: String = "com.parley.kit", account: String = "storage-key")
        #endif
    }

    public var directory: URL
    public var key: Key
    /// How many conversations' messages are kept on the device for reading offline.
    public var cachedConversations: Int
    /// How many voice notes' audio files are kept on the device (the most recently played).
    public var cachedVoiceNotes: Int

    public init(directory: URL, key: Key, cachedConversations: Int = 20, cachedVoiceNotes: Int = 20) {
        self.directory = directory
        self.key = key
        self.cachedConversations = max(0, cachedConversations)
        self.cachedVoiceNotes = max(0, cachedVoiceNotes)
    }
}

/// Files sealed with AES-256-GCM (swift-crypto): nothing ParleyKit stores is readable without the
/// key. Each file is written whole to a temporary name and renamed, so a crash never leaves half a file.
struct SecureStore: Sendable {
    let directory: URL
    let key: SymmetricKey

    init(_ storage: ParleyStorage) throws {
        directory = storage.directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        switch storage.key {
        case .bytes(let data):
            guard data.count == 32 else { throw ParleyKitError.storage("the storage key must be 32 bytes") }
            key = SymmetricKey(data: data)
        case .file(let url):
            if let data = FileManager.default.contents(atPath: url.path) {
                guard data.count == 32 else { throw ParleyKitError.storage("the key file must hold 32 bytes") }
                key = SymmetricKey(data: data)
            } else {
                let created = SymmetricKey(size: .bits256)
                let bytes = created.withUnsafeBytes { Data($0) }
                guard FileManager.default.createFile(atPath: url.path, contents: bytes, attributes: [.posixPermissions: 0o600]) else {
                    throw ParleyKitError.storage("the key file could not be written")
                }
                key = created
            }
        #if canImport(Security)
        case .keychain(let service, let account):
            key = SymmetricKey(data: try Keychain.key(service: service, account: account))
        #endif
        }
    }

    func read<Value: Decodable>(_ name: String, as type: Value.Type) throws -> Value? {
        guard let sealed = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path) else { return nil }
        do {
            let plain = try AES.GCM.open(try AES.GCM.SealedBox(combined: sealed), using: key)
            return try JSONDecoder().decode(Value.self, from: plain)
        } catch {
            throw ParleyKitError.storage("\(name) could not be opened (another key, or a damaged file)")
        }
    }

    func write(_ name: String, _ value: some Encodable) throws {
        let plain = try JSONEncoder().encode(value)
        guard let sealed = try AES.GCM.seal(plain, using: key).combined else { throw ParleyKitError.storage("sealing failed") }
        let target = directory.appendingPathComponent(name)
        let temporary = directory.appendingPathComponent(".\(name).\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary.path, contents: sealed, attributes: [.posixPermissions: 0o600]) else {
            throw ParleyKitError.storage("\(name) could not be written")
        }
        if rename(temporary.path, target.path) != 0 {
            try? FileManager.default.removeItem(at: temporary)
            throw ParleyKitError.storage("\(name) could not be replaced")
        }
    }

    func remove(_ name: String) {
        try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
    }

    /// Signing out: every file goes.
    func wipe() throws {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] {
            try FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }
}

/// What ParleyKit's own machinery reports (the server's refusals are `ParleyClientError`).
public enum ParleyKitError: Error, Sendable, Equatable {
    case storage(String)
    /// The app id and brand id do not belong together.
    case misconfigured(String)
    /// What was asked for does not exist (yet): a voice note still being processed, say.
    case notAvailable(String)
    /// What the app passed cannot be sent (an activity's name, say); the sentence says why.
    case invalid(String)
}

#if canImport(Security)
import Security

/// The storage key in the Keychain: read, or made and added on first use.
enum Keychain {
    static func key(service: String, account: String) throws -> Data {
        let query: [CFString: Any] = [kSecClass: kSecClassGenericPassword, kSecAttrService: service, kSecAttrAccount: account]
        var found: CFTypeRef?
        let status = SecItemCopyMatching((query.merging([kSecReturnData: true, kSecMatchLimit: kSecMatchLimitOne]) { $1 }) as CFDictionary, &found)
        if status == errSecSuccess, let data = found as? Data, data.count == 32 { return data }
        guard status == errSecItemNotFound else { throw ParleyKitError.storage("the Keychain refused the storage key (\(status))") }
        let created = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        let added = SecItemAdd(
            (query.merging([kSecValueData: created, kSecAttrAccessible: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly]) { $1 }) as CFDictionary, nil)
        guard added == errSecSuccess else { throw ParleyKitError.storage("the Keychain did not keep the storage key (\(added))") }
        return created
    }
}
#endif
