import Foundation
import XCTest
@testable import RestManager

final class CancellationTests: MockServerTestCase {
    private func cancelled(_ results: RestManager.Results?) -> Bool {
        (results?.error as? RestManager.CustomError)?.isCancellation ?? false
    }

    /// Cancelled right after the call: a route that never answers, so that the answer cannot win on a busy machine
    /// (with `/_test/echo` it did once, under ThreadSanitizer).
    func testCancelBeforeStartCompletesOnceWithCancellation() {
        let done = expectation(description: "completed")
        let box = ResultBox<RestManager.Results>()
        let handle = rest.makeRequest(toURL: url("/_test/hang"), withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        handle.cancel()
        handle.cancel()
        wait(for: [done], timeout: 5)
        XCTAssertTrue(cancelled(box.value))
        XCTAssertTrue(handle.isCancelled)
        // Nothing more arrives later (the fixture waits for a second request to be sure the first is done).
        send(.get, "/_test/echo")
        XCTAssertEqual(box.count, 1)
    }

    /// A call cancelled while its body is assembled (multipart parts from disk, off the caller's thread) never goes
    /// out: its handle has completed, so the exchange made for it after the assembly does not start.
    func testACallCancelledWhileItsBodyIsAssembledNeverGoesOut() {
        let handleIsSet = DispatchSemaphore(value: 0)
        let slot = RestManager.Locked<RestManager.RequestHandle?>(nil)
        var request = RestManager.Request(.post, url: url("/_test/echo"))
        request.body = Data("assembled".utf8)
        request.assembleBody = { value, _ in
            handleIsSet.wait()
            slot.withLock { $0 }?.cancel()
            return value
        }
        let started = ResultBox<RestManager.Event>()
        rest.eventHandler = { event in
            if case .started = event { started.set(event) }
        }
        let done = expectation(description: "completed")
        let box = ResultBox<RestManager.Results>()
        let handle = rest.makeRequest(request) {
            box.set($0); done.fulfill()
        }
        slot.withLock { $0 = handle }
        handleIsSet.signal()
        wait(for: [done], timeout: 10)
        XCTAssertTrue(cancelled(box.value))
        // What would go out, would go out at once: a second is plenty to see it.
        XCTAssertFalse(server.waitForRequests(1, timeout: 1))
        XCTAssertEqual(started.count, 0)
        XCTAssertEqual(box.count, 1)
    }

    func testCancelDuringTheTransferEndsItAtOnce() {
        let done = expectation(description: "completed")
        let box = ResultBox<RestManager.Results>()
        let handle = rest.makeRequest(toURL: url("/_test/hang"), withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        // Wait until the server has the request, then cancel.
        XCTAssertTrue(server.waitForRequests(1))
        let started = Date()
        handle.cancel()
        wait(for: [done], timeout: 5)
        XCTAssertLessThan(Date().timeIntervalSince(started), 3, "not at the 10 s deadline")
        XCTAssertTrue(cancelled(box.value))
        XCTAssertEqual(box.count, 1)
        // The network call ends too: the server sees the connection close (not at the 10 s deadline).
        let server = self.server!
        let closed = expectation(for: NSPredicate { _, _ in server.openConnectionCount == 0 }, evaluatedWith: nil)
        wait(for: [closed], timeout: 3)
    }

    func testCancelAfterCompletionDoesNothing() {
        let done = expectation(description: "completed")
        let box = ResultBox<RestManager.Results>()
        let handle = rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 5)
        handle.cancel()
        XCTAssertFalse(handle.isCancelled)
        XCTAssertEqual(box.value?.response?.httpStatusCode, 200)
        send(.get, "/_test/echo")
        XCTAssertEqual(box.count, 1)
    }

    func testCancellingTheSwiftTaskCancelsTheRequest() async throws {
        let rest = try XCTUnwrap(self.rest)
        let target = url("/_test/hang")
        let task = Task { await rest.makeRequest(toURL: target, withHttpMethod: .get) }
        await serverReceived(1)
        task.cancel()
        let results = await task.value
        XCTAssertTrue(cancelled(results))
    }

    func testAlreadyCancelledTaskNeverSends() async throws {
        let rest = try XCTUnwrap(self.rest)
        let target = url("/_test/echo")
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await rest.makeRequest(toURL: target, withHttpMethod: .get)
        }
        let results = await task.value
        XCTAssertTrue(cancelled(results))
        // A request sent after it arrives after it: the server saw only that one.
        let sentinel = await rest.makeRequest(toURL: url("/_test/status/201"), withHttpMethod: .get)
        XCTAssertEqual(sentinel.statusCode, 201)
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/_test/status/201"])
    }

    /// The same for a stream: `stream(_:)` in a cancelled task throws `.cancelled` and sends nothing.
    func testAlreadyCancelledTaskNeverSendsAStream() async throws {
        let rest = try XCTUnwrap(self.rest)
        let target = url("/_test/stream?count=3")
        let task = Task { () -> Error? in
            withUnsafeCurrentTask { $0?.cancel() }
            do {
                _ = try await rest.stream(RestManager.Request(url: target))
                return nil
            } catch {
                return error
            }
        }
        let error = await task.value
        XCTAssertTrue((error as? RestManager.CustomError)?.isCancellation ?? false, "\(String(describing: error))")
        let sentinel = await rest.makeRequest(toURL: url("/_test/status/201"), withHttpMethod: .get)
        XCTAssertEqual(sentinel.statusCode, 201)
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/_test/status/201"])
    }

    func testThrowingAPIThrowsCancellation() async throws {
        let rest = try XCTUnwrap(self.rest)
        let target = url("/_test/hang")
        let task = Task { try await rest.data(fromURL: target) }
        await serverReceived(1)
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("expected cancellation")
        } catch let error as RestManager.CustomError {
            XCTAssertTrue(error.isCancellation)
        }
    }

    func testManyRandomCancellationsCompleteEachRequestExactlyOnce() {
        let count = 200
        let box = ResultBox<Int>()
        let group = DispatchGroup()
        var handles: [RestManager.RequestHandle] = []
        for index in 0..<count {
            group.enter()
            let path = index % 3 == 0 ? "/_test/delay?seconds=0.05" : "/_test/echo"
            handles.append(
                rest.makeRequest(toURL: url(path), withHttpMethod: .get) { _ in
                    box.set(index); group.leave()
                })
        }
        let toCancel = handles
        DispatchQueue.concurrentPerform(iterations: count / 2) { toCancel[$0 * 2].cancel() }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(box.all.sorted(), Array(0..<count))
    }
}
