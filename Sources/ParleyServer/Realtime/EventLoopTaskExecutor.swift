import NIOCore
import Synchronization

/// A task executor that runs its jobs on one event loop: a connection's frames are handled on the
/// loop that reads its socket.
///
/// `parley serve` runs Swift Concurrency's jobs on NIO's event loops (the global executor), which
/// hands each new task to the next loop in turn. A frame's handler started there ran on the other
/// loop half the time: the socket's loop woke that one to handle the frame, and it woke the socket's
/// loop back to write the answer, two thread wake-ups per frame (bench/profiles/step2, "scheduler
/// and wakeups"). With this preference the handler, the SQLite write it makes when the writer is
/// idle, and the ack's write stay on one thread. Written here because this SwiftNIO (2.101) gives an
/// event loop a `SerialExecutor` but no `TaskExecutor`.
@available(macOS 15, iOS 18, *)
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    private init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// One executor per loop, made on first use and kept (a server has a loop per core). Keeping the
    /// executor keeps its loop's object, so a key never comes back for another loop.
    private static let made = Mutex<[ObjectIdentifier: EventLoopTaskExecutor]>([:])

    static func on(_ eventLoop: any EventLoop) -> EventLoopTaskExecutor {
        made.withLock { made in
            if let executor = made[ObjectIdentifier(eventLoop)] { return executor }
            let executor = EventLoopTaskExecutor(eventLoop: eventLoop)
            made[ObjectIdentifier(eventLoop)] = executor
            return executor
        }
    }
}
