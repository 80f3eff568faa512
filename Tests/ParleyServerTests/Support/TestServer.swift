import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ParleyAPI
import ParleyServer
import ServiceLifecycle
import Testing

/// A real Parley server on 127.0.0.1 and an ephemeral port, with its own SQLite file and media
/// directory, stopped and removed when the test ends.
struct TestServer: Sendable {
    let port: Int
    let services: ParleyServices
    let dataDirectory: URL

    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }

    static func run(
        configure: (inout ParleyConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = ParleyConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory.path
        configuration.bcryptCost = 4
        configuration.seedDemo = false
        configuration.clamd = "off"  // tests that scan start their own clamd
        // Tests send faster than people do; the rate-limit tests turn limits back on.
        configuration.rateConsumerMessages = 0
        configuration.rateIPWrites = 0
        configuration.rateConsumerSessions = 0
        configuration.rateLogins = 0
        configuration.publicDirectory = repositoryRoot.appendingPathComponent("Public").path
        configure(&configuration)
        var logger = Logger(label: "parley-test-server")
        logger.logLevel = .warning
        let services = try await ParleyServices.make(configuration: configuration, logger: logger)
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let app = buildApplication(services, logger: logger) { port in portContinuation.yield(port) }
        let group = makeServiceGroup(app, services, gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw TestFailure("server did not start") }
        let server = TestServer(port: port, services: services, dataDirectory: directory)
        do {
            try await body(server)
        } catch {
            await group.triggerGracefulShutdown()
            _ = try? await running.value
            await services.close()
            throw error
        }
        await group.triggerGracefulShutdown()
        try await running.value
        await services.close()
    }

    // MARK: HTTP

    struct Reply: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: Data

        func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
            do {
                return try ParleyJSON.makeDecoder().decode(T.self, from: body)
            } catch {
                throw TestFailure("could not decode \(T.self) from \(status.code): \(String(decoding: body, as: UTF8.self))")
            }
        }

        /// The error body; fails the test when the response has none.
        var error: ErrorBody.Detail {
            get throws { try decode(ErrorBody.self).error }
        }

        var text: String { String(decoding: body, as: UTF8.self) }
    }

    @discardableResult
    func request(
        _ method: HTTPRequest.Method, _ path: String, token: String? = nil, json: (any Encodable)? = nil, raw: String? = nil,
        data: Data? = nil, headers extra: HTTPFields = [:]
    ) async throws -> Reply {
        var headers = extra
        if let token { headers[.authorization] = "Bearer \(token)" }
        var body: ByteBuffer?
        if let json {
            body = ByteBuffer(bytes: try ParleyJSON.makeEncoder().encode(json))
        } else if let raw {
            body = ByteBuffer(string: raw)
        }
        if body != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        if let data {
            body = ByteBuffer(bytes: data)
            if headers[.contentType] == nil { headers[.contentType] = "application/octet-stream" }
        }
        let request = TestClient.Request(path, method: method, authority: "127.0.0.1:\(port)", headers: headers, body: body)
        let response = try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            try await client.execute(request)
        }
        return Reply(status: response.status, headers: response.headers, body: response.body.map { Data(buffer: $0) } ?? Data())
    }

    func get(_ path: String, token: String? = nil) async throws -> Reply {
        try await request(.get, path, token: token)
    }

    func post(_ path: String, token: String? = nil, json: (any Encodable)? = nil) async throws -> Reply {
        try await request(.post, path, token: token, json: json)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
