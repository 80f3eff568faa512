import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A bare TCP client for requests no HTTP library sends: uploads cut off half-way or stalled.
enum RawHTTP {
    enum Ending {
        /// Close the connection after the bytes (a truncated request).
        case close
        /// Keep the connection open, send nothing more, and wait up to this long for a response.
        case wait(seconds: Int)
    }

    /// Sends `head` and `body` to 127.0.0.1:`port`, then ends as told; returns what the server answered.
    static func send(port: Int, head: String, body: Data, ending: Ending) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestFailure("connect() failed") }
        let payload = Data(head.utf8) + body
        try payload.withUnsafeBytes { buffer in
            var sent = 0
            while sent < buffer.count {
                let n = Glibc.send(fd, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                guard n > 0 else { throw TestFailure("send() failed") }
                sent += n
            }
        }
        switch ending {
        case .close:
            return ""
        case .wait(let seconds):
            var timeout = timeval(tv_sec: seconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var response = Data()
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = recv(fd, &chunk, chunk.count, 0)
                if n <= 0 { break }
                response.append(contentsOf: chunk[0..<n])
                if let text = String(data: response, encoding: .utf8), text.contains("\r\n\r\n"), text.contains("}") { break }
            }
            return String(decoding: response, as: UTF8.self)
        }
    }
}
