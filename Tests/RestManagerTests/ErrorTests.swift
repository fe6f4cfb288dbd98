import Foundation
import XCTest
import RestManager

final class ErrorTests: MockServerTestCase {
    private func error(for target: URL) -> RestManager.CustomError? {
        let done = expectation(description: "completed")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: target, withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 15)
        return box.value?.error as? RestManager.CustomError
    }

    func testInvalidURLsSayWhatIsWrong() throws {
        for text in ["ftp://example.com/file", "mailto:someone@example.com", "/relative/path", "http:///nohost"] {
            let target = try XCTUnwrap(URL(string: text))
            guard case .invalidURL(let reported, let reason)? = error(for: target) else { XCTFail(text); continue }
            XCTAssertEqual(reported, text)
            XCTAssertFalse(reason.isEmpty)
        }
    }

    func testErrorsDescribeThemselves() {
        let error = RestManager.CustomError.invalidHeader(name: "X-A", reason: "the value contains CR, LF or NUL")
        XCTAssertEqual(error.localizedDescription, "Invalid request header 'X-A': the value contains CR, LF or NUL.")
        XCTAssertEqual((error as Error).localizedDescription, error.errorDescription)
        XCTAssertEqual(RestManager.CustomError.failedToCreateRequest.localizedDescription, "Unable to create the URLRequest object.")
    }

    /// Each case's sentence, secrets in its URL redacted (`print(error)` goes to logs); the two that carry a platform
    /// error begin as shown and go on with Foundation's text for it.
    func testEveryCaseSaysWhatWentWrongWithSecretsRedacted() throws {
        typealias CustomError = RestManager.CustomError
        let url = try XCTUnwrap(URL(string: "https://user:pw@h.example/p?token=abc&x=1"))
        let shown = "https://user:<redacted>@h.example/p?token=<redacted>&x=1"
        let cases: [(CustomError, String)] = [
            (.invalidURL("https://h/p?key=s", reason: "r"), "Invalid URL 'https://h/p?key=<redacted>': r."),
            (.invalidTimeout(-1), "Invalid timeout -1.0: it must be a positive number of seconds."),
            (.bodyEncodingFailed("r"), "The request body could not be encoded: r."),
            (
                .timedOut(url, after: 5),
                "The request to \(shown) timed out after 5.0 s: it did not complete within timeoutInterval (the "
                    + "manager's, request's or call's: raise it to wait longer)."
            ),
            (
                .timedOut(url, after: 5, limit: .idle),
                "The request to \(shown) timed out after 5.0 s: no byte was sent or received for that long (raise the "
                    + "manager's idleTimeoutInterval to wait longer)."
            ),
            (.tooManyRedirects(url, limit: 3), "Too many redirects (more than 3) starting from \(shown)."),
            (.cancelled, "The request was cancelled."),
            (.invalidResponse, "The server's answer was not an HTTP response."),
            (.unacceptableStatusCode(503, body: Data("abc".utf8)), "The server answered with HTTP status 503 (3 bytes of body)."),
            (.emptyBody(statusCode: 204), "The answer (HTTP 204) has no body to decode."),
            (
                .responseTooLarge(limit: 10),
                "The response body is larger than 10 bytes; raise RestManager.maximumResponseSize (nil for no limit) to "
                    + "accept it."
            ),
            (
                .unexpectedRedirect(url),
                "URLSession followed a redirect to \(shown) without asking RestManager; please report this."
            ),
            (.authenticationFailed(reason: "r"), "Authentication failed: r."),
            (.fileAccessFailed(URL(fileURLWithPath: "/tmp/f"), reason: "r"), "The file '/tmp/f' cannot be used: r.")
        ]
        for (error, sentence) in cases {
            XCTAssertEqual(error.description, sentence)
            XCTAssertEqual(error.localizedDescription, sentence)
        }
        XCTAssertTrue(CustomError.transport(URLError(.notConnectedToInternet)).description.hasPrefix("Network error -1009: "))
        let decoding = CustomError.decodingFailed(CocoaError(.coderValueNotFound)).description
        XCTAssertTrue(decoding.hasPrefix("The body could not be decoded ("), decoding)
        XCTAssertTrue(decoding.hasSuffix(").") && !decoding.contains(".."), decoding)
    }

    /// `isCancellation` is true for `.cancelled` only: a caller that skips its error message for a cancel must still see
    /// a timeout or a network error.
    func testOnlyACancelIsACancellation() throws {
        let url = try XCTUnwrap(URL(string: "http://127.0.0.1/"))
        XCTAssertTrue(RestManager.CustomError.cancelled.isCancellation)
        XCTAssertFalse(RestManager.CustomError.timedOut(url, after: 1).isCancellation)
        XCTAssertFalse(RestManager.CustomError.transport(URLError(.cancelled)).isCancellation)
        XCTAssertFalse(RestManager.CustomError.invalidResponse.isCancellation)
    }

    /// A header name that is not a token is named in the error with its control characters escaped; a space, which is
    /// printable, stays a space. Nothing is sent.
    func testAnInvalidHeaderNameIsShownWithItsControlCharactersEscaped() {
        rest.requestHttpHeaders.add(value: "1", forKey: "Bad Name\u{1}\u{7F}~")
        let reason = "a header name may contain only letters, digits and !#$%&'*+-.^_`|~"
        XCTAssertEqual(
            send(.get, "/api/users").error?.localizedDescription,
            "Invalid request header 'Bad Name\\u{1}\\u{7f}~': \(reason).")
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    func testConnectionRefusedKeepsTheURLError() throws {
        let port = server.port
        server.stop()
        guard case .transport(let urlError)? = error(for: URL(string: "http://127.0.0.1:\(port)/api/users")!) else {
            return XCTFail("expected a transport error")
        }
        XCTAssertEqual(urlError.code, .cannotConnectToHost)
    }

    func testUnresolvableHostIsATransportError() {
        guard case .transport(let urlError)? = error(for: URL(string: "http://no-such-host.invalid/")!) else {
            return XCTFail("expected a transport error")
        }
        XCTAssertEqual(urlError.code, .cannotFindHost)
    }

    func testHTTPErrorStatusIsNotAnErrorButIsNotSuccess() {
        let results = send(.get, "/api/users/23")
        XCTAssertNil(results.error)
        XCTAssertEqual(results.response?.httpStatusCode, 404)
        XCTAssertFalse(results.isSuccess)
        XCTAssertEqual(results.data, Data("{}".utf8))
        XCTAssertThrowsError(try results.validate()) { error in
            guard case .unacceptableStatusCode(404, let body) = error as? RestManager.CustomError else { return XCTFail("\(error)") }
            XCTAssertEqual(body, Data("{}".utf8))
        }
    }

    /// Success is 2xx exactly: 299 is one, 300 (Multiple Choices, not followed: it has no Location here) is not.
    func testOnlyA2xxStatusIsASuccess() async throws {
        for (status, success) in [(200, true), (226, true), (299, true), (300, false)] {
            server.stub("GET", path: "/status", response: .text("s", status: status))
            let results = send(.get, "/status")
            XCTAssertEqual(results.statusCode, status)
            XCTAssertEqual(results.isSuccess, success, "\(status)")
            do {
                let data = try await rest.data(fromURL: url("/status"))
                XCTAssertTrue(success, "\(status) read as a success")
                XCTAssertEqual(data, Data("s".utf8))
            } catch RestManager.CustomError.unacceptableStatusCode(let code, _) {
                XCTAssertFalse(success, "\(status) read as a failure")
                XCTAssertEqual(code, status)
            }
        }
    }

    func testBrokenResponsesAreTransportErrors() {
        for path in ["/_test/close-before-response", "/_test/close-mid-body", "/_test/garbage"] {
            let results = send(.get, path)
            guard case .transport = results.error as? RestManager.CustomError else {
                XCTFail("\(path): \(String(describing: results.error))"); continue
            }
        }
    }

    func testServerErrorsArriveAsResponses() {
        for code in [500, 503] {
            XCTAssertEqual(send(.get, "/_test/status/\(code)").response?.httpStatusCode, code)
        }
    }
}
