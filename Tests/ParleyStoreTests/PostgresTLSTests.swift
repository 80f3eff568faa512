import Foundation
import Logging
import ParleyStore
import SQLKit
import Testing

/// TLS to PostgreSQL as libpq's `sslmode` and `sslrootcert` say (issue 32: `?sslmode=require` once
/// connected in plaintext). The test script starts a second PostgreSQL with `ssl=on`, a certificate
/// for "localhost" only signed by a test CA, and password sign-in (`scripts/postgres.sh start DIR --tls`),
/// and names it in `TEST_POSTGRES_TLS_URL` and its CA in `TEST_POSTGRES_TLS_CA`.
@Suite("PostgreSQL: sslmode and sslrootcert, start-up failures")
struct PostgresTLSTests {
    static let environment = ProcessInfo.processInfo.environment
    static let logger = Logger(label: "parley-tls-test")

    @Test("sslmode is read as libpq reads it; an unknown mode or an unreadable sslrootcert is refused by name")
    func parsing() throws {
        #expect(try PostgresSettings(url: "postgres://u@db.example:5432/p").sslMode == .prefer)
        for mode in PostgresSettings.SSLMode.allCases {
            #expect(try PostgresSettings(url: "postgres://u@db.example/p?sslmode=\(mode.rawValue)").sslMode == mode)
        }
        #expect(try PostgresSettings(url: "postgres://u@db.example/p?sslmode=REQUIRE").sslMode == .require)
        let ca = FileManager.default.temporaryDirectory.appendingPathComponent("ca-\(UUID().uuidString).crt")
        try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: ca)
        defer { try? FileManager.default.removeItem(at: ca) }
        // require with a root certificate checks it, as libpq does.
        #expect(try PostgresSettings(url: "postgres://u@db.example/p?sslmode=require&sslrootcert=\(ca.path)").effectiveMode == .verifyCA)
        #expect(throws: StoreError.self) { try PostgresSettings(url: "postgres://u@db.example/p?sslmode=sometimes") }
        #expect(throws: StoreError.self) { try PostgresSettings(url: "postgres://u@db.example/p?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt") }
        if case .disable = try PostgresSettings(url: "postgres://u@db.example/p?sslmode=disable").tls() {} else { Issue.record("disable has TLS") }
        if case .require = try PostgresSettings(url: "postgres://u@db.example/p?sslmode=verify-full").tls() {} else { Issue.record("verify-full without TLS") }
    }

    static var tlsServer: (url: URLComponents, ca: String)? {
        guard let url = environment["TEST_POSTGRES_TLS_URL"].flatMap({ URLComponents(string: $0) }), let ca = environment["TEST_POSTGRES_TLS_CA"] else { return nil }
        return (url, ca)
    }

    /// The TLS server's URL with `host` and query items.
    static func url(host: String = "127.0.0.1", password: String? = nil, _ query: [String: String]) throws -> String {
        var components = try #require(tlsServer).url
        components.host = host
        if let password { components.password = password }
        components.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        return try #require(components.string)
    }

    /// Whether the connection the database hands out is encrypted, as the server sees it.
    static func encrypted(_ url: String) async throws -> Bool {
        let database = try await openDatabase(.postgres(url: url), poolSize: 2, logger: logger)
        defer { Task { await database.close() } }
        return try await database.read { db in
            try await db.raw("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").first()?.decode(column: "ssl", as: Bool.self) ?? false
        }
    }

    /// The start-up refusal's text, and how long it took.
    static func refusal(_ url: String) async -> (text: String, seconds: Double) {
        let started = Date()
        do {
            let database = try await openDatabase(.postgres(url: url), poolSize: 2, logger: logger)
            await database.close()
            return ("connected", Date().timeIntervalSince(started))
        } catch {
            return ("\(error)", Date().timeIntervalSince(started))
        }
    }

    @Test("against a server with TLS: verify-full passes for the certificate's name and fails for another, verify-ca checks the CA only, require and prefer encrypt, disable does not; a wrong password ends at once with PostgreSQL's message",
          .enabled(if: environment["TEST_POSTGRES_URL"] != nil, "the test script starts PostgreSQL"))
    func againstTLS() async throws {
        let (_, ca) = try #require(Self.tlsServer, "the test script starts a PostgreSQL with TLS next to the plain one")
        #expect(try await Self.encrypted(try Self.url(host: "localhost", ["sslmode": "verify-full", "sslrootcert": ca])))
        // The certificate names "localhost" only: 127.0.0.1 is another name.
        let wrongName = await Self.refusal(try Self.url(host: "127.0.0.1", ["sslmode": "verify-full", "sslrootcert": ca]))
        #expect(wrongName.text.contains("cannot connect to PostgreSQL") && wrongName.text.lowercased().contains("hostname"), "\(wrongName.text)")
        #expect(try await Self.encrypted(try Self.url(host: "127.0.0.1", ["sslmode": "verify-ca", "sslrootcert": ca])))
        // Without our CA the certificate is not trusted.
        let untrusted = await Self.refusal(try Self.url(host: "localhost", ["sslmode": "verify-full"]))
        #expect(untrusted.text.contains("cannot connect to PostgreSQL") && untrusted.text.lowercased().contains("certificate"), "\(untrusted.text)")
        #expect(try await Self.encrypted(try Self.url(["sslmode": "require"])))
        #expect(try await Self.encrypted(try Self.url([:])))  // prefer, libpq's default
        #expect(try await !Self.encrypted(try Self.url(["sslmode": "disable"])))
        // A wrong password: PostgreSQL's own words and code, at once (the pool used to retry for 68 s).
        let wrong = await Self.refusal(try Self.url(password: "not-the-password", ["sslmode": "require"]))
        #expect(wrong.text.contains("password authentication failed") && wrong.text.contains("SQLSTATE 28P01"), "\(wrong.text)")
        #expect(!wrong.text.contains("not-the-password"))
        #expect(wrong.seconds < 10, "\(wrong.seconds) s")
    }

    @Test("against a server without TLS: require is refused, saying so; prefer connects in plaintext; nothing listening ends within 10 s",
          .enabled(if: environment["TEST_POSTGRES_URL"] != nil, "the test script starts PostgreSQL"))
    func againstPlain() async throws {
        var plain = try #require(Self.environment["TEST_POSTGRES_URL"].flatMap { URLComponents(string: $0) })
        plain.queryItems = [URLQueryItem(name: "sslmode", value: "require")]
        let refused = await Self.refusal(try #require(plain.string))
        #expect(refused.text.contains("does not offer TLS"), "\(refused.text)")
        plain.queryItems = [URLQueryItem(name: "sslmode", value: "prefer")]
        #expect(try await !Self.encrypted(try #require(plain.string)))
        // A port where nothing listens.
        plain.port = 1
        plain.queryItems = nil
        let nobody = await Self.refusal(try #require(plain.string))
        #expect(nobody.text.contains("cannot connect to PostgreSQL") && nobody.text.lowercased().contains("refused"), "\(nobody.text)")
        #expect(nobody.seconds < 10)
    }
}
