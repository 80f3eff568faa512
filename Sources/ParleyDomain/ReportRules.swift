import Foundation
import ParleyAPI

/// How report numbers are made from facts.
public enum ReportRules {
    /// The longest period one history report covers.
    public static let maxDays = 400

    /// The `fraction` percentile by nearest rank (0.5: the median, 0.9: the 90th), nil for no values.
    public static func percentile(_ values: [Double], _ fraction: Double) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[max(0, min(sorted.count - 1, rank - 1))]
    }

    /// "2026-11-24": the day of `date` in `timeZone`.
    public static func day(_ date: Date, in calendar: Calendar) -> String {
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }

    /// Accumulates one group's facts into its row.
    public struct Accumulator: Sendable {
        public var row: ReportRowDTO
        var firstResponses: [Double] = []
        var resolutions: [Double] = []
        var scores: [Int] = []
        var callSeconds = 0
        var transcribedMs = 0

        public init(key: String, label: String) { row = ReportRowDTO(key: key, label: label) }

        public mutating func begun(firstResponseSeconds: Double?) {
            row.newConversations += 1
            if let seconds = firstResponseSeconds { firstResponses.append(max(0, seconds)) }
        }

        public mutating func resolved(afterSeconds seconds: Double) {
            row.resolved += 1
            resolutions.append(max(0, seconds))
        }

        public mutating func rated(_ score: Int) { scores.append(score) }

        public mutating func voice(fromCustomer: Bool, durationMs: Int, transcribed: Bool = false) {
            if transcribed { transcribedMs += durationMs }
            let seconds = (durationMs + 500) / 1000
            if fromCustomer {
                row.voiceNotesIn += 1
                row.voiceSecondsIn += seconds
            } else {
                row.voiceNotesOut += 1
                row.voiceSecondsOut += seconds
            }
        }

        public mutating func call(connectedSeconds: Int?) {
            row.calls += 1
            callSeconds += connectedSeconds ?? 0
        }

        /// The row with its medians, percentiles and averages.
        public func finished() -> ReportRowDTO {
            var row = self.row
            row.firstResponseMedianSeconds = percentile(firstResponses, 0.5).map { Int($0.rounded()) }
            row.firstResponseP90Seconds = percentile(firstResponses, 0.9).map { Int($0.rounded()) }
            row.resolutionMedianSeconds = percentile(resolutions, 0.5).map { Int($0.rounded()) }
            row.resolutionP90Seconds = percentile(resolutions, 0.9).map { Int($0.rounded()) }
            row.ratings = scores.count
            if !scores.isEmpty {
                row.csatAverage = (Double(scores.reduce(0, +)) / Double(scores.count) * 100).rounded() / 100
                row.csatPositivePercent = Int((Double(scores.filter { $0 >= 4 }.count) / Double(scores.count) * 100).rounded())
            }
            row.callMinutes = Int((Double(callSeconds) / 60).rounded())
            row.transcribedSeconds = (transcribedMs + 500) / 1000
            return row
        }
    }

    /// A chart's columns in the CSV export (`chart`), or every column.
    public static let charts: [String: [String]] = [
        "volume": ["newConversations", "resolved"],
        "response": ["firstResponseMedianSeconds", "firstResponseP90Seconds", "resolutionMedianSeconds", "resolutionP90Seconds"],
        "csat": ["ratings", "csatAverage", "csatPositivePercent"],
        "voice": ["voiceNotesIn", "voiceNotesOut", "voiceSecondsIn", "voiceSecondsOut", "transcribedSeconds"],
        "calls": ["calls", "callMinutes"],
    ]
    public static let allColumns = ["newConversations", "resolved"] + charts["response"]! + charts["csat"]! + charts["voice"]! + charts["calls"]!

    /// The report as CSV (RFC 4180): a header, one line per row, then the total.
    public static func csv(_ report: ReportDTO, columns: [String]) -> String {
        func field(_ text: String) -> String {
            text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
        }
        func value(_ row: ReportRowDTO, _ column: String) -> String {
            switch column {
            case "newConversations": "\(row.newConversations)"
            case "resolved": "\(row.resolved)"
            case "firstResponseMedianSeconds": row.firstResponseMedianSeconds.map(String.init) ?? ""
            case "firstResponseP90Seconds": row.firstResponseP90Seconds.map(String.init) ?? ""
            case "resolutionMedianSeconds": row.resolutionMedianSeconds.map(String.init) ?? ""
            case "resolutionP90Seconds": row.resolutionP90Seconds.map(String.init) ?? ""
            case "ratings": "\(row.ratings)"
            case "csatAverage": row.csatAverage.map { String(format: "%.2f", $0) } ?? ""
            case "csatPositivePercent": row.csatPositivePercent.map(String.init) ?? ""
            case "voiceNotesIn": "\(row.voiceNotesIn)"
            case "voiceNotesOut": "\(row.voiceNotesOut)"
            case "voiceSecondsIn": "\(row.voiceSecondsIn)"
            case "voiceSecondsOut": "\(row.voiceSecondsOut)"
            case "transcribedSeconds": "\(row.transcribedSeconds)"
            case "calls": "\(row.calls)"
            case "callMinutes": "\(row.callMinutes)"
            default: ""
            }
        }
        var lines = [([report.groupBy.rawValue, "label"] + columns).joined(separator: ",")]
        for row in report.rows + [report.total] {
            lines.append(([field(row.key), field(row.label)] + columns.map { value(row, $0) }).joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
