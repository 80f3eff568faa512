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
    }

    /// The text exposition of every metric.
    public func render() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}
