import ParleyAPI
import Prometheus

/// Parley's own metrics, served at `/metrics` in the Prometheus text format.
public final class ParleyMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    let messagesFromConsumers: Counter
    let messagesFromAgents: Counter
    let idempotentReplays: Counter
    let receipts: Counter
    let realtimeConnections: Gauge
    let realtimeOverflows: Counter
    let logins: Counter
    let failedLogins: Counter
    let scans: Counter
    let scansInfected: Counter
    let scansUnavailable: Counter
    let rateLimited: Counter
    let uploadsAbandoned: Counter
    let realtimeWriteTimeouts: Counter
    let realtimeFloodCloses: Counter
    let realtimeFramesRefused: Counter
    let voiceBusy: Counter
    let orphanMediaRemoved: Counter
    let jobsDone: Counter
    let jobsRetried: Counter
    let jobsFailed: Counter
    let webhooksRefused: Counter
    private let refusedConnections: [String: Counter]
    let realtimeFramesSent: Counter
    /// How long each kind of client frame took to handle, made once per frame type (no lookup per frame).
    private let frameDurations: [ClientFrameType: DurationHistogram]
    private static let requestDuration = (
        name: "http_request_duration", help: "HTTP requests, by route, method and status class, until the answer's last byte.")
    private static let jobDuration = (name: "job_duration", help: "Durable jobs' run time, by kind and outcome.")

    /// Latency buckets from 1 ms to 10 s: a message's path is milliseconds, a voice conversion seconds.
    static let buckets: [Duration] = [
        .milliseconds(1), .microseconds(2500), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .microseconds(2_500_000), .seconds(5), .seconds(10),
    ]

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "parley", metricName: metric, unitName: unit, helpText: help)
        }
        self.registry = registry
        let messages = name("messages", "total", "Messages stored, by sender.")
        messagesFromConsumers = registry.makeCounter(descriptor: messages, labels: [("sender", "consumer")])
        messagesFromAgents = registry.makeCounter(descriptor: messages, labels: [("sender", "agent")])
        idempotentReplays = registry.makeCounter(
            descriptor: name("message_retries", "total", "Sends answered with an existing message (client retries)."))
        receipts = registry.makeCounter(descriptor: name("receipts", "total", "Receipts that changed a delivery state."))
        realtimeConnections = registry.makeGauge(descriptor: name("realtime_connections", "", "Open real-time connections."))
        realtimeOverflows = registry.makeCounter(
            descriptor: name("realtime_overflows", "total", "Connections closed because their send queue overflowed."))
        logins = registry.makeCounter(descriptor: name("agent_logins", "total", "Successful agent sign-ins."))
        failedLogins = registry.makeCounter(descriptor: name("agent_failed_logins", "total", "Refused agent sign-ins."))
        scans = registry.makeCounter(descriptor: name("malware_scans", "total", "Files the malware scanner gave a verdict on."))
        scansInfected = registry.makeCounter(descriptor: name("malware_found", "total", "Files blocked because the scanner found malware."))
        scansUnavailable = registry.makeCounter(
            descriptor: name("malware_scanner_unavailable", "total", "Scans that failed because the scanner was down or slow."))
        rateLimited = registry.makeCounter(descriptor: name("rate_limited", "total", "Requests and frames refused with 429."))
        uploadsAbandoned = registry.makeCounter(
            descriptor: name("uploads_abandoned", "total", "Voice uploads that ended before their last byte (client gone or stalled); counted once the partial file is removed."))
        realtimeWriteTimeouts = registry.makeCounter(
            descriptor: name("realtime_write_timeouts", "total", "Real-time connections closed because their client stopped reading."))
        realtimeFloodCloses = registry.makeCounter(
            descriptor: name("realtime_flood_closes", "total", "Real-time connections closed with 4008 for sending frames past their limit."))
        realtimeFramesRefused = registry.makeCounter(
            descriptor: name("realtime_frames_refused", "total", "Client frames refused or dropped by the per-connection frame limit."))
        voiceBusy = registry.makeCounter(
            descriptor: name("voice_busy", "total", "Voice uploads refused with 503 because every analysis slot and queue place was taken."))
        orphanMediaRemoved = registry.makeCounter(
            descriptor: name("orphan_media_removed", "total", "Media files removed because no row refers to them (left by a crash)."))
        let jobs = name("jobs", "total", "Durable jobs (channel delivery, media fetches, webhook processing), by outcome.")
        jobsDone = registry.makeCounter(descriptor: jobs, labels: [("outcome", "done")])
        jobsRetried = registry.makeCounter(descriptor: jobs, labels: [("outcome", "retried")])
        jobsFailed = registry.makeCounter(descriptor: jobs, labels: [("outcome", "failed")])
        webhooksRefused = registry.makeCounter(
            descriptor: name("webhooks_refused", "total", "Provider webhooks refused for a missing or wrong signature."))
        let refused = name("connections_refused", "total", "Connections closed before their first request, by reason.")
        var byReason: [String: Counter] = [:]
        for reason in ConnectionRefusal.allCases {
            byReason[reason.rawValue] = registry.makeCounter(descriptor: refused, labels: [("reason", reason.rawValue)])
        }
        refusedConnections = byReason
        realtimeFramesSent = registry.makeCounter(
            descriptor: name("realtime_frames_sent", "total", "Frames written to real-time connections."))
        let frames = name("realtime_frame_duration", "seconds", "Time to handle a client's real-time frame, by frame type.")
        var byType: [ClientFrameType: DurationHistogram] = [:]
        for type in ClientFrameType.allCases {
            byType[type] = registry.makeDurationHistogram(descriptor: frames, labels: [("type", type.rawValue)], buckets: Self.buckets)
        }
        frameDurations = byType
    }

    func frameHandled(_ type: ClientFrameType, in duration: Duration) {
        frameDurations[type]?.record(duration)
    }

    /// `route` is the route's pattern (never the path itself: ids would make a series per request).
    func requestAnswered(route: String, method: String, status: Int, in duration: Duration) {
        let labels = [("route", route), ("method", method), ("status", "\(status / 100)xx")]
        let descriptor = MetricNameDescriptor(
            namespace: "parley", metricName: Self.requestDuration.name, unitName: "seconds", helpText: Self.requestDuration.help)
        registry.makeDurationHistogram(descriptor: descriptor, labels: labels, buckets: Self.buckets).record(duration)
    }

    /// A note transcribed: its audio's seconds (transcribed minutes, for the operator's bill and the
    /// reports) and the engine's time, by engine.
    func transcribed(engine: String, audioMs: Int, in duration: Duration) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "parley", metricName: "transcribed_audio", unitName: "seconds_total", helpText: "Seconds of voice notes transcribed, by engine."),
            labels: [("engine", engine)]
        ).increment(by: Int64(audioMs / 1000))
        let descriptor = MetricNameDescriptor(
            namespace: "parley", metricName: "transcription_duration", unitName: "seconds", helpText: "Time to transcribe one voice note, by engine.")
        registry.makeDurationHistogram(descriptor: descriptor, labels: [("engine", engine)], buckets: Self.buckets).record(duration)
    }

    func jobRan(kind: String, outcome: String, in duration: Duration) {
        let descriptor = MetricNameDescriptor(namespace: "parley", metricName: Self.jobDuration.name, unitName: "seconds", helpText: Self.jobDuration.help)
        registry.makeDurationHistogram(descriptor: descriptor, labels: [("kind", kind), ("outcome", outcome)], buckets: Self.buckets).record(duration)
    }

    /// Why the connection guard closed a connection before its first request.
    enum ConnectionRefusal: String, CaseIterable {
        case tooManyConnections = "too_many_connections"
        case requestTimeout = "request_timeout"
        case headersTooLarge = "headers_too_large"
        case badRequest = "bad_request"
        case originNotAllowed = "origin_not_allowed"
        case tooManyFrames = "too_many_frames"
    }

    func connectionsRefused(_ reason: ConnectionRefusal) -> Counter { refusedConnections[reason.rawValue]! }

    /// The text exposition of every metric.
    public func render() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}
