import CompressNIO
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOWebSocket
import ParleyAPI
import ParleyDomain
@testable import ParleyServer
import Synchronization
import Testing

/// The real-time socket on its own, in an `EmbeddedChannel` (the real network is covered by
/// RealtimeTests and HardeningTests): what it reads, what it answers, what it writes.
@Suite("Real-time socket")
struct RealtimeSocketTests {
    /// Records what the socket hands over.
    final class Owner: RealtimeSocket.Owner {
        let outbox: Outbox
        private let state = Mutex<(messages: [RealtimeSocket.Message], ended: Int)>(([], 0))

        init(writer: RealtimeSocket.Writer, eventLoop: any EventLoop) {
            outbox = Outbox(
                connectionId: ConnectionID.make(),
                principal: .consumer(ConsumerPrincipal(consumerId: "csm_a", brandId: "brd_a", appId: "app_a")),
                sessionTokenHash: nil, limit: 8, eventLoop: eventLoop, writer: writer)
        }

        func take(_ message: RealtimeSocket.Message, limiter: inout FrameLimiter) -> Bool {
            state.withLock { $0.messages.append(message) }
            return true
        }

        func ended() { state.withLock { $0.ended += 1 } }

        var messages: [RealtimeSocket.Message] { state.withLock { $0.messages } }
        var endings: Int { state.withLock { $0.ended } }
    }

    final class Made: Sendable {
        let owner = Mutex<Owner?>(nil)
    }

    let deflateSettings = PerMessageDeflate.Settings()

    func socket(maxMessageBytes: Int = 1024, deflate agreement: PerMessageDeflate.Agreement? = nil) throws -> (EmbeddedChannel, Owner) {
        let made = Made()
        let socket = RealtimeSocket(
            settings: .init(maxMessageBytes: maxMessageBytes, framesPerSecond: 100),
            deflate: agreement.map { PerMessageDeflate(agreement: $0, settings: deflateSettings) }, metrics: ParleyMetrics()
        ) { writer, eventLoop, _ in
            let owner = Owner(writer: writer, eventLoop: eventLoop)
            made.owner.withLock { $0 = owner }
            return owner
        }
        let channel = EmbeddedChannel(handler: socket)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, try #require(made.owner.withLock { $0 }))
    }

    func frame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true, rsv1: Bool = false) -> WebSocketFrame {
        WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, data: ByteBuffer(string: text))
    }

    func closeCode(_ frame: WebSocketFrame?) -> UInt16? {
        guard let frame, frame.opcode == .connectionClose else { return nil }
        var data = frame.unmaskedData
        return data.readInteger(as: UInt16.self)
    }

    @Test("a message in fragments is put together; a ping is answered with its payload; text that is not UTF-8 closes with 1002")
    func fragmentsAndPings() throws {
        let (channel, owner) = try socket()
        try channel.writeInbound(frame(.text, "{\"type\":", fin: false))
        try channel.writeInbound(frame(.ping, "are you there"))
        try channel.writeInbound(frame(.continuation, "\"view\"}"))
        try channel.writeInbound(frame(.binary, "raw"))
        #expect(owner.messages == [.text("{\"type\":\"view\"}"), .binary])
        let pong = try #require(try channel.readOutbound(as: WebSocketFrame.self))
        #expect(pong.opcode == .pong && pong.data == ByteBuffer(string: "are you there"))

        try channel.writeInbound(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: [0xC3, 0x28])))
        channel.embeddedEventLoop.run()
        #expect(closeCode(try channel.readOutbound(as: WebSocketFrame.self)) == 1002)
    }

    @Test("a message over the limit closes with 1009, whole or in fragments; a continuation with nothing to continue closes with 1002")
    func limits() throws {
        let (whole, _) = try socket(maxMessageBytes: 16)
        try whole.writeInbound(frame(.text, String(repeating: "a", count: 17)))
        whole.embeddedEventLoop.run()
        #expect(closeCode(try whole.readOutbound(as: WebSocketFrame.self)) == 1009)

        let (pieces, owner) = try socket(maxMessageBytes: 16)
        try pieces.writeInbound(frame(.text, String(repeating: "a", count: 10), fin: false))
        try pieces.writeInbound(frame(.continuation, String(repeating: "a", count: 10)))
        pieces.embeddedEventLoop.run()
        #expect(closeCode(try pieces.readOutbound(as: WebSocketFrame.self)) == 1009)
        #expect(owner.messages.isEmpty)

        let (stray, _) = try socket()
        try stray.writeInbound(frame(.continuation, "x"))
        stray.embeddedEventLoop.run()
        #expect(closeCode(try stray.readOutbound(as: WebSocketFrame.self)) == 1002)
    }

    @Test("the heartbeat pings; a ping answered keeps the socket, one unanswered by the next heartbeat closes it")
    func heartbeat() throws {
        let (channel, owner) = try socket()
        owner.outbox.heartbeat()
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: WebSocketFrame.self)?.opcode == .ping)
        try channel.writeInbound(frame(.pong, ""))
        owner.outbox.heartbeat()
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: WebSocketFrame.self)?.opcode == .ping)
        #expect(channel.isActive)
        // No pong this time.
        owner.outbox.heartbeat()
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
        #expect(owner.endings == 1)
    }

    @Test("the client's close is answered with its code and the socket closed; the connection ends once")
    func clientClose() throws {
        let (channel, owner) = try socket()
        var payload = ByteBuffer()
        payload.writeInteger(UInt16(1001))
        try channel.writeInbound(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload))
        #expect(closeCode(try channel.readOutbound(as: WebSocketFrame.self)) == 1001)
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
        #expect(owner.endings == 1)
    }

    @Test("a client that closes its side of TCP without a close frame ends the connection (the server allows half-closed sockets for HTTP)")
    func halfClosed() throws {
        let (channel, owner) = try socket()
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
        #expect(owner.endings == 1)
    }

    @Test("frames queued in the outbox go out in order, in one flush, then the close with its code and reason")
    func outboxToSocket() throws {
        let (channel, owner) = try socket()
        owner.outbox.send("one")
        owner.outbox.send("two")
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: WebSocketFrame.self)?.data == ByteBuffer(string: "one"))
        #expect(try channel.readOutbound(as: WebSocketFrame.self)?.data == ByteBuffer(string: "two"))
        owner.outbox.send("three")
        owner.outbox.close(code: 4000, text: "reconnect")
        channel.embeddedEventLoop.run()
        let close = try #require(try channel.readOutbound(as: WebSocketFrame.self))  // "three" was dropped with the close
        var data = close.data
        #expect(close.opcode == .connectionClose && data.readInteger(as: UInt16.self) == 4000 && data.readString(length: data.readableBytes) == "reconnect")
        #expect(owner.outbox.send("four") == .closed)
    }

    @Test("permessage-deflate: the answer to a browser's offer, compressed messages read (in fragments too), large frames sent compressed and small ones plain; RSV1 without it closes with 1002")
    func deflate() throws {
        var offer = HTTPFields()
        offer[.secWebSocketExtensions] = "permessage-deflate; client_max_window_bits"
        let agreement = try #require(PerMessageDeflate.negotiate(offer, settings: deflateSettings))
        #expect(agreement.header == "permessage-deflate;client_max_window_bits=10;server_max_window_bits=10")
        #expect(PerMessageDeflate.negotiate(HTTPFields(), settings: deflateSettings) == nil)

        // What a client sends: the message deflated with a sync flush, its last four bytes removed.
        let client = try ZlibCompressor(algorithm: .deflate, configuration: .init(windowSize: 10, compressionLevel: -1, memoryLevel: 8))
        func compressed(_ text: String) throws -> ByteBuffer {
            var input = ByteBuffer(string: text)
            var output = try input.compressStream(with: client, flush: .sync)
            output.moveWriterIndex(to: output.writerIndex - 4)
            return output
        }
        let (channel, owner) = try socket(deflate: agreement)
        let text = #"{"type":"send","id":"1","conversationId":"cnv_1","text":"hello hello hello hello"}"#
        try channel.writeInbound(WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: try compressed(text)))
        // The same again, split in two frames (RSV1 on the first only): the shared window shrinks it.
        var second = try compressed(text)
        let half = second.readSlice(length: second.readableBytes / 2)!
        try channel.writeInbound(WebSocketFrame(fin: false, rsv1: true, opcode: .text, data: half))
        try channel.writeInbound(WebSocketFrame(fin: true, opcode: .continuation, data: second))
        #expect(owner.messages == [.text(text), .text(text)])

        owner.outbox.send(String(repeating: "{\"type\":\"typing\"}", count: 10))
        owner.outbox.send("{}")
        channel.embeddedEventLoop.run()
        let large = try #require(try channel.readOutbound(as: WebSocketFrame.self))
        let small = try #require(try channel.readOutbound(as: WebSocketFrame.self))
        #expect(large.rsv1 && large.data.readableBytes < 170)
        var restored = large.data
        restored.writeBytes([0, 0, 0xff, 0xff])
        let inflater = try ZlibDecompressor(algorithm: .deflate, windowSize: 10)
        let inflated = try restored.decompressStream(with: inflater, maxSize: 1 << 16)
        #expect(String(buffer: inflated) == String(repeating: "{\"type\":\"typing\"}", count: 10))
        #expect(!small.rsv1 && small.data == ByteBuffer(string: "{}"))

        let (plain, _) = try socket()
        try plain.writeInbound(WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: try compressed("x")))
        plain.embeddedEventLoop.run()
        #expect(closeCode(try plain.readOutbound(as: WebSocketFrame.self)) == 1002)
    }
}
