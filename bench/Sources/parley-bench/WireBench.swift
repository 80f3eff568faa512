import Foundation
import HTTPTypes
import ParleyAPI
import ParleyKit
import ParleyKitNIO
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 that counts the bytes each way: what a client sends and receives,
/// measured at the socket (HTTP and WebSocket framing included, TCP/IP headers not).
final class CountingProxy: Sendable {
    let port: Int
    private let listener: Int32
    private let counts = Mutex((up: 0, down: 0))

    init(target: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 64) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw BenchError("proxy: cannot listen") }
        port = Int(UInt16(bigEndian: address.sin_port))
        listener = fd
        Thread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                guard let upstream = try? RawHTTP.connect(port: target) else {
                    close(client)
                    continue
                }
                let pair = Pair()
                Thread { self.pump(from: client, to: upstream, up: true, pair: pair) }.start()
                Thread { self.pump(from: upstream, to: client, up: false, pair: pair) }.start()
            }
        }.start()
    }

    /// Both directions of one proxied connection; the second pump to finish closes the sockets.
    private final class Pair: Sendable {
        let finished = Atomic<Int>(0)
    }

    private func pump(from source: Int32, to destination: Int32, up: Bool, pair: Pair) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            counts.withLock { if up { $0.up += count } else { $0.down += count } }
            if (try? RawHTTP.writeAll(destination, Array(buffer[0..<count]))) == nil { break }
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
        if pair.finished.add(1, ordering: .acquiringAndReleasing).newValue == 2 {
            close(source)
            close(destination)
        }
    }

    var bytes: (up: Int, down: Int) { counts.withLock { $0 } }
    func reset() { counts.withLock { $0 = (0, 0) } }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

/// Section 4: a 12-message chat as the consumer's widget has it, at the socket.
enum WireBench {
    struct Row: Sendable {
        /// The client: the widget (a browser) or ParleyKit (an app).
        var client = "widget"
        var compression: Bool
        var httpUp: Int
        var httpDown: Int
        var socketUp: Int
        var socketDown: Int
        var up: Int { httpUp + socketUp }
        var down: Int { httpDown + socketDown }
    }

    /// The headers Chromium sends with the widget's `fetch` calls (same-origin, bearer token).
    static let browserHeaders: [(String, String)] = [
        ("Connection", "keep-alive"),
        ("sec-ch-ua-platform", "\"Android\""),
        ("User-Agent", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"),
        ("sec-ch-ua", "\"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\""),
        ("sec-ch-ua-mobile", "?1"), ("Accept", "*/*"), ("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "cors"),
        ("Sec-Fetch-Dest", "empty"), ("Referer", "https://chat.example.com/widget.html?app=app_0123456789abcdefghijklmn"),
        ("Accept-Encoding", "gzip, deflate, br, zstd"), ("Accept-Language", "en-GB,en;q=0.9"),
    ]

    /// The widget's conversation: six lines from the customer, six answers from the agent.
    static let customer = [
        "Hi! My order #48213 hasn't arrived yet, it was due on Tuesday.",
        "It's the blue running shoes, size 42.",
        "Yes, the address is still 12 Harbour Street.",
        "Could you send them by express instead?",
        "Great, thank you. Will I get a tracking link?",
        "Perfect, thanks for your help!",
    ]
    static let agent = [
        "Hello! Sorry about that. Let me check order #48213 for you.",
        "I can see them: they left our warehouse on Monday but the courier lost the scan.",
        "Thanks. I'll have a new pair sent to 12 Harbour Street today.",
        "Of course, express at no charge. It should arrive tomorrow before noon.",
        "Yes, you'll get an email with the tracking link within the hour.",
        "You're welcome! Have a lovely day.",
    ]

    static func run(server: ParleyServer) async throws -> [Row] {
        var rows: [Row] = []
        for compression in [false, true] {
            rows.append(try await chat(server: server, compression: compression))
        }
        rows.append(try await sdkChat(server: server))
        return rows
    }

    /// The same chat from an app on ParleyKit: its session and the socket (resume, each answer
    /// received with a delivered receipt, then read), the customer's lines through its outbox.
    static func sdkChat(server: ParleyServer) async throws -> Row {
        let proxy = try CountingProxy(target: server.port)
        defer { proxy.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-kit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        guard let appId = AppID(server.appId) else { throw BenchError("wire bench: bad app id") }
        let parley = try await Parley.configure(
            brandID: nil, appID: appId, server: URL(string: "http://127.0.0.1:\(proxy.port)/")!, identity: .anonymous(),
            storage: ParleyStorage(directory: directory, key: .file(directory.appendingPathExtension("key"))), transport: NIOTransport())
        let events = Locked<[ParleyEvent]>([])
        let listener = Task { for await event in parley.events { events.withLock { $0.append(event) } } }
        defer { listener.cancel() }
        func until(_ check: @escaping @Sendable ([ParleyEvent]) -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if events.withLock({ check($0) }) { return }
                try await Task.sleep(for: .milliseconds(2))
            }
            throw BenchError("wire bench (ParleyKit): an expected event did not arrive")
        }
        await parley.connect()
        try await until { $0.contains { if case .connection(.connected) = $0 { true } else { false } } }
        let agentToken = try await server.api.login(email: server.adminEmail, password: server.adminPassword)
        let agentFrames = Locked<[String]>([])
        let agentSocket = try await BenchSocket.open(url: "ws://127.0.0.1:\(server.port)/v1/realtime?access_token=\(agentToken)") { text in
            agentFrames.withLock { $0.append(text) }
        }
        func agentWait(_ matches: @escaping @Sendable (String) -> Bool) async throws -> String {
            try await take(from: agentFrames, matching: matches)
        }
        for turn in 0..<6 {
            try await parley.send(customer[turn])
            _ = await parley.flush()
            guard let stored = await parley.outgoing.last?.state.stored else { throw BenchError("wire bench (ParleyKit): not sent: \(await parley.outgoing.map { "\($0.state) \($0.lastError ?? "")" })") }
            let conversationId = stored.conversationId.rawValue
            let incoming = try await agentWait { FrameScan.type(of: $0) == "message" && $0.contains(customer[turn]) }
            if turn == 0 { agentSocket.send(#"{"type":"view","conversationId":"\#(conversationId)"}"#) }
            agentSocket.send(#"{"type":"receipt","id":"r\#(turn)","conversationId":"\#(conversationId)","upToSeq":\#(seqOf(incoming)),"state":"read"}"#)
            _ = try await agentWait { $0.contains(#""id":"r\#(turn)""#) }
            agentSocket.send(
                #"{"type":"send","id":"a\#(turn)","clientMessageId":"\#(UUID().uuidString.lowercased())","conversationId":"\#(conversationId)","text":"\#(agent[turn])"}"#)
            let ack = try await agentWait { $0.contains(#""id":"a\#(turn)""#) }
            let answer = agent[turn]
            try await until { ParleyKitEvents.messages($0).contains { $0.text == answer } }
            await parley.markRead(stored.conversationId)
            _ = try await agentWait { FrameScan.type(of: $0) == "event" && $0.contains(#""upToSeq":\#(seqOf(ack))"#) && $0.contains("read") }
        }
        try await Task.sleep(for: .milliseconds(200))
        await parley.disconnect()
        await agentSocket.close()
        try await Task.sleep(for: .milliseconds(100))
        let total = proxy.bytes
        // The app's HTTP and socket share the proxy: the split is not kept, the totals are what count.
        return Row(client: "ParleyKit", compression: false, httpUp: 0, httpDown: 0, socketUp: total.up, socketDown: total.down)
    }

    static func chat(server: ParleyServer, compression: Bool) async throws -> Row {
        let proxy = try CountingProxy(target: server.port)
        defer { proxy.stop() }
        let appId = server.appId
        let proxyPort = proxy.port
        func http(_ method: String, _ path: String, token: String?, body: String?) async throws -> RawHTTP.Response {
            var headers = browserHeaders
            if let token { headers.append(("Authorization", "Bearer \(token)")) }
            if body != nil {
                headers.append(("Content-Type", "application/json"))
                headers.append(("Origin", "https://chat.example.com"))
            }
            return try await RawHTTP.onThread { [headers] in
                try RawHTTP.request(port: proxyPort, method, path, headers: headers, body: Array((body ?? "").utf8))
            }
        }
        // What the widget does on a first visit: a session (with the page it opened on) and the
        // brand's settings (a new visitor has no conversations to list); then the socket.
        let sessionBody = #"{"appId":"\#(appId)","pageUrl":"https://shop.example.com/products/espresso-machine","pageTitle":"Espresso machine · Shop"}"#
        let session = try ParleyJSON.makeDecoder().decode(
            ConsumerSessionResponse.self,
            from: Data(try await http("POST", "/v1/consumer/session", token: nil, body: sessionBody).body))
        _ = try await http("GET", "/v1/consumer/settings", token: session.token, body: nil)
        let afterHTTP = proxy.bytes

        let consumerFrames = Locked<[String]>([])
        var headers = HTTPFields()
        headers[.userAgent] = browserHeaders.first { $0.0 == "User-Agent" }?.1
        headers[.origin] = "https://chat.example.com"
        headers[.acceptLanguage] = "en-GB,en;q=0.9"
        headers[.cacheControl] = "no-cache"
        let consumer = try await BenchSocket.open(
            url: "ws://127.0.0.1:\(proxyPort)/v1/realtime?access_token=\(session.token)", compression: compression, headers: headers
        ) { text in consumerFrames.withLock { $0.append(text) } }

        let agentToken = try await server.api.login(email: server.adminEmail, password: server.adminPassword)
        let agentFrames = Locked<[String]>([])
        let agentSocket = try await BenchSocket.open(url: "ws://127.0.0.1:\(server.port)/v1/realtime?access_token=\(agentToken)") { text in
            agentFrames.withLock { $0.append(text) }
        }

        func waitFor(_ frames: Locked<[String]>, _ matches: @escaping @Sendable (String) -> Bool) async throws -> String {
            try await take(from: frames, matching: matches)
        }

        var conversationId: String?
        for turn in 0..<6 {
            // The customer sends over the socket, as the widget does while online.
            let id = "c\(turn * 2 + 1)"
            var send = #"{"type":"send","id":"\#(id)","clientMessageId":"\#(UUID().uuidString.lowercased())","text":"\#(customer[turn])""#
            if let conversationId { send += #","conversationId":"\#(conversationId)""# }
            consumer.send(send + "}")
            let ack = try await waitFor(consumerFrames) { $0.contains(#""id":"\#(id)""#) }
            conversationId = conversationId ?? FrameScan.string("conversationId", in: ack).map(String.init)
            guard let conversationId else { throw BenchError("wire bench: no conversation") }
            // The agent sees it, reads it, answers.
            let incoming = try await waitFor(agentFrames) { FrameScan.type(of: $0) == "message" && $0.contains(customer[turn]) }
            // As the workspace does when it opens the conversation: its receipts and typing come here.
            if turn == 0 { agentSocket.send(#"{"type":"view","conversationId":"\#(conversationId)"}"#) }
            let seq = seqOf(incoming)
            agentSocket.send(#"{"type":"receipt","id":"r\#(turn)","conversationId":"\#(conversationId)","upToSeq":\#(seq),"state":"read"}"#)
            _ = try await waitFor(agentFrames) { $0.contains(#""id":"r\#(turn)""#) }
            agentSocket.send(
                #"{"type":"send","id":"a\#(turn)","clientMessageId":"\#(UUID().uuidString.lowercased())","conversationId":"\#(conversationId)","text":"\#(agent[turn])"}"#)
            _ = try await waitFor(agentFrames) { $0.contains(#""id":"a\#(turn)""#) }
            // The customer gets the answer and marks it read.
            let answer = try await waitFor(consumerFrames) { FrameScan.type(of: $0) == "message" && $0.contains(agent[turn]) }
            let receiptId = "c\(turn * 2 + 2)"
            consumer.send(#"{"type":"receipt","id":"\#(receiptId)","conversationId":"\#(conversationId)","upToSeq":\#(seqOf(answer)),"state":"read"}"#)
            _ = try await waitFor(consumerFrames) { $0.contains(#""id":"\#(receiptId)""#) }
            _ = try await waitFor(agentFrames) { FrameScan.type(of: $0) == "event" && $0.contains(#""upToSeq":\#(seqOf(answer))"#) }
        }
        // Everything the server sends the consumer (the agent's receipts included) has arrived once
        // the consumer sees the agent's receipt of the last line.
        try await Task.sleep(for: .milliseconds(200))
        await consumer.close()
        await agentSocket.close()
        try await Task.sleep(for: .milliseconds(100))
        let total = proxy.bytes
        return Row(
            compression: compression, httpUp: afterHTTP.up, httpDown: afterHTTP.down, socketUp: total.up - afterHTTP.up,
            socketDown: total.down - afterHTTP.down)
    }

    enum ParleyKitEvents {
        static func messages(_ events: [ParleyEvent]) -> [MessageDTO] {
            events.compactMap { if case .message(let message) = $0 { message } else { nil } }
        }
    }

    /// The first frame received that `matches`, taken out of `frames`; waits up to 10 s for it.
    static func take(from frames: Locked<[String]>, matching matches: @escaping @Sendable (String) -> Bool) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let found = frames.withLock({ list -> String? in
                guard let index = list.firstIndex(where: matches) else { return nil }
                return list.remove(at: index)
            }) {
                return found
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        throw BenchError("wire bench: an expected frame did not arrive")
    }

    static func seqOf(_ frame: String) -> Int {
        guard let range = frame.range(of: #""seq":"#) else { return 0 }
        return Int(frame[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }
}
