import Foundation

/// A value behind a lock. Written by hand because `Synchronization.Mutex` needs iOS 18 / macOS 15,
/// above the SDK's floor (iOS 17 / macOS 14), and swift-atomics (the listed alternative) has no lock;
/// `OSAllocatedUnfairLock` is Apple-only and the SDK is built and tested on Linux too.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
