import Foundation
import HummingbirdBcrypt
import NIOPosix

/// bcrypt on the thread pool: hashing takes tens to hundreds of milliseconds and must not block
/// an event loop.
struct PasswordHasher: Sendable {
    let cost: Int
    /// A hash to verify against when the account does not exist, made at the same cost as real
    /// hashes, so that a failed sign-in takes the same time whether or not the email is known.
    let decoy: String

    init(cost: Int) {
        self.cost = cost
        self.decoy = Bcrypt.hash("parley-decoy-\(UUID().uuidString)", cost: UInt8(cost))
    }

    func hash(_ password: String) async throws -> String {
        let cost = UInt8(cost)
        return try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    func verify(_ password: String, hash: String) async throws -> Bool {
        try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
    }
}
