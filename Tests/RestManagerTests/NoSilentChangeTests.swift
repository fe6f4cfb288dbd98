import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// A request goes as the caller wrote it, or fails with a typed error saying what to change: never changed unseen.
final class NoSilentChangeTests: MockServerTestCase {
    /// Makes each request what `change` makes of it.
    struct Adapting: RestManager.Interceptor {
        let change: @Sendable (inout URLRequest) -> Void
        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            var adapted = request
            change(&adapted)
            return adapted
        }
    }

    private var repeatedTags: RestManager.RestEntity {
        var tags = RestManager.RestEntity()
        tags.append(value: "a", forKey: "X-Tag")
        tags.append(value: "b", forKey: "X-Tag")
        return tags
    }

    func testRepeatedHeaderValuesAreAllSent() throws {
        rest.requestHttpHeaders = repeatedTags
        XCTAssertEqual(rest.requestHttpHeaders.values(forKey: "x-tag"), ["a", "b"])
        XCTAssertEqual(try echo(send(.get, "/_test/echo")).header("X-Tag"), "a, b")
        rest.requestHttpHeaders = RestManager.RestEntity()
        var request = RestManager.Request(url: url("/_test/echo"))
        request.headers = repeatedTags
        XCTAssertEqual(request.headers.values(forKey: "X-TAG"), ["a", "b"])
        XCTAssertEqual(try echo(send(request)).header("X-Tag"), "a, b")
    }

    func testAJSONBodyRefusesARepeatedKeyAndAFormKeepsBoth() throws {
        var request = RestManager.Request(.post, url: url("/_test/echo"))
        request.bodyParameters.append(value: "a", forKey: "tag")
        request.bodyParameters.append(value: "b", forKey: "tag")
        let refused = send(request).error as? RestManager.CustomError
        XCTAssertEqual(
            refused?.description,
            "The request body could not be encoded: the JSON body would name 'tag' twice; use a form body for "
                + "repeated keys.")
        XCTAssertEqual(server.receivedRequests.count, 0)
        request.headers.add(value: "application/x-www-form-urlencoded", forKey: "Content-Type")
        XCTAssertEqual(try echo(send(request)).bodyText, "tag=a&tag=b")
    }

    func testAnInterceptorsMethodMustBeAToken() {
        rest.interceptors = [Adapting { $0.httpMethod = "GET /smuggle HTTP/1.1\r\nX:" }]
        let error = send(.get, "/_test/echo").error as? RestManager.CustomError
        XCTAssertEqual(
            error?.description,
            #"Invalid request header 'Method': the method 'GET /smuggle HTTP/1.1\u{d}\u{a}X:' an interceptor set is "#
                + "not an RFC 9110 token.")
        rest.interceptors = [Adapting { $0.httpMethod = "" }]
        guard case .invalidHeader(name: "Method", _)? = send(.get, "/_test/echo").error as? RestManager.CustomError
        else { return XCTFail("an empty method went out") }
        XCTAssertEqual(server.receivedRequests.count, 0)
        rest.interceptors = [Adapting { $0.httpMethod = "PROPFIND" }]
        XCTAssertEqual(try echo(send(.get, "/_test/echo")).method, "PROPFIND")
    }

    func testAnInterceptorsGETWithABodyFailsNamingBoth() {
        rest.interceptors = [Adapting { $0.httpBody = Data("x".utf8) }]
        for method in [RestManager.HttpMethod.get, .head] {
            let error = send(method, "/_test/echo").error as? RestManager.CustomError
            XCTAssertEqual(
                error?.description,
                "The request body could not be encoded: a \(method.name) request cannot carry the body an interceptor "
                    + "gave it.")
        }
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// Refused as a caller's is. (On Linux `setValue(_:forHTTPHeaderField:)` itself ignores such a value, inside the
    /// interceptor, before the library sees the request: checked below, so that a change there shows.)
    func testAnInterceptorsHeaderWithALineBreakIsRefused() {
        #if canImport(FoundationNetworking)
        var dropped = URLRequest(url: url("/"))
        dropped.setValue("a\r\nX-Injected: 1", forHTTPHeaderField: "X-Note")
        XCTAssertNil(dropped.allHTTPHeaderFields?["X-Note"])
        #endif
        rest.interceptors = [Adapting { $0.allHTTPHeaderFields?["X-Note"] = "a\r\nX-Injected: 1" }]
        let error = send(.get, "/_test/echo").error as? RestManager.CustomError
        guard case .invalidHeader(name: "X-Note", let reason)? = error else {
            return XCTFail("\(String(describing: error)); sent: \(server.receivedRequests.map(\.headers))")
        }
        XCTAssertEqual(reason, "the value contains CR, LF or NUL")
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// `isCancelled` is true exactly when the completion got `.cancelled`, however `cancel()` and the answer race.
    func testIsCancelledMeansTheCompletionGotCancelled() {
        let rounds = 200
        let mismatches = ResultBox<String>()
        let group = DispatchGroup()
        for round in 0..<rounds {
            group.enter()
            let handleBox = ResultBox<RestManager.RequestHandle>()
            let handle = rest.makeRequest(toURL: url("/_test/status/200"), withHttpMethod: .get) { results in
                // Read after `cancel()` returned, when it raced: the answer went out, so it must not say cancelled.
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) {
                    let cancelled = (results.error as? RestManager.CustomError)?.isCancellation == true
                    if handleBox.value?.isCancelled != cancelled { mismatches.set("round \(round)") }
                    group.leave()
                }
            }
            handleBox.set(handle)
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(round * 20)) { handle.cancel() }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(mismatches.all, [])
    }

    func testLastEventIDFollowsARedirectToAnotherOrigin() throws {
        var request = RestManager.Request(url: url("/_test/redirect/302?to="))
        let target = "http://localhost:\(server.port)/_test/echo"
        request.url = url("/_test/redirect/302?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        request.headers.add(value: "41", forKey: "Last-Event-ID")
        request.headers.add(value: "k", forKey: "X-Api-Key")
        let echoed = try echo(send(request))
        XCTAssertEqual(echoed.header("Host"), "localhost:\(server.port)")
        XCTAssertEqual(echoed.header("Last-Event-ID"), "41")
        XCTAssertNil(echoed.header("X-Api-Key"))
    }
}
