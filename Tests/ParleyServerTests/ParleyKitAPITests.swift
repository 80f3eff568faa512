import Foundation
import Testing

/// ParleyKit's public interface is listed in docs/parleykit-api.txt: a change to it is a decision,
/// so this test fails until the listing is updated with it (run the test with
/// `PARLEY_UPDATE_API_LISTING=1` to rewrite the listing, and review the diff).
@Suite("ParleyKit public API")
struct ParleyKitAPITests {
    /// Every `public` declaration of the sources, each on one line (up to its body), in file order.
    static func listing() throws -> String {
        let directory = TestServer.repositoryRoot.appendingPathComponent("ParleyKit/Sources/ParleyKit")
        var lines: [String] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path).filter({ $0.hasSuffix(".swift") }).sorted() {
            let source = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8).components(separatedBy: "\n")
            var index = 0
            // The indentation of the public enums whose body is being read: their cases are public too.
            var enums: [Int] = []
            while index < source.count {
                let raw = source[index]
                let line = raw.trimmingCharacters(in: .whitespaces)
                let indent = raw.prefix { $0 == " " }.count
                index += 1
                while let last = enums.last, indent <= last, line.hasPrefix("}") || (indent < last && !line.isEmpty) { enums.removeLast() }
                if let last = enums.last, indent == last + 4, line.hasPrefix("case ") {
                    lines.append("\(name): " + line.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " "))
                    continue
                }
                guard line.hasPrefix("public ") || line.hasPrefix("@discardableResult public ") || line.hasPrefix("nonisolated public ") else {
                    continue
                }
                if line.hasPrefix("public enum ") || line.contains(" public enum ") { enums.append(indent) }
                // The declaration may go on over several lines, until its parentheses close.
                var declaration = line
                var depth = line.filter { $0 == "(" }.count - line.filter { $0 == ")" }.count
                while depth > 0, index < source.count {
                    let next = source[index].trimmingCharacters(in: .whitespaces)
                    index += 1
                    declaration += " " + next
                    depth += next.filter { $0 == "(" }.count - next.filter { $0 == ")" }.count
                }
                if let body = declaration.range(of: " {") { declaration = String(declaration[..<body.lowerBound]) }
                lines.append("\(name): " + declaration.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " "))
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test("the public interface matches docs/parleykit-api.txt")
    func listingIsCurrent() throws {
        let file = TestServer.repositoryRoot.appendingPathComponent("docs/parleykit-api.txt")
        let current = try Self.listing()
        if ProcessInfo.processInfo.environment["PARLEY_UPDATE_API_LISTING"] == "1" {
            try current.write(to: file, atomically: true, encoding: .utf8)
        }
        let recorded = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        #expect(current == recorded, "ParleyKit's public API changed: review it, then run with PARLEY_UPDATE_API_LISTING=1 to update docs/parleykit-api.txt")
        #expect(current.contains("public static func configure("))
    }
}
