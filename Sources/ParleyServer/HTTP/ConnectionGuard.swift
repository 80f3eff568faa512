import Foundation
import Hummingbird
import HummingbirdCore
import HTTPTypes
import Logging
import NIOCore
import Synchronization

/// Limits on connections before Hummingbird sees them.
///
/// Hummingbird's WebSocket-upgrade channel installs its idle timeout only once the first request
/// head has been parsed, and answers nothing when that head fails to parse: a socket that sends
/// nothing, half a request line, garbage or an endless header stays open for ever, and a client
/// holding a thousand of them exhausts the server's file descriptors. No package we use has a hook
/// for the time before the first head, so this handler sits first in every connection's pipeline
/// and, until a first request head has arrived whole and well-formed:
/// - closes the connection after `headerTimeout` with `408`;
/// - refuses a head over `maxHeadBytes` with `431`, and a malformed one (bad request line, NUL or
///   other control characters, a header line without a colon) with `400`;
/// - refuses a connection over `maxPerAddress` open connections from one client address with `429`;
/// - refuses a WebSocket upgrade authenticated by the session cookie from a page of another origin
///   with `403 origin_not_allowed`, and one by a session in its flood cool-down with
///   `429 too_many_frames` (Hummingbird answers every refused upgrade with a bare `400`).
///   Browsers open every WebSocket on a connection of its own, so its first head is the one to check.
/// After the first head it only passes bytes on (Hummingbird's idle timeout covers keep-alive
/// connections, the WebSocket ping covers upgraded ones) and counts the connection until it closes.
struct ConnectionGuardSettings: Sendable {
    var headerTimeout: TimeAmount
    var maxHeadBytes: Int
    /// 0: no per-address limit (behind a proxy every connection comes from the proxy).
    var maxPerAddress: Int
    /// Who may open the real-time WebSocket with the session cookie (see `OriginPolicy`).
    var origins = OriginPolicy()
    /// Sessions closed for flooding, refused new WebSocket upgrades for a while.
    var floods: FloodCooldown?
}

/// Open connections per client address, shared by every connection's guard.
public final class ConnectionCounter: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    public init() {}

    /// Counts a new connection from `address`; false (and nothing counted) when it would pass `limit`.
    func open(_ address: String, limit: Int) -> Bool {
        counts.withLock { counts in
            let current = counts[address, default: 0]
            if limit > 0, current >= limit { return false }
            counts[address] = current + 1
            return true
        }
    }

    func close(_ address: String) {
        counts.withLock { counts in
            let remaining = counts[address, default: 1] - 1
            counts[address] = remaining > 0 ? remaining : nil
        }
    }

    /// Open connections from one address.
    public func count(_ address: String) -> Int { counts.withLock { $0[address, default: 0] } }
}

/// A server child channel with `ConnectionGuardHandler` in front of another one's pipeline.
struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let inner: Inner.Value
        /// True once the first request head passed the guard; false when the guard (or the client) closed first.
        let admitted: EventLoopFuture<Bool>
        var channel: any NIOCore.Channel { inner.channel }
    }

    let inner: Inner
    let settings: ConnectionGuardSettings
    let counter: ConnectionCounter
    let metrics: ParleyMetrics

    func setup(channel: any NIOCore.Channel, logger: Logger) -> EventLoopFuture<Value> {
        let handler = ConnectionGuardHandler(settings: settings, counter: counter, metrics: metrics, eventLoop: channel.eventLoop)
        do {
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let admitted = handler.admitted
        return inner.setup(channel: channel, logger: logger).map { Value(inner: $0, admitted: admitted) }
    }

    func handle(value: Value, logger: Logger) async {
        // A connection the guard turned away never reaches Hummingbird, whose upgrade handler would
        // otherwise log its unfinished upgrade as an error, once per refused socket.
        guard (try? await value.admitted.get()) == true else { return }
        await inner.handle(value: value.inner, logger: logger)
    }
}

/// See `GuardedChildChannel`. Runs on its channel's event loop only.
final class ConnectionGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let settings: ConnectionGuardSettings
    private let counter: ConnectionCounter
    private let metrics: ParleyMetrics
    private let admittedPromise: EventLoopPromise<Bool>
    var admitted: EventLoopFuture<Bool> { admittedPromise.futureResult }

    private enum State {
        case waiting
        /// Reading the first request head; bytes are held until it is complete.
        case readingHead(ByteBuffer)
        case admitted
        case refused
    }

    private var state = State.waiting
    private var started = false
    private var countedAddress: String?
    private var timeout: Scheduled<Void>?

    init(settings: ConnectionGuardSettings, counter: ConnectionCounter, metrics: ParleyMetrics, eventLoop: any EventLoop) {
        self.settings = settings
        self.counter = counter
        self.metrics = metrics
        self.admittedPromise = eventLoop.makePromise(of: Bool.self)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        if let address = context.channel.remoteAddress?.ipAddress {
            guard counter.open(address, limit: settings.maxPerAddress) else {
                refuse(
                    context, status: "429 Too Many Requests", reason: .tooManyConnections,
                    message: "Too many open connections from this address; close some and try again.", retryAfter: 10)
                return
            }
            countedAddress = address
        }
        state = .readingHead(context.channel.allocator.buffer(capacity: 0))
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timeout = context.eventLoop.scheduleTask(in: settings.headerTimeout) {
            let (handler, context) = loopBound.value
            handler.refuse(
                context, status: "408 Request Timeout", reason: .requestTimeout,
                message: "The request did not arrive in time.", retryAfter: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .readingHead(var held) = state else {
            if case .admitted = state { context.fireChannelRead(data) }
            return  // refused: the rest is dropped
        }
        var chunk = unwrapInboundIn(data)
        let searchFrom = max(0, held.readableBytes - 3)
        held.writeBuffer(&chunk)
        guard let end = Self.headEnd(in: held, from: searchFrom) else {
            if held.readableBytes > settings.maxHeadBytes {
                refuse(
                    context, status: "431 Request Header Fields Too Large", reason: .headersTooLarge,
                    message: "The request head is larger than \(settings.maxHeadBytes) bytes.", retryAfter: nil)
            } else {
                state = .readingHead(held)
            }
            return
        }
        if end > settings.maxHeadBytes {
            refuse(
                context, status: "431 Request Header Fields Too Large", reason: .headersTooLarge,
                message: "The request head is larger than \(settings.maxHeadBytes) bytes.", retryAfter: nil)
            return
        }
        let head = held.readableBytesView.prefix(end)
        guard Self.isWellFormedHead(head) else {
            refuse(context, status: "400 Bad Request", reason: .badRequest, message: "The request is not valid HTTP/1.1.", retryAfter: nil)
            return
        }
        if let upgrade = Self.webSocketUpgrade(head) {
            guard settings.origins.admitsCookie(of: upgrade) else {
                refuse(context, status: "403 Forbidden", reason: .originNotAllowed, message: OriginPolicy.refusalMessage, retryAfter: nil)
                return
            }
            if let floods = settings.floods, let (token, _) = AuthMiddleware.token(in: upgrade),
                let wait = floods.remaining(SessionTokens.hash(token))
            {
                let refusal = FloodCooldown.refusal(wait)
                refuse(
                    context, status: "429 Too Many Requests", reason: .tooManyFrames, message: refusal.message,
                    retryAfter: FloodCooldown.seconds(wait))
                return
            }
        }
        timeout?.cancel()
        timeout = nil
        state = .admitted
        admittedPromise.succeed(true)
        context.fireChannelRead(wrapInboundOut(held))
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish()
    }

    private func finish() {
        timeout?.cancel()
        timeout = nil
        if let address = countedAddress {
            counter.close(address)
            countedAddress = nil
        }
        admittedPromise.succeed(false)  // no effect once admitted
    }

    /// Answers with a small JSON error in the API's shape and closes the connection.
    private func refuse(
        _ context: ChannelHandlerContext, status: String, reason: ParleyMetrics.ConnectionRefusal, message: String, retryAfter: Int?
    ) {
        let code = reason.rawValue
        if case .refused = state { return }
        if case .admitted = state { return }
        state = .refused
        timeout?.cancel()
        timeout = nil
        metrics.connectionsRefused(reason).increment()
        var body = #"{"error":{"code":"\#(code)","message":"\#(message)""#
        if let retryAfter { body += #","retryAfter":\#(retryAfter)"# }
        body += "}}"
        var head = "HTTP/1.1 \(status)\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        if let retryAfter { head += "Retry-After: \(retryAfter)\r\n" }
        head += "\r\n"
        let buffer = context.channel.allocator.buffer(string: head + body)
        context.writeAndFlush(NIOAny(buffer)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
        admittedPromise.succeed(false)
    }

    /// Where the head ends (just past its blank line), if it has arrived. A blank line of bare line
    /// feeds ends it too (and is then refused as malformed).
    static func headEnd(in buffer: ByteBuffer, from start: Int) -> Int? {
        let bytes = buffer.readableBytesView
        var index = bytes.startIndex + max(0, start - 1)
        while index + 1 < bytes.endIndex {
            if bytes[index] == 10, bytes[index + 1] == 10 { return index + 2 - bytes.startIndex }
            if index + 3 < bytes.endIndex, bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 {
                return index + 4 - bytes.startIndex
            }
            index += 1
        }
        return nil
    }

    /// A request line (`METHOD SP target SP HTTP/1.x`) and header lines (`name: value`) with token
    /// names and no control characters but tab. Leading empty lines are allowed (RFC 9112 2.2).
    static func isWellFormedHead(_ head: some Collection<UInt8>) -> Bool {
        var lines: [ArraySlice<UInt8>] = []
        let bytes = Array(head)
        var lineStart = 0
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == 13 {
                guard bytes[index + 1] == 10 else { return false }  // a bare CR
                lines.append(bytes[lineStart..<index])
                index += 2
                lineStart = index
            } else if bytes[index] == 10 {
                return false  // a bare LF
            } else {
                index += 1
            }
        }
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard let requestLine = lines.first else { return false }
        let parts = requestLine.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte), !parts[1].isEmpty,
            parts[1].allSatisfy({ $0 > 32 && $0 != 127 }),
            Array(parts[2]) == Array("HTTP/1.1".utf8) || Array(parts[2]) == Array("HTTP/1.0".utf8)
        else { return false }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: 58), colon > line.startIndex,
                line[line.startIndex..<colon].allSatisfy(isTokenByte),
                line[(colon + 1)...].allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) })
            else { return false }
        }
        return true
    }

    /// The request of a well-formed head that asks for a WebSocket upgrade of the real-time endpoint,
    /// else nil. Every other first request (most of them) is told apart by its request line alone,
    /// before any header is looked at.
    static func webSocketUpgrade(_ head: some Collection<UInt8>) -> Request? {
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: true)
        guard let requestLine = lines.first else { return nil }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[1].split(separator: "?", maxSplits: 1).first == Substring(RealtimeController.path),
            let method = HTTPRequest.Method(String(parts[0]))
        else { return nil }
        var fields = HTTPFields()
        var host: String?
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon]
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name.lowercased() == "host" {
                host = value  // the request's authority, as Hummingbird's HTTP/1 decoder makes it
            } else if let field = HTTPField.Name(String(name)) {
                fields.append(HTTPField(name: field, value: value))
            }
        }
        guard fields[values: .upgrade].contains(where: { $0.lowercased().contains("websocket") }) else { return nil }
        let head = HTTPRequest(method: method, scheme: nil, authority: host, path: String(parts[1]), headerFields: fields)
        return Request(head: head, body: .init(buffer: ByteBuffer()))
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
