import Foundation

/// Milliseconds since 1970: how every timestamp is stored and sent.
public enum StoredTime {
    public static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
    public static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    /// `date` at the millisecond precision that is stored, so that what a write returns equals what
    /// a later read finds.
    public static func truncated(_ date: Date) -> Date { Self.date(millis(date)) }
}

extension Duration {
    /// The duration in seconds, its fraction included (`components.seconds` alone drops it).
    public var seconds: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}

/// What time it is, and waiting for a while: injected into every service that keeps time (session
/// expiry, call ring and connect timers, malware rescans), so that tests move a manual clock
/// instead of sleeping. Not named `Clock`: that is the standard library's protocol for measuring
/// intervals, which this is not (it is wall time, at stored precision).
public protocol WallClock: Sendable {
    /// Now, at the millisecond precision that is stored.
    func now() -> Date
    /// Returns once `duration` has passed on this clock; throws if the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The machine's clock.
public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { StoredTime.truncated(Date()) }
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}

/// The machine's clock moved by an offset read from a file (whole seconds, may be negative): how
/// end-to-end tests of a running `parley serve` move time ("25 hours later") without sleeping.
/// Only used when `PARLEY_TEST_CLOCK_FILE` is set; the server says so in its log at start. The file
/// is read at most every 100 ms, never on the caller's path.
public final class FileOffsetClock: WallClock, @unchecked Sendable {
    private let path: String
    private let lock = NSLock()
    private var offset: TimeInterval = 0
    private var readAt = Date.distantPast

    public init(path: String) { self.path = path }

    public func now() -> Date {
        let real = Date()
        lock.lock()
        if real.timeIntervalSince(readAt) > 0.1 {
            readAt = real
            if let text = try? String(contentsOfFile: path, encoding: .utf8), let seconds = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                offset = seconds
            }
        }
        let shifted = real.addingTimeInterval(offset)
        lock.unlock()
        return StoredTime.truncated(shifted)
    }

    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}
