import Foundation
@testable import ParleyServer
import Synchronization
import Testing

@Suite("A connection's frame queue")
struct FrameQueueTests {
    @Test("one handler at a time: the frame that finds the queue idle starts it, it takes frames in order until none is left, then the next frame starts another")
    func handlerOnDemand() {
        // setup
        let queue = FrameQueue(limit: 3)
        // MUT, validate
        #expect(queue.offer("a") == .startHandler)
        #expect(queue.offer("b") == .queued)
        #expect(queue.offer("c") == .queued)
        #expect(queue.offer("d") == .full)  // a burst's worth is waiting
        #expect(queue.next()! == ("a", 1))
        #expect(queue.offer("d") == .queued)  // room again; still being handled
        #expect(queue.next()! == ("b", 2))
        #expect(queue.next()! == ("c", 3))
        #expect(queue.next()! == ("d", 4))
        #expect(queue.next() == nil)  // empty: the handler ends and the queue is idle
        #expect(queue.offer("e") == .startHandler)
        #expect(queue.next()! == ("e", 5))
    }

    @Test("offered from one thread while handlers drain on others: every frame is handled once, in order, and none waits without a handler")
    func concurrentOffersAndDrains() async {
        // setup: a reader offers 20,000 frames as fast as it can; each startHandler starts a handler task
        let queue = FrameQueue(limit: 64)
        let handled = Handled()
        // MUT
        await withDiscardingTaskGroup { group in
            var sent = 0
            while sent < 20_000 {
                switch queue.offer("f\(sent)") {
                case .full:
                    await Task.yield()
                    continue
                case .queued:
                    break
                case .startHandler:
                    group.addTask {
                        while let (text, number) = queue.next() {
                            handled.append(text == "f\(number - 1)" ? number : -number)
                        }
                    }
                }
                sent += 1
            }
        }
        // validate: in order (two handlers at once would append out of order), each once
        let numbers = handled.numbers
        #expect(numbers == Array(1...20_000))
        #expect(queue.count == 0)
    }

    final class Handled: Sendable {
        private let list = Mutex<[Int]>([])
        func append(_ number: Int) { list.withLock { $0.append(number) } }
        var numbers: [Int] { list.withLock { $0 } }
    }
}
