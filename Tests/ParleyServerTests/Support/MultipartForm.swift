import Foundation
import MultipartKit
import NIOCore

/// A multipart/form-data body as the local provider endpoints read it (WhatsApp's media upload,
/// Messenger's attachment send, the OpenAI-compatible transcription endpoint): each named part's
/// bytes, file name and content type. MultipartKit parses; this only collects its callbacks.
struct MultipartForm {
    struct Part {
        var data: Data
        var fileName: String?
        var contentType: String?
        var text: String { String(decoding: data, as: UTF8.self) }
    }

    var parts: [String: Part] = [:]

    /// The boundary of a `multipart/form-data` content type; nil for any other type.
    static func boundary(of contentType: String?) -> String? {
        guard let contentType, contentType.lowercased().hasPrefix("multipart/form-data"),
            let range = contentType.range(of: "boundary=")
        else { return nil }
        let value = contentType[range.upperBound...].split(separator: ";").first.map(String.init) ?? ""
        let boundary = value.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        return boundary.isEmpty ? nil : boundary
    }

    init(_ body: ByteBuffer, boundary: String) throws {
        var parts: [String: Part] = [:]
        var name = ""
        var current = Part(data: Data())
        let parser = MultipartParser(boundary: boundary)
        parser.onHeader = { field, value in
            switch field.lowercased() {
            case "content-disposition":
                func parameter(_ key: String) -> String? {
                    value.components(separatedBy: "\(key)=\"").dropFirst().first?.components(separatedBy: "\"").first
                }
                name = parameter("name") ?? ""
                current.fileName = parameter("filename")
            case "content-type":
                current.contentType = value
            default:
                break
            }
        }
        parser.onBody = { buffer in current.data.append(contentsOf: buffer.readableBytesView) }
        parser.onPartComplete = {
            parts[name] = current
            current = Part(data: Data())
        }
        try parser.execute(body)
        self.parts = parts
    }

    subscript(_ name: String) -> Part? { parts[name] }
}
