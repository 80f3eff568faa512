import Foundation
import NIOSSL
import PostgresKit
import PostgresNIO

/// What a `postgres://` URL says, read as libpq reads it: the server, the user and database, and TLS
/// from `sslmode` and `sslrootcert` (https://www.postgresql.org/docs/15/libpq-ssl.html).
///
/// | sslmode | TLS | the server's certificate |
/// |---|---|---|
/// | `disable` | never | - |
/// | `allow`, `prefer` (the default, as in libpq) | when the server offers it | not checked |
/// | `require` | always | not checked; checked against `sslrootcert` like `verify-ca` when one is given (as libpq does) |
/// | `verify-ca` | always | signed by `sslrootcert` (or the system's roots) |
/// | `verify-full` | always | `verify-ca`, and issued for the host name (or IP address) in the URL |
public struct PostgresSettings: Sendable {
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var host: String?
    public var port: Int
    public var unixSocketPath: String?
    public var username: String
    public var password: String?
    public var database: String?
    public var sslMode: SSLMode
    /// The CA certificates (PEM) that sign the server's certificate.
    public var rootCertificate: String?

    public init(url: String) throws(StoreError) {
        // PostgresKit reads the server and the user; TLS is read here (PostgresKit knows fewer modes).
        var withoutTLS = URLComponents(string: url)
        let query = withoutTLS?.queryItems ?? []
        let tlsNames: Set<String> = ["sslmode", "tlsmode", "ssl", "tls", "sslrootcert"]
        let kept = query.filter { !tlsNames.contains($0.name.lowercased()) }
        withoutTLS?.queryItems = kept.isEmpty ? nil : kept
        guard let plain = withoutTLS?.string, let core = try? SQLPostgresConfiguration(url: plain).coreConfiguration else {
            throw StoreError.configuration("'\(DatabaseLocation.redact(url))' is not a valid postgres URL (postgres://user:password@host:port/database)")
        }
        (host, port, unixSocketPath) = (core.host, core.port ?? 5432, core.unixSocketPath)
        (username, password, database) = (core.username, core.password, core.database)
        let mode = query.last { ["sslmode", "tlsmode"].contains($0.name.lowercased()) }?.value ?? "prefer"
        guard let sslMode = SSLMode(rawValue: mode.lowercased()) else {
            throw StoreError.configuration(
                "sslmode=\(mode) is not one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", ")) (the postgres URL's sslmode)")
        }
        self.sslMode = sslMode
        rootCertificate = query.last { $0.name.lowercased() == "sslrootcert" }?.value.flatMap { $0.isEmpty ? nil : $0 }
        if let rootCertificate, !FileManager.default.isReadableFile(atPath: rootCertificate) {
            throw StoreError.configuration("sslrootcert=\(rootCertificate) cannot be read (the postgres URL's CA certificate file)")
        }
    }

    /// The mode in force: `require` with a root certificate checks it, as libpq does.
    public var effectiveMode: SSLMode {
        sslMode == .require && rootCertificate != nil ? .verifyCA : sslMode
    }

    /// What TLS the mode asks for, with the certificate checks it makes.
    public enum TLSChoice: Sendable {
        case disable
        case prefer(TLSConfiguration)
        case require(TLSConfiguration)
    }

    public func tls() -> TLSChoice {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificate {
            configuration.trustRoots = .file(rootCertificate)
        }
        switch effectiveMode {
        case .disable:
            return .disable
        case .allow, .prefer:
            configuration.certificateVerification = .none
            return .prefer(configuration)
        case .require:
            configuration.certificateVerification = .none
            return .require(configuration)
        case .verifyCA:
            configuration.certificateVerification = .noHostnameVerification
            return .require(configuration)
        case .verifyFull:
            // The host name is checked against the certificate's names; an IP address (which SNI
            // cannot carry) against its IP addresses.
            configuration.certificateVerification = .fullVerification
            return .require(configuration)
        }
    }

    /// One connection's configuration (the start-up check), with a connect timeout.
    func connectionConfiguration(connectTimeout: Duration) throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let host {
            let tls: PostgresConnection.Configuration.TLS = switch self.tls() {
            case .disable: .disable
            case .prefer(let configuration): .prefer(try NIOSSLContext(configuration: configuration))
            case .require(let configuration): .require(try NIOSSLContext(configuration: configuration))
            }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        } else if let unixSocketPath {
            configuration = .init(unixSocketPath: unixSocketPath, username: username, password: password, database: database)
        } else {
            throw StoreError.configuration("the postgres URL names neither a host nor a socket")
        }
        configuration.options.connectTimeout = .nanoseconds(Int64(connectTimeout.components.seconds) * 1_000_000_000)
        return configuration
    }

    /// The pool's configuration.
    func clientConfiguration(poolSize: Int, connectTimeout: Duration) throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let host {
            let tls: PostgresClient.Configuration.TLS = switch self.tls() {
            case .disable: .disable
            case .prefer(let configuration): .prefer(configuration)
            case .require(let configuration): .require(configuration)
            }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        } else if let unixSocketPath {
            configuration = .init(unixSocketPath: unixSocketPath, username: username, password: password, database: database)
        } else {
            throw StoreError.configuration("the postgres URL names neither a host nor a socket")
        }
        configuration.options.maximumConnections = poolSize
        configuration.options.connectTimeout = connectTimeout
        // Every connection of the pool stays open and none runs a keep-alive query. PostgresNIO's
        // pool starts a timer each time a connection comes back to it (one for the keep-alive query,
        // one for closing connections above the minimum when idle) and cancels them when the
        // connection is next leased: two child tasks, a task group and a sleep per timer, three
        // times a message on the message path. Without them the two nodes of the cluster bench
        // spent 733 µs per message instead of 1,075 and cross-node delivery p99 went from 12-25 ms
        // to 4 ms (bench/RESULTS.md, "Across nodes"). A closed connection is still seen at once
        // (the pool opens another in its place); a quiet one through NAT or a firewall is kept
        // open by PostgreSQL's own TCP keepalives (docs/cluster.md: tcp_keepalives_idle).
        configuration.options.minimumConnections = poolSize
        configuration.options.keepAliveBehavior = nil
        return configuration
    }
}
