import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// Requests as values: base URL joining, header precedence, and many callers sharing one manager.
final class ValueRequestTests: MockServerTestCase {
    private func value(_ path: String, _ method: RestManager.HttpMethod = .get) -> RestManager.Request {
        RestManager.Request(method, url: URL(string: path)!)
    }

    private func sendValue(_ request: RestManager.Request, using manager: RestManager? = nil) -> RestManager.Results {
        let done = expectation(description: "value request")
        let box = ResultBox<RestManager.Results>()
        (manager ?? rest).makeRequest(request) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 15)
        return box.value ?? RestManager.Results(withError: RestManager.CustomError.failedToCreateRequest)
    }

    /// A request's headers ignore case from the start, also in a copy taken out of the request and changed there.
    func testARequestsHeadersIgnoreCaseEvenWhenCopiedOut() throws {
        var headers = RestManager.Request(.get, url: try XCTUnwrap(URL(string: "http://h/"))).headers
        headers.add(value: "1", forKey: "X-Trace")
        headers.add(value: "2", forKey: "x-trace")
        XCTAssertEqual(headers.value(forKey: "X-TRACE"), "2")
        XCTAssertEqual(headers.orderedPairs.map(\.key), ["X-Trace"])
    }

    func testBaseURLAndRelativeURLsJoinWithExactlyOneSlash() throws {
        for base in ["/api", "/api/"] {
            for relative in ["users?page=2", "/users?page=2"] {
                rest.baseURL = URL(string: server.baseURL.absoluteString + base)
                XCTAssertEqual(sendValue(value(relative)).statusCode, 200, "\(base) + \(relative)")
                XCTAssertEqual(server.takeRequest(timeout: 1)?.target, "/api/users?page=2", "\(base) + \(relative)")
            }
        }
        rest.baseURL = URL(string: server.baseURL.absoluteString + "/api/")
        XCTAssertEqual(sendValue(value(url("/_test/status/201").absoluteString)).statusCode, 201, "absolute URLs ignore the base")
    }

    func testARelativeURLWithoutABaseIsAnInvalidURL() {
        guard case .invalidURL(let text, let reason)? = sendValue(value("users")).error as? RestManager.CustomError else {
            return XCTFail("no invalidURL")
        }
        XCTAssertEqual(text, "users")
        XCTAssertEqual(reason, "it is relative and the manager has no baseURL")
    }

    func testTheManagersHeadersApplyAndTheRequestsOwnWinButNotTheManagersQueryOrBody() throws {
        rest.requestHttpHeaders.add(value: "manager", forKey: "X-Who")
        rest.requestHttpHeaders.add(value: "kept", forKey: "X-Manager")
        rest.urlQueryParameters.add(value: "no", forKey: "managerQuery")
        rest.httpBodyParameters.add(value: "no", forKey: "managerBody")
        var request = value(url("/_test/echo?a=1").absoluteString, .post)
        request.headers.add(value: "request", forKey: "x-who")
        request.queryParameters.add(value: "b c", forKey: "q")
        try request.setBody(["name": "neo"])
        let echo = try echo(sendValue(request))
        XCTAssertEqual(echo.method, "POST")
        XCTAssertEqual(echo.rawQuery, "a=1&q=b%20c")
        XCTAssertEqual(echo.headers.filter { $0[0].lowercased() == "x-who" }.map { $0[1] }, ["request"])
        XCTAssertEqual(echo.header("X-Manager"), "kept")
        XCTAssertEqual(echo.header("Content-Type"), "application/json")
        XCTAssertEqual(echo.bodyText, #"{"name":"neo"}"#)
    }

    func testFilesGoAsMultipartWithTheBodyParameters() throws {
        var request = value(url("/_test/echo").absoluteString, .post)
        request.bodyParameters.add(value: "Holiday", forKey: "title")
        request.addFile(Data([1, 2]), fieldName: "photo", fileName: "a.bin", mimeType: "application/octet-stream")
        let echo = try echo(sendValue(request))
        let boundary = try XCTUnwrap(echo.header("Content-Type")?.components(separatedBy: "boundary=").last)
        XCTAssertEqual(
            echo.bodyData,
            Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHoliday\r\n".utf8)
                + Data(
                    "--\(boundary)\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                        .utf8)
                + Data([1, 2]) + Data("\r\n--\(boundary)--\r\n".utf8))
    }

    func testAThousandValueRequestsFromSixteenThreadsArriveExactlyAsBuilt() throws {
        let manager = RestManager(maximumConnectionsPerHost: 6)
        manager.baseURL = server.baseURL
        // The server's handler counts how many requests it works on at once (each takes 2 ms of
        // server work): the library sends at most maximumConnectionsPerHost at a time.
        let concurrency = Concurrency()
        server.stub(path: "/_test/echo") { request in
            concurrency.enter()
            usleep(2000)  // simulated server work, not synchronisation
            concurrency.leave()
            return MockServer.Response(status: 200, body: request.body)
        }
        let group = DispatchGroup()
        let statuses = ResultBox<Int>()
        DispatchQueue.concurrentPerform(iterations: 16) { thread in
            for index in 0..<(1000 / 16 + (thread < 1000 % 16 ? 1 : 0)) {
                var request = RestManager.Request(.post, url: URL(string: "/_test/echo")!)
                request.queryParameters.add(value: "\(thread)-\(index)", forKey: "id")
                request.body = Data("body \(thread)-\(index)".utf8)
                group.enter()
                manager.makeRequest(request) { results in
                    statuses.set(results.statusCode ?? 0)
                    group.leave()
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(statuses.count, 1000)
        XCTAssertEqual(Set(statuses.all), [200])
        let received = server.receivedRequests
        XCTAssertEqual(received.count, 1000)
        let mismatched = received.filter { request in
            guard let id = request.query("id") else { return true }
            return request.body != Data("body \(id)".utf8) || request.header("Content-Type") != "application/octet-stream"
        }
        XCTAssertEqual(mismatched.count, 0)
        XCTAssertEqual(Set(received.compactMap { $0.query("id") }).count, 1000)
        // At most 6 at once, whatever thread sends them. The TCP connection count itself is only
        // reported: libcurl closes idle connections when few transfers are running (its connection
        // cache holds four per transfer) and connects again for the next burst (7–41 seen, raw
        // URLSession alike; BENCHMARKS.md).
        XCTAssertLessThanOrEqual(concurrency.peak, 6)
        XCTAssertGreaterThanOrEqual(concurrency.peak, 2, "the requests did overlap")
        print("1,000 value requests from 16 threads: at most \(concurrency.peak) at once, \(server.acceptedConnectionCount) TCP connections")
    }

    func testDecodingCurlAndATimeoutOfItsOwn() async throws {
        let rest = try XCTUnwrap(self.rest)
        rest.baseURL = server.baseURL
        struct Single: Decodable { struct User: Decodable { let id: Int }; let data: User }
        let user = try await rest.request(Single.self, for: RestManager.Request(url: URL(string: "api/users/2")!))
        XCTAssertEqual(user.data.id, 2)
        var request = RestManager.Request(.put, url: URL(string: "api/users/2?token=abc")!)
        request.headers.add(value: "Bearer t", forKey: "Authorization")
        request.body = Data("x".utf8)
        XCTAssertEqual(
            try rest.curlCommand(for: request),
            "curl -X PUT '\(server.baseURL.absoluteString)/api/users/2?token=<redacted>' -H 'Accept: */*' -H 'Authorization: <redacted>' -H 'Content-Type: application/octet-stream' -H 'User-Agent: RestManager/3.0.0' --data-binary 'x'"
        )
        var slow = RestManager.Request(url: URL(string: "_test/hang")!)
        slow.timeoutInterval = 0.3
        let started = Date()
        let results = await rest.makeRequest(slow)
        guard case .timedOut(_, let after, .wholeCall)? = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(after, 0.3)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
    }
}

/// How many callers are inside at once, and the most there were.
final class Concurrency: @unchecked Sendable {
    private let lock = NSLock()
    private var current = 0
    private var highest = 0

    func enter() {
        lock.withLock {
            current += 1; highest = max(highest, current)
        }
    }
    func leave() { lock.withLock { current -= 1 } }
    var peak: Int { lock.withLock { highest } }
}
