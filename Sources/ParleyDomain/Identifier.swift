/// Opaque, prefixed, random identifiers: `cnv_5k2x...`. The prefix tells a person what an id names;
/// the random part (120 bits) makes ids unguessable, so an id alone grants nothing and reveals nothing.
public enum Identifier {
    public enum Prefix: String, Sendable {
        case brand = "brd"
        case app = "app"
        case agent = "agt"
        case consumer = "csm"
        case conversation = "cnv"
        case message = "msg"
        case connection = "ws"
        case call = "call"
    }

    private static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz")

    public static func make(_ prefix: Prefix) -> String {
        prefix.rawValue + "_" + random(24)
    }

    /// A random string from a 32-letter alphabet: 5 bits a character.
    public static func random(_ length: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        var result = ""
        result.reserveCapacity(length)
        for _ in 0..<length {
            result.append(alphabet[Int(generator.next(upperBound: UInt32(alphabet.count)))])
        }
        return result
    }

    /// Whether a string has the shape of an id with this prefix. Used to refuse garbage early.
    public static func isWellFormed(_ value: String, _ prefix: Prefix) -> Bool {
        value.utf8.count <= 64 && value.hasPrefix(prefix.rawValue + "_")
            && value.utf8.dropFirst(prefix.rawValue.utf8.count + 1).allSatisfy {
                ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 122)
            }
    }
}
