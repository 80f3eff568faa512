import Foundation
import ParleyAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How ParleyKit reaches the server: HTTP exchanges and the real-time WebSocket.
///
/// Apps use the default, `URLSessionTransport` (URLSession does both on Apple platforms). It is a
/// protocol so that the SDK itself depends on nothing but Foundation and swift-crypto: on Linux,
/// where URLSession has no WebSockets, the server's repository gives ParleyKit a SwiftNIO transport
/// (`ParleyKitNIO`) for its tests and `parley chat`, and an app never resolves those packages.
public protocol ParleyTransport: Sendable {
    /// Sends `request` with its body and returns the answer's body (at most `maxBytes`) and status.
    /// `progress` hears the fraction of the request's body sent, from 0 to 1. A network failure
    /// throws; an answer of any status returns.
    func exchange(_ request: URLRequest, maxBytes: Int, progress: (@Sendable (Double) -> Void)?) async throws -> (body: Data, status: Int)

    /// Opens the real-time WebSocket at `url` (authorized by `token`), sends what `outgoing` yields,
    /// hands each text frame to `receive`, and returns when the connection closes. Throws
    /// `ParleyTransportError.unauthorized` when the server closed it because the session ended.
    func realtime(url: URL, token: String, outgoing: AsyncStream<String>, receive: @escaping @Sendable (String) async -> Void) async throws
}

/// What a transport reports beyond network failures.
public enum ParleyTransportError: Error, Sendable, Equatable {
    /// The server closed the real-time connection because the session expired or was revoked
    /// (close code 4001): ParleyKit starts a new session.
    case unauthorized
    /// This transport cannot open a real-time connection on this platform (Linux's URLSession).
    case realtimeUnsupported
}

/// URLSession for both: the default on every platform (real time on Apple platforms only).
public struct URLSessionTransport: ParleyTransport {
    public let session: URLSession

    public init(session: URLSession = .shared) {
        self.session = session
    }

    public func exchange(_ request: URLRequest, maxBytes: Int, progress: (@Sendable (Double) -> Void)?) async throws -> (body: Data, status: Int) {
        let data: Data
        let response: URLResponse
        if let progress, let body = request.httpBody {
            var request = request
            request.httpBody = nil
            (data, response) = try await session.upload(for: request, from: body, delegate: UploadProgress(report: progress))
        } else {
            (data, response) = try await session.data(for: request)
        }
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return (data.count > maxBytes ? data.prefix(maxBytes + 1) : data, http.statusCode)
    }

    public func realtime(url: URL, token: String, outgoing: AsyncStream<String>, receive: @escaping @Sendable (String) async -> Void) async throws {
        #if canImport(FoundationNetworking)
        // Linux's URLSession (libcurl) has no WebSockets.
        throw ParleyTransportError.realtimeUnsupported
        #else
        var request = URLRequest(url: url)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let task = session.webSocketTask(with: request)
        task.resume()
        defer { task.cancel(with: .goingAway, reason: nil) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await text in outgoing { try await task.send(.string(text)) }
            }
            group.addTask {
                while true {
                    let message = try await task.receive()
                    if case .string(let text) = message { await receive(text) }
                }
            }
            do {
                try await group.next()
            } catch {
                if task.closeCode.rawValue == Int(RealtimeCloseCode.unauthorized) { throw ParleyTransportError.unauthorized }
                throw error
            }
            group.cancelAll()
        }
        #endif
    }
}

/// Hears how much of an upload's body was sent.
private final class UploadProgress: NSObject, URLSessionTaskDelegate, Sendable {
    let report: @Sendable (Double) -> Void

    init(report: @escaping @Sendable (Double) -> Void) {
        self.report = report
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        guard totalBytesExpectedToSend > 0 else { return }
        report(min(1, Double(totalBytesSent) / Double(totalBytesExpectedToSend)))
    }
}
