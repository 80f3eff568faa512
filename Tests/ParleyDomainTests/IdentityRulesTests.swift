import ParleyAPI
import ParleyDomain
import Testing

@Suite("Identities and ids")
struct IdentityRulesTests {
    @Test("emails are trimmed and lower-cased; garbage is refused")
    func emails() throws {
        #expect(try IdentityRules.normalizeEmail("  Ana@Example.COM ") == "ana@example.com")
        for bad in ["", "ana", "ana@", "@example.com", "ana@example", "a b@example.com", "ana@.com"] {
            #expect(throws: ParleyError.self, "\(bad)") { try IdentityRules.normalizeEmail(bad) }
        }
    }

    @Test("passwords: at least 10 characters, at most bcrypt's 72 bytes")
    func passwords() throws {
        try IdentityRules.validatePassword("correct horse")
        #expect(throws: ParleyError.self) { try IdentityRules.validatePassword("short") }
        #expect(throws: ParleyError.self) { try IdentityRules.validatePassword(String(repeating: "é", count: 40)) }
    }

    @Test("names are trimmed and bounded")
    func names() throws {
        #expect(try IdentityRules.validateName("  Ana  ") == "Ana")
        #expect(throws: ParleyError.self) { try IdentityRules.validateName("   ") }
        #expect(throws: ParleyError.self) { try IdentityRules.validateName(String(repeating: "x", count: 101)) }
        #expect(throws: ParleyError.self) { try IdentityRules.validateName("a\u{1B}[31m") }
    }

    @Test("visitor names are stable per consumer")
    func visitorNames() {
        let name = IdentityRules.visitorName(for: "csm_abc")
        #expect(name == IdentityRules.visitorName(for: "csm_abc"))
        #expect(name.hasPrefix("Visitor "))
    }

    @Test("ids are prefixed, random and recognisable")
    func identifiers() {
        let ids = (0..<1000).map { _ in Identifier.make(.conversation) }
        #expect(Set(ids).count == 1000)
        #expect(ids.allSatisfy { Identifier.isWellFormed($0, .conversation) })
        #expect(!Identifier.isWellFormed(ids[0], .message))
        #expect(!Identifier.isWellFormed("cnv_../../etc", .conversation))
        #expect(!Identifier.isWellFormed("cnv_ABC", .conversation))
    }
}
