import Foundation
import XCTest
@testable import RestManager

/// `Transport.Backlog`, the delegate queue's brake: who waits for it, and until when. No network: the counter alone,
/// with waits made long (60 s) so that a caller that should not wait shows up as a timeout.
final class DelegateBacklogTests: XCTestCase {
    private let limit = RestManager.Transport.Backlog.limit

    /// A full queue makes the next caller wait; once the queue has drained to half, it goes on.
    func testACallerWaitsWhileTheQueueIsFull() {
        let backlog = RestManager.Transport.Backlog(longestWait: 60)
        for _ in 0..<limit { backlog.enter() }
        let entered = expectation(description: "the caller went on")
        let passed = ResultBox<Bool>()
        Thread.detachNewThread {
            backlog.enter()
            passed.set(true)
            entered.fulfill()
        }
        // The queue is full: the caller must not go on (one let through would in microseconds).
        Thread.sleep(forTimeInterval: 0.2)
        XCTAssertEqual(passed.count, 0, "a caller went on while the queue was full")
        for _ in 0..<(limit / 2) { backlog.leave() }
        wait(for: [entered], timeout: 10)
    }

    /// The delegate queue's own thread never waits for a full queue: it is what empties it.
    func testTheDelegateThreadNeverWaits() {
        let backlog = RestManager.Transport.Backlog(longestWait: 60)
        for _ in 0..<limit { backlog.enter() }
        let entered = expectation(description: "the delegate thread went on")
        RestManager.Transport.delegateThread.async {
            backlog.enter()
            entered.fulfill()
        }
        wait(for: [entered], timeout: 10)
    }

    /// While a call that waits for FoundationNetworking's queue runs (`excused`), a caller waiting for the delegate
    /// queue goes on: else each would wait for the other.
    func testAnExcusedCallLetsAWaitingCallerGoOn() {
        let backlog = RestManager.Transport.Backlog(longestWait: 60)
        for _ in 0..<limit { backlog.enter() }
        let waiting = expectation(description: "the caller is about to wait")
        let entered = expectation(description: "the caller went on")
        Thread.detachNewThread {
            waiting.fulfill()
            backlog.enter()
            entered.fulfill()
        }
        wait(for: [waiting], timeout: 10)
        backlog.excused {
            // Inside the excused call: the caller must get through now, whether it began waiting yet or not.
            wait(for: [entered], timeout: 10)
        }
    }
}
