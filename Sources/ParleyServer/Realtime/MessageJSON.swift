import Foundation
import ParleyAPI

/// A message's JSON text, written straight into bytes.
///
/// Why by hand: every message is encoded once for its real-time frames (the agents' `message` frame
/// and the sender's ack carry the same text), and Foundation's `JSONEncoder` took 22 µs of the
/// 290 µs a message cost the server at 1,000 messages/s (bench/profiles/step6: a box and a keyed
/// container per value, dynamic casts, the custom date strategy's closure and `ISO8601FormatStyle`).
/// No listed package writes JSON faster for a `Codable` type. A plain message (no voice note,
/// attachment or channel delivery: most of them) is written here; any other goes through
/// `ParleyCoders.json`. The text is the same object the encoder makes, its strings escaped byte for
/// byte as the encoder escapes them, its keys in declaration order (the encoder's order on Linux
/// changes from one call to the next); `MessageJSONTests` compares the two over every field, every
/// control character and a thousand random messages, so clients cannot tell which wrote it.
enum MessageJSON {
    static func text(_ message: MessageDTO) throws -> String {
        guard message.voice == nil, message.attachment == nil, message.channelDelivery == nil else {
            return try ParleyCoders.json(message)
        }
        var out = [UInt8]()
        out.reserveCapacity(320 + message.text.utf8.count)
        key("{\"id\":", string: message.id.rawValue, &out)
        key(",\"conversationId\":", string: message.conversationId.rawValue, &out)
        out.append(contentsOf: ",\"seq\":".utf8)
        out.append(contentsOf: String(message.seq).utf8)
        key(",\"senderKind\":", string: message.senderKind.rawValue, &out)
        key(",\"senderId\":", string: message.senderId, &out)
        key(",\"clientMessageId\":", string: message.clientMessageId, &out)
        key(",\"kind\":", string: message.kind.rawValue, &out)
        key(",\"text\":", string: message.text, &out)
        key(",\"deliveryState\":", string: message.deliveryState.rawValue, &out)
        key(",\"createdAt\":", string: ParleyJSON.formatDate(message.createdAt), &out)
        if let senderName = message.senderName {
            key(",\"senderName\":", string: senderName, &out)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` as a JSON string, quoted and escaped as `ParleyCoders.encoder` does.
    static func string(_ value: String) -> String {
        var out = [UInt8]()
        out.reserveCapacity(value.utf8.count + 2)
        append(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static func key(_ key: StaticString, string value: String, _ out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        append(value, to: &out)
    }

    /// Quotes and escapes as Foundation's encoder with `.withoutEscapingSlashes`: `"` and `\` with a
    /// backslash, the control characters below U+0020 as `\b \t \n \f \r` or `\u00XX`, everything else
    /// (slashes, DEL, every non-ASCII scalar) as its UTF-8.
    private static func append(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            var start = 0
            for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                start = index + 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case 0x08: out.append(contentsOf: #"\b"#.utf8)
                case 0x09: out.append(contentsOf: #"\t"#.utf8)
                case 0x0A: out.append(contentsOf: #"\n"#.utf8)
                case 0x0C: out.append(contentsOf: #"\f"#.utf8)
                case 0x0D: out.append(contentsOf: #"\r"#.utf8)
                default:
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
