import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// `Response.link(_:)` reads RFC 8288 `Link` headers; `pages(_:)` gives every page of a paginated resource.
final class PaginationTests: MockServerTestCase {
    private func response(link: String?, url: String = "https://api.example/items?page=2") -> RestManager.Response {
        let http = HTTPURLResponse(
            url: URL(string: url)!, statusCode: 200, httpVersion: "HTTP/1.1",
            headerFields: link.map { ["Link": $0] } ?? [:])
        return RestManager.Response(fromURLResponse: http)
    }

    private func collect(_ pages: RestManager.Pages) async throws -> [String] {
        var bodies: [String] = []
        for try await page in pages { bodies.append(String(decoding: page.data ?? Data(), as: UTF8.self)) }
        return bodies
    }

    // MARK: - Link (RFC 8288)

    func testLinkReadsEachFormRFC8288Allows() {
        let two = #"<https://api.example/items?page=3>; rel="next", <https://api.example/items?page=1>; rel="first""#
        XCTAssertEqual(response(link: two).link("next")?.absoluteString, "https://api.example/items?page=3")
        XCTAssertEqual(response(link: two).link("first")?.absoluteString, "https://api.example/items?page=1")
        XCTAssertNil(response(link: two).link("prev"))
        let several = #"<https://api.example/items?page=1>; rel="prev first""#
        XCTAssertEqual(response(link: several).link("first")?.absoluteString, "https://api.example/items?page=1")
        XCTAssertEqual(response(link: several).link("PREV")?.absoluteString, "https://api.example/items?page=1")
        XCTAssertEqual(response(link: "<https://a.example/n>; REL=Next").link("next")?.absoluteString, "https://a.example/n")
        XCTAssertEqual(response(link: "</items?page=3>; rel=next").link("next")?.absoluteString, "https://api.example/items?page=3")
        XCTAssertEqual(response(link: "<page4>;rel=next").link("next")?.absoluteString, "https://api.example/page4")
        let quoted = #"<https://a.example/1>; title="a, b; rel=next"; rel="last", <https://a.example/2>; rel="next""#
        XCTAssertEqual(response(link: quoted).link("next")?.absoluteString, "https://a.example/2")
        XCTAssertEqual(response(link: quoted).link("last")?.absoluteString, "https://a.example/1")
        let comma = #"<https://a.example/x?ids=1,2>; rel="next""#
        XCTAssertEqual(response(link: comma).link("next")?.absoluteString, "https://a.example/x?ids=1,2")
        XCTAssertEqual(
            response(link: #"<https://a.example/1>; rel="next"; rel="last""#).link("last"), nil,
            "only the first rel counts (§3.3)")
    }

    func testGarbageLinkHeadersGiveNil() {
        let garbage = [
            "", "next", #"rel="next""#, "<https://a.example/", "<<<;;;rel=", ">; rel=next", "<https://a.example/>; rel",
            "<https://a.example/>; rel=", "<https://a.example/>; relation=next", String(repeating: "<", count: 10_000),
            String(repeating: #"<a>; title=""#, count: 2_001), String(repeating: "<a>;", count: 5_000) + " rel"
        ]
        for text in garbage { XCTAssertNil(response(link: text).link("next"), String(text.prefix(40))) }
        XCTAssertNil(response(link: nil).link("next"))
    }

    /// Two `Link` fields in one answer (Foundation joins them) and a relative target resolved against the URL that
    /// answered (after a redirect, the redirect's target).
    func testRepeatedLinkFieldsAndARedirectedAnswerOnTheWire() throws {
        server.stub(
            "GET", path: "/listed",
            response: MockServer.Response(
                status: 200, headers: [("Link", #"<first>; rel="first""#), ("Link", #"<../other/next?p=2>; rel="next""#)],
                body: Data("[]".utf8)))
        let results = send(.get, "/_test/redirect/302?to=/listed")
        XCTAssertEqual(results.response?.link("next"), url("/other/next?p=2"))
        XCTAssertEqual(results.response?.link("first"), url("/first"))
    }

    // MARK: - Pages

    func testEveryPageByLinkHeadersInOrder() async throws {
        let bodies = try await collect(rest.pages(RestManager.Request(url: url("/_test/pages/3"))))
        XCTAssertEqual(bodies, (1...3).map { #"{"page":\#($0),"total_pages":3}"# })
        XCTAssertEqual(server.receivedRequests.map(\.target), ["/_test/pages/3", "/_test/pages/3?page=2", "/_test/pages/3?page=3"])
    }

    /// reqres.in pages by `page` and `total_pages` in the body: a `next` closure says what comes after each page.
    func testEveryPageByANextClosure() async throws {
        struct UserPage: Decodable {
            let page: Int
            let totalPages: Int
            let data: [User]
            struct User: Decodable { let id: Int }
        }
        var first = RestManager.Request(url: url("/api/users"))
        first.headers.add(value: "reqres-free-v1", forKey: "x-api-key")
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        var ids: [Int] = []
        let pages = rest.pages(first) { request, page in
            let decoded = try page.decode(UserPage.self, using: decoder)
            guard decoded.page < decoded.totalPages else { return nil }
            var next = request
            next.queryParameters.add(value: "\(decoded.page + 1)", forKey: "page")
            return next
        }
        for try await page in pages { ids += try page.decode(UserPage.self, using: decoder).data.map(\.id) }
        XCTAssertEqual(ids, Array(1...12))
        XCTAssertEqual(server.receivedRequests.map(\.target), ["/api/users", "/api/users?page=2"])
    }

    func testMaximumPagesBoundsTheSequence() async throws {
        let bodies = try await collect(rest.pages(RestManager.Request(url: url("/_test/pages/10")), maximumPages: 4))
        XCTAssertEqual(bodies.count, 4)
        XCTAssertEqual(server.receivedRequests.count, 4)
        let none = try await collect(rest.pages(RestManager.Request(url: url("/_test/pages/10")), maximumPages: -1))
        XCTAssertEqual(none, [])
        XCTAssertEqual(server.receivedRequests.count, 4)
    }

    func testALoopEndsWithPaginationLoop() async throws {
        server.stub("GET", path: "/a", response: MockServer.Response(status: 200, headers: [("Link", "</b>; rel=next")], body: Data("a".utf8)))
        server.stub("GET", path: "/b", response: MockServer.Response(status: 200, headers: [("Link", "</a>; rel=next")], body: Data("b".utf8)))
        var bodies: [String] = []
        do {
            for try await page in rest.pages(RestManager.Request(url: url("/a"))) {
                bodies.append(String(decoding: page.data ?? Data(), as: UTF8.self))
            }
            XCTFail("no loop found")
        } catch let loop as RestManager.PaginationLoop {
            XCTAssertEqual(loop.url, url("/a"))
            XCTAssertEqual(loop.description, "The next page, \(url("/a").absoluteString), was given already: the pagination loops.")
        }
        XCTAssertEqual(bodies, ["a", "b"])
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    func testANon2xxPageThrowsItsStatus() async throws {
        server.stub("GET", path: "/ok", response: MockServer.Response(status: 200, headers: [("Link", "</fails>; rel=next")], body: Data("ok".utf8)))
        server.stub("GET", path: "/fails", response: MockServer.Response(status: 500, body: Data("down".utf8)))
        var bodies: [String] = []
        do {
            for try await page in rest.pages(RestManager.Request(url: url("/ok"))) {
                bodies.append(String(decoding: page.data ?? Data(), as: UTF8.self))
            }
            XCTFail("no error")
        } catch RestManager.CustomError.unacceptableStatusCode(let status, let body) {
            XCTAssertEqual(status, 500)
            XCTAssertEqual(body, Data("down".utf8))
        }
        XCTAssertEqual(bodies, ["ok"])
    }

    /// Each page goes through the whole pipeline: the retry policy retries a 503 page.
    func testEachPageGoesThroughTheInterceptorsAndTheRetryPolicy() async throws {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0)
        rest.interceptors.append(NoSilentChangeTests.Adapting { $0.setValue("yes", forHTTPHeaderField: "X-Adapted") })
        server.enqueue(MockServer.Response(status: 503))
        let bodies = try await collect(rest.pages(RestManager.Request(url: url("/_test/pages/2"))))
        XCTAssertEqual(bodies.count, 2)
        XCTAssertEqual(server.receivedRequests.map { $0.header("X-Adapted") }, ["yes", "yes", "yes"])
    }

    /// Cancelling the task that reads the pages ends the page under way at once, with `.cancelled`.
    func testCancellingTheReadingTaskEndsItAtOnce() async throws {
        server.stub(
            "GET", path: "/slow-list",
            response: MockServer.Response(status: 200, headers: [("Link", "</_test/delay?seconds=30>; rel=next")], body: Data("1".utf8)))
        let rest = self.rest!
        let first = url("/slow-list")
        let reading = Task { () -> String in
            var count = 0
            do {
                for try await _ in rest.pages(RestManager.Request(url: first)) { count += 1 }
                return "ended after \(count)"
            } catch RestManager.CustomError.cancelled {
                return "cancelled after \(count)"
            } catch {
                return "\(error)"
            }
        }
        await serverReceived(2)
        let cancelled = Date()
        reading.cancel()
        let outcome = await reading.value
        XCTAssertEqual(outcome, "cancelled after 1")
        XCTAssertLessThan(Date().timeIntervalSince(cancelled), 10)
    }

    /// A next page on another origin goes without the credential: no token, no manager headers, no interceptors;
    /// the request's own headers only if they never hold a secret.
    func testANextPageOnAnotherOriginGoesWithoutTheCredential() async throws {
        let elsewhere = "http://localhost:\(server.port)/_test/echo"
        server.stub(
            "GET", path: "/home", response: MockServer.Response(status: 200, headers: [("Link", "<\(elsewhere)>; rel=next")], body: Data("home".utf8))
        )
        rest.authenticator = RestManager.Authenticator(credential: .init(accessToken: "secret")) { _ in .init(accessToken: "new") }
        rest.requestHttpHeaders.add(value: "key", forKey: "X-Api-Key")
        var first = RestManager.Request(url: url("/home"))
        first.headers.add(value: "en", forKey: "Accept-Language")
        first.headers.add(value: "mine", forKey: "X-Session")
        var pages: [RestManager.Results] = []
        for try await page in rest.pages(first) { pages.append(page) }
        XCTAssertEqual(pages.count, 2)
        let sent = server.receivedRequests
        XCTAssertEqual(sent.map { $0.header("Authorization") }, ["Bearer secret", nil])
        XCTAssertEqual(sent.map { $0.header("X-Api-Key") }, ["key", nil])
        XCTAssertEqual(sent.map { $0.header("X-Session") }, ["mine", nil])
        XCTAssertEqual(sent.map { $0.header("Accept-Language") }, ["en", "en"])
        XCTAssertEqual(sent.last?.header("Host"), "localhost:\(server.port)")
    }
}
