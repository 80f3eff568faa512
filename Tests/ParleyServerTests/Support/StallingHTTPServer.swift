import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP server that answers every request with a head announcing `announced` bytes, sends the
/// first `sent` of them, and then sends nothing more, holding the connection open: an object store
/// that stops in the middle of an answer. Blocking sockets on threads, as `StallingProxy`.
final class StallingHTTPServer: Sendable {
    let port: Int
    private let listener: Int32
    private let announced: Int
    private let sent: Int
    private let stopped = Mutex(false)
    private let clients = Mutex<[Int32]>([])
    /// Requests answered so far.
    let answered = Mutex(0)

    init(announced: Int = 100_000, sent: Int = 10) throws {
        (self.announced, self.sent) = (announced, sent)
        let (listener, port) = StartupTests.boundSocket(listening: true)
        guard listener >= 0, port > 0 else { throw TestFailure("the stalling server could not listen: errno \(errno)") }
        (self.listener, self.port) = (listener, port)
        Thread { [self] in acceptLoop() }.start()
    }

    func stop() {
        stopped.withLock { $0 = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for client in clients.withLock({ $0 }) { close(client) }
    }

    private func acceptLoop() {
        while !stopped.withLock({ $0 }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            clients.withLock { $0.append(client) }
            Thread { [self] in answer(client) }.start()
        }
    }

    private func answer(_ client: Int32) {
        // Read the request's head (a request with a body gets its answer before the body: fine here).
        var head = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while head.range(of: Data("\r\n\r\n".utf8)) == nil {
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            head.append(contentsOf: buffer[0..<count])
        }
        let answer = Data("HTTP/1.1 200 OK\r\nContent-Length: \(announced)\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
            + Data(repeating: 0x41, count: sent)
        _ = answer.withUnsafeBytes { Glibc.send(client, $0.baseAddress, answer.count, Int32(MSG_NOSIGNAL)) }
        answered.withLock { $0 += 1 }
        // Then nothing: the connection stays open until the client gives up or the test stops.
    }
}
