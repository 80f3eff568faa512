import ParleyAPI

/// A `send` frame read straight from its bytes, the frame every message arrives in.
///
/// Why by hand: decoding a frame through Foundation's `JSONDecoder` took 15 µs of the 290 µs a
/// message cost the server at 1,000 messages/s (bench/profiles/step6: the text copied into `Data`,
/// parsed into a tree of values, then a keyed container and a box per value). No listed package
/// decodes faster. This reads only the plainest shape: one object whose members are the send frame's
/// keys, each at most once, with string values (or null for `conversationId` and `channel`), in any
/// order, with any JSON whitespace and escapes. Anything else (another frame type, an unknown or
/// repeated key, a number, a nested value, a lone surrogate, a known channel misspelled, invalid
/// JSON) returns nil, and the frame goes through `JSONDecoder` as before, which also makes the error
/// the client gets. `SendFrameReaderTests` checks that whatever this reads, the decoder reads the same.
enum SendFrameReader {
    static func read(_ text: String) -> ClientFrame? {
        var text = text
        return text.withUTF8 { bytes in
            var reader = Reader(bytes: bytes)
            return reader.frame()
        }
    }

    private enum Key: Int, CaseIterable {
        case type, id, clientMessageId, text, conversationId, channel

        init?(_ bytes: UnsafeBufferPointer<UInt8>.SubSequence) {
            // Against the names' bytes as compiled in (`StaticString`): a `String`'s UTF-8 view is
            // unpacked and walked a code unit at a time, 0.5% of a message's instructions
            // (bench/instructions.sh) for the five keys of a send.
            func named(_ name: StaticString) -> Bool { name.withUTF8Buffer { $0.elementsEqual(bytes) } }
            switch bytes.count {
            case 2 where named("id"): self = .id
            case 4 where named("type"): self = .type
            case 4 where named("text"): self = .text
            case 7 where named("channel"): self = .channel
            case 14 where named("conversationId"): self = .conversationId
            case 15 where named("clientMessageId"): self = .clientMessageId
            default: return nil
            }
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func frame() -> ClientFrame? {
            var values = [String?](repeating: nil, count: Key.allCases.count)
            var seen = 0
            skipSpace()
            guard take(UInt8(ascii: "{")) else { return nil }
            repeat {
                skipSpace()
                guard take(UInt8(ascii: "\"")), let key = keyName() else { return nil }
                guard seen & (1 << key.rawValue) == 0 else { return nil }
                seen |= 1 << key.rawValue
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                if take(UInt8(ascii: "\"")) {
                    guard let value = string() else { return nil }
                    values[key.rawValue] = value
                } else if key == .conversationId || key == .channel, takeNull() {
                    values[key.rawValue] = nil
                } else {
                    return nil
                }
                skipSpace()
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
            skipSpace()
            guard at == bytes.count, values[Key.type.rawValue] == "send",
                let id = values[Key.id.rawValue], let clientMessageId = values[Key.clientMessageId.rawValue],
                let text = values[Key.text.rawValue]
            else { return nil }
            var channel: Channel?
            if let name = values[Key.channel.rawValue] {
                guard let known = Channel(rawValue: name) else { return nil }
                channel = known
            }
            return .send(
                id: id,
                SendMessageRequest(
                    clientMessageId: clientMessageId, text: text,
                    conversationId: values[Key.conversationId.rawValue].map { ConversationID(rawValue: $0) }, channel: channel))
        }

        private mutating func skipSpace() {
            while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        private mutating func takeNull() -> Bool {
            guard bytes.count - at >= 4, bytes[at..<at + 4].elementsEqual("null".utf8) else { return false }
            at += 4
            return true
        }

        /// A key without escapes, after its opening quote.
        private mutating func keyName() -> Key? {
            let start = at
            while at < bytes.count, bytes[at] != UInt8(ascii: "\"") {
                guard bytes[at] != UInt8(ascii: "\\") else { return nil }
                at += 1
            }
            guard at < bytes.count else { return nil }
            let key = Key(bytes[start..<at])
            at += 1
            return key
        }

        /// A string's value, after its opening quote; nil for anything JSON does not allow in one.
        private mutating func string() -> String? {
            let start = at
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") {
                    defer { at += 1 }
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") { return escapedString(from: start) }
                if byte < 0x20 { return nil }
                at += 1
            }
            return nil
        }

        /// The rest of a string with escapes: `at` is on the first backslash.
        private mutating func escapedString(from start: Int) -> String? {
            var out = Array(bytes[start..<at])
            while at < bytes.count {
                let byte = bytes[at]
                at += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard at < bytes.count else { return nil }
                    let escape = bytes[at]
                    at += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { return nil }  // a lone low surrogate
                        out.append(contentsOf: UTF8.encode(unicode)!)
                    default:
                        return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    out.append(byte)
                }
            }
            return nil
        }

        private mutating func hex4() -> UInt32? {
            guard bytes.count - at >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[at]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                at += 1
            }
            return value
        }
    }
}
