import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket

/// Each accepted connection: HTTP/1.1 for Hummingbird's router, or, when its first request asks for
/// a WebSocket upgrade that the upgrade router grants, a real-time socket on SwiftNIO's own frame
/// handlers with a `RealtimeSocket` on top.
///
/// It is Hummingbird's `HTTP1WebSocketUpgradeChannel` with one difference: that one hands an
/// upgraded socket to a task that runs as long as the socket is open (reading it through an async
/// sequence and writing through another), which cost each idle connection 30 KB before Parley added
/// anything; here the socket is a `ChannelHandler` and the connection's task ends with the upgrade.
/// The HTTP side is Hummingbird's own (`handleHTTP`).
struct RealtimeChannel<UpgradeResponder: HTTPResponder>: ServerChildChannel, HTTPChannelHandler
where UpgradeResponder.Context == ParleyRequestContext {
    enum UpgradeResult: Sendable {
        case upgraded
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        case failedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>, Logger)
    }

    struct Value: ServerChildChannelValue {
        let upgradeResult: EventLoopFuture<UpgradeResult>
        let channel: any Channel
    }

    /// What a granted upgrade becomes: the socket's handler, given who connects and the compression agreed.
    typealias MakeSocket = @Sendable (RealtimeUpgrade, PerMessageDeflate.Agreement?, Logger) -> RealtimeSocket

    let responder: HTTPChannelHandler.Responder
    let upgradeResponder: UpgradeResponder
    let http1: HTTP1Channel.Configuration
    /// Largest frame SwiftNIO's decoder reads (a larger one is closed with 1009).
    let maxFrameSize: Int
    /// permessage-deflate, when the server offers it.
    let deflate: PerMessageDeflate.Settings?
    let makeSocket: MakeSocket

    init(
        responder: @escaping HTTPChannelHandler.Responder, upgradeResponder: UpgradeResponder, http1: HTTP1Channel.Configuration,
        maxFrameSize: Int, deflate: PerMessageDeflate.Settings?, makeSocket: @escaping MakeSocket
    ) {
        self.responder = Self.upgradeAwareResponder(responder)
        self.upgradeResponder = upgradeResponder
        self.http1 = http1
        self.maxFrameSize = maxFrameSize
        self.deflate = deflate
        self.makeSocket = makeSocket
    }

    /// A request that asks for an upgrade after the connection's first one cannot be upgraded (the
    /// upgrade runs only on a connection's first request): like Hummingbird, it is sent to open a new
    /// connection with a redirect to the same address.
    private static func upgradeAwareResponder(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        return { request, responseWriter, channel in
            guard request.headers[.upgrade] == "websocket" else {
                return try await responder(request, responseWriter, channel)
            }
            var path = request.uri.path
            if let query = request.uri.query { path += "?\(query)" }
            try await responseWriter.writeResponse(HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: path]))
            throw RealtimeRedirectClose()
        }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let upgradeAttempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let granted = NIOLoopBoundBox<(RealtimeUpgrade, PerMessageDeflate.Agreement?)?>(nil, eventLoop: channel.eventLoop)
            let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
                maxFrameSize: maxFrameSize,
                shouldUpgrade: { channel, head in
                    upgradeAttempted.value = true
                    return decide(head, channel: channel, logger: logger).map { decision in
                        guard let (upgrade, agreement) = decision else { return nil }
                        granted.value = (upgrade, agreement)
                        var headers = HTTPHeaders()
                        if let agreement { headers.add(name: "Sec-WebSocket-Extensions", value: agreement.header) }
                        return headers
                    }
                },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        guard let (upgrade, agreement) = granted.value else { throw ChannelError.inappropriateOperationForState }
                        try channel.pipeline.syncOperations.addHandler(makeSocket(upgrade, agreement, logger))
                        return UpgradeResult.upgraded
                    }
                })
            let serverUpgrade = NIOTypedHTTPServerUpgradeConfiguration(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try channel.pipeline.syncOperations.addHandlers(http1.additionalChannelHandlers())
                        try channel.pipeline.syncOperations.addHandler(
                            HTTPConnectionStateHandler(idleTimeout: http1.idleTimeout.map { .init($0) }, logger: logger))
                        let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        return upgradeAttempted.value ? .failedUpgrade(asyncChannel, logger) : .notUpgraded(asyncChannel)
                    }
                })
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<UpgradeResult>(upgradeConfiguration: serverUpgrade)
            configuration.enablePipelining = false  // HTTP is pipelined by NIOAsyncChannel
            configuration.enableErrorHandling = false  // Hummingbird handles these
            configuration.enableResponseHeaderValidation = false  // Swift HTTP Types validate already
            configuration.decoderConfiguration.maxHeaderFieldSize = http1.httpDecoder.maxHeaderFieldSize
            configuration.decoderConfiguration.maxHeaderListSize = http1.httpDecoder.maxHeaderListSize
            configuration.decoderConfiguration.maxHeaderFieldCount = http1.httpDecoder.maxHeaderFieldCount
            let result = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            return Value(upgradeResult: result, channel: channel)
        }
    }

    /// Runs the upgrade router for the request: who connects, and the compression agreed; nil when refused.
    private func decide(
        _ head: HTTPRequestHead, channel: any Channel, logger: Logger
    ) -> EventLoopFuture<(RealtimeUpgrade, PerMessageDeflate.Agreement?)?> {
        let promise = channel.eventLoop.makePromise(of: (RealtimeUpgrade, PerMessageDeflate.Agreement?)?.self)
        promise.completeWithTask {
            guard let head = try? HTTPRequest(head, secure: false, splitCookie: false) else { return nil }
            let context = ParleyRequestContext(source: .init(channel: channel, logger: logger))
            guard let response = try? await upgradeResponder.respond(to: Request(head: head, body: .init(buffer: .init())), context: context),
                response.status == .ok, let upgrade = context.realtimeUpgrade.decided
            else { return nil }
            return (upgrade, deflate.flatMap { PerMessageDeflate.negotiate(head.headerFields, settings: $0) })
        }
        return promise.futureResult
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgradeResult.get() {
            case .notUpgraded(let http1):
                await handleHTTP(asyncChannel: http1, logger: logger)
            case .failedUpgrade(let http1, let logger):
                logger.debug("WebSocket upgrade refused")
                await refuseUpgrade(http1)
            case .upgraded:
                // The socket lives in its pipeline from here; no task stays with it.
                break
            }
        } catch let error as ChannelError where error == .inputClosed {
            logger.trace("the connection closed before its first request")
        } catch {
            logger.debug("the connection's first request failed", metadata: ["error": "\(error)"])
        }
    }

    /// A refused upgrade: 400, no body, connection closed (as Hummingbird answers one).
    private func refuseUpgrade(_ channel: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        try? await channel.executeThenClose { _, outbound in
            try await outbound.write(
                contentsOf: [.head(HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])), .end(nil)])
        }
    }
}

/// Ends the connection after the redirect of a late upgrade request.
private struct RealtimeRedirectClose: Error {}
