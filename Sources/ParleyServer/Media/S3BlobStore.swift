import AsyncHTTPClient
import Crypto
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Logging
import NIOCore
import NIOHTTP1
import ParleyDomain
import ParleyMedia
import Synchronization

/// Blobs in an S3-compatible object store (AWS S3, SeaweedFS, MinIO, Ceph...), one bucket, path-style
/// addresses (`ENDPOINT/BUCKET/KEY`), requests signed with SigV4 over AsyncHTTPClient (no Swift S3
/// SDK is in our package mirror; the signing is `SigV4`, checked against AWS's vectors).
///
/// Every request has a deadline; reads, heads, deletes and whole puts are retried on a connection
/// failure or a 5xx with back-off; a store that still does not answer is `BlobStoreUnavailable`
/// (503 `media_unavailable`). Files go up streamed from disk, hashed first (the signature covers the
/// body); files over `multipartThreshold` go in parts (an upload that fails is aborted, so nothing
/// half-written is left). Tools that read files get a scratch copy (`withLocalFile`).
public final class S3BlobStore: BlobStore {
    public struct Settings: Sendable {
        public var endpoint: String
        public var bucket: String
        /// A folder inside the bucket for this deployment's media ("" for none): several
        /// deployments (or test runs) can share one bucket.
        public var prefix: String
        public var region: String
        public var accessKey: String
        public var secretKey: String
        /// Longest one request may take.
        public var timeout: Duration
        /// Files larger than this go up in parts of `partSize`.
        public var multipartThreshold: Int
        public var partSize: Int

        public init(
            endpoint: String, bucket: String, prefix: String = "", region: String = "us-east-1", accessKey: String, secretKey: String,
            timeout: Duration = .seconds(30), multipartThreshold: Int = 16 * 1024 * 1024, partSize: Int = 8 * 1024 * 1024
        ) {
            (self.endpoint, self.bucket, self.region, self.accessKey, self.secretKey) = (endpoint, bucket, region, accessKey, secretKey)
            self.prefix = prefix.isEmpty || prefix.hasSuffix("/") ? prefix : prefix + "/"
            (self.timeout, self.multipartThreshold, self.partSize) = (timeout, multipartThreshold, max(5 * 1024 * 1024, partSize))
        }
    }

    let settings: Settings
    private let signer: SigV4
    private let client: HTTPClient
    private let scratch: URL
    private let logger: Logger
    private let host: String
    private let base: String
    /// Tries per idempotent request, and the first back-off (doubled each time).
    static let attempts = 3
    static let firstBackoff: Duration = .milliseconds(100)
    /// Largest answer read into memory (a Range read asks for less; whole gets are media files).
    static let maxBody = 256 * 1024 * 1024

    /// `scratch`: a local directory for files on their way in and out (uploads, transcoder output,
    /// copies for ffmpeg and clamd).
    public init(settings: Settings, client: HTTPClient, scratch: URL, logger: Logger) throws {
        guard let url = URL(string: settings.endpoint), let scheme = url.scheme, ["http", "https"].contains(scheme), let host = url.host else {
            throw BlobStoreUnavailable("start", "PARLEY_S3_ENDPOINT '\(settings.endpoint)' is not an http(s) URL")
        }
        self.settings = settings
        self.signer = SigV4(accessKey: settings.accessKey, secretKey: settings.secretKey, region: settings.region)
        self.client = client
        self.scratch = scratch
        self.logger = logger
        self.host = url.port.map { "\(host):\($0)" } ?? host
        self.base = "\(scheme)://\(self.host)"
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    // MARK: Requests

    struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
    }

    private func path(_ key: String?) -> String {
        let bucket = "/" + SigV4.encode(settings.bucket)
        guard let key else { return bucket }
        return bucket + "/" + SigV4.encode(settings.prefix + key, slash: false)
    }

    /// One signed request; `body` is hashed into the signature.
    private func request(
        _ method: HTTPMethod, key: String?, query: [(String, String)] = [], headers extra: [(String, String)] = [],
        body: HTTPClientRequest.Body? = nil, payloadHash: String = SigV4.emptyPayloadHash, maxBody: Int = S3BlobStore.maxBody
    ) async throws -> Answer {
        let amzDate = SigV4.amzDate(Date())
        var headers: [(String, String)] = [("host", host), ("x-amz-date", amzDate), ("x-amz-content-sha256", payloadHash)] + extra
        let path = path(key)
        let authorization = signer.authorization(.init(method: method.rawValue, path: path, query: query, headers: headers, payloadHash: payloadHash))
        headers.append(("authorization", authorization))
        let queryString = query.map { SigV4.encode($0.0) + "=" + SigV4.encode($0.1) }.joined(separator: "&")
        var request = HTTPClientRequest(url: base + path + (queryString.isEmpty ? "" : "?" + queryString))
        request.method = method
        for (name, value) in headers where name != "host" { request.headers.add(name: name, value: value) }
        if let body { request.body = body }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: TimeAmount.nanoseconds(Int64(settings.timeout.seconds * 1e9)))
        } catch {
            throw BlobStoreUnavailable("\(method.rawValue) \(key ?? settings.bucket)", "\(error)")
        }
        let data = try await readBody(response.body, maxBody: maxBody, what: "\(method.rawValue) \(key ?? settings.bucket)")
        return Answer(status: Int(response.status.code), headers: response.headers, body: data)
    }

    /// Reads an answer's body, giving up once no byte has come for `settings.timeout`: the client's
    /// deadline covers the answer's head only, and a store that stops in the middle of a body would
    /// otherwise hold the request (and the job or the upload behind it) for ever.
    private func readBody(_ body: HTTPClientResponse.Body, maxBody: Int, what: String) async throws -> Data {
        let progress = Progress()
        let timeout = settings.timeout
        return try await withThrowingTaskGroup(of: Data?.self) { group in
            group.addTask {
                var data = Data()
                for try await chunk in body {
                    data.append(contentsOf: chunk.readableBytesView)
                    if data.count > maxBody { throw BlobStoreUnavailable(what, "the answer is larger than \(maxBody) bytes") }
                    progress.touch()
                }
                return data
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: timeout / 4)
                    if progress.idle > timeout { throw BlobStoreUnavailable(what, "the store stopped sending its answer for \(timeout)") }
                }
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let data = first else { throw BlobStoreUnavailable(what, "no answer") }
            return data
        }
    }

    /// When the last bytes of an answer came.
    private final class Progress: Sendable {
        private let last = Mutex(ContinuousClock.now)
        func touch() { last.withLock { $0 = .now } }
        var idle: Duration { ContinuousClock.now - last.withLock { $0 } }
    }

    /// A request retried (with back-off) while the store cannot be reached or answers 5xx.
    private func retried(_ what: String, _ make: () async throws -> Answer) async throws -> Answer {
        var delay = Self.firstBackoff
        var last = "no attempt"
        for attempt in 1...Self.attempts {
            do {
                let answer = try await make()
                if answer.status < 500 { return answer }
                last = "HTTP \(answer.status): \(Self.errorCode(answer.body) ?? "")"
            } catch let error as BlobStoreUnavailable {
                last = error.detail
            }
            if attempt < Self.attempts {
                try await Task.sleep(for: delay)
                delay *= 4
            }
        }
        throw BlobStoreUnavailable(what, last)
    }

    private func expect(_ answer: Answer, _ ok: Set<Int>, _ what: String) throws {
        guard ok.contains(answer.status) else {
            throw BlobStoreUnavailable(what, "HTTP \(answer.status) \(Self.errorCode(answer.body) ?? "")")
        }
    }

    // MARK: BlobStore

    public func put(_ data: Data, key: String) async throws {
        try Self.validate(key)
        let hash = SigV4.hex(SHA256.hash(data: data))
        let answer = try await retried("store \(key)") {
            try await request(
                .PUT, key: key, headers: [("content-length", "\(data.count)")], body: .bytes(ByteBuffer(bytes: data)), payloadHash: hash)
        }
        try expect(answer, [200], "store \(key)")
    }

    public func putFile(_ source: URL, key: String) async throws {
        try Self.validate(key)
        let size = (try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.intValue ?? 0
        if size > settings.multipartThreshold {
            try await putParts(source, size: size, key: key)
        } else {
            let hash = try Self.sha256(of: source, range: 0..<size)
            let answer = try await retried("store \(key)") {
                try await request(
                    .PUT, key: key, headers: [("content-length", "\(size)")], body: Self.stream(source, range: 0..<size), payloadHash: hash)
            }
            try expect(answer, [200], "store \(key)")
        }
        try? FileManager.default.removeItem(at: source)
    }

    /// A multipart upload: parts of `partSize` streamed from the file, then completed; aborted on
    /// any failure (the store keeps no part).
    private func putParts(_ source: URL, size: Int, key: String) async throws {
        let created = try await retried("start an upload of \(key)") { try await request(.POST, key: key, query: [("uploads", "")]) }
        try expect(created, [200], "start an upload of \(key)")
        guard let uploadId = XMLValues.first("UploadId", in: created.body) else {
            throw BlobStoreUnavailable("start an upload of \(key)", "no UploadId in the answer")
        }
        do {
            var etags: [String] = []
            var offset = 0
            var number = 1
            while offset < size {
                let range = offset..<min(size, offset + settings.partSize)
                let hash = try Self.sha256(of: source, range: range)
                let part = number
                let answer = try await retried("store part \(part) of \(key)") {
                    try await request(
                        .PUT, key: key, query: [("partNumber", "\(part)"), ("uploadId", uploadId)], headers: [("content-length", "\(range.count)")],
                        body: Self.stream(source, range: range), payloadHash: hash)
                }
                try expect(answer, [200], "store part \(part) of \(key)")
                guard let etag = answer.headers.first(name: "ETag") else { throw BlobStoreUnavailable("store part \(part) of \(key)", "no ETag") }
                etags.append(etag)
                offset = range.upperBound
                number += 1
            }
            let parts = etags.enumerated().map { "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\(XMLValues.escape($0.element))</ETag></Part>" }
            let body = Data("<CompleteMultipartUpload>\(parts.joined())</CompleteMultipartUpload>".utf8)
            let hash = SigV4.hex(SHA256.hash(data: body))
            let done = try await retried("finish the upload of \(key)") {
                try await request(
                    .POST, key: key, query: [("uploadId", uploadId)], headers: [("content-length", "\(body.count)")], body: .bytes(ByteBuffer(bytes: body)),
                    payloadHash: hash)
            }
            // S3 may answer 200 with an error inside.
            try expect(done, [200], "finish the upload of \(key)")
            if XMLValues.first("Code", in: done.body) != nil { throw BlobStoreUnavailable("finish the upload of \(key)", Self.errorCode(done.body) ?? "") }
        } catch {
            _ = try? await request(.DELETE, key: key, query: [("uploadId", uploadId)])
            throw error
        }
    }

    public func get(key: String) async throws -> Data? {
        try Self.validate(key)
        let answer = try await retried("read \(key)") { try await request(.GET, key: key) }
        if answer.status == 404 { return nil }
        try expect(answer, [200], "read \(key)")
        return answer.body
    }

    public func size(key: String) async throws -> Int? {
        try Self.validate(key)
        let answer = try await retried("look at \(key)") { try await request(.HEAD, key: key) }
        if answer.status == 404 { return nil }
        try expect(answer, [200], "look at \(key)")
        return answer.headers.first(name: "Content-Length").flatMap(Int.init)
    }

    public func read(key: String, range: Range<Int>) async throws -> Data {
        try Self.validate(key)
        guard !range.isEmpty else { return Data() }
        let answer = try await retried("read \(key)") {
            try await request(.GET, key: key, headers: [("range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)")], maxBody: range.count)
        }
        try expect(answer, [200, 206], "read \(key)")
        // A store that ignored the Range sent it all: cut it here.
        if answer.status == 200 { return answer.body.subdata(in: min(range.lowerBound, answer.body.count)..<min(range.upperBound, answer.body.count)) }
        return answer.body
    }

    public func delete(key: String) async throws {
        try Self.validate(key)
        let answer = try await retried("remove \(key)") { try await request(.DELETE, key: key) }
        try expect(answer, [200, 204, 404], "remove \(key)")
    }

    public func move(key: String, to destinationKey: String) async throws {
        try Self.validate(key)
        try Self.validate(destinationKey)
        let source = path(key)
        let copied = try await retried("copy \(key)") {
            try await request(.PUT, key: destinationKey, headers: [("x-amz-copy-source", source)])
        }
        if copied.status == 404 { return }
        try expect(copied, [200], "copy \(key)")
        if XMLValues.first("Code", in: copied.body) != nil { throw BlobStoreUnavailable("copy \(key)", Self.errorCode(copied.body) ?? "") }
        try await delete(key: key)
    }

    public func list(prefix: String) async throws -> [BlobListing] {
        try Self.validate(prefix)
        var found: [BlobListing] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", settings.prefix + prefix + "/")]
            if let token { query.append(("continuation-token", token)) }
            let page = try await retried("list \(prefix)") { try await request(.GET, key: nil, query: query) }
            try expect(page, [200], "list \(prefix)")
            found += XMLValues.objects(in: page.body).map { object in
                var object = object
                object.key = String(object.key.dropFirst(settings.prefix.count))
                return object
            }
            token = XMLValues.first("IsTruncated", in: page.body) == "true" ? XMLValues.first("NextContinuationToken", in: page.body) : nil
        } while token != nil
        return found.sorted { $0.key < $1.key }
    }

    public func deletePrefix(_ prefix: String) async throws -> Int {
        let blobs = try await list(prefix: prefix)
        for blob in blobs { try await delete(key: blob.key) }
        return blobs.count
    }

    public func withLocalFile<T: Sendable>(key: String, _ body: (URL) async throws -> T) async throws -> T {
        try Self.validate(key)
        let file = scratchFile("-" + (key.split(separator: "/").last.map(String.init) ?? "blob"))
        defer { try? FileManager.default.removeItem(at: file) }
        guard let data = try await get(key: key) else { throw BlobStoreUnavailable("read \(key)", "it is not there") }
        try data.write(to: file)
        return try await body(file)
    }

    public func scratchFile(_ suffix: String) -> URL {
        scratch.appendingPathComponent("\(Identifier.random(20))\(suffix)")
    }

    public func check() async throws {
        let answer = try await request(.HEAD, key: nil)
        try expect(answer, [200], "reach the bucket")
    }

    /// Creates the bucket if it is not there (a new deployment); an existing one is left alone.
    public func ensureBucket() async throws {
        let answer = try await retried("reach the bucket") { try await request(.HEAD, key: nil) }
        if answer.status == 200 { return }
        guard answer.status == 404 else { throw BlobStoreUnavailable("reach the bucket", "HTTP \(answer.status)") }
        let created = try await retried("create the bucket") { try await request(.PUT, key: nil, headers: [("content-length", "0")]) }
        // Another node starting at the same time (or our own first try, retried) may have created it
        // between the look and the create: S3 answers 409 BucketAlreadyOwnedByYou (SeaweedFS too), and
        // a node refused to start on it. Whatever the answer, a bucket that is there now will do.
        if created.status != 200, try await retried("reach the bucket", { try await request(.HEAD, key: nil) }).status == 200 { return }
        try expect(created, [200], "create the bucket \(settings.bucket)")
        logger.notice("created the media bucket", metadata: ["bucket": "\(settings.bucket)"])
    }

    // MARK: Helpers

    private static func validate(_ key: String) throws {
        guard LocalBlobStore.isValidKey(key) else { throw BlobKeyError(key: key) }
    }

    private static func errorCode(_ body: Data) -> String? {
        XMLValues.first("Code", in: body).map { code in XMLValues.first("Message", in: body).map { "\(code): \($0)" } ?? code }
    }

    /// The SHA-256 of bytes `range` of a file, read in 1 MiB chunks.
    static func sha256(of file: URL, range: Range<Int>) throws -> String {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(range.lowerBound))
        var hasher = SHA256()
        var left = range.count
        while left > 0, let chunk = try handle.read(upToCount: min(left, 1 << 20)), !chunk.isEmpty {
            hasher.update(data: chunk)
            left -= chunk.count
        }
        return SigV4.hex(hasher.finalize())
    }

    /// Bytes `range` of a file as a request body, read in 256 KiB chunks as they are sent.
    static func stream(_ file: URL, range: Range<Int>) -> HTTPClientRequest.Body {
        let chunks = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
            do {
                let handle = try FileHandle(forReadingFrom: file)
                defer { try? handle.close() }
                try handle.seek(toOffset: UInt64(range.lowerBound))
                var left = range.count
                while left > 0, let chunk = try handle.read(upToCount: min(left, 256 * 1024)), !chunk.isEmpty {
                    continuation.yield(ByteBuffer(bytes: chunk))
                    left -= chunk.count
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        return .stream(chunks, length: .known(Int64(range.count)))
    }
}

/// The few values Parley reads from S3's XML answers (Foundation's XMLParser, not a hand-made parser).
enum XMLValues {
    private final class Collector: NSObject, XMLParserDelegate {
        var path: [String] = []
        var text = ""
        var values: [(path: [String], text: String)] = []

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            path.append(name)
            text = ""
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            values.append((path, text))
            path.removeLast()
            text = ""
        }
    }

    private static func parse(_ data: Data) -> [(path: [String], text: String)] {
        let collector = Collector()
        let parser = XMLParser(data: data)
        parser.delegate = collector
        _ = parser.parse()
        return collector.values
    }

    /// The text of the first element named `name`.
    static func first(_ name: String, in data: Data) -> String? {
        parse(data).first { $0.path.last == name }?.text
    }

    /// A ListObjectsV2 page's objects.
    static func objects(in data: Data) -> [BlobListing] {
        var objects: [BlobListing] = []
        var key: String?
        var size = 0
        var modified = Date.distantPast
        let dates = ISO8601DateFormatter()
        dates.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        for (path, text) in parse(data) where path.count >= 2 && path[path.count - 2] == "Contents" || path.last == "Contents" {
            switch path.last {
            case "Key": key = text
            case "Size": size = Int(text) ?? 0
            case "LastModified": modified = dates.date(from: text) ?? plain.date(from: text) ?? .distantPast
            case "Contents":
                if let key { objects.append(BlobListing(key: key, bytes: size, modified: modified)) }
                (key, size, modified) = (nil, 0, .distantPast)
            default: break
            }
        }
        return objects
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }
}
