import CompressNIO
import HTTPTypes
import HummingbirdWebSocket
import NIOCore

/// permessage-deflate (RFC 7692) for one real-time connection, run synchronously on its event loop.
///
/// Written here because the library's extension (swift-websocket's `PerMessageDeflateExtension`)
/// compresses in two actors through `async` calls, which a `ChannelHandler` cannot make: the socket
/// would need a task per connection again (issue 28, "What an idle connection costs"). The
/// negotiation follows that extension's rules, and the zlib work is CompressNIO's, as it is there.
/// The zlib streams are made when first needed, so a connection that never sends a compressed
/// message keeps no inflate state.
final class PerMessageDeflate {
    /// What the server asks for and allows.
    struct Settings: Sendable {
        /// Largest LZ77 window (bits) the client may use for what it sends, when it lets the server choose.
        var clientMaxWindow = 10
        /// The window the server compresses with.
        var serverMaxWindow = 10
        /// zlib's memory level for compressing (1-9): 2 keeps each connection's deflate state small.
        var memoryLevel: Int32 = 2
        /// Frames shorter than this go uncompressed.
        var minimumSize = 64
    }

    /// What one handshake agreed on.
    struct Agreement: Sendable, Equatable {
        var receiveWindow: Int
        var receiveNoContextTakeover: Bool
        var sendWindow: Int
        var sendNoContextTakeover: Bool
        /// The `Sec-WebSocket-Extensions` answer.
        var header: String
    }

    /// The agreement for a client's offers, or nil when it offered no permessage-deflate.
    static func negotiate(_ requestHeaders: HTTPFields, settings: Settings) -> Agreement? {
        guard let offer = WebSocketExtensionHTTPParameters.parseHeaders(requestHeaders).first(where: { $0.name == "permessage-deflate" })
        else { return nil }
        // The client's window: set by the server only when the client says it may be (the parameter
        // present, with or without a value).
        let receiveWindow: Int? = offer.parameters["client_max_window_bits"].map { requested in
            min(requested.integer ?? 15, settings.clientMaxWindow)
        }
        let sendWindow = min(offer.parameters["server_max_window_bits"]?.integer ?? 15, settings.serverMaxWindow)
        // zlib cannot compress with a window under 9 bits: no compression rather than a wrong one.
        guard sendWindow >= 9, (receiveWindow ?? 15) >= 8 else { return nil }
        let receiveNoContextTakeover = offer.parameters["client_no_context_takeover"] != nil
        let sendNoContextTakeover = offer.parameters["server_no_context_takeover"] != nil
        var header = "permessage-deflate"
        if let receiveWindow { header += ";client_max_window_bits=\(receiveWindow)" }
        if receiveNoContextTakeover { header += ";client_no_context_takeover" }
        header += ";server_max_window_bits=\(sendWindow)"
        if sendNoContextTakeover { header += ";server_no_context_takeover" }
        return Agreement(
            receiveWindow: receiveWindow ?? 15, receiveNoContextTakeover: receiveNoContextTakeover, sendWindow: sendWindow,
            sendNoContextTakeover: sendNoContextTakeover, header: header)
    }

    enum Failure: Error, Equatable {
        /// The message inflates past the limit.
        case tooLarge
        /// Not a deflate stream.
        case corrupt
    }

    private let agreement: Agreement
    private let settings: Settings
    private var inflater: ZlibDecompressor?
    private var deflater: ZlibCompressor?

    init(agreement: Agreement, settings: Settings) {
        self.agreement = agreement
        self.settings = settings
    }

    /// Inflates one frame of a compressed message (`last`: its final frame), at most `maxSize` bytes.
    func inflate(_ data: ByteBuffer, last: Bool, maxSize: Int) throws(Failure) -> ByteBuffer {
        do {
            let inflater = try self.inflater ?? ZlibDecompressor(algorithm: .deflate, windowSize: Int32(agreement.receiveWindow))
            self.inflater = inflater
            var data = data
            // The sender removed the final 00 00 ff ff of the message's sync flush (RFC 7692, 7.2.2).
            if last { data.writeBytes([0, 0, 0xff, 0xff]) }
            let inflated = try data.decompressStream(with: inflater, maxSize: maxSize)
            if last, agreement.receiveNoContextTakeover { try inflater.reset() }
            return inflated
        } catch let error as CompressNIOError where error == .bufferOverflow {
            throw .tooLarge
        } catch {
            throw .corrupt
        }
    }

    /// The payload to send for a whole message, and whether it is compressed (RSV1).
    func deflate(_ data: ByteBuffer) -> (ByteBuffer, compressed: Bool) {
        guard data.readableBytes >= settings.minimumSize else { return (data, false) }
        do {
            let deflater =
                try self.deflater
                ?? ZlibCompressor(
                    algorithm: .deflate,
                    configuration: .init(windowSize: Int32(agreement.sendWindow), compressionLevel: -1, memoryLevel: settings.memoryLevel))
            self.deflater = deflater
            var input = data
            var output = try input.compressStream(with: deflater, flush: .sync)
            // A message ends with the sync flush's 00 00 ff ff, which is left out (RFC 7692, 7.2.1).
            output.moveWriterIndex(to: output.writerIndex - 4)
            if agreement.sendNoContextTakeover { try deflater.reset() }
            return (output, true)
        } catch {
            return (data, false)  // sent as it is: an uncompressed message is always allowed
        }
    }
}
