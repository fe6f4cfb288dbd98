import Foundation
import XCTest
import RestManager
import MockServer

final class MethodAndHeaderTests: MockServerTestCase {
    func testEveryMethodGoesOutUpperCase() throws {
        for method in RestManager.HttpMethod.allCases where method != .head {
            let results = send(method, "/_test/echo")
            XCTAssertEqual(results.response?.httpStatusCode, 200, "\(method)")
            XCTAssertEqual(server.receivedRequests.last?.method, method.name)
        }
        XCTAssertEqual(send(.head, "/_test/echo").response?.httpStatusCode, 200)
        XCTAssertEqual(server.receivedRequests.last?.method, "HEAD")
        XCTAssertEqual(RestManager.HttpMethod.patch.rawValue, "patch")  // the tutorial's raw values stay
    }

    func testRequestHeaderLookupsIgnoreCase() throws {
        rest.requestHttpHeaders.add(value: "one", forKey: "X-Custom")
        rest.requestHttpHeaders.add(value: "two", forKey: "x-custom")
        XCTAssertEqual(rest.requestHttpHeaders.value(forKey: "X-CUSTOM"), "two")
        XCTAssertEqual(rest.requestHttpHeaders.totalItems(), 1)
        let echo = try echo(send(.get, "/_test/echo"))
        XCTAssertEqual(echo.headers.filter { $0[0].lowercased() == "x-custom" }.map { $0[1] }, ["two"])
    }

    /// A header appended twice under any spelling goes out once, its values joined with ", " (RFC 9110 §5.3).
    func testARepeatedHeaderIsSentOnceWithItsValuesJoined() throws {
        rest.requestHttpHeaders.append(value: "a", forKey: "X-Multi")
        rest.requestHttpHeaders.append(value: "b", forKey: "x-multi")
        let echo = try echo(send(.get, "/_test/echo"))
        XCTAssertEqual(echo.headers.filter { $0[0].lowercased() == "x-multi" }.map { $0[1] }, ["a, b"])
    }

    func testResponseHeadersAreReadableUnderAnySpelling() {
        let results = send(.get, "/_test/response-headers?ETag=%22v1%22&x-rate-limit=5&content-md5=abc")
        let headers = results.response?.headers
        XCTAssertEqual(headers?.value(forKey: "ETag"), "\"v1\"")
        XCTAssertEqual(headers?.value(forKey: "etag"), "\"v1\"")
        XCTAssertEqual(headers?.value(forKey: "X-Rate-Limit"), "5")
        XCTAssertEqual(headers?.value(forKey: "Content-MD5"), "abc")
    }

    func testDefaultHeadersAreSetAndCallerHeadersWin() throws {
        var echo = try echo(send(.get, "/_test/echo"))
        XCTAssertEqual(echo.header("User-Agent"), "RestManager/3.0.0")
        XCTAssertEqual(echo.header("Accept"), "*/*")
        rest.requestHttpHeaders.add(value: "application/json", forKey: "accept")
        rest.requestHttpHeaders.add(value: "MyApp/2", forKey: "user-agent")
        echo = try self.echo(send(.get, "/_test/echo"))
        XCTAssertEqual(echo.header("Accept"), "application/json")
        XCTAssertEqual(echo.header("User-Agent"), "MyApp/2")
    }

    /// The request as built says what goes out (libcurl would add `Accept: */*` on the wire anyway, URLSession on
    /// Apple platforms too): `makeURLRequest` and the cURL line show it.
    func testTheBuiltRequestCarriesTheDefaultHeaders() throws {
        let request = try rest.makeURLRequest(toURL: url("/_test/echo"), withHttpMethod: .get)
        XCTAssertEqual(request.value(forHTTPHeaderField: "Accept"), "*/*")
        XCTAssertEqual(request.value(forHTTPHeaderField: "User-Agent"), "RestManager/3.0.0")
    }

    func testALoneCROrNULInAHeaderValueIsRefused() {
        for value in ["a\rInjected: yes", "a\u{0}b"] {
            rest.requestHttpHeaders = RestManager.RestEntity()
            rest.requestHttpHeaders.add(value: value, forKey: "X-Evil")
            guard case .invalidHeader(let name, let reason)? = send(.get, "/_test/echo").error as? RestManager.CustomError else {
                XCTFail("\(value.debugDescription) was not refused")
                continue
            }
            XCTAssertEqual(name, "X-Evil")
            XCTAssertEqual(reason, "the value contains CR, LF or NUL")
        }
        XCTAssertTrue(server.receivedRequests.isEmpty)
    }

    func testHeaderInjectionIsRefusedBeforeSending() {
        for (name, value) in [("X-Evil", "a\r\nInjected: yes"), ("X-Evil", "a\nb"), ("Bad Name", "v"), ("X:Colon", "v"), ("", "v")] {
            rest.requestHttpHeaders = RestManager.RestEntity()
            rest.requestHttpHeaders.add(value: value, forKey: name)
            let results = send(.get, "/_test/echo")
            guard case .invalidHeader(let reportedName, _) = results.error as? RestManager.CustomError else {
                XCTFail("\(name): \(String(describing: results.error))"); continue
            }
            XCTAssertEqual(reportedName, name)
            XCTAssertFalse(results.error?.localizedDescription.contains("Injected") ?? true, "the value is not repeated")
        }
        XCTAssertTrue(server.receivedRequests.isEmpty)
    }

    /// Every character RFC 9110 allows in a header name (`tchar`) goes out, each symbol in a name of its own.
    func testHeaderNamesMayUseEveryTokenSymbol() throws {
        let symbols = "!#$%&'*+-.^_`|~"
        for symbol in symbols { rest.requestHttpHeaders.add(value: "1", forKey: "X\(symbol)Y") }
        let echo = try echo(send(.get, "/_test/echo"))
        XCTAssertEqual(symbols.map { echo.header("X\($0)Y") }, Array(repeating: "1", count: 15))
    }

    func testReusedManagerSendsNoBodyWithGetAfterJSONPost() throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "morpheus", forKey: "name")
        XCTAssertEqual(send(.post, "/api/users").response?.httpStatusCode, 201)
        let get = send(.get, "/api/users/2")
        XCTAssertNil(get.error)
        XCTAssertEqual(get.response?.httpStatusCode, 200)
        XCTAssertEqual(server.lastRequest(path: "/api/users/2")?.body, Data())
        XCTAssertEqual(send(.head, "/api/users/2").response?.httpStatusCode, 200)
    }

    func testHeadersThatDescribeABodyAreNotSentWithoutOne() throws {
        for (name, value) in [("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Content-Language", "en")] {
            rest.requestHttpHeaders.add(value: value, forKey: name)
        }
        rest.requestHttpHeaders.add(value: "kept", forKey: "X-Other")
        let names = try echo(send(.get, "/_test/echo")).headerNames().map { $0.lowercased() }
        XCTAssertFalse(names.contains("content-type"), "\(names)")
        XCTAssertFalse(names.contains("content-encoding"), "\(names)")
        XCTAssertFalse(names.contains("content-language"), "\(names)")
        XCTAssertTrue(names.contains("x-other"), "\(names)")
    }

    func testSequentialRequestsShareOneConnection() {
        for _ in 0..<5 { XCTAssertEqual(send(.get, "/api/users").response?.httpStatusCode, 200) }
        XCTAssertEqual(Set(server.receivedRequests.map(\.connectionID)).count, 1)
        XCTAssertEqual(server.acceptedConnectionCount, 1)
    }

    func testCookiesAreNeitherStoredNorSent() throws {
        send(.get, "/_test/set-cookie")
        let echo = try echo(send(.get, "/_test/echo"))
        XCTAssertNil(echo.header("Cookie"))
    }
}

/// A response header sent on two lines reaches the caller as Foundation joins it.
final class RepeatedResponseHeaderTests: MockServerTestCase {
    func testRepeatedResponseHeadersComeJoinedWithACommaAndASpace() {
        server.stub(path: "/multi", response: MockServer.Response(status: 200, headers: [("X-Multi", "one"), ("X-Multi", "two")]))
        let headers = send(.get, "/multi").response?.headers
        XCTAssertEqual(headers?.values(forKey: "x-multi"), ["one, two"])
        XCTAssertEqual(headers?.value(forKey: "X-Multi"), "one, two")
    }
}
