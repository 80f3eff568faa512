import HummingbirdBcrypt
import NIOPosix

/// bcrypt on the thread pool: hashing takes tens to hundreds of milliseconds and must not block
/// an event loop.
struct PasswordHasher: Sendable {
    var cost: Int

    func hash(_ password: String) async throws -> String {
        let cost = UInt8(cost)
        return try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    func verify(_ password: String, hash: String) async throws -> Bool {
        try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
    }

    /// A hash to verify against when the account does not exist, so that a failed sign-in takes the
    /// same time whether or not the email is known.
    static let decoy = Bcrypt.hash("parley-decoy-password", cost: 4)
}
