import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A bare TCP connection to the test server, for clients no library would be: silent ones, garbage
/// senders, WebSocket clients that never read or send fragmented and compressed frames by hand.
final class RawSocket: @unchecked Sendable {  // a file descriptor; each test uses its sockets from one task
    let fd: Int32

    init(port: Int, receiveBuffer: Int? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw TestFailure("connect() failed: errno \(errno)")
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send() failed: errno \(errno)") }
            sent += n
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads until the peer closes the connection or `seconds` pass; returns what arrived and whether it closed.
    /// Blocking reads run on a dispatch thread: the test server shares this process's cooperative
    /// threads (two on two cores), and a test blocked in recv() there would starve it.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    func readUntilClosed(within seconds: Double) async -> (data: [UInt8], closed: Bool) {
        (try? await Self.offPool { self.blockingReadUntilClosed(within: seconds) }) ?? ([], true)
    }

    func blockingReadUntilClosed(within seconds: Double) -> (data: [UInt8], closed: Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return (data, false) }
            var timeout = timeval(tv_sec: Int(remaining), tv_usec: Int((remaining - Double(Int(remaining))) * 1e6))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let n = recv(fd, &chunk, chunk.count, 0)
            if n == 0 { return (data, true) }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                return (data, true)  // reset by the server
            }
            data.append(contentsOf: chunk[0..<n])
        }
    }

    /// Reads an HTTP response head (up to the blank line).
    func readHead(within seconds: Double = 5) async throws -> String {
        try await Self.offPool { self.blockingReadHead(within: seconds) }
    }

    func blockingReadHead(within seconds: Double = 5) -> String {
        let deadline = Date().addingTimeInterval(seconds)
        var data: [UInt8] = []
        var byte = [UInt8](repeating: 0, count: 1)
        while deadline.timeIntervalSinceNow > 0 {
            var timeout = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let n = recv(fd, &byte, 1, 0)
            if n == 0 { break }
            if n < 0 { continue }
            data.append(byte[0])
            if data.suffix(4) == [13, 10, 13, 10] { break }
        }
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: WebSocket by hand

    /// Sends an upgrade request for the real-time endpoint and reads the response head.
    func upgrade(port: Int, token: String, extensions: String? = nil, headers: [String] = []) async throws -> String {
        var request = "GET /v1/realtime?access_token=\(token) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\n"
            + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let extensions { request += "Sec-WebSocket-Extensions: \(extensions)\r\n" }
        for header in headers { request += header + "\r\n" }
        try send(request + "\r\n")
        return try await readHead()
    }

    /// One masked client frame.
    func sendFrame(opcode: UInt8, fin: Bool, payload: [UInt8], compressed: Bool = false) throws {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | (compressed ? 0x40 : 0) | opcode]
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame.append(0x80 | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        try send(frame)
    }

    /// Sends text frames (`frame(n)`) as fast as the connection takes them, never reading, for at most
    /// `frames` frames or `seconds`; a send that waits longer than `sendTimeout` (a full window) or
    /// fails (the connection is gone) ends it. Returns how many were sent.
    func flood(frames: Int, for seconds: Double, sendTimeout: Double, _ frame: @escaping @Sendable (Int) -> String) async throws -> Int {
        try await Self.offPool {
            var timeout = timeval(tv_sec: Int(sendTimeout), tv_usec: Int((sendTimeout - Double(Int(sendTimeout))) * 1e6))
            setsockopt(self.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let deadline = Date().addingTimeInterval(seconds)
            var count = 0
            while count < frames, Date() < deadline {
                do { try self.sendFrame(opcode: 0x1, fin: true, payload: Array(frame(count).utf8)) } catch { break }
                count += 1
            }
            return count
        }
    }

    /// Reads server frames until a close frame; returns its code (nil when the connection just ended).
    func closeCode(within seconds: Double) async -> UInt16? {
        let (data, _) = await readUntilClosed(within: seconds)
        var index = 0
        while index + 2 <= data.count {
            let opcode = data[index] & 0x0F
            var length = Int(data[index + 1] & 0x7F)
            var offset = index + 2
            if length == 126, offset + 2 <= data.count {
                length = Int(data[offset]) << 8 | Int(data[offset + 1])
                offset += 2
            } else if length == 127, offset + 8 <= data.count {
                length = (0..<8).reduce(0) { $0 << 8 | Int(data[offset + $1]) }
                offset += 8
            }
            if opcode == 0x8, length >= 2, offset + 2 <= data.count {
                return UInt16(data[offset]) << 8 | UInt16(data[offset + 1])
            }
            index = offset + length
        }
        return nil
    }
}
