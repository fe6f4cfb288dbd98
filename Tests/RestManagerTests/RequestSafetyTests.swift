import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
@testable import RestManager

/// Requests go out as built: no smuggling through framing headers, URLs joined and checked, absurd settings never trap.
final class RequestSafetyTests: MockServerTestCase {
    private func invalidHeaderName(_ results: RestManager.Results, file: StaticString = #filePath, line: UInt = #line) -> String? {
        guard case let .invalidHeader(name, reason)? = results.error as? RestManager.CustomError else {
            XCTFail("not .invalidHeader: \(String(describing: results.error))", file: file, line: line)
            return nil
        }
        XCTAssertTrue(reason.contains("frames the message"), reason, file: file, line: line)
        return name
    }

    /// A caller's `Content-Length: 0` with a body made the body a second request on the connection; framing headers are refused.
    func testFramingHeadersAreRefusedBeforeAnythingIsSent() {
        for name in ["Content-Length", "transfer-encoding", "Host", "Connection", "Keep-Alive", "Upgrade", "Expect", "TE", "Trailer"] {
            rest.requestHttpHeaders = RestManager.RestEntity()
            rest.requestHttpHeaders.add(value: "0", forKey: name)
            rest.httpBody = Data("GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            XCTAssertEqual(invalidHeaderName(send(.post, "/_test/echo")), name)
        }
        var request = RestManager.Request(.get, url: url("/_test/echo"))
        request.headers.add(value: "chunked", forKey: "Transfer-Encoding")
        let done = expectation(description: "value request")
        let box = ResultBox<RestManager.Results>()
        rest.requestHttpHeaders = RestManager.RestEntity()
        rest.makeRequest(request) { results in
            box.set(results)
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(box.value.flatMap { invalidHeaderName($0) }, "Transfer-Encoding")
        XCTAssertEqual(server.receivedRequests.count, 0, "nothing was sent")
        rest.requestHttpHeaders = RestManager.RestEntity()
        rest.httpBody = nil
        XCTAssertEqual(send(.get, "/_test/status/204").statusCode, 204, "the connection serves the next call")
        XCTAssertEqual(server.receivedRequests.map(\.target), ["/_test/status/204"])
    }

    /// The base's query is kept and merged after the joined path; its fragment is dropped.
    func testABaseURLWithAQueryOrAFragmentJoinsCorrectly() throws {
        rest.baseURL = URL(string: server.baseURL.absoluteString + "/_test?key=S")
        let withQuery = try echo(send(.get, "echo?page=2", base: ""))
        XCTAssertEqual(withQuery.path, "/_test/echo")
        XCTAssertEqual(withQuery.rawQuery, "key=S&page=2")
        rest.baseURL = URL(string: server.baseURL.absoluteString + "/_test/#f")
        let withFragment = try echo(send(.get, "/echo", base: ""))
        XCTAssertEqual(withFragment.path, "/_test/echo")
        XCTAssertNil(withFragment.rawQuery)
        let resolved = try RestManager.RequestBuilder.resolve(
            XCTUnwrap(URL(string: "users?page=2#top")), against: URL(string: "https://h/api/?key=S&v=1#frag"))
        XCTAssertEqual(resolved.absoluteString, "https://h/api/users?key=S&v=1&page=2")
    }

    func testAnUpperCaseSchemeWorksAndAPortOutOfRangeIsAnInvalidURL() throws {
        let upper = server.baseURL.absoluteString.replacingOccurrences(of: "http://", with: "HTTP://")
        XCTAssertEqual(try echo(send(.get, "/_test/echo?a=1", base: upper)).rawQuery, "a=1")
        rest.urlQueryParameters.add(value: "2", forKey: "b")
        XCTAssertEqual(try echo(send(.get, "/_test/echo?a=1", base: upper)).rawQuery, "a=1&b=2")
        for (port, text) in [("0", "0"), ("65536", "65536"), ("99999999999999999999", "99999999999999999999")] {
            let results = send(.get, "/x", base: "http://127.0.0.1:\(port)")
            guard case let .invalidURL(url, reason)? = results.error as? RestManager.CustomError else {
                XCTFail("port \(port): \(String(describing: results.error))")
                continue
            }
            XCTAssertEqual(url, "http://127.0.0.1:\(port)/x")
            XCTAssertEqual(reason, "the port \(text) is outside 1-65535")
        }
        XCTAssertEqual(send(.get, "/_test/status/204", base: "http://127.0.0.1:\(server.port)").statusCode, 204)
    }

    /// The port ends where the path, the query or the fragment begins: a colon in a query or fragment after a URL with
    /// no path is no port ("?t=1:0" was read as port 0 and refused).
    func testAColonInAQueryOrFragmentAfterNoPathIsNoPort() {
        for suffix in ["?t=1:0", "#t:0"] {
            let results = send(.get, suffix, base: "http://127.0.0.1:\(server.port)")
            XCTAssertNil(results.error, suffix)
            XCTAssertEqual(results.statusCode, 404, suffix)
        }
        XCTAssertEqual(server.receivedRequests.map(\.target), ["/?t=1:0", "/"])
    }

    /// Infinite, NaN and negative delays are clamped: the first retry used to trap (a random delay from an infinite range).
    func testRetryPoliciesWithAbsurdDelaysNeverTrap() {
        let failed = RestManager.Results(withError: RestManager.CustomError.transport(URLError(.networkConnectionLost)))
        let cases: [(TimeInterval, TimeInterval, ClosedRange<TimeInterval>)] = [
            (.infinity, .infinity, 5e8...1e9), (.nan, .nan, 0...0), (.nan, 30, 0...0), (1, .nan, 0...0),
            (.greatestFiniteMagnitude, .infinity, 5e8...1e9), (1, .infinity, 0.5...1)
        ]
        for (initial, maximum, range) in cases {
            let policy = RestManager.RetryPolicy(maximumRetries: .max, initialDelay: initial, maximumDelay: maximum)
            for retry in [1, 2, 64, 1000, Int.max] {
                let delay = policy.delay(beforeRetry: retry, after: failed, method: .get) ?? -1
                XCTAssertTrue(retry > 1 || range.contains(delay), "initial \(initial), maximum \(maximum), retry \(retry): \(delay)")
                XCTAssertTrue((0...1e9).contains(delay), "initial \(initial), maximum \(maximum), retry \(retry): \(delay)")
            }
        }
        XCTAssertNil(RestManager.RetryPolicy(maximumRetries: .min).delay(beforeRetry: 1, after: failed, method: .get))
        // Over a socket: the infinite delay ends after the deadline, so the 503 is delivered at once.
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: .max, initialDelay: .infinity, maximumDelay: .infinity)
        server.enqueue(MockServer.Response(status: 503))
        XCTAssertEqual(send(.get, "/x").statusCode, 503)
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testTimeoutsRedirectLimitsAndSizeLimitsAtTheirExtremes() {
        for timeout in [0, -1, TimeInterval.nan, .infinity, -TimeInterval.infinity] {
            rest.timeoutInterval = timeout
            guard case .invalidTimeout? = send(.get, "/_test/echo").error as? RestManager.CustomError else {
                return XCTFail("timeout \(timeout) was not refused")
            }
        }
        rest.timeoutInterval = .greatestFiniteMagnitude
        XCTAssertEqual(send(.get, "/_test/status/204").statusCode, 204)
        rest.timeoutInterval = 10
        rest.maximumRedirects = .min
        guard case .tooManyRedirects(_, 0)? = send(.get, "/_test/redirect/302?to=/_test/echo").error as? RestManager.CustomError else {
            return XCTFail("a negative limit follows no redirect")
        }
        rest.maximumRedirects = .max
        XCTAssertEqual(send(.get, "/_test/redirect/302?to=/_test/status/204").statusCode, 204)
        for limit in [Int.max, Int(Int32.max) + 1] {
            rest.maximumResponseSize = limit
            server.stub(path: "/huge") { _ in MockServer.Response(status: 200, headers: [("X-Filler", "a")], body: Data("abc".utf8)) }
            XCTAssertEqual(send(.get, "/huge").data, Data("abc".utf8))
        }
        rest.maximumResponseSize = .min
        guard case .responseTooLarge(0)? = send(.get, "/huge").error as? RestManager.CustomError else { return XCTFail("a negative limit is 0") }
        let many = RestManager(maximumConnectionsPerHost: .max)
        XCTAssertEqual(send(.get, "/_test/status/204", using: many).statusCode, 204)
        let none = RestManager(maximumConnectionsPerHost: .min)
        XCTAssertEqual(send(.get, "/_test/status/204", using: none).statusCode, 204)
    }

    /// A server's `Content-Length: 30000000000` with a limit of `Int.max` reserved 30 GB and trapped.
    func testAHugeAnnouncedLengthReservesNothingUpFront() throws {
        rest.maximumResponseSize = .max
        server.stub(path: "/liar") { _ in
            var response = MockServer.Response(status: 200, headers: [("Content-Length", "30000000000")], body: Data("abc".utf8))
            response.fault = .closeMidBody
            return response
        }
        let results = send(.get, "/liar")
        XCTAssertNotNil(results.error, "the body was cut short")
    }

    /// A URL longer than 1,000,000 bytes is refused before anything is sent, saying so (libcurl failed it as "Out of
    /// memory" past 1 MiB of request head, and as error -1000 past 8 MB); one of exactly 1,000,000 bytes goes out.
    func testAURLLongerThanAMillionBytesIsRefusedClearly() {
        let prefix = url("/_test/echo?q=").absoluteString
        let exact = String(repeating: "a", count: 1_000_000 - prefix.utf8.count)
        XCTAssertEqual(send(.get, "/_test/echo?q=" + exact).statusCode, 431, "sent: the mock refuses so long a head")
        for extra in [1, 100_000, 8_000_000] {
            let results = send(.get, "/_test/echo?q=" + exact + String(repeating: "a", count: extra))
            guard case .invalidURL(let shown, let reason)? = results.error as? RestManager.CustomError else {
                return XCTFail("\(extra): \(String(describing: results.error))")
            }
            XCTAssertEqual(shown, String((prefix + exact).prefix(60)) + "…")
            XCTAssertEqual(reason, "it is longer than 1,000,000 bytes")
        }
        // Query parameters count: a URL of exactly 1,000,000 bytes before them is refused with them.
        var request = RestManager.Request(url: url("/_test/echo?q=" + exact))
        request.queryParameters.add(value: "1", forKey: "p")
        guard case .invalidURL(_, let reason)? = send(request).error as? RestManager.CustomError else {
            return XCTFail("the query parameters made it too long")
        }
        XCTAssertEqual(reason, "it is longer than 1,000,000 bytes")
        // A password past the 60 characters shown is not printed in part.
        let token = String(repeating: "s3cr3t", count: 20)
        let secret = "http://user:\(token)@127.0.0.1:\(server.port)/_test/echo?q=" + exact
        let text = send(RestManager.Request(url: URL(string: secret)!)).error.map { "\($0)" } ?? "no error"
        XCTAssertTrue(text.hasPrefix("Invalid URL 'http://user:<redacted>@127.0.0.1:\(server.port)/_test/echo?q=aaa"), text)
        XCTAssertTrue(text.hasSuffix("aaa…': it is longer than 1,000,000 bytes."), text)
        XCTAssertFalse(text.contains("s3cr3t"), text)
    }
}
