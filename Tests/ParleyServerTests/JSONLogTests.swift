import Foundation
import Logging
import Synchronization
import Testing

@testable import ParleyServer

/// `PARLEY_LOG_FORMAT=json`: one JSON object a line, with the metadata's keys at the top level.
@Suite("JSON logs")
struct JSONLogTests {
    @Test("a line is one object: time, level, logger, message, source, the metadata (the logger's and the message's), an error")
    func oneObjectALine() throws {
        let lines = Mutex<[Data]>([])
        var logger = Logger(label: "parley-test") { label in JSONLogHandler(label: label) { data in lines.withLock { $0.append(data) } } }
        logger[metadataKey: "node"] = "node_a"
        logger.warning("the media store is unavailable", metadata: ["path": "/v1/media/x", "attempts": "3", "nested": ["a": "1"]])
        logger.debug("not written: below the level")
        let written = lines.withLock { $0 }
        #expect(written.count == 1)
        let data = try #require(written.first)
        #expect(data.last == 0x0A && data.dropLast().firstIndex(of: 0x0A) == nil)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["level"] as? String == "warning")
        #expect(object["logger"] as? String == "parley-test")
        #expect(object["message"] as? String == "the media store is unavailable")
        #expect(object["path"] as? String == "/v1/media/x" && object["attempts"] as? String == "3" && object["node"] as? String == "node_a")
        #expect((object["nested"] as? [String: Any])?["a"] as? String == "1")
        #expect(object["source"] as? String == "ParleyServerTests")
        let time = try #require(object["time"] as? String)
        #expect(time.hasSuffix("Z") && time.contains("."), "\(time)")
        #expect(try Date(time, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)).timeIntervalSinceNow.magnitude < 60)
    }

    @Test("the setting: text or json; anything else is refused, naming the setting")
    func setting() throws {
        var configuration = ParleyConfiguration()
        try configuration.apply(arguments: ["--log-format", "json"])
        #expect(configuration.logFormat == .json)
        #expect(throws: ConfigurationError.self) { try configuration.apply(arguments: ["--log-format", "yaml"]) }
    }
}
