import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy in front of the test server that passes bytes both ways, except that a request whose
/// head names `stallOn` gets only `after` bytes of its body through: then nothing more moves on that
/// connection, which stays open, as when a phone's network dies in the middle of an upload.
/// Blocking sockets on threads: the simplest proxy there is, and a test needs no more.
final class StallingProxy: Sendable {
    let port: Int
    private let listener: Int32
    private let upstream: Int
    private let stallOn: String
    private let after: Int
    /// Set once a request was cut off.
    let stalled = Mutex(false)
    private let stopped = Mutex(false)

    init(upstream: Int, stallOn: String, after: Int) throws {
        (self.upstream, self.stallOn, self.after) = (upstream, stallOn, after)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(listener, pointer, size) == 0 && listen(listener, 16) == 0 && getsockname(listener, pointer, &size) == 0
            }
        }
        guard bound else { throw TestFailure("the proxy could not listen: errno \(errno)") }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    func stop() {
        stopped.withLock { $0 = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while !stopped.withLock({ $0 }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            guard let server = try? RawSocket(port: upstream) else {
                close(client)
                continue
            }
            let done = Mutex(0)
            let finish: @Sendable () -> Void = {
                // The second pump to end closes both sides.
                if done.withLock({ count in count += 1; return count }) == 2 {
                    close(client)
                    _ = server
                }
            }
            Thread { [self] in pump(from: client, to: server.fd, inspect: true); shutdown(server.fd, Int32(SHUT_WR)); finish() }.start()
            Thread { [self] in pump(from: server.fd, to: client, inspect: false); shutdown(client, Int32(SHUT_WR)); finish() }.start()
        }
    }

    /// Copies bytes until the source closes; a request to `stallOn` stops being copied after `after` body bytes.
    private func pump(from source: Int32, to target: Int32, inspect: Bool) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var head = Data()
        var bodyBytes: Int? = nil  // counting once the head of a request to `stallOn` has passed
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            var chunk = Data(buffer[0..<count])
            if inspect {
                if var counted = bodyBytes {
                    let room = max(0, after - counted)
                    if chunk.count > room {
                        chunk = chunk.prefix(room)
                        stalled.withLock { $0 = true }
                    }
                    counted += chunk.count
                    bodyBytes = counted
                } else {
                    head.append(chunk)
                    if let end = head.range(of: Data("\r\n\r\n".utf8)), String(decoding: head[..<end.lowerBound], as: UTF8.self).contains(stallOn) {
                        let headLength = chunk.count - (head.count - end.upperBound)
                        let body = head.count - end.upperBound
                        if body > after {
                            chunk = chunk.prefix(headLength + after)
                            stalled.withLock { $0 = true }
                        }
                        bodyBytes = min(body, after)
                    } else if head.count > 64 * 1024 || head.range(of: Data("\r\n\r\n".utf8)) != nil {
                        head = Data()
                    }
                }
            }
            var sent = 0
            while sent < chunk.count {
                let n = chunk.withUnsafeBytes { Glibc.send(target, $0.baseAddress! + sent, chunk.count - sent, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { return }
                sent += n
            }
        }
    }
}
