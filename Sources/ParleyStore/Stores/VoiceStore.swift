import Foundation
import ParleyAPI
import ParleyDomain
import SQLKit

/// Voice-note records: the original, its renditions, its scan. Only `VoiceNotes` (in the server)
/// writes them.
public protocol VoiceStore: Sendable {
    func insertVoice(_ voice: VoiceRecord) async throws
    func updateVoice(_ voice: VoiceRecord) async throws
    func voice(messageId: MessageID, brandId: BrandID) async throws -> VoiceRecord?
    /// Voice notes left in `processing` (e.g. by a crash) whose scan allows renditions, oldest first.
    func voicesProcessing(limit: Int) async throws -> [VoiceRecord]
    /// Voice notes waiting for the malware scanner whose next try is due, soonest first.
    func voicesAwaitingScan(dueBy: Date, limit: Int) async throws -> [VoiceRecord]
    /// Makes a note's transcript searchable (SQLite's FTS5 table; PostgreSQL indexes the column as
    /// it is written).
    func indexTranscript(messageId: MessageID, text: String) async throws
}

extension SQLRepository: VoiceStore {
    public func insertVoice(_ voice: VoiceRecord) async throws {
        try await db.insert(VoiceRow(voice))
    }

    public func updateVoice(_ voice: VoiceRecord) async throws {
        try await db.update(VoiceRow(voice), where: "message_id = \(bind: voice.messageId) AND brand_id = \(bind: voice.brandId)").run()
    }

    public func voice(messageId: MessageID, brandId: BrandID) async throws -> VoiceRecord? {
        try await db.raw("SELECT * FROM voice_media WHERE message_id = \(bind: messageId) AND brand_id = \(bind: brandId)")
            .first(VoiceRow.self)?.record
    }

    public func voicesProcessing(limit: Int) async throws -> [VoiceRecord] {
        try await db.raw(
            """
            SELECT * FROM voice_media WHERE state = \(bind: VoiceState.processing.rawValue)
                AND scan_state IN (\(bind: MalwareScanState.clean.rawValue), \(bind: MalwareScanState.unscanned.rawValue))
            ORDER BY created_at LIMIT \(bind: limit)
            """
        ).all(VoiceRow.self).map(\.record)
    }

    public func indexTranscript(messageId: MessageID, text: String) async throws {
        guard flavor == .sqlite else { return }
        try await db.raw("DELETE FROM transcript_search WHERE message_id = \(bind: messageId)").run()
        guard !text.isEmpty else { return }
        try await db.raw("INSERT INTO transcript_search (body, message_id) VALUES (\(bind: text), \(bind: messageId))").run()
    }

    public func voicesAwaitingScan(dueBy: Date, limit: Int) async throws -> [VoiceRecord] {
        try await db.raw(
            """
            SELECT * FROM voice_media WHERE scan_state = \(bind: MalwareScanState.pending.rawValue)
                AND scan_next_at <= \(bind: StoredTime.millis(dueBy))
            ORDER BY scan_next_at LIMIT \(bind: limit)
            """
        ).all(VoiceRow.self).map(\.record)
    }
}

struct VoiceRow: TableRow {
    static let table = "voice_media"
    var messageId: MessageID
    var brandId: BrandID
    var container: String
    var originalKey: String
    var originalBytes: Int
    var durationMs: Int
    /// The waveform's bytes in hexadecimal.
    var waveform: String
    var state: VoiceState
    var failureReason: String?
    var opusKey: String?
    var opusBytes: Int?
    var aacKey: String?
    var aacBytes: Int?
    var scanState: MalwareScanState
    var scanDetail: String?
    var scanAttempts: Int
    var scanNextAt: Int64?
    var transcriptState: TranscriptState?
    var transcriptText: String?
    var transcriptLanguage: String?
    var transcriptLowConfidence: Int
    var createdAt: Int64
    var updatedAt: Int64

    init(_ v: VoiceRecord) {
        (messageId, brandId, container, originalKey, originalBytes, durationMs) = (v.messageId, v.brandId, v.container, v.originalKey, v.originalBytes, v.durationMs)
        waveform = Self.hex(v.waveform)
        (state, failureReason, opusKey, opusBytes, aacKey, aacBytes) = (v.state, v.failureReason, v.opusKey, v.opusBytes, v.aacKey, v.aacBytes)
        (scanState, scanDetail, scanAttempts) = (v.scan, v.scanDetail, v.scanAttempts)
        scanNextAt = v.scanNextAt.map(StoredTime.millis)
        (transcriptState, transcriptText, transcriptLanguage) = (v.transcript?.state, v.transcript?.text, v.transcript?.language)
        transcriptLowConfidence = v.transcript?.lowConfidence == true ? 1 : 0
        createdAt = StoredTime.millis(v.createdAt)
        updatedAt = StoredTime.millis(v.updatedAt)
    }

    var record: VoiceRecord {
        VoiceRecord(
            messageId: messageId, brandId: brandId, container: container, originalKey: originalKey, originalBytes: originalBytes,
            durationMs: durationMs, waveform: Self.bytes(fromHex: waveform), state: state, failureReason: failureReason,
            opusKey: opusKey, opusBytes: opusBytes, aacKey: aacKey, aacBytes: aacBytes, scan: scanState, scanDetail: scanDetail,
            scanAttempts: scanAttempts, scanNextAt: scanNextAt.map(StoredTime.date),
            transcript: transcriptState.map {
                VoiceTranscriptDTO(state: $0, text: transcriptText ?? "", language: transcriptLanguage, lowConfidence: transcriptLowConfidence != 0)
            },
            createdAt: StoredTime.date(createdAt),
            updatedAt: StoredTime.date(updatedAt))
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func bytes(fromHex hex: String) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(hex.utf8.count / 2)
        var index = hex.startIndex
        while let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), index != hex.endIndex {
            if let byte = UInt8(hex[index..<next], radix: 16) { result.append(byte) }
            index = next
        }
        return result
    }
}
