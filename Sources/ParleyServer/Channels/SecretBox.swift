import Crypto
import Foundation
import ParleyDomain
import ParleyStore

/// Seals the secrets brands give Parley (a provider's app secret, access token, verify token) with
/// AES-256-GCM before they are stored, and opens them when a webhook or a send needs them.
///
/// The key is `PARLEY_SECRET_KEY` (base64 of 32 bytes) or, without it, `<data-dir>/secret.key`,
/// written with mode 0600 on first start. Sealed text is `v1:` and the base64 of nonce, ciphertext
/// and tag, so that a later key version can be told apart.
public struct SecretBox: Sendable {
    let key: SymmetricKey
    /// Keys of earlier rotations: they still open, never seal.
    var previous: [SymmetricKey] = []

    static func load(_ configuration: ParleyConfiguration) throws -> SecretBox {
        var box = try loadCurrent(configuration)
        for text in configuration.previousSecretKeys {
            guard let data = Data(base64Encoded: text), data.count == 32 else {
                throw ConfigurationError(setting: "PARLEY_PREVIOUS_SECRET_KEYS", message: "each key must be base64 of exactly 32 bytes")
            }
            box.previous.append(SymmetricKey(data: data))
        }
        return box
    }

    private static func loadCurrent(_ configuration: ParleyConfiguration) throws -> SecretBox {
        if let text = configuration.secretKey {
            guard let data = Data(base64Encoded: text), data.count == 32 else {
                throw ConfigurationError(setting: "PARLEY_SECRET_KEY", message: "must be base64 of exactly 32 bytes (openssl rand -base64 32)")
            }
            return SecretBox(key: SymmetricKey(data: data))
        }
        let path = configuration.secretKeyFile
        if let data = FileManager.default.contents(atPath: path) {
            guard data.count == 32 else { throw ConfigurationError(setting: path, message: "must hold exactly 32 bytes") }
            return SecretBox(key: SymmetricKey(data: data))
        }
        let key = SymmetricKey(size: .bits256)
        let bytes = key.withUnsafeBytes { Data($0) }
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: path, contents: bytes, attributes: [.posixPermissions: 0o600]) else {
            throw ConfigurationError(setting: path, message: "could not be written")
        }
        return SecretBox(key: key)
    }

    func seal(_ text: String) throws -> String {
        let box = try AES.GCM.seal(Data(text.utf8), using: key)
        guard let combined = box.combined else { throw StoreFailure.sealing }
        return "v1:" + combined.base64EncodedString()
    }

    func open(_ sealed: String) throws -> String {
        guard sealed.hasPrefix("v1:"), let data = Data(base64Encoded: String(sealed.dropFirst(3))) else { throw StoreFailure.sealing }
        let box = try AES.GCM.SealedBox(combined: data)
        for candidate in [key] + previous {
            if let plain = try? AES.GCM.open(box, using: candidate) { return String(decoding: plain, as: UTF8.self) }
        }
        throw StoreFailure.sealing
    }

    /// Whether `sealed` opens with the current key (false: it needs re-sealing after a rotation).
    func isCurrent(_ sealed: String) -> Bool {
        guard sealed.hasPrefix("v1:"), let data = Data(base64Encoded: String(sealed.dropFirst(3))),
            let box = try? AES.GCM.SealedBox(combined: data)
        else { return false }
        return (try? AES.GCM.open(box, using: key)) != nil
    }

    enum StoreFailure: Error { case sealing }

    /// A secret sealed with the server's key (`PARLEY_SECRET_KEY`, or `<data-dir>/secret.key`,
    /// made on first use), for a setting that takes sealed values (`parley seal`).
    public static func sealSetting(_ text: String, configuration: ParleyConfiguration) throws -> String {
        try load(configuration).seal(text)
    }

    /// Seals every value of every sealed column (`SealedColumns.all`) that the current key does not
    /// open with the current key, in one transaction; returns how many. A value no key opens stops
    /// it, naming the column, and nothing is changed.
    static func reseal(store: Store, secrets: SecretBox) async throws -> Int {
        try await store.write { repo in
            var count = 0
            for column in SealedColumns.all {
                for value in try await repo.sealedValues(column) where !secrets.isCurrent(value.sealed) {
                    guard let plain = try? secrets.open(value.sealed) else { throw ResealFailure(column: column, key: value.key) }
                    try await repo.updateSealed(column, key: value.key, sealed: try secrets.seal(plain))
                    count += 1
                }
            }
            return count
        }
    }

    /// A sealed value that neither the current key nor a previous one opens.
    struct ResealFailure: Error, CustomStringConvertible {
        var column: SealedColumn
        var key: [String]
        var description: String {
            "\(column) of \(key.joined(separator: "/")) opens with no key given: add the key it was sealed with to PARLEY_PREVIOUS_SECRET_KEYS"
        }
    }
}
