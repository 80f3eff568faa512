import Foundation
import ParleyAPI
import Testing

/// The error-code catalogue (`ErrorCode`): every code is declared once with its meaning and what to do,
/// the server's and the SDK's sources name declared codes only, the pages compare with known codes,
/// and docs/errors.md is the catalogue as it is (`PARLEY_UPDATE_ERROR_CODES=1` rewrites it).
@Suite("Error code catalogue")
struct ErrorCatalogueTests {
    static let root = TestServer.repositoryRoot

    static func sources(under folder: String, ending suffix: String) throws -> [(path: String, text: String)] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        var found: [(String, String)] = []
        for case let url as URL in walker where url.lastPathComponent.hasSuffix(suffix) {
            found.append((String(url.path.dropFirst(root.path.count + 1)), try String(contentsOf: url, encoding: .utf8)))
        }
        return found.sorted { $0.0 < $1.0 }
    }

    static func matches(_ pattern: String, in text: String) throws -> [[String]] {
        let regex = try NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { match in
            (0..<match.numberOfRanges).map { index in
                Range(match.range(at: index), in: text).map { String(text[$0]) } ?? ""
            }
        }
    }

    @Test("every declared code is in the catalogue once, named after its value, with a meaning, an action and real HTTP statuses")
    func declaredOnce() throws {
        let file = try String(contentsOf: Self.root.appendingPathComponent("ParleyKit/Sources/ParleyAPI/ErrorCode.swift"), encoding: .utf8)
        let declared = try Self.matches(#"public static let (\w+): ErrorCode = "([a-z_0-9]+)""#, in: file)
        let codes = ErrorCode.catalogue.map(\.code.rawValue)
        #expect(Set(codes).count == codes.count, "a code is in the catalogue twice")
        #expect(Set(declared.map { $0[2] }) == Set(codes))
        #expect(declared.count == codes.count)
        for row in declared {
            #expect(row[1] == Self.camel(row[2]), "\(row[2]) is declared as \(row[1])")
        }
        for entry in ErrorCode.catalogue {
            #expect(entry.meaning.count > 10 && entry.action.count > 10, "\(entry.code)")
            #expect(entry.http.allSatisfy { (400...599).contains($0) }, "\(entry.code)")
            #expect(entry.code.entry?.code == entry.code)
        }
        // On the wire a code is its string.
        let body = try JSONEncoder().encode(ErrorBody(code: .callNotFound, message: "m"))
        #expect(String(decoding: body, as: UTF8.self).contains(#""code":"call_not_found""#))
        #expect(try JSONDecoder().decode(ErrorBody.self, from: body).error.code == .callNotFound)
    }

    @Test("the server's and ParleyKit's sources name declared codes, never a string")
    func noBareCodes() throws {
        var offenders: [String] = []
        let sources = try Self.sources(under: "Sources", ending: ".swift") + Self.sources(under: "ParleyKit/Sources", ending: ".swift")
        #expect(sources.contains { $0.0.hasSuffix("ParleyKit/Parley.swift") }, "ParleyKit's sources were not read")
        for (path, text) in sources where !path.hasSuffix("ParleyAPI/ErrorCode.swift") {
            for pattern in [#"[cC]ode: "[a-z_]"#, #"[cC]ode [!=]= "[a-z_]"#, #"ErrorCode\(rawValue: ""#, #"Code: "[a-z_]"#] {
                for match in try Self.matches(pattern, in: text) { offenders.append("\(path): \(match[0])") }
            }
        }
        #expect(offenders.isEmpty, "\(offenders.joined(separator: "\n"))")
    }

    @Test("the pages compare error codes through error-codes.js (made from the catalogue), never with a string")
    func pagesUseKnownCodes() throws {
        let known = Set(ErrorCode.catalogue.map { Self.camel($0.code.rawValue) })
        var literals: [String] = []
        var used: [String: String] = [:]
        for (path, text) in try Self.sources(under: "Public", ending: ".js") where !path.hasSuffix("error-codes.js") {
            for match in try Self.matches(#"code [!=]== "([a-z_0-9]+)""#, in: text) { literals.append("\(path): \(match[0])") }
            for match in try Self.matches(#"ErrorCode\.(\w+)"#, in: text) { used[match[1]] = path }
        }
        #expect(literals.isEmpty, "\(literals)")
        #expect(!used.isEmpty)
        for (name, path) in used.sorted(by: { $0.key < $1.key }) {
            #expect(known.contains(name), "\(path) uses ErrorCode.\(name), which the catalogue does not have")
        }
        let url = Self.root.appendingPathComponent("Public/js/error-codes.js")
        if ProcessInfo.processInfo.environment["PARLEY_UPDATE_ERROR_CODES"] == "1" {
            try Self.javascript().write(to: url, atomically: true, encoding: .utf8)
        }
        #expect((try? String(contentsOf: url, encoding: .utf8)) == Self.javascript(), "Public/js/error-codes.js is out of date: run PARLEY_UPDATE_ERROR_CODES=1 swift test --filter ErrorCatalogueTests")
    }

    static func camel(_ code: String) -> String {
        code.split(separator: "_").enumerated().map { $0 == 0 ? String($1) : $1.prefix(1).uppercased() + $1.dropFirst() }.joined()
    }

    /// Public/js/error-codes.js, made from the catalogue.
    static func javascript() -> String {
        var lines = [
            "// The error codes the server sends, as the pages compare them: made from ParleyKit/Sources/ParleyAPI/ErrorCode.swift",
            "// by ErrorCatalogueTests (PARLEY_UPDATE_ERROR_CODES=1 rewrites it). What each means: docs/errors.md.",
            "export const ErrorCode = Object.freeze({",
        ]
        for entry in ErrorCode.catalogue { lines.append("  \(camel(entry.code.rawValue)): \"\(entry.code.rawValue)\",") }
        lines += ["});", ""]
        return lines.joined(separator: "\n")
    }

    /// docs/errors.md, made from the catalogue.
    static func markdown() -> String {
        var lines = [
            "# Error codes", "",
            "Every refusal Parley gives has a stable `code`: in the body of an HTTP error (`{\"error\": {\"code\", \"message\", \"field\", \"retryAfter\"}}`), in a",
            "real-time `error` frame, on a message a channel could not deliver (`errorCode`, beside the provider's own codes), and in",
            "ParleyKit's refusals. This page is made from the catalogue in `ParleyKit/Sources/ParleyAPI/ErrorCode.swift`, which the server,",
            "ParleyKit and the tests share (`ErrorCatalogueTests` checks that no code is used outside it and that this page is current;",
            "`PARLEY_UPDATE_ERROR_CODES=1 swift test --filter ErrorCatalogueTests` rewrites it). Branch on the code, show the message: the message",
            "may be reworded, the code never changes. ParleyKit reports an HTTP failure that carries no error body as `http_<status>`.", "",
        ]
        for surface in ErrorCode.Surface.allCases {
            let entries = ErrorCode.catalogue.filter { $0.surface == surface }
            guard !entries.isEmpty else { continue }
            lines += ["## \(surface.rawValue)", "", "| Code | HTTP | Meaning | What to do |", "|---|---|---|---|"]
            for entry in entries {
                let http = entry.http.isEmpty ? "–" : entry.http.map(String.init).joined(separator: ", ")
                lines.append("| `\(entry.code)` | \(http) | \(entry.meaning.replacingOccurrences(of: "|", with: "\\|")) | \(entry.action.replacingOccurrences(of: "|", with: "\\|")) |")
            }
            lines.append("")
        }
        return lines.joined(separator: "\n")
    }

    @Test("docs/errors.md is the catalogue")
    func docsAreCurrent() throws {
        let url = Self.root.appendingPathComponent("docs/errors.md")
        let expected = Self.markdown()
        if ProcessInfo.processInfo.environment["PARLEY_UPDATE_ERROR_CODES"] == "1" {
            try expected.write(to: url, atomically: true, encoding: .utf8)
        }
        let current = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        #expect(current == expected, "docs/errors.md is out of date: run PARLEY_UPDATE_ERROR_CODES=1 swift test --filter ErrorCatalogueTests")
    }
}
