import NIOCore
import Synchronization

/// A task executor that runs its jobs on one event loop: a connection's frames are handled on the
/// loop that reads its socket.
///
/// `parley serve` runs Swift Concurrency's jobs on NIO's event loops (the global executor). NIO
/// enqueues a job on the loop it is enqueued from, but a job enqueued from any other thread goes to
/// the next loop in turn (`MultiThreadedEventLoopGroup.anySEL`). The SQLite writer's thread finishes
/// every write that queued behind another and resumes its caller from there: the handler went on on
/// either loop, and the answer's write and the frames after it paid a wake-up of the socket's loop
/// (bench/profiles/step2, "scheduler and wakeups"; at saturation every write queues). With this
/// preference the handler always comes back to the socket's loop. Written here because this SwiftNIO
/// (2.101) gives an event loop a `SerialExecutor` but no `TaskExecutor`.
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
