import Foundation

/// The sizes a HEIF/HEIC file declares for its images, read from its `ispe` properties (ISO/IEC
/// 23008-12, ImageSpatialExtentsProperty) without decoding anything.
///
/// Debian's ffprobe (ffmpeg 5.1) cannot read HEIF at all, and the only HEIF tool we run, libheif's
/// heif-convert, decodes the whole image before anything could check it: a 58 KB HEIC declaring
/// 16000 x 16000 cost 1.1 GB there. So the few boxes on the way to the sizes are walked here by
/// hand: `meta` (a full box) → `iprp` → `ipco` → every `ispe` (a full box: width, height, 32 bits
/// each). No listed package reads ISO base media boxes.
public enum HEIFSize {
    /// Every image size the file declares (a grid's, each tile's, a thumbnail's), or nil when the
    /// file has no `meta` box with image properties (it is not a HEIF image we can measure).
    public static func declaredSizes(in data: Data) -> [(width: Int, height: Int)]? {
        let bytes = [UInt8](data)
        guard let meta = boxes(in: bytes, from: 0, to: bytes.count).first(where: { $0.type == "meta" }),
            // `meta` is a full box: version and flags come before its children.
            let iprp = boxes(in: bytes, from: meta.body + 4, to: meta.end).first(where: { $0.type == "iprp" }),
            let ipco = boxes(in: bytes, from: iprp.body, to: iprp.end).first(where: { $0.type == "ipco" })
        else { return nil }
        let sizes = boxes(in: bytes, from: ipco.body, to: ipco.end).filter { $0.type == "ispe" && $0.end - $0.body >= 12 }.map { box in
            (width: Int(uint32(bytes, box.body + 4)), height: Int(uint32(bytes, box.body + 8)))
        }
        return sizes.isEmpty ? nil : sizes
    }

    /// The largest declared image in pixels (what a decoder would have to hold), or nil (see `declaredSizes`).
    public static func largestImage(in data: Data) -> (width: Int, height: Int)? {
        declaredSizes(in: data)?.max { $0.width * $0.height < $1.width * $1.height }
    }

    struct Box {
        var type: String
        /// Where the box's contents start and where the box ends.
        var body: Int
        var end: Int
    }

    /// The boxes one after another in `bytes[from..<to]`; stops at the first that does not fit.
    static func boxes(in bytes: [UInt8], from start: Int, to limit: Int) -> [Box] {
        var found: [Box] = []
        var offset = start
        while offset + 8 <= limit, found.count < 10_000 {
            var size = Int(uint32(bytes, offset))
            var header = 8
            if size == 1 {
                guard offset + 16 <= limit else { break }
                let large = (UInt64(uint32(bytes, offset + 8)) << 32) | UInt64(uint32(bytes, offset + 12))
                guard large <= UInt64(limit - offset) else { break }
                size = Int(large)
                header = 16
            } else if size == 0 {
                size = limit - offset  // to the end of the enclosing box
            }
            guard size >= header, offset + size <= limit else { break }
            let type = String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self)
            found.append(Box(type: type, body: offset + header, end: offset + size))
            offset += size
        }
        return found
    }

    static func uint32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }
}
