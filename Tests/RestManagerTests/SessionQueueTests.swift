#if canImport(FoundationNetworking)
import Foundation
import XCTest
@testable import RestManager

/// The Linux delegate queue: serial and in order, yet an operation that runs the caller's completion
/// in place can let the rest go on without it.
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

    func testAnOperationThatLetsTheQueueGoOnDoesNotHoldUpLaterOnes() {
        let queue = RestManager.SessionQueue()
        let trace = Trace()
        let laterRan = DispatchSemaphore(value: 0)
        let continued = ResultBox<Bool>()
        let waited = ResultBox<DispatchTimeoutResult>()
        let done = expectation(description: "first operation returned")
        queue.addOperation {
            continued.set(queue.continueWithoutCurrentThread())
            // Blocks until the later operations have run: only possible if the queue went on.
            waited.set(laterRan.wait(timeout: .now() + 10))
            done.fulfill()
        }
        for index in 1...3 {
            queue.addOperation {
                trace.begin(index)
                trace.end()
                if index == 3 { laterRan.signal() }
            }
        }
        wait(for: [done], timeout: 30)
        XCTAssertEqual(continued.value, true)
        XCTAssertEqual(waited.value, .success, "later operations ran while the first was blocked")
        XCTAssertEqual(trace.snapshot.order, [1, 2, 3], "and still one at a time, in order")
        XCTAssertEqual(trace.snapshot.mostAtOnce, 1)
    }

    func testOperationsAlreadyWaitingAreHandedOnToo() {
        let queue = RestManager.SessionQueue()
        let trace = Trace()
        let secondRan = DispatchSemaphore(value: 0)
        let queued = DispatchSemaphore(value: 0)
        let waited = ResultBox<DispatchTimeoutResult>()
        let done = expectation(description: "first operation returned")
        queue.addOperation {
            // The second operation is added while this one still holds the queue.
            XCTAssertEqual(queued.wait(timeout: .now() + 10), .success)
            _ = queue.continueWithoutCurrentThread()
            waited.set(secondRan.wait(timeout: .now() + 10))
            done.fulfill()
        }
        queue.addOperation { trace.begin(2); trace.end(); secondRan.signal() }
        queued.signal()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(waited.value, .success)
        XCTAssertEqual(trace.snapshot.order, [2])
    }

    func testOnlyTheThreadRunningTheCurrentOperationCanLetTheQueueGoOn() {
        let queue = RestManager.SessionQueue()
        XCTAssertFalse(queue.continueWithoutCurrentThread(), "not from outside the queue")
        let answers = ResultBox<Bool>()
        let done = expectation(description: "ran")
        queue.addOperation {
            answers.set(queue.continueWithoutCurrentThread())
            answers.set(queue.continueWithoutCurrentThread()) // the queue has already gone on
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(answers.all, [true, false])
    }
}
#endif
