import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// Traces (`PARLEY_OTLP_ENDPOINT`): a span per HTTP request (Hummingbird's `TracingMiddleware`),
/// per job (`job <kind>`) and per real-time frame (`frame <type>`), each with `parley.request_id`
/// (`RequestID`), sent in batches to an OpenTelemetry collector over OTLP/HTTP by swift-otel. Off by
/// default: nothing is made then, not even no-op spans on the message path.
public enum Traces {
    /// Whether this process makes spans (set once, by `bootstrap`).
    public static var on: Bool { enabled.load(ordering: .relaxed) }
    private static let enabled = Atomic<Bool>(false)

    /// Makes swift-otel's tracer the process's (swift-distributed-tracing allows one per process) and
    /// returns the service that exports the spans, to run beside the server (it sends what is left at
    /// shutdown). Nil when no collector is configured. The OpenTelemetry `OTEL_*` variables still
    /// apply on top (`OTEL_TRACES_SAMPLER`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_SCHEDULE_DELAY`...).
    public static func bootstrap(_ configuration: ParleyConfiguration, logger: Logger) throws -> (any Service)? {
        guard let endpoint = configuration.otlpEndpoint else { return nil }
        var otel = OTel.Configuration.default
        otel.serviceName = "parley"
        otel.resourceAttributes = ["service.version": BuildInfo.current.version]
        otel.logs.enabled = false  // logs go to standard error (docs/operations.md, "Logs")
        otel.metrics.enabled = false  // metrics are Prometheus's, at /metrics
        otel.traces.exporter = .otlp
        otel.traces.otlpExporter.endpoint = (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
        otel.traces.otlpExporter.protocol = configuration.otlpEncoding == .json ? .httpJSON : .httpProtobuf
        otel.diagnosticLogger = .custom(logger)
        otel.diagnosticLogLevel = .warning
        let exporter = try OTel.bootstrap(configuration: otel)
        enabled.store(true, ordering: .relaxed)
        return exporter
    }
}
