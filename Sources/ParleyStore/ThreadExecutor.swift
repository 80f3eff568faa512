import Foundation
import Synchronization

/// A task executor with one thread of its own, for work that blocks or runs long: SQLite's writer
/// runs its transactions on one, the WAL checkpoints on another.
///
/// `parley serve` runs Swift Concurrency's jobs on NIO's event loops. Group commit keeps the writer
/// busy for as long as writes keep coming, and SQLite's work is synchronous: on an event loop it
/// would hold that loop's sockets unread for as long as the load lasts (seen in the benchmark: a
/// tenth of the connections got no answer for ten seconds). A checkpoint syncs the file. On a
/// thread of their own they hold nothing else up.
@available(macOS 15, iOS 18, *)
final class ThreadExecutor: TaskExecutor {
    private let jobs = Mutex<(queue: [UnownedJob], stopped: Bool)>(([], false))
    private let wakeUp = DispatchSemaphore(value: 0)

    /// `name` shows in `top` and profiles; Linux keeps 15 characters and ignores a longer name.
    init(name: String) {
        let thread = Thread { [self] in
            Thread.current.name = name  // on Linux only the running thread can name itself
            run()
        }
        thread.start()
    }

    /// Runs `operation` as a task on a new thread of its own; the thread ends with the task.
    static func task(named name: String, _ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let executor = ThreadExecutor(name: name)
        return Task(executorPreference: executor) {
            await operation()
            executor.stop()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.queue.append(job) }
        wakeUp.signal()
    }

    /// Ends the thread once the jobs queued so far have run.
    func stop() {
        jobs.withLock { $0.stopped = true }
        wakeUp.signal()
    }

    private func run() {
        var batch: [UnownedJob] = []
        while true {
            wakeUp.wait()
            let stopped = jobs.withLock { jobs in
                swap(&batch, &jobs.queue)
                return jobs.stopped
            }
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            batch.removeAll(keepingCapacity: true)
            if stopped, jobs.withLock({ $0.queue.isEmpty }) { return }
        }
    }
}
