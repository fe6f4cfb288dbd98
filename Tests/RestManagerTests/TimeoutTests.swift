import Foundation
import XCTest
import RestManager

final class TimeoutTests: MockServerTestCase {
    func testHalfASecondMeansHalfASecond() {
        rest.timeoutInterval = 0.5
        let started = Date()
        let results = send(.get, "/_test/delay?seconds=3")
        let elapsed = Date().timeIntervalSince(started)
        guard case .timedOut(_, let after, .wholeCall) = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(after, 0.5)
        XCTAssertEqual(
            results.error?.localizedDescription,
            "The request to \(url("/_test/delay?seconds=3")) timed out after 0.5 s: it did not complete within "
                + "timeoutInterval (the manager's, request's or call's: raise it to wait longer).")
        XCTAssertGreaterThanOrEqual(elapsed, 0.45)
        XCTAssertLessThan(elapsed, 2.5, "the answer comes at 3 s")
    }

    func testASubSecondTimeoutDoesNotFireEarly() {
        rest.timeoutInterval = 0.8
        let results = send(.get, "/_test/delay?seconds=0.2")
        XCTAssertNil(results.error)
        XCTAssertEqual(results.response?.httpStatusCode, 200)
    }

    func testHugeTimeoutsMeanNeverAndDoNotTrap() throws {
        for timeout in [1e300, Double(Int.max) + 1, 1e9, Double.greatestFiniteMagnitude] {
            rest.timeoutInterval = timeout
            let results = send(.get, "/_test/echo?t=1")
            XCTAssertEqual(results.response?.httpStatusCode, 200, "\(timeout): \(String(describing: results.error))")
        }
        for timeout in [0, -1, Double.infinity, Double.nan] {
            rest.timeoutInterval = timeout
            guard case .invalidTimeout = send(.get, "/_test/echo").error as? RestManager.CustomError else {
                return XCTFail("\(timeout) was accepted")
            }
        }
    }

    func testPerCallTimeoutOverridesTheManagers() {
        rest.timeoutInterval = 30
        let done = expectation(description: "timed out")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: url("/_test/hang"), withHttpMethod: .get, timeoutInterval: 0.3) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 5)
        guard case .timedOut = box.value?.error as? RestManager.CustomError else { return XCTFail("\(String(describing: box.value?.error))") }
    }

    func testStallInTheMiddleOfTheBodyTimesOut() {
        rest.timeoutInterval = 0.5
        let results = send(.get, "/_test/stall?seconds=3&bytes=1000")
        guard case .timedOut = results.error as? RestManager.CustomError else { return XCTFail("\(String(describing: results.error))") }
    }

    func testInvalidTimeoutIsAClearError() {
        for value in [0, -1, Double.nan, Double.infinity] {
            rest.timeoutInterval = value
            let results = send(.get, "/_test/echo")
            guard case .invalidTimeout = results.error as? RestManager.CustomError else { XCTFail("\(value)"); continue }
        }
    }

    /// All of a manager's deadlines share one timer: a shorter timeout added later must still fire
    /// first, each at its own time, never early.
    func testEachRequestTimesOutAtItsOwnDeadline() {
        let started = Date()
        let elapsed = ResultBox<(TimeInterval, TimeInterval)>()
        let timeouts: [TimeInterval] = [1.5, 0.3, 0.8]
        let done = timeouts.map { expectation(description: "timeout \($0)") }
        for (timeout, finished) in zip(timeouts, done) {
            rest.makeRequest(toURL: url("/_test/hang"), withHttpMethod: .get, timeoutInterval: timeout) { results in
                if case .timedOut(_, let after, .wholeCall) = results.error as? RestManager.CustomError, after == timeout {
                    elapsed.set((timeout, Date().timeIntervalSince(started)))
                }
                finished.fulfill()
            }
        }
        wait(for: done, timeout: 10)
        XCTAssertEqual(elapsed.all.map(\.0), [0.3, 0.8, 1.5], "in deadline order, each with its own timeout")
        for (timeout, after) in elapsed.all {
            XCTAssertGreaterThanOrEqual(after, timeout - 0.02, "\(timeout) s fired early")
            XCTAssertLessThan(after, timeout + 1, "\(timeout) s fired late")
        }
    }

    func testFinishedRequestsLeaveNoDeadlineBehind() {
        rest.timeoutInterval = 0.4
        for _ in 0..<50 { XCTAssertNil(send(.get, "/_test/echo").error) }
        let started = Date()
        let results = send(.get, "/_test/hang")
        guard case .timedOut = results.error as? RestManager.CustomError else { return XCTFail("\(String(describing: results.error))") }
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.38)
    }
}
