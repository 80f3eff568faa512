import Foundation

/// The hot-path figures in a form a machine reads: `bench/results.json`, written beside
/// bench/RESULTS.md by every full run (merged: a run of some sections replaces only their figures,
/// each figure keeps the commit and date it was measured at) and read by `bench/run.sh --quick`.
struct Figures: Codable, Sendable {
    struct Figure: Codable, Sendable {
        var value: Double
        var commit: String
        var date: String
    }

    /// What a figure means and which way is better, in the order the quick table prints them.
    struct Kind: Sendable {
        var key: String
        var label: String
        var unit: String
        var digits: Int
        var higherIsBetter: Bool
    }

    static let kinds: [Kind] = [
        Kind(key: "text.saturation_per_second", label: "Text: messages/s at saturation", unit: "/s", digits: 0, higherIsBetter: true),
        Kind(key: "text.delivery_p99_ms", label: "Text: delivery p99 at 1,000/s", unit: "ms", digits: 2, higherIsBetter: false),
        Kind(key: "text.delivery_p99_vs_echo", label: "Text: delivery p99 / echo p99", unit: "×", digits: 1, higherIsBetter: false),
        Kind(key: "text.cpu_us_per_message", label: "Text: server CPU per message at 1,000/s", unit: "µs", digits: 0, higherIsBetter: false),
        Kind(key: "text.cpu_vs_echo", label: "Text: server CPU per message / echo's", unit: "×", digits: 1, higherIsBetter: false),
        Kind(key: "text.cpu_vs_floor", label: "Text: server CPU per message / the durable floor's", unit: "×", digits: 1, higherIsBetter: false),
        Kind(key: "text.quiet_delivery_p99_ms", label: "Text: delivery p99 at 20/s (quiet)", unit: "ms", digits: 2, higherIsBetter: false),
        Kind(key: "text.quiet_p99_vs_echo", label: "Text: quiet delivery p99 / echo p99 at 20/s", unit: "×", digits: 1, higherIsBetter: false),
        Kind(key: "connections.kb_per_connection_1000", label: "1,000 idle connections: memory each", unit: "KB", digits: 1, higherIsBetter: false),
        Kind(
            key: "connections.vs_hummingbird_1000", label: "1,000 idle connections: / plain Hummingbird's", unit: "×", digits: 2,
            higherIsBetter: false),
    ]

    var figures: [String: Figure] = [:]

    /// The figures a report holds.
    static func values(text: TextBench.Report?, connections: [ConnectionsBench.Row]?, baseline: ConnectionsBench.Row?) -> [String: Double] {
        var values: [String: Double] = [:]
        if let text {
            values["text.saturation_per_second"] = text.saturation.messagesPerSecond
            values["text.delivery_p99_ms"] = text.fixed.deliveryLatency.p99
            values["text.delivery_p99_vs_echo"] = text.fixed.deliveryLatency.p99 / text.echo.deliveryLatency.p99
            // The median over the runs (the fixed row is the run with the median delivery p99).
            let cpu = text.fixedCPUMedian.isFinite ? text.fixedCPUMedian : text.fixed.cpuMicrosPerMessage
            values["text.cpu_us_per_message"] = cpu
            values["text.cpu_vs_echo"] = cpu / text.echo.cpuMicrosPerMessage
            if text.floor != nil {
                values["text.cpu_vs_floor"] = cpu / text.floorCPUMedian
            }
            if let quiet = text.quiet {
                values["text.quiet_delivery_p99_ms"] = quiet.deliveryLatency.p99
                if let echo = text.quietEcho { values["text.quiet_p99_vs_echo"] = quiet.deliveryLatency.p99 / echo.deliveryLatency.p99 }
            }
        }
        if let row = connections?.first(where: { !$0.compression && $0.connections == 1000 }) {
            values["connections.kb_per_connection_1000"] = row.bytesPerConnection / 1024
            if let baseline, baseline.bytesPerConnection > 0 {
                // The baseline of a full run holds 10,000 connections; per connection it is the same cost.
                values["connections.vs_hummingbird_1000"] = row.bytesPerConnection / baseline.bytesPerConnection
            }
        }
        return values.filter { $0.value.isFinite }
    }

    mutating func merge(_ values: [String: Double], commit: String, date: String) {
        for (key, value) in values { figures[key] = Figure(value: value, commit: commit, date: date) }
    }

    static func read(from url: URL) -> Figures? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? JSONDecoder().decode(Figures.self, from: data)
    }

    /// The figures as committed at HEAD (what a change is compared with), else as the file is now.
    static func committed(path: String) -> Figures? {
        let shown = Report.git(["show", "HEAD:\(path)"])
        if !shown.isEmpty, let figures = try? JSONDecoder().decode(Figures.self, from: Data(shown.utf8)) { return figures }
        return read(from: URL(fileURLWithPath: path))
    }

    func write(to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try (encoder.encode(self) + Data("\n".utf8)).write(to: url, options: .atomic)
    }

    /// The quick run's table: each figure now, as committed, and the change, with a word where it
    /// slid by more than `tolerance` (these machines are noisy: a slide under it is not called one).
    static func comparison(now: [String: Double], committed: Figures?, tolerance: Double = 0.15) -> [String] {
        var lines = [
            "| Figure | Committed | Now | Change |",
            "|---|---:|---:|---:|",
        ]
        var slid: [String] = []
        for kind in kinds {
            guard let value = now[kind.key] else { continue }
            let format = { (number: Double) in "\(Report.f(number, kind.digits)) \(kind.unit)" }
            guard let before = committed?.figures[kind.key] else {
                lines.append("| \(kind.label) | none | \(format(value)) | |")
                continue
            }
            let change = (value - before.value) / before.value
            let worse = kind.higherIsBetter ? change < -tolerance : change > tolerance
            if worse { slid.append(kind.label) }
            let sign = change >= 0 ? "+" : ""
            lines.append(
                "| \(kind.label) | \(format(before.value)) (\(before.commit)) | \(format(value)) | \(sign)\(Report.f(change * 100, 0))%\(worse ? " **slid**" : "") |")
        }
        lines.append("")
        lines.append(
            slid.isEmpty
                ? "No figure slid by more than \(Int(tolerance * 100))% against the committed ones."
                : "Slid by more than \(Int(tolerance * 100))%: \(slid.joined(separator: ", ")). Run `bench/run.sh --only text,connections` (three full runs) before believing it.")
        return lines
    }
}
