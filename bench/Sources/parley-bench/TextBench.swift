import Foundation
import ParleyAPI
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds, cheap enough to take on every frame.
@inline(__always) func monotonicNanos() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Send, ack and delivery instants per message index, filled by the generator and the reader tasks.
final class Timeline: Sendable {
    let capacity: Int
    private let sent: Mutex<[UInt64]>
    private let acked: Mutex<[UInt64]>
    private let delivered: Mutex<[UInt64]>
    let next = Atomic<Int>(0)
    let ackCount = Atomic<Int>(0)
    let deliveredCount = Atomic<Int>(0)

    init(capacity: Int) {
        self.capacity = capacity
        sent = Mutex([UInt64](repeating: 0, count: capacity))
        acked = Mutex([UInt64](repeating: 0, count: capacity))
        delivered = Mutex([UInt64](repeating: 0, count: capacity))
    }

    /// A fresh message index, or nil when the run has used them all.
    func claim() -> Int? {
        let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
        return index < capacity ? index : nil
    }

    let sentCount = Atomic<Int>(0)

    func markSent(_ index: Int) {
        sent.withLock { $0[index] = monotonicNanos() }
        sentCount.add(1, ordering: .relaxed)
    }

    func markAcked(_ index: Int) {
        let now = monotonicNanos()
        guard index >= 0, index < capacity else { return }
        acked.withLock { $0[index] = now }
        ackCount.add(1, ordering: .relaxed)
    }

    func markDelivered(_ index: Int) {
        let now = monotonicNanos()
        guard index >= 0, index < capacity else { return }
        delivered.withLock { $0[index] = now }
        deliveredCount.add(1, ordering: .relaxed)
    }

    /// Waits until `sent` messages are acked and delivered, or `limit` has passed (what is still in
    /// flight when a phase's sending stops).
    func settle(_ sent: Int, within limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        while deliveredCount.load(ordering: .relaxed) < sent || ackCount.load(ordering: .relaxed) < sent, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// `BENCH_DEBUG` set: frames are echoed, and messages answered after more than a second are
    /// listed, on standard error.
    static let debug = ProcessInfo.processInfo.environment["BENCH_DEBUG"] != nil

    /// `BENCH_TIMELINE_DIR` set: each phase writes its messages there, one line each (sent, in
    /// nanoseconds from the phase's first send; ack and delivery, in microseconds after the send;
    /// -1 for none), after a header line that gives the first send's `CLOCK_MONOTONIC` time, to find
    /// when the slow ones happened (bench/slow_messages.py).
    static let dumpDirectory = ProcessInfo.processInfo.environment["BENCH_TIMELINE_DIR"]

    func dump(name: String) {
        guard let directory = Self.dumpDirectory else { return }
        let sent = self.sent.withLock { $0 }
        let acked = self.acked.withLock { $0 }
        let delivered = self.delivered.withLock { $0 }
        let count = min(capacity, next.load(ordering: .relaxed))
        let first = sent.prefix(count).filter { $0 != 0 }.min() ?? 0
        var lines = "sent_ns ack_us delivery_us first=\(first)\n"
        for index in 0..<count where sent[index] != 0 {
            let ack = acked[index] == 0 ? -1 : Int(acked[index] - sent[index]) / 1000
            let delivery = delivered[index] == 0 ? -1 : Int(delivered[index] - sent[index]) / 1000
            lines += "\(sent[index] - first) \(ack) \(delivery)\n"
        }
        let stamp = monotonicNanos()
        try? Data(lines.utf8).write(to: URL(fileURLWithPath: directory).appendingPathComponent("\(name)-\(stamp).txt"))
    }

    /// Milliseconds from send to ack and from send to delivery, for messages sent in `window`.
    func latencies(sentBetween window: ClosedRange<UInt64>? = nil) -> (ack: [Double], delivery: [Double]) {
        let sent = self.sent.withLock { $0 }
        let acked = self.acked.withLock { $0 }
        let delivered = self.delivered.withLock { $0 }
        var ack: [Double] = []
        var delivery: [Double] = []
        for index in 0..<min(capacity, next.load(ordering: .relaxed)) where sent[index] != 0 {
            if let window, !window.contains(sent[index]) { continue }
            if acked[index] != 0 { ack.append(Double(acked[index] - sent[index]) / 1e6) }
            if Self.debug, acked[index] > sent[index] + 1_000_000_000 {
                // A message held up for over a second: which one, and when it was answered.
                let ackMs = Double(acked[index] - sent[index]) / 1e6
                let deliveryMs = delivered[index] == 0 ? Double.nan : Double(delivered[index] - sent[index]) / 1e6
                FileHandle.standardError.write(Data("slow: message \(index) acked after \(ackMs) ms, delivered after \(deliveryMs) ms\n".utf8))
            }
            if delivered[index] != 0 { delivery.append(Double(delivered[index] - sent[index]) / 1e6) }
        }
        return (ack, delivery)
    }
}

/// Section 1: text messages from consumers to one agent, at a fixed rate and at saturation.
enum TextBench {
    struct Phase: Sendable {
        var name: String
        var seconds: Double
        var sent: Int
        var acked: Int
        var delivered: Int
        var ackLatency: Distribution
        var deliveryLatency: Distribution
        var serverCPUSeconds: Double
        /// This process's CPU over the same span: the load generator competes for the same cores.
        var generatorCPUSeconds: Double = .nan
        /// The share of the machine's CPU time over the same span that the hypervisor gave to other
        /// machines (`/proc/stat`'s steal): how busy the host was, which moves every figure.
        var stolenShare: Double = .nan
        var messagesPerSecond: Double { Double(acked) / seconds }
        var cpuMicrosPerMessage: Double { serverCPUSeconds * 1e6 / Double(max(delivered, 1)) }
        /// PostgreSQL's statements and CPU over the same span (the cluster section).
        var database: PostgresProbe.Use?
        var statementsPerMessage: Double { database.map { Double($0.statements) / Double(max(acked, 1)) } ?? .nan }
        var databaseMicrosPerMessage: Double { database.map { $0.cpuSeconds * 1e6 / Double(max(delivered, 1)) } ?? .nan }
    }

    struct Report: Sendable {
        var consumers: Int
        var window: Int
        var repeats: Int
        var fixed: Phase
        var saturation: Phase
        var echo: Phase
        var fixedP99Range: (Double, Double)
        var echoP99Range: (Double, Double)
        var throughputRange: (Double, Double)
        /// Server CPU per message at the fixed rate over the runs: it moves more between runs than latency
        /// does (the fixed row is the run with the median delivery p99), so the figure compared is the median.
        var fixedCPURange: (Double, Double) = (.nan, .nan)
        var fixedCPUMedian: Double = .nan
        /// The quiet rate (`quietRate`): what a message costs when the server is not busy, the hour
        /// most brands have most of the time. Nil when the run has no quiet phase.
        var quiet: Phase?
        var quietP99Range: (Double, Double) = (.nan, .nan)
        /// The echo at the quiet rate: a server woken from idle for each message.
        var quietEcho: Phase?
        /// The durable-message floor (`floorPhase`) at the fixed rate, the run with the median delivery p99,
        /// and its CPU per message over the runs; the echo's CPU median beside it.
        var floor: Phase?
        var floorCPURange: (Double, Double) = (.nan, .nan)
        var floorCPUMedian: Double = .nan
        var echoCPUMedian: Double = .nan
        /// The floor's CPU per message against the echo's, and Parley's against the floor's (medians).
        var floorVsEcho: Double { floorCPUMedian / echoCPUMedian }
        var parleyVsFloor: Double { fixedCPUMedian / floorCPUMedian }
    }

    /// Messages a second in the quiet phase: one every 50 ms, so each commit finds the writer idle and
    /// the previous one's WAL frames copied by the background checkpoint (every 250 ms) or not yet.
    static let quietRate = 20

    /// A consumer with its conversation and its connection.
    struct Sender: Sendable {
        var index: Int
        var conversationId: String
        var socket: BenchSocket
    }

    static func sendFrame(conversationId: String, index: Int, run: String) -> String {
        #"{"type":"send","id":"s\#(index)","clientMessageId":"\#(run)-\#(index)","conversationId":"\#(conversationId)","text":"bench \#(index)"}"#
    }

    /// What the echo baseline is sent: a send's shape and size, typed `ack`, so that what comes back
    /// reads as the ack of message `index`.
    static func echoFrame(index: Int) -> String {
        sendFrame(conversationId: "cnv_" + String(repeating: "x", count: 24), index: index, run: "echo0000")
            .replacingOccurrences(of: #""type":"send""#, with: #""type":"ack""#)
    }

    /// The message index in an ack (`"id":"s<index>"`) or a delivered message (`"text":"bench <index>"`).
    static func ackIndex(_ text: String) -> Int? {
        guard FrameScan.type(of: text) == "ack", let id = FrameScan.topLevel("id", in: text), id.hasPrefix("s")
        else { return nil }
        return Int(id.dropFirst())
    }

    static func deliveredIndex(_ text: String) -> Int? {
        guard FrameScan.type(of: text) == "message", let body = FrameScan.string("text", in: text), body.hasPrefix("bench ") else {
            return nil
        }
        return Int(body.dropFirst("bench ".count))
    }

    static func run(
        server: ParleyServer, consumers: Int, rate: Int, seconds: Double, saturationSeconds: Double, window: Int, repeats: Int,
        echoBinary: URL, quietSeconds: Double? = nil
    ) async throws -> Report {
        let api = server.api
        let agentToken = try await api.login(email: server.adminEmail, password: server.adminPassword)
        let sessions = try await openConversations(server, consumers: consumers)

        // The machine is shared and noisy: each phase runs `repeats` times, interleaved, and the
        // report keeps the median run (by delivery p99, by throughput) and the range.
        var fixedRuns: [Phase] = []
        var saturationRuns: [Phase] = []
        var echoRuns: [Phase] = []
        var floorRuns: [Phase] = []
        var quietRuns: [Phase] = []
        var quietEchoRuns: [Phase] = []
        for _ in 0..<repeats {
            if let quietSeconds {
                quietRuns.append(
                    try await phase(
                        "quiet", server: server, agentToken: agentToken, sessions: sessions, seconds: quietSeconds,
                        capacity: quietRate * Int(quietSeconds.rounded(.up)) + 16, mode: .fixedRate(quietRate)))
                quietEchoRuns.append(try await echoPhase(binary: echoBinary, rate: quietRate, seconds: quietSeconds))
            }
            fixedRuns.append(
                try await phase(
                    "fixed", server: server, agentToken: agentToken, sessions: sessions, seconds: seconds,
                    capacity: rate * Int(seconds.rounded(.up)) + 16, mode: .fixedRate(rate)))
            echoRuns.append(try await echoPhase(binary: echoBinary, rate: rate, seconds: seconds))
            floorRuns.append(try await floorPhase(binary: echoBinary, consumers: consumers, rate: rate, seconds: seconds))
            saturationRuns.append(
                try await phase(
                    "saturation", server: server, agentToken: agentToken, sessions: sessions, seconds: saturationSeconds,
                    capacity: 60_000 * Int(saturationSeconds.rounded(.up)) + 16, mode: .window(window)))
        }
        return Report(
            consumers: consumers, window: window, repeats: repeats,
            fixed: median(fixedRuns, by: { $0.deliveryLatency.p99 }),
            saturation: median(saturationRuns, by: { $0.messagesPerSecond }),
            echo: median(echoRuns, by: { $0.deliveryLatency.p99 }),
            fixedP99Range: range(fixedRuns, \.deliveryLatency.p99),
            echoP99Range: range(echoRuns, \.deliveryLatency.p99),
            throughputRange: range(saturationRuns, \.messagesPerSecond),
            fixedCPURange: range(fixedRuns, \.cpuMicrosPerMessage),
            fixedCPUMedian: median(fixedRuns, by: { $0.cpuMicrosPerMessage }).cpuMicrosPerMessage,
            quiet: quietRuns.isEmpty ? nil : median(quietRuns, by: { $0.deliveryLatency.p99 }),
            quietP99Range: range(quietRuns, \.deliveryLatency.p99),
            quietEcho: quietEchoRuns.isEmpty ? nil : median(quietEchoRuns, by: { $0.deliveryLatency.p99 }),
            floor: median(floorRuns, by: { $0.deliveryLatency.p99 }),
            floorCPURange: range(floorRuns, \.cpuMicrosPerMessage),
            floorCPUMedian: median(floorRuns, by: { $0.cpuMicrosPerMessage }).cpuMicrosPerMessage,
            echoCPUMedian: median(echoRuns, by: { $0.cpuMicrosPerMessage }).cpuMicrosPerMessage)
    }

    /// The run whose `key` is the median of `runs` (the noisy machine's runs are summarized by it).
    static func median(_ runs: [Phase], by key: (Phase) -> Double) -> Phase { runs.sorted { key($0) < key($1) }[runs.count / 2] }

    /// The lowest and highest `key` over `runs` (NaN for none).
    static func range(_ runs: [Phase], _ key: (Phase) -> Double) -> (Double, Double) {
        (runs.map(key).min() ?? .nan, runs.map(key).max() ?? .nan)
    }

    /// Every consumer opens its conversation over HTTP first, so the timed sends all continue one.
    /// Returns each one's token and conversation id.
    static func openConversations(_ server: ParleyServer, consumers: Int) async throws -> [(String, String)] {
        let api = server.api
        let appId = server.appId
        return try await concurrently(consumers, width: 8) { index in
            let session = try await api.consumerSession(appId: appId, name: "Bench consumer \(index)")
            let first: SendMessageResponse = try await api.call(
                "POST", "/v1/consumer/messages", token: session.token,
                body: SendMessageRequest(clientMessageId: "open-\(index)", text: "Hello, I need help with my order"))
            return (session.token, first.conversation.id.rawValue)
        }
    }

    enum Mode {
        case fixedRate(Int)
        case window(Int)
    }

    /// Sends at `rate` per second from `started` until `end` (monotonic nanoseconds), open loop: a
    /// late send goes at once, none is skipped. Marks each index sent just before `send`; returns
    /// how many were sent.
    @discardableResult
    static func paced(
        rate: Int, from started: UInt64, until end: UInt64, timeline: Timeline, send: (Int) -> Void
    ) async throws -> Int {
        let interval = 1e9 / Double(rate)
        var sent = 0
        while let index = timeline.claim() {
            let due = started + UInt64(Double(sent) * interval)
            if due >= end { break }
            let now = monotonicNanos()
            if due > now { try await Task.sleep(for: .nanoseconds(Int64(due - now))) }
            timeline.markSent(index)
            send(index)
            sent += 1
        }
        return sent
    }

    /// `agentPort`: the agent connects to another node (cross-node delivery); `otherNodes`: their CPU
    /// counts too; `consumerPorts`: the consumers connect to these nodes in turn (else all to `server`).
    static func phase(
        _ name: String, server: ParleyServer, agentToken: String, sessions: [(String, String)], seconds: Double, capacity: Int,
        mode: Mode, agentPort: Int? = nil, otherNodes: [ChildProcess] = [], consumerPorts: [Int]? = nil, database: PostgresProbe? = nil
    ) async throws -> Phase {
        let timeline = Timeline(capacity: capacity)
        let debug = Timeline.debug
        let run = UUID().uuidString.prefix(8).lowercased()
        let stopAt = Atomic<UInt64>(UInt64.max)
        let agent = try await BenchSocket.open(url: "ws://127.0.0.1:\(agentPort ?? server.port)/v1/realtime?access_token=\(agentToken)") { text in
            if debug { FileHandle.standardError.write(Data("agent: \(text.prefix(300))\n".utf8)) }
            if let index = deliveredIndex(text) { timeline.markDelivered(index) }
        }
        // Each sender's reader acks; in window mode an ack sends that consumer's next message.
        let senders = Locked<[Int: BenchSocket]>([:])
        let windowed: Bool
        if case .window = mode { windowed = true } else { windowed = false }
        let conversationOf = sessions.map(\.1)
        var sockets: [BenchSocket] = []
        for (position, session) in sessions.enumerated() {
            let conversationId = session.1
            let port = consumerPorts.map { $0[position % $0.count] } ?? server.port
            let socket = try await BenchSocket.open(url: "ws://127.0.0.1:\(port)/v1/realtime?access_token=\(session.0)") { text in
                if debug { FileHandle.standardError.write(Data("consumer: \(text.prefix(300))\n".utf8)) }
                guard let index = ackIndex(text) else { return }
                timeline.markAcked(index)
                guard windowed, monotonicNanos() < stopAt.load(ordering: .relaxed), let next = timeline.claim(),
                    let socket = senders.withLock({ $0[position] })
                else { return }
                timeline.markSent(next)
                socket.send(sendFrame(conversationId: conversationId, index: next, run: run))
            }
            senders.withLock { $0[position] = socket }
            sockets.append(socket)
        }

        let nodes = [server.child] + otherNodes
        let cpuBefore = nodes.map(\.cpuSeconds).reduce(0, +)
        let ownBefore = ProcStats.cpuSeconds(pid: getpid())
        let ticksBefore = ProcStats.machineTicks()
        let databaseBefore = try await database?.start()
        let perf = PerfRecorder.start(name + (agentPort == nil ? "" : "-across"), pids: nodes.map(\.pid), seconds: seconds)
        let started = monotonicNanos()
        let end = started + UInt64(seconds * 1e9)
        stopAt.store(end, ordering: .relaxed)
        switch mode {
        case .fixedRate(let rate):
            try await paced(rate: rate, from: started, until: end, timeline: timeline) { index in
                let position = index % sockets.count
                sockets[position].send(sendFrame(conversationId: conversationOf[position], index: index, run: run))
            }
        case .window(let width):
            for (position, socket) in sockets.enumerated() {
                for _ in 0..<width {
                    guard let index = timeline.claim() else { break }
                    timeline.markSent(index)
                    socket.send(sendFrame(conversationId: conversationOf[position], index: index, run: run))
                }
            }
            while monotonicNanos() < end { try await Task.sleep(for: .milliseconds(20)) }
        }
        let ackedInWindow = timeline.ackCount.load(ordering: .relaxed)
        let elapsed = Double(monotonicNanos() - started) / 1e9
        // Let what is in flight arrive (bounded), then read the server's CPU.
        let sentTotal = timeline.sentCount.load(ordering: .relaxed)
        try await timeline.settle(sentTotal, within: .seconds(15))
        let cpu = nodes.map(\.cpuSeconds).reduce(0, +) - cpuBefore
        let own = ProcStats.cpuSeconds(pid: getpid()) - ownBefore
        let stolen = ProcStats.stolenShare(since: ticksBefore)
        var databaseUse: PostgresProbe.Use?
        if let database { databaseUse = try await database.finish(cpuBefore: databaseBefore ?? .nan) }
        let (ack, delivery) = timeline.latencies()
        timeline.dump(name: name + (agentPort == nil ? "" : "-across"))
        await PerfRecorder.finish(perf, delivered: delivery.count, serverCPUSeconds: cpu)
        for socket in sockets { await socket.close() }
        await agent.close()
        let isFixed: Bool
        if case .fixedRate = mode { isFixed = true } else { isFixed = false }
        return Phase(
            name: name, seconds: isFixed ? seconds : elapsed, sent: sentTotal, acked: isFixed ? ack.count : ackedInWindow,
            delivered: delivery.count, ackLatency: Distribution(ack), deliveryLatency: Distribution(delivery), serverCPUSeconds: cpu,
            generatorCPUSeconds: own, stolenShare: stolen, database: databaseUse)
    }

    /// The other baseline: the durable-message floor (`relay-floor-server`, a fresh process and
    /// database each time) at the same rate, from as many consumers to one agent, with the same
    /// frames: what a message costs that is committed to SQLite before its ack, with nothing else.
    static func floorPhase(binary: URL, consumers: Int, rate: Int, seconds: Double) async throws -> Phase {
        let child = try await ChildProcess(executable: binary, arguments: ["relay-floor-server", "--database", "floor.sqlite"], readyMarker: "relay floor on port ")
        do {
            guard let port = child.word(after: "relay floor on port ").flatMap({ Int($0) }) else { throw BenchError("relay floor port") }
            let timeline = Timeline(capacity: rate * Int(seconds.rounded(.up)) + 16)
            let agent = try await BenchSocket.open(url: "ws://127.0.0.1:\(port)/relay?agent") { text in
                if let index = deliveredIndex(text) { timeline.markDelivered(index) }
            }
            let conversations = (0..<consumers).map { "cnv_floor\(String(format: "%015d", $0))" }
            let sockets = try await concurrently(consumers, width: 16) { position in
                try await BenchSocket.open(url: "ws://127.0.0.1:\(port)/relay?conversation=\(conversations[position])") { text in
                    if let index = ackIndex(text) { timeline.markAcked(index) }
                }
            }
            let cpuBefore = child.cpuSeconds
            let ownBefore = ProcStats.cpuSeconds(pid: getpid())
            let ticksBefore = ProcStats.machineTicks()
            let perf = PerfRecorder.start("floor", pids: [child.pid], seconds: seconds)
            let started = monotonicNanos()
            let sent = try await paced(rate: rate, from: started, until: started + UInt64(seconds * 1e9), timeline: timeline) { index in
                let position = index % sockets.count
                sockets[position].send(sendFrame(conversationId: conversations[position], index: index, run: "floor000"))
            }
            try await timeline.settle(sent, within: .seconds(10))
            let cpu = child.cpuSeconds - cpuBefore
            let own = ProcStats.cpuSeconds(pid: getpid()) - ownBefore
            let stolen = ProcStats.stolenShare(since: ticksBefore)
            let (ack, delivery) = timeline.latencies()
            // A floor that lost messages would be a cheaper floor: every send must be acked and delivered.
            guard ack.count == sent, delivery.count == sent else {
                throw BenchError("the relay floor acked \(ack.count) and delivered \(delivery.count) of \(sent) messages:\n\((try? String(contentsOf: child.logFile, encoding: .utf8)) ?? "")")
            }
            timeline.dump(name: "floor")
            await PerfRecorder.finish(perf, delivered: delivery.count, serverCPUSeconds: cpu)
            for socket in sockets { await socket.close() }
            await agent.close()
            await child.stop()
            return Phase(
                name: "floor", seconds: seconds, sent: sent, acked: ack.count, delivered: delivery.count, ackLatency: Distribution(ack),
                deliveryLatency: Distribution(delivery), serverCPUSeconds: cpu, generatorCPUSeconds: own, stolenShare: stolen)
        } catch {
            await child.stop()
            throw error
        }
    }

    /// The baseline: a plain WebSocket echo server (Hummingbird, same machine, separate process) at
    /// the same rate, with frames of the same size; latency is send to echo received.
    static func echoPhase(binary: URL, rate: Int, seconds: Double) async throws -> Phase {
        let child = try await ChildProcess(executable: binary, arguments: ["echo-server"], readyMarker: "echo server on port ")
        do {
            return try await echoPhase(child: child, rate: rate, seconds: seconds)
        } catch {
            await child.stop()
            throw error
        }
    }

    private static func echoPhase(child: ChildProcess, rate: Int, seconds: Double) async throws -> Phase {
        guard let port = child.word(after: "echo server on port ").flatMap({ Int($0) }) else { throw BenchError("echo server port") }
        let capacity = rate * Int(seconds.rounded(.up)) + 16
        let timeline = Timeline(capacity: capacity)
        let socket = try await BenchSocket.open(url: "ws://127.0.0.1:\(port)/echo") { text in
            if let index = ackIndex(text) {
                timeline.markAcked(index)
                timeline.markDelivered(index)
            }
        }
        let cpuBefore = child.cpuSeconds
        let ownBefore = ProcStats.cpuSeconds(pid: getpid())
        let ticksBefore = ProcStats.machineTicks()
        let started = monotonicNanos()
        let end = started + UInt64(seconds * 1e9)
        let sent = try await paced(rate: rate, from: started, until: end, timeline: timeline) { index in
            socket.send(echoFrame(index: index))
        }
        // The echo marks each message acked and delivered at once.
        try await timeline.settle(sent, within: .seconds(10))
        let cpu = child.cpuSeconds - cpuBefore
        let own = ProcStats.cpuSeconds(pid: getpid()) - ownBefore
        let stolen = ProcStats.stolenShare(since: ticksBefore)
        await socket.close()
        await child.stop()
        let (ack, delivery) = timeline.latencies()
        timeline.dump(name: "echo")
        return Phase(
            name: "echo", seconds: seconds, sent: sent, acked: ack.count, delivered: delivery.count, ackLatency: Distribution(ack),
            deliveryLatency: Distribution(delivery), serverCPUSeconds: cpu, generatorCPUSeconds: own, stolenShare: stolen)
    }
}
