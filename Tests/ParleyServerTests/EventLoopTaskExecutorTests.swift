import NIOCore
import NIOPosix
@testable import ParleyServer
import Testing

/// A connection's frames are handled on the event loop that reads its socket (`EventLoopTaskExecutor`).
@Suite("Event-loop task executor")
struct EventLoopTaskExecutorTests {
    @Test("a task with the preference runs on its loop, before and after it suspends, whichever loop it was started from")
    func staysOnItsLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loops = Array(group.makeIterator())
        #expect(loops.count == 2)
        for (index, loop) in loops.enumerated() {
            let other = loops[1 - index]
            let executor = EventLoopTaskExecutor.on(loop)
            #expect(EventLoopTaskExecutor.on(loop) === executor, "one executor per loop")
            // Started from the other loop's thread, as a socket's handler could be.
            let places = try await other.submit {
                Task(executorPreference: executor) { () -> [Bool] in
                    var places = [loop.inEventLoop]
                    for _ in 0..<20 {
                        await Task.yield()
                        // An await that leaves the task: a continuation resumed from the other loop.
                        await withCheckedContinuation { continuation in other.execute { continuation.resume() } }
                        places.append(loop.inEventLoop)
                    }
                    return places
                }
            }.get().value
            #expect(places.count == 21)
            #expect(places.allSatisfy { $0 }, "ran off its loop: \(places)")
        }
        try await group.shutdownGracefully()
    }
}
