import ParleyAPI

/// Opaque, prefixed, random identifiers: `cnv_5k2x...`. The prefix tells a person what an id names;
/// the random part (120 bits) makes ids unguessable, so an id alone grants nothing and reveals nothing.
public enum Identifier {
    private static let letters = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)

    /// A random string from a 32-letter alphabet: 5 bits a character.
    /// One call to the system's generator per 12 characters (a UInt64 holds 12 5-bit draws), not
    /// one per character: ids are made on every message.
    public static func random(_ length: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let letters = Self.letters
        var bytes = [UInt8]()
        bytes.reserveCapacity(length)
        var bits: UInt64 = 0
        var available = 0
        while bytes.count < length {
            if available < 5 {
                bits = generator.next()
                available = 60
            }
            bytes.append(letters[Int(bits & 31)])
            bits >>= 5
            available -= 5
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension ID {
    /// A new random id of this kind: its prefix, `_`, 24 random characters.
    public static func make() -> Self {
        Self(rawValue: Tag.prefix + "_" + Identifier.random(24))
    }
}
