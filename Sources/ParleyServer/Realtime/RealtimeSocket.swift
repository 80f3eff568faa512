import NIOCore
import NIOWebSocket
import ParleyAPI

/// One real-time WebSocket, in its channel's pipeline after SwiftNIO's frame decoder and encoder.
///
/// Everything here runs on the channel's event loop and nothing waits: a frame is reassembled,
/// inflated and budgeted as it is read, then handed to the connection (`RealtimeConnection`), which
/// starts a task only while it has frames to handle; frames to the client are written from the
/// connection's `Outbox` as they are queued. So an idle connection holds its socket, its pipeline and
/// the few fields below, and no task, stream or buffer of its own (issue 28, "What an idle connection
/// costs"). Control frames: a ping is answered, a close is answered and the socket closed, and the
/// hub's heartbeat pings every connection and closes one whose previous ping went unanswered.
final class RealtimeSocket: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    struct Settings: Sendable {
        /// Largest message (all its frames, inflated) a client may send.
        var maxMessageBytes: Int
        /// Frames a client may send per second (`FrameLimiter`).
        var framesPerSecond: Int
        /// How long a close this side started waits for the client's close before the socket is closed.
        var closeTimeout: TimeAmount = .seconds(5)
    }

    /// A whole message from the client.
    enum Message: Equatable {
        case text(String)
        case binary
    }

    /// What the socket reports to: created once the socket is in the pipeline, with the writer
    /// that the connection's outbox writes through and how many admitted frames may wait for
    /// handling (a burst of the socket's frame budget).
    typealias Open = (RealtimeSocket.Writer, any EventLoop, _ queueLimit: Int) -> any Owner

    /// The connection a socket serves (`RealtimeConnection`).
    protocol Owner: AnyObject, Sendable {
        /// Where frames to the client are queued; a close asked of it closes the socket.
        var outbox: Outbox { get }
        /// A whole message from the client, on the socket's event loop; false when the connection is closing.
        func take(_ message: RealtimeSocket.Message, limiter: inout FrameLimiter) -> Bool
        /// The socket closed.
        func ended()
    }

    private let settings: Settings
    private let deflate: PerMessageDeflate?
    private let metrics: ParleyMetrics
    private var open: Open?
    private var connection: (any Owner)?
    private var context: ChannelHandlerContext?
    private var limiter: FrameLimiter
    /// The message being reassembled: its kind, whether it is compressed, what came so far.
    private var assembling: (opcode: WebSocketOpcode, compressed: Bool, buffer: ByteBuffer)?
    private var closeSent = false
    private var closing = false
    private var awaitingPong = false

    init(settings: Settings, deflate: PerMessageDeflate?, metrics: ParleyMetrics, open: @escaping Open) {
        self.settings = settings
        self.deflate = deflate
        self.metrics = metrics
        self.open = open
        self.limiter = FrameLimiter(perSecond: settings.framesPerSecond)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        guard let open else { return }
        self.open = nil
        connection = open(Writer(socket: NIOLoopBound(self, eventLoop: context.eventLoop)), context.eventLoop, Int(limiter.burst))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The server allows half-closed sockets (for HTTP): a client that shut its side down, with or
        // without a close frame, sends nothing more, so the socket ends here instead of lingering.
        if let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // SwiftNIO's protocol error handler, before this one, has sent the close frame an error asks for.
        context.close(promise: nil)
    }

    /// The client is gone: its connection finishes (frames admitted are still handled).
    private func end() {
        guard let connection else { return }
        self.connection = nil
        connection.ended()
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard !closing else { return }
        // RSV1 means compressed: allowed on a message's first frame when permessage-deflate was agreed.
        if frame.rsv2 || frame.rsv3 || (frame.rsv1 && (deflate == nil || frame.opcode == .continuation || frame.opcode.isControl)) {
            return fail(code: .protocolError, "protocol error")
        }
        switch frame.opcode {
        case .text, .binary, .continuation:
            read(frame)
        case .ping:
            guard frame.fin, frame.length <= 125 else { return fail(code: .protocolError, "protocol error") }
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .pong:
            awaitingPong = false
        case .connectionClose:
            closing = true
            if closeSent {
                context.close(promise: nil)
            } else {
                // Answered with the client's code, then closed (RFC 6455, 5.5.1).
                closeSent = true
                var data = frame.unmaskedData
                let code = data.readableBytes >= 2 ? data.readInteger(as: UInt16.self) : nil
                var answer = context.channel.allocator.buffer(capacity: 2)
                if let code { answer.writeInteger(code) }
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: answer)))
                    .whenComplete { _ in channel.close(promise: nil) }
            }
        default:
            fail(code: .protocolError, "protocol error")
        }
    }

    private func read(_ frame: WebSocketFrame) {
        var payload = frame.unmaskedData
        let compressed: Bool
        switch frame.opcode {
        case .continuation:
            guard let assembling else { return fail(code: .protocolError, "protocol error") }
            compressed = assembling.compressed
        default:
            guard assembling == nil else { return fail(code: .protocolError, "protocol error") }
            compressed = frame.rsv1
            // The usual case, one uncompressed frame: no copy into a reassembly buffer.
            if frame.fin, !compressed {
                return deliver(opcode: frame.opcode, payload)
            }
            assembling = (frame.opcode, compressed, context?.channel.allocator.buffer(capacity: 0) ?? ByteBuffer())
        }
        guard var message = assembling else { return }
        if compressed, let deflate {
            let room = settings.maxMessageBytes - message.buffer.readableBytes
            do {
                payload = try deflate.inflate(payload, last: frame.fin, maxSize: max(room, 0))
            } catch .tooLarge {
                return fail(code: .messageTooLarge, "message too large")
            } catch {
                return fail(code: .dataInconsistentWithMessage, "invalid compressed data")
            }
        }
        guard message.buffer.readableBytes + payload.readableBytes <= settings.maxMessageBytes else {
            return fail(code: .messageTooLarge, "message too large")
        }
        message.buffer.writeBuffer(&payload)
        guard frame.fin else {
            assembling = message
            return
        }
        assembling = nil
        deliver(opcode: message.opcode, message.buffer)
    }

    private func deliver(opcode: WebSocketOpcode, _ payload: ByteBuffer) {
        guard payload.readableBytes <= settings.maxMessageBytes else { return fail(code: .messageTooLarge, "message too large") }
        let message: Message
        if opcode == .binary {
            message = .binary
        } else {
            guard let text = String(validating: payload.readableBytesView, as: UTF8.self) else {
                return fail(code: .protocolError, "protocol error")
            }
            message = .text(text)
        }
        guard let connection else { return }
        if !connection.take(message, limiter: &limiter) {
            closing = true  // the connection asked to close: the rest is not read
        }
    }

    /// Closes with `code` for a fault of the client's.
    private func fail(code: WebSocketErrorCode, _ reason: String) {
        closing = true
        assembling = nil
        connection?.outbox.close(code: UInt16(webSocketErrorCode: code), text: reason)
        if connection == nil { close(Outbox.CloseReason(code: UInt16(webSocketErrorCode: code), text: reason)) }
    }

    // MARK: Writing (from the outbox, on the event loop)

    fileprivate func write(_ frames: [String], written: @escaping @Sendable () -> Void) {
        guard let context, !closeSent, !frames.isEmpty else { return written() }
        let promise = context.eventLoop.makePromise(of: Void.self)
        for (index, text) in frames.enumerated() {
            var data = context.channel.allocator.buffer(string: text)
            var rsv1 = false
            if let deflate { (data, rsv1) = deflate.deflate(data) }
            let frame = WebSocketFrame(fin: true, rsv1: rsv1, opcode: .text, data: data)
            // Writes complete in order: the last one's promise says they all have.
            context.write(wrapOutboundOut(frame), promise: index == frames.count - 1 ? promise : nil)
        }
        context.flush()
        metrics.realtimeFramesSent.increment(by: Int64(frames.count))
        promise.futureResult.whenComplete { _ in written() }
    }

    fileprivate func close(_ reason: Outbox.CloseReason) {
        guard let context, !closeSent else { return }
        closeSent = true
        var data = context.channel.allocator.buffer(capacity: 2 + reason.text.utf8.count)
        data.writeInteger(reason.code)
        data.writeString(String(reason.text.utf8.prefix(123)) ?? "")
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)), promise: nil)
        // The client answers with its close and this side closes the socket; one that does not answer is closed anyway.
        let channel = context.channel
        context.eventLoop.scheduleTask(in: settings.closeTimeout) { channel.close(promise: nil) }
    }

    fileprivate func abort() {
        context?.close(mode: .all, promise: nil)
    }

    fileprivate func heartbeat() {
        guard let context, !closeSent else { return }
        if awaitingPong {
            // The previous ping, a heartbeat ago, went unanswered: the client is gone.
            context.close(promise: nil)
            return
        }
        awaitingPong = true
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: context.channel.allocator.buffer(capacity: 0))), promise: nil)
    }

    /// The outbox's way to the socket: every call comes on the socket's event loop.
    struct Writer: RealtimeWriter {
        let socket: NIOLoopBound<RealtimeSocket>

        func write(_ frames: [String], written: @escaping @Sendable () -> Void) { socket.value.write(frames, written: written) }
        func close(_ reason: Outbox.CloseReason) { socket.value.close(reason) }
        func abort() { socket.value.abort() }
        func heartbeat() { socket.value.heartbeat() }
    }
}

extension WebSocketOpcode {
    fileprivate var isControl: Bool { self == .ping || self == .pong || self == .connectionClose }
}
