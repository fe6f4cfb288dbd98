import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
@testable import RestManager

/// Retries: which requests, after what, how long, and within one deadline.
final class RetryPolicyTests: MockServerTestCase {
    private func arrivalTimes() -> ResultBox<Date> { ResultBox<Date>() }

    func testA503ThenA200SucceedsAndTheBodyIsSentAgain() throws {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0.01)
        server.enqueue(MockServer.Response(status: 503))
        rest.httpBody = Data("payload".utf8)
        let results = send(.put, "/_test/echo")
        XCTAssertEqual(results.statusCode, 200)
        let received = server.receivedRequests
        XCTAssertEqual(received.map(\.method), ["PUT", "PUT"])
        XCTAssertEqual(received.map(\.body), [Data("payload".utf8), Data("payload".utf8)])
    }

    /// `maximumRetries` and the backoff count the policy's own retries: an authenticator's resend after a 401 is not
    /// one (after it, a 503 was retried once instead of twice, and the first delay was the second's).
    func testTheAuthenticatorsResendIsNotOneOfThePolicysRetries() {
        rest.authenticator = RestManager.Authenticator(credential: .init(accessToken: "old")) { _ in
            .init(accessToken: "new")
        }
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 2, initialDelay: 0.2)
        let delays = ResultBox<TimeInterval>()
        rest.eventHandler = { event in
            if case .retrying(_, _, let delay, let reason) = event, reason == "HTTP 503" { delays.set(delay) }
        }
        server.enqueue(MockServer.Response(status: 401))
        server.enqueue(MockServer.Response(status: 503))
        server.enqueue(MockServer.Response(status: 503))
        XCTAssertEqual(send(.get, "/_test/echo").statusCode, 200)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Authorization") }, ["Bearer old"] + Array(repeating: "Bearer new", count: 3))
        XCTAssertEqual(delays.count, 2)
        XCTAssertTrue((0.1...0.2).contains(delays.all[0]), "first retry: \(delays.all)")
        XCTAssertTrue((0.2...0.4).contains(delays.all[1]), "second retry: \(delays.all)")
    }

    func testNoPolicyNoRetryAndPostIsNotRetriedByDefault() {
        server.enqueue(MockServer.Response(status: 503))
        XCTAssertEqual(send(.get, "/_test/echo").statusCode, 503)
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0.01)
        server.enqueue(MockServer.Response(status: 503))
        XCTAssertEqual(send(.post, "/_test/echo").statusCode, 503)
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    /// RFC 9110 §9.2.2: PATCH and POST are not idempotent; the default retries only the methods that are.
    func testOnlyIdempotentMethodsAreRetriedByDefault() {
        let policy = RestManager.RetryPolicy(initialDelay: 0.01)
        XCTAssertEqual(policy.retryableMethods, [.get, .head, .put, .delete, .options])
        rest.retryPolicy = policy
        for method in RestManager.HttpMethod.allCases {
            server.clearReceivedRequests()
            server.enqueue(MockServer.Response(status: 503))
            send(method, "/_test/echo")
            let expected = [.get, .head, .put, .delete, .options].contains(method) ? 2 : 1
            XCTAssertEqual(server.receivedRequests.count, expected, "\(method.name)")
        }
    }

    /// A method an interceptor made that the policy does not know (`PURGE`) may not be idempotent: never retried. It
    /// was taken for a GET and sent again.
    func testAMethodThePolicyDoesNotKnowIsNotRetried() {
        struct Purge: RestManager.Interceptor {
            func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
                var purge = request
                purge.httpMethod = "PURGE"
                return purge
            }
        }
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0.01)
        rest.interceptors = [Purge()]
        server.enqueue(MockServer.Response(status: 503))
        XCTAssertEqual(send(.get, "/_test/echo").statusCode, 503)
        XCTAssertEqual(server.receivedRequests.map(\.method), ["PURGE"])
    }

    func testItStopsAfterMaximumRetriesAndOnlyForItsStatuses() {
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 2, initialDelay: 0.01)
        for _ in 0..<5 { server.enqueue(MockServer.Response(status: 500)) }
        XCTAssertEqual(send(.get, "/x").statusCode, 500)
        XCTAssertEqual(server.receivedRequests.count, 3, "the first attempt and two retries")
        server.removeAllStubs()
        server.enqueue(MockServer.Response(status: 501))
        XCTAssertEqual(send(.get, "/x").statusCode, 501)
        XCTAssertEqual(server.receivedRequests.count, 4, "501 is not retryable")
    }

    func testRetryAfterInSecondsIsHonoured() throws {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0.01)
        let arrivals = arrivalTimes()
        server.stub(path: "/limited") { _ in
            arrivals.set(Date())
            return arrivals.count == 1 ? MockServer.Response(status: 429, headers: [("Retry-After", "1")]) : .text("ok")
        }
        XCTAssertEqual(send(.get, "/limited").statusCode, 200)
        let times = arrivals.all
        XCTAssertEqual(times.count, 2)
        let gap = times[1].timeIntervalSince(times[0])
        XCTAssertGreaterThanOrEqual(gap, 1.0)
        XCTAssertLessThan(gap, 1.5, "Retry-After: 1 waited \(gap) s")
    }

    func testRetryAfterAsAnHTTPDateAndOneLongerThanTheMaximumDelay() throws {
        XCTAssertEqual(RestManager.RetryPolicy.seconds(fromRetryAfter: "120"), 120)
        let date = try XCTUnwrap(RestManager.RetryPolicy.seconds(fromRetryAfter: "Sun, 06 Nov 1994 08:49:37 GMT"))
        XCTAssertEqual(date, 0, "a date in the past means now")
        XCTAssertNil(RestManager.RetryPolicy.seconds(fromRetryAfter: "-5"))
        XCTAssertNil(RestManager.RetryPolicy.seconds(fromRetryAfter: "soon"))
        XCTAssertEqual(RestManager.RetryPolicy.seconds(fromRetryAfter: "99999999999"), 99_999_999_999)
        XCTAssertEqual(RestManager.RetryPolicy.seconds(fromRetryAfter: String(repeating: "9", count: 400)), .infinity)
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0.01, maximumDelay: 5)
        for value in ["60", "99999999999", String(repeating: "9", count: 400)] {
            server.enqueue(MockServer.Response(status: 503, headers: [("Retry-After", value)]))
            let started = Date()
            XCTAssertEqual(send(.get, "/x").statusCode, 503, "a Retry-After beyond maximumDelay is delivered, not waited for")
            XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        }
        XCTAssertEqual(server.receivedRequests.count, 3, "none retried: a long Retry-After is not an unreadable one")
    }

    /// RFC 9110 §5.6.7: a recipient accepts all three date forms, on a 24-hour clock.
    func testRetryAfterDatesInAllThreeFormsOnA24HourClock() throws {
        let expected = 784_136_977.0  // Sun, 06 Nov 1994 15:49:37 GMT
        for text in ["Sun, 06 Nov 1994 15:49:37 GMT", "Sunday, 06-Nov-94 15:49:37 GMT", "Sun Nov  6 15:49:37 1994"] {
            XCTAssertEqual(RestManager.RetryPolicy.date(fromHTTPDate: text)?.timeIntervalSince1970, expected, text)
        }
        XCTAssertEqual(RestManager.RetryPolicy.date(fromHTTPDate: "Wed Nov 16 03:04:05 1994")?.timeIntervalSince1970, 784_955_045)
        for text in ["1.5", "-1", "soon", "Sun, 06 Nov 1994 25:49:37 GMT", ""] {
            XCTAssertNil(RestManager.RetryPolicy.seconds(fromRetryAfter: text), text)
        }
        // A date 3 s ahead, in each form, is waited for: between 2 and 3 s (the date has whole seconds).
        let formats = ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"]
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            let seconds = try XCTUnwrap(RestManager.RetryPolicy.seconds(fromRetryAfter: formatter.string(from: Date() + 3)), format)
            XCTAssertTrue((1.5...3).contains(seconds), "\(format): \(seconds)")
        }
    }

    /// A Retry-After that is neither seconds nor a date does not disable the retry: the policy's own backoff applies.
    func testAnUnreadableRetryAfterFallsBackToTheBackoff() {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0, maximumDelay: 0)
        let events = ResultBox<String>()
        rest.eventHandler = { events.set($0.description) }
        for value in ["1.5", "-1", "later"] {
            server.enqueue(MockServer.Response(status: 503, headers: [("Retry-After", value)]))
            XCTAssertEqual(send(.get, "/_test/status/204").statusCode, 204, value)
        }
        XCTAssertEqual(server.receivedRequests.count, 6)
        let retries = events.all.filter { $0.hasPrefix("retrying") }
        XCTAssertEqual(retries.count, 3)
        for line in retries { XCTAssertTrue(line.hasSuffix("in 0.00 s: HTTP 503"), line) }
    }

    func testBrokenConnectionsAreRetriedButCancellationIsNot() {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0.01)
        var closed = MockServer.Response()
        closed.fault = .closeWithoutResponse
        server.enqueue(closed)
        XCTAssertEqual(send(.get, "/_test/status/201").statusCode, 201)
        XCTAssertEqual(server.receivedRequests.count, 2)
        // A body cut short (-1 on Linux, "transfer closed with N bytes remaining") is retried too.
        var cut = MockServer.Response(status: 200, headers: [("Content-Type", "text/plain")], body: Data("0123456789".utf8))
        cut.fault = .closeMidBody
        server.enqueue(cut)
        let results = send(.get, "/_test/status/201")
        XCTAssertEqual(results.statusCode, 201, "\(String(describing: results.error))")
        XCTAssertEqual(server.receivedRequests.count, 4)
    }

    /// `Retry-After` may come with spaces or tabs around its value (RFC 9110's OWS): they are not part of it.
    func testRetryAfterWithSpacesAroundItIsRead() {
        XCTAssertEqual(RestManager.RetryPolicy.seconds(fromRetryAfter: " 2 "), 2)
        XCTAssertEqual(RestManager.RetryPolicy.seconds(fromRetryAfter: "\t7 "), 7, "a tab is OWS too")
        XCTAssertNotNil(RestManager.RetryPolicy.seconds(fromRetryAfter: "  Sun, 06 Nov 2094 08:49:37 GMT "))
    }

    func testTheNextAttemptMustStartBeforeTheDeadlineOrTheLastAnswerIsDelivered() {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 2, maximumDelay: 2)
        rest.timeoutInterval = 1
        server.enqueue(MockServer.Response(status: 503))
        let started = Date()
        let results = send(.get, "/x")
        XCTAssertEqual(results.statusCode, 503, "the 503, not a timeout")
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.9, "before the 1 s deadline")
    }

    func testTheDeadlineCoversEveryAttempt() {
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 10, initialDelay: 0.1, maximumDelay: 0.1)
        rest.timeoutInterval = 0.5
        server.stub(path: "/slow") { _ in
            var response = MockServer.Response(status: 503)
            response.delay = 0.2
            return response
        }
        let started = Date()
        let results = send(.get, "/slow")
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertLessThan(elapsed, 2, "ten attempts would take 3 s")
        if case .timedOut? = results.error as? RestManager.CustomError {} else { XCTAssertEqual(results.statusCode, 503) }
    }

    func testCancellingDuringTheBackoffCompletesAtOnce() {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 5, maximumDelay: 5)
        server.enqueue(MockServer.Response(status: 503))
        let done = expectation(description: "cancelled")
        let box = ResultBox<RestManager.Results>()
        let events = ResultBox<String>()
        rest.eventHandler = { events.set("\($0)") }
        let handle = rest.makeRequest(toURL: url("/x"), withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        let retrying = expectation(for: NSPredicate { _, _ in events.all.contains { $0.hasPrefix("retrying") } }, evaluatedWith: nil)
        wait(for: [retrying], timeout: 5)
        handle.cancel()
        wait(for: [done], timeout: 1)
        guard case .cancelled? = box.value?.error as? RestManager.CustomError else { return XCTFail("\(String(describing: box.value?.error))") }
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testDelaysGrowExponentiallyWithJitterAndACap() {
        let policy = RestManager.RetryPolicy(maximumRetries: 10, initialDelay: 1, maximumDelay: 4)
        let failed = RestManager.Results(withError: RestManager.CustomError.transport(URLError(.networkConnectionLost)))
        for (retry, range) in [(1, 0.5...1.0), (2, 1.0...2.0), (3, 2.0...4.0), (4, 2.0...4.0), (8, 2.0...4.0)] {
            var delays: Set<TimeInterval> = []
            for _ in 0..<50 {
                let delay = policy.delay(beforeRetry: retry, after: failed, method: .get) ?? -1
                XCTAssertTrue(range.contains(delay), "retry \(retry): \(delay)")
                delays.insert(delay)
            }
            XCTAssertGreaterThan(delays.count, 1, "retry \(retry): jittered, so that many clients do not retry at once")
        }
        XCTAssertNil(policy.delay(beforeRetry: 11, after: failed, method: .get))
        XCTAssertNil(policy.delay(beforeRetry: 1, after: failed, method: .post))
        XCTAssertNil(policy.delay(beforeRetry: 1, after: RestManager.Results(withError: RestManager.CustomError.cancelled), method: .get))
        XCTAssertNil(
            policy.delay(beforeRetry: 1, after: RestManager.Results(withError: RestManager.CustomError.transport(URLError(.cancelled))), method: .get)
        )
    }

    /// Delays at the extremes (zero, negative, a negative maximum, minus infinity) mean "at once", never a trap.
    func testZeroAndNegativeDelaysRetryAtOnce() {
        let failed = RestManager.Results(withError: RestManager.CustomError.transport(URLError(.networkConnectionLost)))
        for (initial, maximum) in [(0.0, 30.0), (-1.0, 30.0), (1.0, -5.0), (-Double.infinity, 30.0)] {
            let policy = RestManager.RetryPolicy(initialDelay: initial, maximumDelay: maximum)
            XCTAssertEqual(policy.delay(beforeRetry: 1, after: failed, method: .get), 0, "initial \(initial), maximum \(maximum)")
        }
    }

    /// A `Retry-After` equal to the maximum delay is waited for; one just over it is not.
    func testARetryAfterOfExactlyTheMaximumDelayIsWaitedFor() throws {
        let response = HTTPURLResponse(
            url: try XCTUnwrap(URL(string: "http://h/")), statusCode: 503, httpVersion: nil, headerFields: ["Retry-After": "2"])
        let unavailable = RestManager.Results(withData: Data(), response: RestManager.Response(fromURLResponse: response), error: nil)
        let atTheMaximum = RestManager.RetryPolicy(maximumDelay: 2).delay(beforeRetry: 1, after: unavailable, method: .get)
        XCTAssertEqual(atTheMaximum, 2)
        XCTAssertNil(RestManager.RetryPolicy(maximumDelay: 1.999).delay(beforeRetry: 1, after: unavailable, method: .get))
    }

    func testEventsTellEachAttemptRetryAndTheEndOnceOnOneLineWithSecretsRedacted() {
        let events = ResultBox<String>()
        rest.eventHandler = { events.set($0.description) }
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0.01, maximumDelay: 0.01)
        server.enqueue(MockServer.Response(status: 503))
        XCTAssertEqual(send(.get, "/_test/echo?token=abc&x=1").statusCode, 200)
        let finished = expectation(for: NSPredicate { _, _ in events.all.count == 4 }, evaluatedWith: nil)
        wait(for: [finished], timeout: 5)
        let lines = events.all
        guard lines.count == 4 else { return XCTFail("\(lines)") }
        let target = "GET \(server.baseURL.absoluteString)/_test/echo?token=<redacted>&x=1"
        XCTAssertEqual(lines[0], "started \(target) (attempt 1)")
        XCTAssertTrue(lines[1].hasPrefix("retrying \(target) after attempt 1 in 0.01 s: HTTP 503"), lines[1])
        XCTAssertEqual(lines[2], "started \(target) (attempt 2)")
        XCTAssertTrue(lines[3].hasPrefix("finished \(target) HTTP 200 in "), lines[3])
        XCTAssertFalse(lines.joined().contains("abc"))
        XCTAssertTrue(lines.allSatisfy { !$0.contains("\n") })
    }
}
