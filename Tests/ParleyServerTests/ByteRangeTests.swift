@testable import ParleyServer
import Testing

@Suite("HTTP byte ranges")
struct ByteRangeTests {
    @Test("single ranges, suffixes, open ends and refusals", arguments: [
        ("bytes=0-99", ByteRange.partial(0..<100)),
        ("bytes=100-", .partial(100..<1000)),
        ("bytes=-10", .partial(990..<1000)),
        ("bytes=-5000", .partial(0..<1000)),
        ("bytes=990-5000", .partial(990..<1000)),
        ("bytes=1000-", .unsatisfiable),
        ("bytes=50-10", .unsatisfiable),
        ("bytes=abc", .unsatisfiable),
        ("bytes=0-1,5-6", .whole),
        ("items=0-1", .whole),
    ])
    func parse(header: String, expected: ByteRange) {
        #expect(ByteRange.parse(header, size: 1000) == expected)
    }
}
