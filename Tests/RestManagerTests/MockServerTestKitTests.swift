import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// MockServer as a test kit: stubs, queued answers, taken requests, faults.
final class MockServerTestKitTests: MockServerTestCase {
    func testQueuedAnswersComeFirstThenTheLatestMatchingStubThenReqres() throws {
        server.stub(path: "/api/users/2", response: .json(#"{"stub":1}"#))
        server.stub("GET", path: "/api/users/*", response: .json(#"{"stub":2}"#))
        server.enqueue(.text("queued", status: 202))
        var results = send(.get, "/api/users/2")
        XCTAssertEqual(results.statusCode, 202)
        XCTAssertEqual(results.data, Data("queued".utf8))
        XCTAssertEqual(results.response?.headers.value(forKey: "Content-Type"), "text/plain; charset=utf-8")
        results = send(.get, "/api/users/2")
        XCTAssertEqual(results.data, Data(#"{"stub":2}"#.utf8), "the latest matching stub wins")
        XCTAssertEqual(send(.post, "/api/users/2").data, Data(#"{"stub":1}"#.utf8), "the GET stub does not match a POST")
        XCTAssertEqual(send(.get, "/api/users/3").data, Data(#"{"stub":2}"#.utf8), "prefix match")
        XCTAssertEqual(send(.get, "/api/unknown/2").statusCode, 200, "reqres still answers the rest")
        XCTAssertTrue(String(decoding: send(.get, "/api/unknown/2").data ?? Data(), as: UTF8.self).contains("fuchsia rose"))
        server.removeAllStubs()
        XCTAssertTrue(String(decoding: send(.get, "/api/users/2").data ?? Data(), as: UTF8.self).contains("Janet"))
        // Queued answers go too.
        server.enqueue(.text("queued", status: 202))
        server.removeAllStubs()
        XCTAssertEqual(send(.get, "/api/users/2").statusCode, 200)
    }

    /// A method sent in lower case (FoundationNetworking sends `httpMethod` verbatim on Linux; Apple platforms upper-case
    /// the standard ones) matches a stub for it, so an app's test passes on both.
    func testAStubMatchesAMethodSentInLowerCase() throws {
        server.stub("GET", path: "/kit/method", response: .text("stubbed"))
        let connection = try RawClient(port: server.port)
        connection.send("get /kit/method HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let answer = connection.readUntilClosed().text
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 ") && answer.hasSuffix("\r\n\r\nstubbed"), answer)
    }

    /// The fault that answers a client's silent resend (a reused connection closed before any byte) answers only that
    /// request sent again: another request after it gets its own answer.
    func testARepeatedFaultAnswersOnlyTheSameRequest() throws {
        server.stub("GET", path: "/kit/other", response: .text("other"))
        let connection = try RawClient(port: server.port)
        connection.send("GET /api/users/2 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(connection.readResponses(1).count, 1, "the connection is now a reused one")
        var fault = MockServer.Response()
        fault.fault = .closeWithoutResponse
        server.enqueue(fault)
        connection.send("GET /kit/fault HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(connection.readUntilClosed().text, "", "closed without an answer")
        let next = try RawClient(port: server.port)
        next.send("GET /kit/other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let answer = next.readUntilClosed().text
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 ") && answer.hasSuffix("other"), answer)
    }

    /// A stub path without its leading slash is read with one (before, it never matched, and the app under test got
    /// reqres' 404 with no hint why); `*` alone still matches every path.
    func testAStubPathWithoutItsSlashMatches() {
        server.stub(path: "greeting", response: .text("hello"))
        server.stub("POST", path: "*", response: .text("any", status: 201))
        XCTAssertEqual(send(.get, "/greeting").data, Data("hello".utf8))
        XCTAssertEqual(send(.post, "/whatever/else").statusCode, 201)
    }

    func testQueuedAnswersGoInOrderToAnyPath() {
        for status in [201, 202, 203] { server.enqueue(MockServer.Response(status: status)) }
        XCTAssertEqual(["/a", "/b/c", "/api/users"].map { send(.get, $0).statusCode }, [201, 202, 203])
        XCTAssertEqual(send(.get, "/api/users/1").statusCode, 200)
    }

    func testJSONFromAnEncodableValue() throws {
        struct User: Encodable { let id: Int; let name: String }
        server.stub(path: "/v1/me", response: .json(User(id: 7, name: "Ann"), status: 201))
        let results = send(.get, "/v1/me")
        XCTAssertEqual(results.statusCode, 201)
        XCTAssertEqual(results.data, Data(#"{"id":7,"name":"Ann"}"#.utf8))
        XCTAssertEqual(results.response?.headers.value(forKey: "content-type"), "application/json; charset=utf-8")
    }

    func testAHandlerSeesTheRequestAndHeadersGoAsGiven() throws {
        server.stub("POST", path: "/v1/echo-length") { request in
            MockServer.Response(
                status: 200, headers: [("X-Length", "\(request.body.count)"), ("X-Method", request.method)],
                body: request.body)
        }
        rest.httpBody = Data("hello".utf8)
        let results = send(.post, "/v1/echo-length")
        XCTAssertEqual(results.response?.headers.value(forKey: "X-Length"), "5")
        XCTAssertEqual(results.response?.headers.value(forKey: "X-Method"), "POST")
        XCTAssertEqual(results.data, Data("hello".utf8))
    }

    /// Date is one field: a stub's own (a server whose clock is off, for a cache's `Expires` minus `Date`) is the only
    /// one sent; before, the mock's came first and Foundation joined the two into an unreadable value.
    func testAStubsOwnDateReplacesTheMocks() throws {
        server.stub(path: "/dated", response: MockServer.Response(status: 200, headers: [("Date", "Sun, 06 Nov 1994 08:49:37 GMT")]))
        server.stub(path: "/undated", response: .text("now"))
        XCTAssertEqual(send(.get, "/dated").response?.headers.values(forKey: "Date"), ["Sun, 06 Nov 1994 08:49:37 GMT"])
        let now = try XCTUnwrap(send(.get, "/undated").response?.headers.value(forKey: "Date"))
        XCTAssertEqual(now.filter { $0 == "," }.count, 1, "one IMF-fixdate: \(now)")
    }

    func testTakeRequestReturnsRequestsInArrivalOrderThenNil() throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "neo", forKey: "name")
        send(.post, "/api/users?x=1")
        rest.clearParameters()
        send(.get, "/api/users/2")
        let first = try XCTUnwrap(server.takeRequest(timeout: 1))
        XCTAssertEqual(first.method, "POST")
        XCTAssertEqual(first.target, "/api/users?x=1")
        XCTAssertEqual(first.header("content-type"), "application/json")
        XCTAssertEqual(first.body, Data(#"{"name":"neo"}"#.utf8))
        XCTAssertEqual(server.takeRequest(timeout: 1)?.target, "/api/users/2")
        let started = Date()
        XCTAssertNil(server.takeRequest(timeout: 0.2))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.15)
    }

    func testTakeRequestWaitsForARequestStillOnItsWay() throws {
        let done = expectation(description: "answered")
        rest.makeRequest(toURL: url("/api/users?delay=0.2"), withHttpMethod: .get) { _ in done.fulfill() }
        XCTAssertEqual(server.takeRequest(timeout: 5)?.path, "/api/users")
        wait(for: [done], timeout: 10)
    }

    func testChunkedStubsGoInChunksAndOthersGetAContentLength() throws {
        let body = Data((0..<10_000).map { UInt8($0 % 256) })
        server.stub(path: "/chunked", response: MockServer.Response(status: 200, headers: [("Transfer-Encoding", "chunked")], body: body))
        server.stub(path: "/plain", response: MockServer.Response(body: Data("abc".utf8)))
        let client = try RawClient(port: server.port)
        client.send("GET /chunked HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let raw = client.readUntilClosed().text
        XCTAssertTrue(raw.contains("Transfer-Encoding: chunked\r\n") && !raw.lowercased().contains("content-length"), raw)
        XCTAssertTrue(raw.contains("\r\n1000\r\n"), "several chunks of 4 KiB")
        XCTAssertEqual(send(.get, "/chunked").data, body)
        let plain = try RawClient(port: server.port)
        plain.send("GET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(plain.readUntilClosed().text.contains("Content-Length: 3\r\n"))
    }

    func testDelayAndThrottle() throws {
        var slow = MockServer.Response.text("x")
        slow.delay = 0.3
        server.stub(path: "/slow", response: slow)
        var started = Date()
        XCTAssertEqual(send(.get, "/slow").data, Data("x".utf8))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3)
        var throttled = MockServer.Response(body: Data(repeating: 7, count: 5000))
        throttled.bytesPerSecond = 10_000
        server.stub(path: "/throttled", response: throttled)
        started = Date()
        XCTAssertEqual(send(.get, "/throttled").data?.count, 5000)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.4, "5,000 bytes at 10,000 a second")
    }

    /// A raw answer is exactly its bytes, each piece after its delay, and then the connection closes: nothing added
    /// (no head, no Content-Length), whatever the stub's status or the request's keep-alive.
    func testARawAnswerIsExactlyItsBytesThenTheConnectionCloses() throws {
        var raw = MockServer.Response.raw([.init("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"), .init(after: 0.3, "short")])
        raw.status = 500
        server.stub(path: "/liar", response: raw)
        let client = try RawClient(port: server.port)
        let started = Date()
        client.send("GET /liar HTTP/1.1\r\nHost: x\r\n\r\n")
        let (text, closed) = client.readUntilClosed()
        XCTAssertEqual(text, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort")
        XCTAssertTrue(closed)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.25, "the second piece waited its delay (poll may wake a little early)")
        guard case .transport(let error)? = send(.get, "/liar").error as? RestManager.CustomError else {
            return XCTFail("a body cut short is an error")
        }
        XCTAssertEqual(error.localizedDescription, "transfer closed with 4 bytes remaining to read")
    }

    func testEachFaultIsSeenByRestManagerAsTheRightError() {
        rest.timeoutInterval = 1
        for fault in MockServer.Fault.allCases {
            var response = MockServer.Response(status: 200, body: Data(repeating: 1, count: 1000))
            response.fault = fault
            server.enqueue(response)
            let results = send(.get, "/anything")
            let error = results.error as? RestManager.CustomError
            switch (fault, error) {
            case (.noResponse, .timedOut?): break
            case (.closeWithoutResponse, .transport(let urlError)?), (.resetConnection, .transport(let urlError)?):
                XCTAssertTrue(
                    [.networkConnectionLost, .cannotConnectToHost, .badServerResponse, .cannotParseResponse].contains(urlError.code),
                    "\(fault): \(urlError.code)")
            case (.closeAfterHeaders, .transport(let urlError)?), (.closeMidBody, .transport(let urlError)?):
                // FoundationNetworking reports a body cut short as -1 ("transfer closed with N bytes remaining").
                XCTAssertTrue([.networkConnectionLost, .unknown].contains(urlError.code), "\(fault): \(urlError.code)")
                XCTAssertNil(results.statusCode, "a cut body is an error, not an answer")
            default:
                XCTFail("\(fault): \(String(describing: results.error)), status \(String(describing: results.statusCode))")
            }
        }
        XCTAssertEqual(send(.get, "/api/users/2").statusCode, 200, "the server is fine afterwards")
    }

    /// On a reused connection libcurl resends the request at once when the connection closes before any byte; the
    /// resend gets the fault too, so the app sees the fault, not the next answer (it saw a 404 before).
    func testCloseWithoutResponseOnAReusedConnectionReachesTheApp() {
        XCTAssertEqual(send(.get, "/api/users/2").statusCode, 200, "opens a keep-alive connection")
        var closed = MockServer.Response(status: 200)
        closed.fault = .closeWithoutResponse
        server.enqueue(closed)
        let results = send(.get, "/anything")
        XCTAssertNil(results.statusCode, "the fault, not an answer")
        guard case .transport? = results.error as? RestManager.CustomError else { return XCTFail("\(String(describing: results.error))") }
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/api/users/2", "/anything", "/anything"], "the resend got the fault")
        XCTAssertEqual(send(.get, "/anything").statusCode, 404, "one resend only: the next request is answered")
    }

    func testAThousandConcurrentRequestsAgainstChangingStubsLoseNothing() {
        let count = 1000
        let group = DispatchGroup()
        let statuses = ResultBox<Int>()
        let server = self.server!
        let changer = Thread {
            for round in 0..<200 {
                server.stub(path: "/v1/item", response: MockServer.Response(status: round % 2 == 0 ? 200 : 201))
                if round % 50 == 49 { server.removeAllStubs() }
            }
        }
        changer.start()
        let target = url("/v1/item")
        for _ in 0..<count {
            group.enter()
            rest.makeRequest(toURL: target, withHttpMethod: .get) { results in
                statuses.set(results.statusCode ?? -1)
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(statuses.count, count)
        XCTAssertEqual(Set(statuses.all).subtracting([200, 201, 404]), [], "every answer is a stub's or the unmatched 404")
        XCTAssertEqual(server.handledRequestCount, count)
    }

    func testStopFreesThePortAndEveryThreadEvenWithAHeldConnection() throws {
        var response = MockServer.Response()
        response.fault = .noResponse
        server.stub(path: "/hold", response: response)
        let client = try RawClient(port: server.port)
        client.send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(server.waitForRequests(1))
        let port = server.port
        server.stop()
        XCTAssertEqual(server.runningThreadCount, 0)
        var configuration = MockServer.Configuration()
        configuration.port = port
        let again = MockServer(configuration: configuration)
        XCTAssertNoThrow(try again.start())
        again.stop()
    }
}

/// What refuses a bad header or event in a stub (the message the precondition failure shows).
final class MockServerResponseHeaderTests: XCTestCase {
    func testHeaderProblemsNameTheHeader() {
        XCTAssertNil(MockServer.Response.headerProblem([("X-A", "b, c"), ("ETag", "\"v1\"")]))
        XCTAssertEqual(MockServer.Response.headerProblem([("Bad Name", "v")]), "header name 'Bad Name' is not a valid token")
        XCTAssertEqual(MockServer.Response.headerProblem([("", "v")]), "header name '' is not a valid token")
        XCTAssertEqual(
            MockServer.Response.headerProblem([("X-Ok", "v"), ("X-Evil", "a\r\nInjected: yes")]),
            "the value of header 'X-Evil' contains CR, LF or NUL")
        XCTAssertEqual(MockServer.Response.headerProblem([("X-Nul", "a\u{0}b")]), "the value of header 'X-Nul' contains CR, LF or NUL")
        XCTAssertEqual(MockServer.Response.headerProblem([("X\r\nY", "v")]), "header name 'X\\u{d}\\u{a}Y' is not a valid token")
    }

    /// An `id` or `event` with a line end would write a field of its own (`id: 1\ndata: injected`); data may hold any.
    func testEventProblemsNameTheEventAndField() {
        typealias Event = MockServer.Response.Event
        XCTAssertNil(MockServer.Response.eventProblem([Event(id: "1", event: "add", data: "a\r\nb\rc\n", retry: 5)]))
        XCTAssertNil(MockServer.Response.eventProblem([Event(id: "a\u{0}b", data: "NUL is the client's to ignore")]))
        XCTAssertEqual(
            MockServer.Response.eventProblem([Event(data: "ok"), Event(id: "1\ndata: injected", data: "x")]),
            "the id of event 1 ('1\\u{a}data: injected') contains CR or LF")
        XCTAssertEqual(
            MockServer.Response.eventProblem([Event(event: "add\r", data: "x")]), "the event of event 0 ('add\\u{d}') contains CR or LF")
    }
}

/// With `servesReqres` off, only what the test defines answers.
final class MockServerStubsOnlyTests: MockServerTestCase {
    override var serverConfiguration: MockServer.Configuration {
        var configuration = MockServer.Configuration()
        configuration.servesReqres = false
        return configuration
    }

    func testUnmatchedRequestsGet404NamingMethodAndPath() throws {
        let results = send(.delete, "/api/users/2?x=1")
        XCTAssertEqual(results.statusCode, 404)
        XCTAssertEqual(
            String(decoding: results.data ?? Data(), as: UTF8.self),
            #"{"error":"no stub matches DELETE /api/users/2","method":"DELETE","path":"/api/users/2"}"#)
        server.stub("DELETE", path: "/api/users/2", response: MockServer.Response(status: 204))
        XCTAssertEqual(send(.delete, "/api/users/2").statusCode, 204)
    }
}

/// A slow handler holds up only its own connection.
final class MockServerHandlerIsolationTests: MockServerTestCase {
    func testASlowHandlerHoldsUpNoOtherRequest() {
        let release = DispatchSemaphore(value: 0)
        server.stub(path: "/slow") { _ in
            _ = release.wait(timeout: .now() + 10)
            return .text("slow")
        }
        let slowDone = expectation(description: "slow")
        rest.makeRequest(toURL: url("/slow"), withHttpMethod: .get) { _ in slowDone.fulfill() }
        XCTAssertEqual(server.takeRequest(timeout: 5)?.path, "/slow")
        let started = Date()
        XCTAssertEqual(send(.get, "/api/users/2").statusCode, 200)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "answered while the slow handler still runs")
        release.signal()
        wait(for: [slowDone], timeout: 10)
    }
}

/// `RestManager(configuration:)` uses a configuration as given: here a URLProtocol stub, no network.
final class CustomConfigurationTests: XCTestCase {
    final class StubProtocol: URLProtocol {
        override class func canInit(with request: URLRequest) -> Bool { request.url?.host == "stub.invalid" }
        override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
        override func startLoading() {
            let url = request.url ?? URL(fileURLWithPath: "/")
            let response = HTTPURLResponse(url: url, statusCode: 203, httpVersion: "HTTP/1.1", headerFields: ["X-Stub": "yes"])
            if let response { client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed) }
            client?.urlProtocol(self, didLoad: Data("stubbed \(request.httpMethod ?? "?") ".utf8) + body)
            client?.urlProtocolDidFinishLoading(self)
        }
        override func stopLoading() {}

        /// The body as sent: a stream, as Apple platforms always give a protocol (a stub that reads `httpBody` alone
        /// sees nothing there, and now on Linux too).
        private var body: Data {
            guard let stream = request.httpBodyStream else { return request.httpBody ?? Data("no body".utf8) }
            stream.open()
            defer { stream.close() }
            var bytes = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while case let count = stream.read(&buffer, maxLength: buffer.count), count > 0 {
                bytes.append(contentsOf: buffer[..<count])
            }
            return bytes
        }
    }

    func testAURLProtocolStubAnswersThroughTheGivenConfiguration() async {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [StubProtocol.self]
        let rest = RestManager(configuration: configuration)
        rest.timeoutInterval = 5
        rest.httpBody = Data("hello".utf8)
        let results = await rest.makeRequest(toURL: URL(string: "http://stub.invalid/thing")!, withHttpMethod: .post)
        XCTAssertNil(results.error)
        XCTAssertEqual(results.statusCode, 203)
        XCTAssertEqual(results.response?.headers.value(forKey: "x-stub"), "yes")
        XCTAssertEqual(String(decoding: results.data ?? Data(), as: UTF8.self), "stubbed POST hello")
    }
}
