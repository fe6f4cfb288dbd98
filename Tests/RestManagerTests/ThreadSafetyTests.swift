import Foundation
import XCTest
import RestManager

final class ThreadSafetyTests: MockServerTestCase {
    func testEachRequestSendsTheStateItWasMadeWith() throws {
        let count = 40
        let box = ResultBox<(Int, Echo?)>()
        let group = DispatchGroup()
        let manager = try XCTUnwrap(rest)
        let target = url("/_test/echo")
        DispatchQueue.concurrentPerform(iterations: count) { index in
            group.enter()
            // Mutations from many threads at once while earlier requests are in flight.
            manager.urlQueryParameters.add(value: "\(index)", forKey: "i\(index)")
            manager.requestHttpHeaders.add(value: "\(index)", forKey: "X-Index")
            manager.makeRequest(toURL: target, withHttpMethod: .get) { results in
                box.set((index, try? results.decode(Echo.self)))
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(box.count, count)
        XCTAssertTrue(box.all.allSatisfy { $0.1 != nil })
    }

    func testCompletionsRunOnTheChosenQueue() {
        let queue = DispatchQueue(label: "chosen")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        rest.callbackQueue = queue
        let done = expectation(description: "completed")
        rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) { _ in
            XCTAssertEqual(DispatchQueue.getSpecific(key: key), true)
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
    }

    /// By default a completion may run on the session queue's thread; one that blocks waiting for
    /// another request of the same manager (a common script pattern) must not stall that request.
    func testACompletionThatBlocksDoesNotHoldUpTheNextRequest() throws {
        let done = expectation(description: "outer completed")
        let inner = ResultBox<RestManager.Results>()
        let waited = ResultBox<DispatchTimeoutResult>()
        let manager = try XCTUnwrap(rest)
        manager.timeoutInterval = 60  // longer than the wait below: only a stalled queue could fail it
        let target = url("/_test/echo")
        manager.makeRequest(toURL: target, withHttpMethod: .get) { _ in
            let finished = DispatchSemaphore(value: 0)
            manager.makeRequest(toURL: target, withHttpMethod: .get) { results in
                inner.set(results)
                finished.signal()
            }
            waited.set(finished.wait(timeout: .now() + 10))
            done.fulfill()
        }
        wait(for: [done], timeout: 30)
        XCTAssertEqual(waited.value, .success, "the inner request completed while the outer completion was blocked")
        XCTAssertEqual(inner.value?.statusCode, 200)
    }

    /// The same with the other request already in flight: its answer arrives while the first
    /// completion is blocked, and must still be delivered.
    func testACompletionThatBlocksDoesNotHoldUpAnAnswerAlreadyOnItsWay() {
        let done = expectation(description: "first completion returned")
        let later = ResultBox<RestManager.Results>()
        let waited = ResultBox<DispatchTimeoutResult>()
        let laterFinished = DispatchSemaphore(value: 0)
        rest.timeoutInterval = 60
        rest.makeRequest(toURL: url("/_test/delay?seconds=0.3"), withHttpMethod: .get) { results in
            later.set(results)
            laterFinished.signal()
        }
        rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) { _ in
            waited.set(laterFinished.wait(timeout: .now() + 10))
            done.fulfill()
        }
        wait(for: [done], timeout: 30)
        XCTAssertEqual(waited.value, .success, "the later answer was delivered while the first completion was blocked")
        XCTAssertEqual(later.value?.statusCode, 200)
    }

    /// Many more blocked completions than cores, each waiting for a request it starts: as with
    /// URLSession, a blocked completion holds a thread of its queue, so the inner requests are
    /// delivered on a serial queue of their own (the documented way), which always gets a thread.
    func testCompletionsWaitingForOtherRequestsFinishWhenThoseUseAQueueOfTheirOwn() throws {
        let manager = try XCTUnwrap(rest)
        manager.timeoutInterval = 60
        let count = 24
        let waited = ResultBox<DispatchTimeoutResult>()
        let group = DispatchGroup()
        let started = Date()
        let (outer, slow) = (url("/_test/echo"), url("/_test/delay?seconds=0.05"))
        let innerManager = RestManager()
        innerManager.callbackQueue = DispatchQueue(label: "inner completions")
        for _ in 0..<count {
            group.enter()
            manager.makeRequest(toURL: outer, withHttpMethod: .get) { _ in
                let inner = DispatchSemaphore(value: 0)
                innerManager.makeRequest(toURL: slow, withHttpMethod: .get) { _ in inner.signal() }
                waited.set(inner.wait(timeout: .now() + 10))
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(waited.all.filter { $0 == .success }.count, count, "every inner answer arrived within 10 s")
        XCTAssertLessThan(Date().timeIntervalSince(started), 15)
    }

    /// The caller's own work blocks every thread the global queues have (Linux adds about one a
    /// second then): answers and deadlines do not depend on them, so with a callback queue of
    /// its own the caller still gets both on time.
    func testRequestsFinishWhileTheGlobalQueuesAreBlocked() {
        let release = DispatchSemaphore(value: 0)
        let blockers = 16
        for _ in 0..<blockers {
            DispatchQueue.global(qos: .userInitiated).async { release.wait() }
            DispatchQueue.global().async { release.wait() }
        }
        defer { for _ in 0..<(2 * blockers) { release.signal() } }
        rest.callbackQueue = DispatchQueue(label: "completions")
        let started = Date()
        let timedOut = expectation(description: "timed out")
        let answered = expectation(description: "answered")
        let outcomes = ResultBox<String>()
        rest.makeRequest(toURL: url("/_test/hang"), withHttpMethod: .get, timeoutInterval: 0.3) { results in
            if case .timedOut = results.error as? RestManager.CustomError { outcomes.set("timed out") }
            timedOut.fulfill()
        }
        rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) { results in
            outcomes.set("answered \(results.statusCode ?? 0)")
            answered.fulfill()
        }
        wait(for: [timedOut, answered], timeout: 30)
        XCTAssertEqual(Set(outcomes.all), ["timed out", "answered 200"])
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "nothing waited for a global queue's thread")
    }

    /// De-duplicated callers share one answer; their completions must not run one after another on
    /// one thread, or a caller that blocks until the other has run would wait forever.
    func testSharedAnswerIsNotDeliveredOneCallerAfterAnother() {
        rest.deduplicatesRequests = true
        let ran = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
        let waited = ResultBox<DispatchTimeoutResult>()
        let done = [expectation(description: "first"), expectation(description: "second")]
        let target = url("/_test/delay?seconds=0.3")
        for (mine, other) in [(0, 1), (1, 0)] {
            rest.makeRequest(toURL: target, withHttpMethod: .get) { _ in
                ran[mine].signal()
                waited.set(ran[other].wait(timeout: .now() + 5))
                done[mine].fulfill()
            }
        }
        wait(for: done, timeout: 30)
        XCTAssertEqual(waited.all, [.success, .success], "each completion ran while the other was waiting")
        XCTAssertEqual(server.receivedRequests.filter { $0.path == "/_test/delay" }.count, 1, "one shared network call")
    }

    func testRequestsInFlightFinishWhenTheManagerIsReleased() {
        let done = expectation(description: "completed")
        let box = ResultBox<RestManager.Results>()
        weak var weakManager: RestManager?
        do {
            let manager = RestManager()
            weakManager = manager
            manager.makeRequest(toURL: url("/_test/delay?seconds=0.3"), withHttpMethod: .get) {
                box.set($0); done.fulfill()
            }
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(box.value?.statusCode, 200)
        XCTAssertNil(weakManager)
    }
    /// Each statement on `interceptors`, `authenticator` and `retryPolicy` is atomic, as for headers and query: 10,000
    /// appends from two threads are all kept (5,841 to 7,380 were), and an authenticator and a retry policy set while
    /// they go on are neither lost nor doubled.
    func testAppendsFromTwoThreadsAndSettersMeanwhileAreAllKept() {
        let manager = RestManager()
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            for index in 0..<5_000 {
                manager.interceptors.append(Marker())
                guard index == 2_500 else { continue }
                if thread == 0 {
                    manager.retryPolicy = RestManager.RetryPolicy(maximumRetries: 3)
                } else {
                    manager.authenticator = RestManager.Authenticator(credential: nil) { _ in
                        throw RestManager.CustomError.authenticationFailed(reason: "none")
                    }
                }
            }
        }
        XCTAssertEqual(manager.interceptors.filter { $0 is Marker }.count, 10_000)
        XCTAssertEqual(manager.interceptors.count, 10_001, "the markers and one authenticator")
        XCTAssertNotNil(manager.authenticator)
        XCTAssertEqual(manager.retryPolicy?.maximumRetries, 3)
    }
}

/// An interceptor that does nothing, to count.
private struct Marker: RestManager.Interceptor {}
