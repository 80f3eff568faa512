import Foundation
import ParleyAPI
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension ContinuousClock.Instant {
    /// Milliseconds from `earlier` to this instant.
    func milliseconds(since earlier: ContinuousClock.Instant) -> Double {
        let duration = self - earlier
        return Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

/// p50, p99 and max of a sample, in whatever unit the sample is in.
struct Distribution: Sendable {
    var count: Int
    var p50: Double
    var p99: Double
    var max: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        count = sorted.count
        func at(_ quantile: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            return sorted[min(sorted.count - 1, Int((Double(sorted.count) * quantile).rounded(.up)) - 1)]
        }
        p50 = at(0.50)
        p99 = at(0.99)
        max = sorted.last ?? .nan
    }
}

/// What `/proc` says about a process: CPU time and resident memory.
enum ProcStats {
    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// The fields of `/proc/<pid>/stat` after the command name (which may hold spaces): index 0 is
    /// field 3 (state), 1 the parent's pid, 11 and 12 utime and stime, 13 and 14 cutime and cstime.
    private static func statFields(_ pid: Int32) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }

    /// The sum of two clock-tick fields of `/proc/<pid>/stat`, in seconds.
    private static func seconds(_ pid: Int32, fields first: Int, _ second: Int) -> Double {
        guard let fields = statFields(pid), fields.count > second, let a = Double(fields[first]), let b = Double(fields[second]) else { return .nan }
        return (a + b) / ticksPerSecond
    }

    /// User plus system CPU seconds the process has used so far.
    static func cpuSeconds(pid: Int32) -> Double { seconds(pid, fields: 11, 12) }

    /// CPU seconds of `pid`'s children: those that ended (the kernel's cutime and cstime) plus
    /// those still running, so that the difference over a span is what its helpers spent in it.
    static func childrenCPUSeconds(pid: Int32) -> Double {
        seconds(pid, fields: 13, 14) + children(of: pid).map { cpuSeconds(pid: $0) }.filter { !$0.isNaN }.reduce(0, +)
    }

    /// The processes whose parent is `pid` (the server's ffmpeg and transcriber runs).
    static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { child in
            guard let fields = statFields(child), fields.count > 1 else { return false }
            return Int32(fields[1]) == pid
        }
    }

    /// The machine's CPU time so far, in clock ticks over all cores (`/proc/stat`'s first line): all
    /// of it, and what the hypervisor gave to other machines (steal).
    static func machineTicks() -> (total: Double, stolen: Double) {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return (.nan, .nan) }
        // user nice system idle iowait irq softirq steal (guest time is inside user already).
        let ticks = line.split(separator: " ").dropFirst().prefix(8).compactMap { Double($0) }
        guard ticks.count == 8 else { return (.nan, .nan) }
        return (ticks.reduce(0, +), ticks[7])
    }

    /// The share of the machine's CPU time since `before` that was stolen; NaN without `/proc/stat`.
    static func stolenShare(since before: (total: Double, stolen: Double)) -> Double {
        let now = machineTicks()
        let total = now.total - before.total
        return total > 0 ? (now.stolen - before.stolen) / total : .nan
    }

    /// Resident set size in bytes.
    static func rssBytes(pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    /// Raises this process's open-file limit to its hard limit (children inherit it).
    static func raiseFileLimit() -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return Int(limit.rlim_cur)
    }
}

/// The machine the numbers come from.
enum Machine {
    static var cores: Int { ProcessInfo.processInfo.activeProcessorCount }
    static var memoryGiB: Double { Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824 }
    static var cpuModel: String {
        let info = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let line = info.split(separator: "\n").first { $0.hasPrefix("model name") }
        return line.map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown CPU"
    }
    static var kernel: String {
        ((try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A blocking HTTP/1.1 client, one request per TCP connection: enough for setup calls, uploads with
/// a known "last byte sent" instant, and time-to-first-byte measurements.
enum RawHTTP {
    struct Response: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        /// Monotonic nanoseconds (`monotonicNanos()`): connecting, the last request byte handed to the
        /// kernel, the first response byte, the last.
        var started: UInt64
        var sent: UInt64
        var firstByte: UInt64
        var finished: UInt64

        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func connect(port: Int, host: String = "127.0.0.1") throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket(): errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw BenchError("connect to \(host):\(port): errno \(code)")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw BenchError("send(): errno \(errno)") }
            offset += written
        }
    }

    static func request(
        port: Int, _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []
    ) throws -> Response {
        let started = monotonicNanos()
        let fd = try connect(port: port)
        defer { Glibc.close(fd) }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PATCH" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try writeAll(fd, Array(head.utf8) + body)
        let sent = monotonicNanos()
        var received: [UInt8] = []
        var firstByte: UInt64?
        var buffer = [UInt8](repeating: 0, count: 65536)
        var headerEnd: Int?
        var contentLength: Int?
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 { throw BenchError("recv(): errno \(errno)") }
            if count == 0 { break }
            if firstByte == nil { firstByte = monotonicNanos() }
            received += buffer[0..<count]
            if headerEnd == nil, let end = find(Array("\r\n\r\n".utf8), in: received) {
                headerEnd = end + 4
                let headText = String(decoding: received[0..<end], as: UTF8.self).lowercased()
                for line in headText.split(separator: "\r\n") where line.hasPrefix("content-length:") {
                    contentLength = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                }
            }
            if let headerEnd, let contentLength, received.count >= headerEnd + contentLength { break }
        }
        let finished = monotonicNanos()
        guard let headerEnd else { throw BenchError("\(method) \(path): no HTTP response") }
        let lines = String(decoding: received[0..<headerEnd - 4], as: UTF8.self).split(separator: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var parsed: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { parsed[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        return Response(
            status: status, headers: parsed, body: Array(received[headerEnd...]), started: started, sent: sent,
            firstByte: firstByte ?? finished, finished: finished)
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if Array(haystack[index..<index + needle.count]) == needle { return index }
        }
        return nil
    }

    /// Runs a blocking request on its own thread, off Swift's cooperative pool.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }
}

/// JSON calls to the Parley API over `RawHTTP`.
struct API: Sendable {
    let port: Int

    func call<Response: Decodable>(
        _ method: String, _ path: String, token: String? = nil, body: (some Encodable)? = Optional<String>.none,
        as type: Response.Type = Response.self
    ) async throws -> Response {
        var headers: [(String, String)] = []
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        var bytes: [UInt8] = []
        if let body {
            bytes = Array(try ParleyJSON.makeEncoder().encode(body))
            headers.append(("Content-Type", "application/json"))
        }
        let port = self.port
        let response = try await RawHTTP.onThread { [bytes, headers] in
            try RawHTTP.request(port: port, method, path, headers: headers, body: bytes)
        }
        guard (200..<300).contains(response.status) else { throw BenchError("\(method) \(path): \(response.status) \(response.text)") }
        return try ParleyJSON.makeDecoder().decode(Response.self, from: Data(response.body))
    }

    func login(email: String, password: String) async throws -> String {
        try await call("POST", "/v1/auth/login", body: LoginRequest(email: email, password: password), as: AgentSessionResponse.self).token
    }

    /// A consumer's voice note, uploaded as the widget does (the recording as the raw body); the
    /// whole response, with its timings, when it is 201.
    func uploadVoice(token: String, clientMessageId: String, note: [UInt8], contentType: String = "audio/webm") async throws -> RawHTTP.Response {
        let port = self.port
        let response = try await RawHTTP.onThread {
            try RawHTTP.request(
                port: port, "POST", "/v1/consumer/voice-messages?clientMessageId=\(clientMessageId)",
                headers: [("Authorization", "Bearer \(token)"), ("Content-Type", contentType)], body: note)
        }
        guard response.status == 201 else { throw BenchError("voice upload: \(response.status) \(response.text)") }
        return response
    }

    func consumerSession(appId: String, name: String? = nil) async throws -> ConsumerSessionResponse {
        try await call("POST", "/v1/consumer/session", body: ConsumerSessionRequest(appId: AppID(rawValue: appId), displayName: name))
    }
}

/// Runs `body` for `0..<count` with at most `width` running at once; results in index order.
func concurrently<T: Sendable>(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
    try await withThrowingTaskGroup(of: (Int, T).self) { group in
        var results = [T?](repeating: nil, count: count)
        var next = 0
        while next < min(width, count) {
            let index = next
            group.addTask { (index, try await body(index)) }
            next += 1
        }
        while let (index, value) = try await group.next() {
            results[index] = value
            if next < count {
                let index = next
                group.addTask { (index, try await body(index)) }
                next += 1
            }
        }
        return results.map { $0! }
    }
}

/// A value behind a lock, for counters and samples that several tasks touch.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout sending Value) -> sending R) -> R { mutex.withLock(body) }
    var value: Value { mutex.withLock { $0 } }
}
