import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// `Results.metrics`: what each call took, measured by the library, against a real socket. Each test counts the
/// requests the server saw and states the attempts' statuses, URLs and byte counts as literals.
final class MetricsTests: MockServerTestCase {
    private typealias Metrics = RestManager.Metrics

    /// The times of every attempt are in order, never negative, and add up to at most the call's duration.
    private func assertTimesAddUp(_ metrics: Metrics, file: StaticString = #filePath, line: UInt = #line) {
        var end: TimeInterval = 0
        for attempt in metrics.attempts {
            XCTAssertGreaterThanOrEqual(attempt.startOffset, end, "an attempt starts after the one before ended", file: file, line: line)
            XCTAssertGreaterThanOrEqual(attempt.duration, attempt.timeToHead ?? 0, "its head comes before its end", file: file, line: line)
            XCTAssertGreaterThanOrEqual(attempt.timeToHead ?? 0, 0, file: file, line: line)
            end = attempt.startOffset + attempt.duration
        }
        XCTAssertLessThanOrEqual(end, metrics.duration, "the last attempt ends before the call", file: file, line: line)
        XCTAssertGreaterThan(metrics.duration, 0, file: file, line: line)
    }

    private func paths(_ metrics: Metrics?) -> [String] {
        (metrics?.attempts ?? []).map { $0.url.path + ($0.url.query.map { "?" + $0 } ?? "") }
    }

    func testResultsMadeByHandHaveNoMetrics() {
        XCTAssertNil(RestManager.Results(withData: Data(), response: nil, error: nil).metrics)
        XCTAssertNil(RestManager.Results(withError: RestManager.CustomError.cancelled).metrics)
    }

    /// A redirect's hop is an attempt: a 302 with its 23-byte body, then the 200 with the stub's 1,234 bytes.
    func testARedirectIsTwoAttempts() throws {
        server.stub("GET", path: "/m/body", response: MockServer.Response(status: 200, body: Data(count: 1234)))
        let results = send(.get, "/_test/redirect/302?to=/m/body")
        let metrics = try XCTUnwrap(results.metrics)
        XCTAssertEqual(server.receivedRequests.count, 2)
        XCTAssertEqual(metrics.attempts.map(\.statusCode), [302, 200])
        XCTAssertEqual(paths(metrics), ["/_test/redirect/302?to=/m/body", "/m/body"])
        XCTAssertEqual(metrics.attempts.map(\.method), ["GET", "GET"])
        XCTAssertEqual(metrics.attempts.map(\.bytesReceived), [23, 1234])
        XCTAssertEqual(metrics.attempts.map(\.bytesSent), [0, 0])
        XCTAssertEqual(metrics.attempts.map { $0.error == nil }, [true, true])
        XCTAssertEqual(metrics.redirectCount, 1)
        XCTAssertEqual(metrics.retryCount, 0)
        XCTAssertEqual(metrics.source, .network)
        assertTimesAddUp(metrics)
    }

    /// A POST counts its body bytes; a 303 makes the next hop a GET without a body.
    func testBytesSentAreTheBodysAndA303HopSendsNone() throws {
        var request = RestManager.Request(.post, url: url("/_test/redirect/303?to=/_test/echo"))
        request.body = Data(repeating: 0x61, count: 5_000)
        let results = send(request)
        let metrics = try XCTUnwrap(results.metrics)
        XCTAssertEqual(server.receivedRequests.map(\.method), ["POST", "GET"])
        XCTAssertEqual(metrics.attempts.map(\.method), ["POST", "GET"])
        XCTAssertEqual(metrics.attempts.map(\.bytesSent), [5_000, 0])
        XCTAssertEqual(metrics.attempts.map(\.statusCode), [303, 200])
        XCTAssertEqual(metrics.attempts.last?.bytesReceived, Int64(results.data?.count ?? -1))
        XCTAssertEqual(metrics.redirectCount, 1)
    }

    /// 503, 503, 200 with a retry policy: three attempts, two of them retries, each after its delay.
    func testRetriesAreAttemptsAndAreCounted() throws {
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 3, initialDelay: 0.2)
        server.enqueue(MockServer.Response(status: 503))
        server.enqueue(MockServer.Response(status: 503))
        server.enqueue(MockServer.Response(status: 200, body: Data("ok".utf8)))
        let metrics = try XCTUnwrap(send(.get, "/retried").metrics)
        XCTAssertEqual(server.receivedRequests.count, 3)
        XCTAssertEqual(metrics.attempts.map(\.statusCode), [503, 503, 200])
        XCTAssertEqual(metrics.attempts.map(\.bytesReceived), [0, 0, 2])
        XCTAssertEqual(metrics.retryCount, 2)
        XCTAssertEqual(metrics.redirectCount, 0)
        let first = metrics.attempts[0]
        XCTAssertGreaterThanOrEqual(metrics.attempts[1].startOffset, first.startOffset + first.duration + 0.1, "the delay")
        assertTimesAddUp(metrics)
    }

    /// A fresh cached answer: no attempt, source `.cache`; a 304 turned into the stored answer: `.revalidated`.
    func testACacheHitHasNoAttemptAndARevalidationHasOne() throws {
        rest.interceptors.append(RestManager.ResponseCache())
        server.stub(path: "/fresh") { _ in
            MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=600")], body: Data("fresh".utf8))
        }
        server.stub(path: "/checked") { request in
            if request.header("If-None-Match") == "\"v1\"" { return MockServer.Response(status: 304, headers: [("ETag", "\"v1\"")]) }
            return MockServer.Response(status: 200, headers: [("ETag", "\"v1\""), ("Cache-Control", "no-cache")], body: Data("v1".utf8))
        }
        XCTAssertEqual(send(.get, "/fresh").metrics?.source, .network)
        let hit = send(.get, "/fresh")
        XCTAssertEqual(hit.data, Data("fresh".utf8))
        XCTAssertEqual(hit.metrics?.source, .cache)
        XCTAssertEqual(hit.metrics?.attempts.count, 0)
        XCTAssertEqual(hit.metrics?.redirectCount, 0)
        XCTAssertEqual(hit.metrics?.retryCount, 0)
        XCTAssertEqual(server.receivedRequests.count, 1)

        XCTAssertEqual(send(.get, "/checked").metrics?.source, .network)
        let revalidated = send(.get, "/checked")
        XCTAssertEqual(revalidated.statusCode, 200)
        XCTAssertEqual(revalidated.data, Data("v1".utf8))
        let metrics = try XCTUnwrap(revalidated.metrics)
        XCTAssertEqual(metrics.source, .revalidated)
        XCTAssertEqual(metrics.attempts.map(\.statusCode), [304])
        XCTAssertEqual(metrics.attempts.map(\.bytesReceived), [0])
        XCTAssertEqual(server.receivedRequests.count, 3)
        assertTimesAddUp(metrics)
    }

    /// A caller that joined an identical call in flight sent nothing: `.shared`, no attempt; the first one has one.
    func testADeduplicatedCallerSeesShared() throws {
        rest.deduplicatesRequests = true
        let first = ResultBox<RestManager.Results>()
        let second = ResultBox<RestManager.Results>()
        let done = expectation(description: "both answered")
        done.expectedFulfillmentCount = 2
        rest.makeRequest(toURL: url("/_test/delay?seconds=2"), withHttpMethod: .get) {
            first.set($0)
            done.fulfill()
        }
        XCTAssertTrue(server.waitForRequests(1))
        rest.makeRequest(toURL: url("/_test/delay?seconds=2"), withHttpMethod: .get) {
            second.set($0)
            done.fulfill()
        }
        wait(for: [done], timeout: 15)
        XCTAssertEqual(server.receivedRequests.count, 1)
        XCTAssertEqual(first.value?.metrics?.source, .network)
        XCTAssertEqual(first.value?.metrics?.attempts.map(\.statusCode), [200])
        XCTAssertEqual(second.value?.statusCode, 200)
        XCTAssertEqual(second.value?.metrics?.source, .shared)
        XCTAssertEqual(second.value?.metrics?.attempts.count, 0)
        XCTAssertGreaterThan(second.value?.metrics?.duration ?? 0, 0)
        XCTAssertLessThan(second.value?.metrics?.duration ?? 1, first.value?.metrics?.duration ?? 0, "its own clock")
    }

    /// A timed-out call reports its attempt: no head, ended by `.timedOut` at the deadline.
    func testATimedOutCallReportsItsAttempt() throws {
        var request = RestManager.Request(url: url("/_test/delay?seconds=10"))
        request.timeoutInterval = 0.5
        let results = send(request)
        let metrics = try XCTUnwrap(results.metrics)
        XCTAssertEqual(metrics.attempts.count, 1)
        let attempt = try XCTUnwrap(metrics.attempts.first)
        XCTAssertNil(attempt.statusCode)
        XCTAssertNil(attempt.timeToHead)
        guard case .timedOut? = attempt.error else { return XCTFail("\(String(describing: attempt.error))") }
        XCTAssertGreaterThanOrEqual(attempt.startOffset + attempt.duration, 0.49, "it ends at the deadline")
        XCTAssertGreaterThanOrEqual(metrics.duration, 0.5)
        assertTimesAddUp(metrics)
    }

    /// A cancelled call reports its attempt, ended by `.cancelled`; so does the async form, cancelled with its task.
    func testACancelledCallReportsItsAttempt() async throws {
        let box = ResultBox<RestManager.Results>()
        let done = expectation(description: "cancelled")
        let handle = rest.makeRequest(toURL: url("/_test/delay?seconds=10"), withHttpMethod: .get) {
            box.set($0)
            done.fulfill()
        }
        await serverReceived(1)
        handle.cancel()
        await fulfillment(of: [done], timeout: 10)
        let metrics = try XCTUnwrap(box.value?.metrics)
        XCTAssertEqual(metrics.attempts.count, 1)
        XCTAssertNil(metrics.attempts.first?.statusCode)
        guard case .cancelled? = metrics.attempts.first?.error else { return XCTFail("not cancelled") }
        assertTimesAddUp(metrics)

        let rest = self.rest!
        let target = url("/_test/delay?seconds=10&n=2")
        let task = Task { await rest.makeRequest(RestManager.Request(url: target)) }
        await serverReceived(2)
        task.cancel()
        let cancelled = await task.value
        XCTAssertEqual(cancelled.metrics?.attempts.count, 1)
        guard case .cancelled? = cancelled.metrics?.attempts.first?.error else { return XCTFail("not cancelled") }
    }

    /// A connection refused: one attempt without a head, its error a transport one.
    func testARefusedConnectionIsAnAttemptWithoutAHead() throws {
        let port = server.port
        server.stop()
        let results = send(.get, "/gone", base: "http://127.0.0.1:\(port)")
        let attempt = try XCTUnwrap(results.metrics?.attempts.first)
        XCTAssertEqual(results.metrics?.attempts.count, 1)
        XCTAssertNil(attempt.statusCode)
        guard case .transport? = attempt.error else { return XCTFail("\(String(describing: attempt.error))") }
    }

    /// A request refused before it went out (a header with a line break) has metrics without an attempt.
    func testARequestRefusedBeforeSendingHasNoAttempt() throws {
        var request = RestManager.Request(url: url("/never"))
        request.headers.add(value: "a\r\nb", forKey: "X-Bad")
        let results = send(request)
        XCTAssertNotNil(results.error)
        XCTAssertEqual(results.metrics?.attempts.count, 0)
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// The `finished` event carries the metrics the caller gets, for every kind of call.
    func testTheFinishedEventCarriesTheMetricsOfEveryKindOfCall() async throws {
        let finished = ResultBox<RestManager.Results>()
        rest.eventHandler = { event in
            if case .finished(_, let results, let duration) = event {
                XCTAssertEqual(results.metrics?.duration, duration)
                finished.set(results)
            }
        }
        let rest = self.rest!
        let memory = await rest.makeRequest(RestManager.Request(url: url("/_test/bytes/1000")))
        let (body, _) = try await rest.stream(RestManager.Request(url: url("/_test/bytes/3000")))
        var streamed = 0
        for try await chunk in body { streamed += chunk.count }
        let file = scratch.appendingPathComponent("download")
        _ = try await rest.download(fromURL: url("/_test/bytes/2000"), to: file)
        try Data(count: 700).write(to: scratch.appendingPathComponent("upload"))
        let upload = await rest.upload(fileAt: scratch.appendingPathComponent("upload"), toURL: url("/_test/upload"))
        for try await _ in rest.events(for: RestManager.Request(url: url("/_test/events?count=2"))) {}
        XCTAssertEqual(streamed, 3000)
        XCTAssertEqual(memory.metrics?.attempts.map(\.bytesReceived), [1000])
        XCTAssertEqual(upload.metrics?.attempts.map(\.bytesSent), [700])
        // The stream's and the events' `finished` may come just after the last chunk. The events' second connection
        // is answered 204 (the stream was complete).
        for _ in 0..<1000 where finished.count < 6 { try await Task.sleep(nanoseconds: 10_000_000) }
        let events = finished.all
        XCTAssertEqual(events.count, 6)
        XCTAssertEqual(events.compactMap { $0.metrics?.attempts.first?.statusCode }, [200, 200, 200, 200, 200, 204])
        XCTAssertEqual(events.compactMap { $0.metrics?.attempts.first?.bytesReceived }.prefix(3), [1000, 3000, 2000])
        XCTAssertEqual(events[3].metrics?.attempts.first?.bytesSent, 700)
        XCTAssertEqual(events.map { $0.metrics?.attempts.count }, Array(repeating: 1, count: 6))
        XCTAssertEqual(events.map { $0.metrics?.source }, Array(repeating: .network, count: 6))
    }
}
