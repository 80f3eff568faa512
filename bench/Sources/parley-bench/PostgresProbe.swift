import Foundation

/// PostgreSQL's side of a bench phase: the statements it ran (`pg_stat_statements`, BEGIN and COMMIT
/// included, loaded by scripts/postgres.sh) and the CPU of its processes (the postmaster and its
/// children from `/proc`: the pooled connections' backends live through a phase, so their time is
/// all there).
struct PostgresProbe: Sendable {
    /// What one phase cost PostgreSQL.
    struct Use: Sendable {
        var statements: Int
        var cpuSeconds: Double
        /// The statements run most often: calls and the statement's text (normalised by PostgreSQL).
        var top: [(calls: Int, query: String)]
    }

    let url: String
    let dataDirectory: String

    /// Creates the extension in the server's database (the URL's), once per run.
    static func open(url: String, dataDirectory: String) async throws -> PostgresProbe {
        let probe = PostgresProbe(url: url, dataDirectory: dataDirectory)
        _ = try await probe.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return probe
    }

    /// Clears the counts and returns PostgreSQL's CPU so far.
    func start() async throws -> Double {
        _ = try await psql("SELECT pg_stat_statements_reset()")
        return cpuSeconds()
    }

    /// What ran since `start`, which returned `cpuBefore`.
    func finish(cpuBefore: Double) async throws -> Use {
        let cpu = cpuSeconds() - cpuBefore
        let rows = try await psql(
            "SELECT calls, regexp_replace(left(query, 160), '\\s+', ' ', 'g') FROM pg_stat_statements "
                + "WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC")
        let parsed: [(calls: Int, query: String)] = rows.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", maxSplits: 1)
            guard fields.count == 2, let calls = Int(fields[0]) else { return nil }
            return (calls, String(fields[1]))
        }
        return Use(statements: parsed.map(\.calls).reduce(0, +), cpuSeconds: cpu, top: Array(parsed.prefix(12)))
    }

    private func psql(_ sql: String) async throws -> String {
        let quote = { (text: String) in "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        return try await ClusterBench.shell("psql \(quote(url)) -AtX -F $'\\t' -v ON_ERROR_STOP=1 -c \(quote(sql))")
    }

    /// The postmaster's CPU and its children's (user + system, from `/proc`).
    func cpuSeconds() -> Double {
        guard let pidText = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8),
            let postmaster = pidText.split(separator: "\n").first.flatMap({ Int32($0) })
        else { return .nan }
        var total = ProcStats.cpuSeconds(pid: postmaster)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // Fields after the command name: state, ppid, ...
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            // A backend that ended meanwhile has no figure (its time is lost to the count).
            if fields.count > 1, Int32(fields[1]) == postmaster, case let cpu = ProcStats.cpuSeconds(pid: pid), !cpu.isNaN { total += cpu }
        }
        return total
    }
}
