#if canImport(FoundationNetworking)
import Foundation
import XCTest
@testable import RestManager

/// The Linux delegate queue: serial and in order, yet work an operation leaves behind (a caller's
/// completion) runs on its thread without holding up the operations after it.
final class SessionQueueTests: XCTestCase {
    /// Records the order operations ran in and how many ever ran at once.
    private final class Trace: @unchecked Sendable {
        private let lock = NSLock()
        private var running = 0
        private(set) var mostAtOnce = 0
        private(set) var order: [Int] = []

        func begin(_ index: Int) {
            lock.lock(); running += 1; mostAtOnce = max(mostAtOnce, running); order.append(index); lock.unlock()
        }
        func end() { lock.lock(); running -= 1; lock.unlock() }
        var snapshot: (order: [Int], mostAtOnce: Int) { lock.lock(); defer { lock.unlock() }; return (order, mostAtOnce) }
    }

    func testOperationsRunOneAtATimeInTheOrderAdded() {
        let queue = RestManager.SessionQueue()
        let trace = Trace()
        let done = expectation(description: "all ran")
        let count = 500
        for index in 0..<count {
            queue.addOperation {
                trace.begin(index)
                if index % 50 == 0 { usleep(1_000) } // give a second thread every chance to overlap
                trace.end()
                if index == count - 1 { done.fulfill() }
            }
        }
        wait(for: [done], timeout: 30)
        XCTAssertEqual(trace.snapshot.order, Array(0..<count))
        XCTAssertEqual(trace.snapshot.mostAtOnce, 1)
    }

    func testWorkLeftByAnOperationDoesNotHoldUpLaterOperations() {
        let queue = RestManager.SessionQueue()
        let trace = Trace()
        let laterRan = DispatchSemaphore(value: 0)
        let left = ResultBox<Bool>()
        let waited = ResultBox<DispatchTimeoutResult>()
        let done = expectation(description: "left work returned")
        queue.addOperation {
            left.set(queue.runAfterCurrentOperation {
                // Blocks until the later operations have run: only possible if the queue went on.
                waited.set(laterRan.wait(timeout: .now() + 10))
                done.fulfill()
            })
        }
        for index in 1...3 {
            queue.addOperation {
                trace.begin(index)
                trace.end()
                if index == 3 { laterRan.signal() }
            }
        }
        wait(for: [done], timeout: 30)
        XCTAssertEqual(left.value, true)
        XCTAssertEqual(waited.value, .success, "later operations ran while the left work was blocked")
        XCTAssertEqual(trace.snapshot.order, [1, 2, 3], "and still one at a time, in order")
        XCTAssertEqual(trace.snapshot.mostAtOnce, 1)
    }

    func testOperationsAlreadyWaitingAreHandedOnToo() {
        let queue = RestManager.SessionQueue()
        let secondRan = DispatchSemaphore(value: 0)
        let queued = DispatchSemaphore(value: 0)
        let waited = ResultBox<DispatchTimeoutResult>()
        let done = expectation(description: "left work returned")
        queue.addOperation {
            // The second operation is added while this one still holds the queue.
            XCTAssertEqual(queued.wait(timeout: .now() + 10), .success)
            _ = queue.runAfterCurrentOperation {
                waited.set(secondRan.wait(timeout: .now() + 10))
                done.fulfill()
            }
        }
        queue.addOperation { secondRan.signal() }
        queued.signal()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(waited.value, .success)
    }

    /// Left work runs once the operation has returned (Foundation finishes its task there first),
    /// on the operation's thread; only an operation of the queue can leave any.
    func testWorkIsLeftOnlyFromInsideAnOperationAndRunsAfterIt() {
        let queue = RestManager.SessionQueue()
        XCTAssertFalse(queue.runAfterCurrentOperation {}, "not from outside the queue")
        let events = ResultBox<String>()
        let threads = ResultBox<Bool>()
        let done = expectation(description: "ran")
        queue.addOperation {
            let operationThread = pthread_self()
            events.set("accepted: \(queue.runAfterCurrentOperation { events.set("first"); threads.set(pthread_equal(operationThread, pthread_self()) != 0) })")
            events.set("accepted: \(queue.runAfterCurrentOperation { events.set("second"); done.fulfill() })")
            events.set("operation returns")
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(events.all, ["accepted: true", "accepted: true", "operation returns", "first", "second"])
        XCTAssertEqual(threads.value, true)
    }
}
#endif
