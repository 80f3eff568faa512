import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// The floor for an idle WebSocket: SwiftNIO's own HTTP/1 upgrade and WebSocket frame handlers with
/// one small `ChannelHandler` on top that greets, echoes text frames, answers pings and closes. No
/// Swift task, no async sequence and no Hummingbird per connection: what a connection costs here is
/// what the event loop, the channel, its pipeline and its buffers cost. The connections section
/// measures it beside plain Hummingbird and Parley (issue 28: "if Hummingbird's WebSocket layer itself
/// is the floor, measure NIO's own WebSocket handlers in the same run and decide with the numbers").
struct NIOEchoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nio-echo-server", abstract: "A WebSocket echo server on SwiftNIO's own handlers (the idle-connection floor).")

    func run() async throws {
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: 1 << 20,
            shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(EchoHandler())
                }
            })
        try await Self.serve(upgrader, announcing: "echo server")
    }

    /// Serves WebSocket upgrades with `upgrader` on 127.0.0.1 on a free port, says the port on
    /// standard output after `name` ("<name> on port <n>", what the bench waits for), and runs until
    /// the process is stopped. The relay floor serves the same way.
    static func serve(_ upgrader: NIOWebSocketServerUpgrader, announcing name: String) async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        FileHandle.standardOutput.write(Data("\(name) on port \(server.localAddress?.port ?? 0)\n".utf8))
        try await server.closeFuture.get()
    }

    /// Greets once upgraded, then echoes: everything happens in the channel's event loop, nothing is kept
    /// between frames.
    final class EchoHandler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = WebSocketFrame
        typealias OutboundOut = WebSocketFrame

        func handlerAdded(context: ChannelHandlerContext) {
            let greeting = context.channel.allocator.buffer(string: #"{"type":"ready"}"#)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: greeting)), promise: nil)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.opcode {
            case .text:
                let reply = WebSocketFrame(fin: true, opcode: .text, data: frame.unmaskedData)
                context.writeAndFlush(wrapOutboundOut(reply), promise: nil)
            default:
                NIOEchoServer.answerControlFrame(frame, context: context)
            }
        }
    }

    /// A ping gets its pong; a close gets a close, then the channel closes. Other frames: nothing.
    static func answerControlFrame(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        switch frame.opcode {
        case .ping:
            context.writeAndFlush(NIOAny(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            let close = WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)
            let channel = context.channel
            context.writeAndFlush(NIOAny(close)).whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }
}
