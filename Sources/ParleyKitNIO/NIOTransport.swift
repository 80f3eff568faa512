import AsyncHTTPClient
import Foundation
import HummingbirdWSClient
import HummingbirdWSCompression
import Logging
import NIOCore
import NIOHTTP1
import ParleyAPI
import ParleyKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ParleyKit's transport on SwiftNIO: AsyncHTTPClient for HTTP, hummingbird-websocket's client for
/// the real-time connection. For Linux, where URLSession has no WebSockets and a known family of
/// hangs and crashes around refused connections and timeouts (swift-corelibs-foundation #4791,
/// #5469): `parley chat` and the tests use it. It lives in the server's package, not the SDK's, so
/// that an app adding ParleyKit resolves none of these packages.
public struct NIOTransport: ParleyTransport {
    public init() {}

    /// A refused connection fails at once (AsyncHTTPClient's own default retries it until the
    /// request's deadline): offline is offline, and the outbox waits.
    static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = .seconds(10)
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    public func exchange(_ request: URLRequest, maxBytes: Int, progress: (@Sendable (Double) -> Void)?) async throws -> (body: Data, status: Int) {
        guard let url = request.url?.absoluteURL.absoluteString else { throw URLError(.badURL) }
        var outgoing = HTTPClientRequest(url: url)
        outgoing.method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
        for (name, value) in request.allHTTPHeaderFields ?? [:] { outgoing.headers.add(name: name, value: value) }
        if let body = request.httpBody {
            if let progress {
                // Handed over in 64 KB pieces, each reported as it is taken to be sent.
                let total = body.count
                let (pieces, feed) = AsyncStream<(ByteBuffer, Int)>.makeStream()
                for offset in stride(from: 0, to: total, by: 64 * 1024) {
                    let end = min(offset + 64 * 1024, total)
                    feed.yield((ByteBuffer(bytes: body[body.startIndex + offset..<body.startIndex + end]), end))
                }
                feed.finish()
                outgoing.body = .stream(
                    pieces.map { piece, sent in
                        progress(Double(sent) / Double(max(total, 1)))
                        return piece
                    }, length: .known(Int64(total)))
            } else {
                outgoing.body = .bytes(ByteBuffer(bytes: body))
            }
        }
        let timeout = Duration.seconds(max(1, request.timeoutInterval))
        let prepared = outgoing
        // The whole exchange under one deadline: AsyncHTTPClient's covers the answer's head only.
        return try await withThrowingTaskGroup(of: (body: Data, status: Int)?.self) { group in
            group.addTask {
                let response = try await Self.http.execute(prepared, timeout: .seconds(timeout.components.seconds))
                let body = try await response.body.collect(upTo: maxBytes + 64 * 1024)
                return (Data(body.readableBytesView), Int(response.status.code))
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let answer = first else { throw URLError(.timedOut) }
            return answer
        }
    }

    public func realtime(url: URL, token: String, outgoing: AsyncStream<String>, receive: @escaping @Sendable (String) async -> Void) async throws {
        var logger = Logger(label: "parleykit.realtime")
        logger.logLevel = .critical
        let close = try await WebSocketClient.connect(
            url: url.absoluteString,
            configuration: .init(
                maxFrameSize: 1 << 20, additionalHeaders: [.authorization: "Bearer \(token)", .userAgent: ParleyClient.userAgent],
                // permessage-deflate, as browsers offer it: a chat's frames are repetitive JSON.
                // Small frames too (receipts are ~100 bytes): the shared window makes them a few bytes each.
                extensions: [.perMessageDeflate(maxDecompressedFrameSize: 1 << 20, minFrameSizeToCompress: 24)]),
            logger: logger
        ) { inbound, outbound, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await text in outgoing { try await outbound.write(.text(text)) }
                    try await outbound.close(.normalClosure, reason: nil)
                }
                group.addTask {
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        if case .text(let text) = message { await receive(text) }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
        if case .unknown(let code) = close?.closeCode, code == RealtimeCloseCode.unauthorized { throw ParleyTransportError.unauthorized }
    }
}
