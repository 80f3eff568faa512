import Foundation
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
        let ids = (0..<1000).map { _ in ConversationID.make() }
        #expect(Set(ids).count == 1000)
        #expect(ids.allSatisfy { ConversationID.isWellFormed($0) })
        #expect(!MessageID.isWellFormed(ids[0].rawValue))
        #expect(!ConversationID.isWellFormed("cnv_../../etc"))
        #expect(!ConversationID.isWellFormed("cnv_ABC"))
        // The prefix and its `_` byte for byte; 64 bytes at most; digits and lower-case letters after.
        let sixtyFour = "cnv_" + String(repeating: "7", count: 60)
        #expect(ConversationID.isWellFormed(sixtyFour) && !ConversationID.isWellFormed(sixtyFour + "7"))
        for shape in ["cnv", "cnv-abc", "cnvabc", "CNV_abc", "cn_abc", "cnv_abc ", "cnv_ab\u{301}c", "c\u{301}nv_abc", "team_abc", ""] {
            #expect(!ConversationID.isWellFormed(shape), "\(shape)")
        }
        #expect(ConversationID.isWellFormed("cnv_") && TeamID.isWellFormed("team_0az9"))
    }

    @Test("typed ids: a plain string on the wire, checked where they enter, one kind never another")
    func typedIdentifiers() throws {
        let id = ConversationID.make()
        // On the wire: the bare string, as before ids were typed.
        let json = try JSONEncoder().encode(["conversationId": id])
        #expect(String(decoding: json, as: UTF8.self) == #"{"conversationId":"\#(id.rawValue)"}"#)
        #expect(try JSONDecoder().decode([String: ConversationID].self, from: json)["conversationId"] == id)
        // Where they enter (path parameters, the command line): the shape is checked.
        // (Through variables: in the tests a literal would be an unchecked id.)
        let (message, traversal, long) = ("msg_abc", "cnv_%00", "cnv_" + String(repeating: "a", count: 70))
        #expect(ConversationID(id.rawValue) == id)
        #expect(ConversationID(message) == nil)
        #expect(MessageID(message) != nil)
        #expect(ConversationID(traversal) == nil)
        #expect(ConversationID(long) == nil)
        // A body's id is decoded as sent and checked by the service that looks it up.
        let odd = try JSONDecoder().decode(ConversationID.self, from: Data(#""not an id""#.utf8))
        #expect(!odd.isWellFormed)
    }
}
