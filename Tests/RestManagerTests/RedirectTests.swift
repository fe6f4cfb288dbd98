import Foundation
import XCTest
import MockServer
import RestManager

final class RedirectTests: MockServerTestCase {
    private func postJSON(to path: String) throws -> Echo {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "v", forKey: "k")
        return try echo(send(.post, path))
    }

    func test307And308KeepMethodAndBody() throws {
        for code in [307, 308] {
            let echo = try postJSON(to: "/_test/redirect/\(code)?to=/_test/echo")
            XCTAssertEqual(echo.method, "POST", "\(code)")
            XCTAssertEqual(echo.bodyText, #"{"k":"v"}"#, "\(code)")
            XCTAssertEqual(echo.path, "/_test/echo")
        }
    }

    func test301And302TurnPostIntoGet() throws {
        for code in [301, 302] {
            let echo = try postJSON(to: "/_test/redirect/\(code)?to=/_test/echo")
            XCTAssertEqual(echo.method, "GET", "\(code)")
            XCTAssertEqual(echo.bodyData, Data())
            XCTAssertNil(echo.header("Content-Type"))
        }
    }

    func test302KeepsPutAnd303TurnsEverythingIntoGet() throws {
        rest.httpBody = Data("x".utf8)
        XCTAssertEqual(try echo(send(.put, "/_test/redirect/302?to=/_test/echo")).method, "PUT")
        XCTAssertEqual(try echo(send(.put, "/_test/redirect/303?to=/_test/echo")).method, "GET")
        XCTAssertEqual(try echo(send(.delete, "/_test/redirect/303?to=/_test/echo")).method, "GET")
        // RFC 9110 §15.4.4: a 303 makes everything a GET but HEAD, which stays a HEAD.
        XCTAssertEqual(send(.head, "/_test/redirect/303?to=/_test/echo").statusCode, 200)
        XCTAssertEqual(server.receivedRequests.last?.method, "HEAD")
    }

    /// A relative `Location` is resolved against the URL that answered with it, not the first one (RFC 9110 §10.2.2):
    /// `/a/first` → `/b/second` → `third` is `/b/third`.
    func testARelativeLocationIsResolvedAgainstTheURLThatSentIt() throws {
        server.stub("GET", path: "/a/first", response: MockServer.Response(status: 302, headers: [("Location", "/b/second")]))
        server.stub("GET", path: "/b/second", response: MockServer.Response(status: 302, headers: [("Location", "third?x=1")]))
        server.stub("GET", path: "/b/third", response: .text("b"))
        server.stub("GET", path: "/a/third", response: .text("a"))
        let results = send(.get, "/a/first")
        XCTAssertEqual(results.data, Data("b".utf8))
        XCTAssertEqual(server.receivedRequests.map(\.target), ["/a/first", "/b/second", "/b/third?x=1"])
    }

    func testSecretsAreDroppedWhenTheHostChanges() throws {
        rest.requestHttpHeaders.add(value: "Bearer secret", forKey: "Authorization")
        rest.requestHttpHeaders.add(value: "a=1", forKey: "Cookie")
        rest.requestHttpHeaders.add(value: "key", forKey: "x-api-key")
        rest.requestHttpHeaders.add(value: "stays", forKey: "X-Other")
        // Same server, other host name: 127.0.0.1 -> localhost is another origin.
        let target = "http://localhost:\(server.port)/_test/echo"
        let crossHost = try echo(send(.get, "/_test/redirect/307?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!))
        XCTAssertEqual(crossHost.header("Host"), "localhost:\(server.port)")
        XCTAssertNil(crossHost.header("Authorization"))
        XCTAssertNil(crossHost.header("Cookie"))
        XCTAssertNil(crossHost.header("x-api-key"))
        XCTAssertNil(crossHost.header("X-Other"), "an unknown header may be a key: it stays with its origin")
        let sameHost = try echo(send(.get, "/_test/redirect/307?to=/_test/echo"))
        XCTAssertEqual(sameHost.header("Authorization"), "Bearer secret")
        XCTAssertEqual(sameHost.header("x-api-key"), "key")
        XCTAssertEqual(sameHost.header("X-Other"), "stays")
    }

    func testTenHopsAreFollowedAndTheEleventhFails() throws {
        XCTAssertEqual(try echo(send(.get, "/_test/redirect-chain/9")).path, "/_test/echo")
        let results = send(.get, "/_test/redirect-chain/10")
        guard case .tooManyRedirects(_, let limit) = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(limit, 10)
        XCTAssertTrue(results.error?.localizedDescription.contains("Too many redirects") ?? false)
    }

    func testRedirectLoopEndsWithAClearError() {
        rest.maximumRedirects = 3
        let results = send(.get, "/_test/redirect-loop")
        guard case .tooManyRedirects(_, 3) = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(server.receivedRequests.count, 4)
    }

    /// A negative `maximumRedirects` is 0: the first redirect fails the call, after one request.
    func testANegativeRedirectLimitIsZero() {
        rest.maximumRedirects = -2
        XCTAssertEqual(rest.maximumRedirects, 0)
        let results = send(.get, "/_test/redirect-loop")
        guard case .tooManyRedirects(_, 0) = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testRedirectsCanBeDeliveredInsteadOfFollowed() {
        rest.followsRedirects = false
        let results = send(.get, "/_test/redirect/302?to=/elsewhere")
        XCTAssertEqual(results.response?.httpStatusCode, 302)
        XCTAssertEqual(results.response?.headers.value(forKey: "location"), "/elsewhere")
    }

    /// A redirect target is checked as a request's URL is. Before, a port out of range went to libcurl, and a scheme in
    /// capitals (which RFC 3986 §3.1 allows, and browsers follow) failed as "unsupported URL" on Linux.
    func testRedirectToANonHTTPSchemeIsRefused() {
        for target in ["file:///etc/passwd", "ftp://127.0.0.1/x", "http://127.0.0.1:70000/x", "http:///nohost"] {
            let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let results = send(.get, "/_test/redirect/302?to=\(encoded)")
            guard case let .invalidURL(url, reason)? = results.error as? RestManager.CustomError else {
                return XCTFail("\(target): \(String(describing: results.error))")
            }
            XCTAssertEqual(url, target)
            XCTAssertEqual(reason, "the redirect target is not an http(s) URL")
        }
        XCTAssertEqual(server.receivedRequests.count, 4)
        server.stub(path: "/upper") { _ in MockServer.Response(status: 200, body: Data("followed".utf8)) }
        let upper = "HTTP://127.0.0.1:\(server.port)/upper".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        XCTAssertEqual(send(.get, "/_test/redirect/302?to=\(upper)").data, Data("followed".utf8))
    }
}
