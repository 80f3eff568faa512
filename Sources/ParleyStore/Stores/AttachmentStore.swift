import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// A stored image or file: its message's id, where its bytes are, and what the scan said.
public struct AttachmentRecord: Sendable, Hashable {
    public var messageId: MessageID
    public var brandId: BrandID
    public var type: AttachmentType
    public var fileName: String
    public var bytes: Int
    public var width: Int?
    public var height: Int?
    public var originalKey: String
    public var thumbnailKey: String?
    public var thumbnailBytes: Int?
    public var scan: MalwareScanState
    public var createdAt: Date

    public init(
        messageId: MessageID, brandId: BrandID, type: AttachmentType, fileName: String, bytes: Int, width: Int?, height: Int?,
        originalKey: String, thumbnailKey: String?, thumbnailBytes: Int?, scan: MalwareScanState, createdAt: Date
    ) {
        (self.messageId, self.brandId, self.type, self.fileName, self.bytes) = (messageId, brandId, type, fileName, bytes)
        (self.width, self.height, self.originalKey, self.thumbnailKey, self.thumbnailBytes) = (width, height, originalKey, thumbnailKey, thumbnailBytes)
        (self.scan, self.createdAt) = (scan, createdAt)
    }

    public var dto: AttachmentDTO {
        AttachmentDTO(
            type: type, fileName: fileName, contentType: type.contentType, bytes: bytes, width: width, height: height,
            url: MediaPaths.attachment(messageId: messageId),
            thumbnailUrl: thumbnailKey == nil ? nil : MediaPaths.attachment(messageId: messageId, thumbnail: true), scan: scan)
    }
}

/// Images and files of messages. Only `ConversationAppend` inserts one, with its message.
public protocol AttachmentStore: Sendable {
    func insertAttachment(_ attachment: AttachmentRecord) async throws
    func attachment(messageId: MessageID, brandId: BrandID) async throws -> AttachmentRecord?
}

extension SQLRepository: AttachmentStore {
    public func insertAttachment(_ attachment: AttachmentRecord) async throws {
        try await db.insert(AttachmentRow(attachment))
    }

    public func attachment(messageId: MessageID, brandId: BrandID) async throws -> AttachmentRecord? {
        try await db.raw("SELECT * FROM attachments WHERE message_id = \(bind: messageId) AND brand_id = \(bind: brandId)")
            .first(AttachmentRow.self)?.record
    }

    /// The attachments of these messages, by message id.
    func attachments(of messageIds: [MessageID]) async throws -> [MessageID: AttachmentDTO] {
        guard !messageIds.isEmpty else { return [:] }
        var found: [MessageID: AttachmentDTO] = [:]
        for row in try await db.select().column("*").from(AttachmentRow.table).where("message_id", .in, messageIds).all(AttachmentRow.self) {
            found[row.messageId] = row.record.dto
        }
        return found
    }
}

struct AttachmentRow: TableRow {
    static let table = "attachments"
    var messageId: MessageID
    var brandId: BrandID
    var type: AttachmentType
    var fileName: String
    var bytes: Int
    var width: Int?
    var height: Int?
    var originalKey: String
    var thumbnailKey: String?
    var thumbnailBytes: Int?
    var scan: MalwareScanState
    var createdAt: Int64

    init(_ record: AttachmentRecord) {
        (messageId, brandId, type, fileName, bytes) = (record.messageId, record.brandId, record.type, record.fileName, record.bytes)
        (width, height, originalKey, thumbnailKey, thumbnailBytes) = (record.width, record.height, record.originalKey, record.thumbnailKey, record.thumbnailBytes)
        scan = record.scan
        createdAt = StoredTime.millis(record.createdAt)
    }

    var record: AttachmentRecord {
        AttachmentRecord(
            messageId: messageId, brandId: brandId, type: type, fileName: fileName, bytes: bytes, width: width, height: height,
            originalKey: originalKey, thumbnailKey: thumbnailKey, thumbnailBytes: thumbnailBytes, scan: scan, createdAt: StoredTime.date(createdAt))
    }
}
