import Foundation
import ParleyAPI
import ParleyDomain
import Testing

/// Routing's choices without a server (issue 26 asks for them apart from the service).
@Suite("Routing rules")
struct RoutingRulesTests {
    static func agent(_ id: AgentID, teams: Set<TeamID> = [], capacity: Int = 3, load: Int = 0) -> RoutingRules.Candidate {
        .init(agentId: id, teams: teams, capacity: capacity, load: load)
    }

    @Test("the most room wins; then fewer open conversations; then the lowest id; nobody without room")
    func choose() {
        #expect(RoutingRules.choose(for: nil, among: [Self.agent("agt_b", load: 2), Self.agent("agt_a", load: 1)]) == "agt_a")
        // Same room (2): a capacity of 5 with 3 open against 3 with 1: fewer open wins.
        #expect(RoutingRules.choose(for: nil, among: [Self.agent("agt_a", capacity: 5, load: 3), Self.agent("agt_b", capacity: 3, load: 1)]) == "agt_b")
        // A full tie: the lowest id, whatever the order given.
        let tie = [Self.agent("agt_c"), Self.agent("agt_a"), Self.agent("agt_b")]
        #expect(RoutingRules.choose(for: nil, among: tie) == "agt_a")
        #expect(RoutingRules.choose(for: nil, among: tie.reversed()) == "agt_a")
        #expect(RoutingRules.choose(for: nil, among: [Self.agent("agt_a", load: 3), Self.agent("agt_b", capacity: 1, load: 1)]) == nil)
        #expect(RoutingRules.choose(for: nil, among: []) == nil)
    }

    @Test("a team's conversation goes only to its members, however much room others have")
    func teams() {
        let candidates = [Self.agent("agt_a", teams: ["tem_sales"], load: 2), Self.agent("agt_b", teams: ["tem_support"], capacity: 10)]
        #expect(RoutingRules.choose(for: "tem_sales", among: candidates) == "agt_a")
        #expect(RoutingRules.choose(for: "tem_billing", among: candidates) == nil)
        #expect(RoutingRules.choose(for: nil, among: candidates) == "agt_b")
    }

    @Test("the expected wait: the median of recent waits times the place, nil with fewer than three waits")
    func expectedWait() {
        #expect(RoutingRules.expectedWait(position: 1, recentWaits: [10, 20]) == nil)
        #expect(RoutingRules.expectedWait(position: 1, recentWaits: [30, 10, 20]) == 20)
        #expect(RoutingRules.expectedWait(position: 3, recentWaits: [10, 20, 30, 40]) == 75)
        #expect(RoutingRules.expectedWait(position: 1, recentWaits: [0.1, 0.1, 0.1]) == 1)  // never 0 s
    }

    @Test("settings: capacity 1-100, grace 0-86,400 s, team names 1-60 characters")
    func validation() {
        #expect(throws: ParleyError.self) { try RoutingRules.validate(UpdateRoutingRequest(maxConversations: 0)) }
        #expect(throws: ParleyError.self) { try RoutingRules.validate(UpdateRoutingRequest(requeueGraceSeconds: 86_401)) }
        #expect(throws: Never.self) { try RoutingRules.validate(UpdateRoutingRequest(maxConversations: 100, requeueGraceSeconds: 0)) }
        #expect(throws: ParleyError.self) { try RoutingRules.validateTeamName("   ") }
        #expect(throws: ParleyError.self) { try RoutingRules.validateTeamName(String(repeating: "x", count: 61)) }
        #expect(throws: Never.self) { try RoutingRules.validateCapacity(nil) }
    }
}

/// Report numbers without a server.
@Suite("Report rules")
struct ReportRulesTests {
    @Test("nearest-rank percentiles: the median and the 90th of known lists, nil for none")
    func percentiles() {
        #expect(ReportRules.percentile([], 0.5) == nil)
        #expect(ReportRules.percentile([7], 0.9) == 7)
        #expect(ReportRules.percentile([5, 1, 4, 2, 3], 0.5) == 3)
        #expect(ReportRules.percentile([1, 2, 3, 4], 0.5) == 2)  // nearest rank: ceil(0.5 * 4) = 2nd
        #expect(ReportRules.percentile(Array(1...10).map(Double.init), 0.9) == 9)
        #expect(ReportRules.percentile(Array(1...100).map(Double.init), 0.9) == 90)
    }

    @Test("a group's row: counts, medians and 90th percentiles, ratings as an average and a share of 4-5, voice in whole seconds, call minutes")
    func accumulator() {
        var group = ReportRules.Accumulator(key: "2026-11-24", label: "Tue 24 Nov")
        for seconds in [30.0, 60, 90, 120, 600] { group.begun(firstResponseSeconds: seconds) }
        group.begun(firstResponseSeconds: nil)  // never answered: counted, not timed
        group.begun(firstResponseSeconds: -5)   // a clock that went back counts as 0
        group.resolved(afterSeconds: 3_600)
        group.resolved(afterSeconds: 1_800)
        for score in [5, 4, 2] { group.rated(score) }
        group.voice(fromCustomer: true, durationMs: 1_499)
        group.voice(fromCustomer: true, durationMs: 1_500)
        group.voice(fromCustomer: false, durationMs: 42_000)
        group.voice(fromCustomer: true, durationMs: 60_000, transcribed: true)
        group.voice(fromCustomer: false, durationMs: 31_000, transcribed: true)
        group.call(connectedSeconds: 90)
        group.call(connectedSeconds: nil)  // missed
        let row = group.finished()
        #expect(row.newConversations == 7 && row.resolved == 2)
        #expect(row.firstResponseMedianSeconds == 60 && row.firstResponseP90Seconds == 600)
        #expect(row.resolutionMedianSeconds == 1_800 && row.resolutionP90Seconds == 3_600)
        #expect(row.ratings == 3 && row.csatAverage == 3.67 && row.csatPositivePercent == 67)
        #expect(row.voiceNotesIn == 3 && row.voiceSecondsIn == 63 && row.voiceNotesOut == 2 && row.voiceSecondsOut == 73)
        #expect(row.transcribedSeconds == 91)
        #expect(row.calls == 2 && row.callMinutes == 2)
        let empty = ReportRules.Accumulator(key: "k", label: "l").finished()
        #expect(empty.firstResponseMedianSeconds == nil && empty.csatAverage == nil && empty.ratings == 0)
    }

    @Test("CSV: RFC 4180 quoting, a chart's columns, the total last, CRLF")
    func csv() {
        var row = ReportRules.Accumulator(key: "agt_a", label: "Sam \"the man\", Jr.")
        row.begun(firstResponseSeconds: 12)
        var total = ReportRules.Accumulator(key: "total", label: "Total")
        total.begun(firstResponseSeconds: 12)
        let report = ReportDTO(
            from: Date(timeIntervalSince1970: 0), to: Date(timeIntervalSince1970: 86_400), groupBy: .agent, timeZone: "UTC",
            rows: [row.finished()], total: total.finished())
        let text = ReportRules.csv(report, columns: ReportRules.charts["volume"]!)
        #expect(text == "agent,label,newConversations,resolved\r\nagt_a,\"Sam \"\"the man\"\", Jr.\",1,0\r\ntotal,Total,1,0\r\n")
        let all = ReportRules.csv(report, columns: ReportRules.allColumns)
        #expect(all.split(separator: "\r\n").first?.split(separator: ",").count == 2 + ReportRules.allColumns.count)
        #expect(all.contains(",12,12,"))
    }
}
