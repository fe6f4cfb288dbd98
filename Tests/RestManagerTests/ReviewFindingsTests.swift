import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import RestManager

/// The bugs a close review of the library found, each asserted on what the server received.
final class ReviewFindingsTests: MockServerTestCase {
    func testARawMultipartBodyIsSentAsIs() throws {
        var body = RestManager.MultipartBody(boundary: "caller-boundary")
        body.addField(name: "title", value: "Holiday")
        body.addFile(fieldName: "photo", fileName: "a.bin", mimeType: "application/octet-stream", data: Data([0, 1, 2]))
        rest.requestHttpHeaders.add(value: body.contentType, forKey: "Content-Type")
        rest.httpBody = body.encoded()
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(echo.header("Content-Type"), "multipart/form-data; boundary=caller-boundary")
        XCTAssertEqual(
            echo.bodyData,
            Data("--caller-boundary\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHoliday\r\n".utf8)
                + Data(
                    "--caller-boundary\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                        .utf8)
                + Data([0, 1, 2]) + Data("\r\n--caller-boundary--\r\n".utf8))
    }

    func testRepeatedKeysAreSentInOrder() throws {
        rest.urlQueryParameters.append(value: "a", forKey: "tag")
        rest.urlQueryParameters.append(value: "b c", forKey: "tag")
        rest.urlQueryParameters.add(value: "1", forKey: "page")
        rest.requestHttpHeaders.append(value: "text/html", forKey: "Accept")
        rest.requestHttpHeaders.append(value: "application/json", forKey: "accept")
        rest.requestHttpHeaders.add(value: "application/x-www-form-urlencoded", forKey: "Content-Type")
        rest.httpBodyParameters.append(value: "x", forKey: "k")
        rest.httpBodyParameters.append(value: "y", forKey: "k")
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(echo.rawQuery, "tag=a&tag=b%20c&page=1")
        XCTAssertEqual(echo.header("Accept"), "text/html, application/json")
        XCTAssertEqual(echo.bodyText, "k=x&k=y")
    }

    func testAddReplacesEveryValueOfTheKeyAndRemoveRemovesThemAll() {
        var entity = RestManager.RestEntity()
        entity.append(value: "1", forKey: "a")
        entity.append(value: "2", forKey: "b")
        entity.append(value: "3", forKey: "a")
        XCTAssertEqual(entity.values(forKey: "a"), ["1", "3"])
        XCTAssertEqual(entity.value(forKey: "a"), "1")
        XCTAssertEqual(entity.allValues(), ["a": "1, 3", "b": "2"])
        entity.add(value: "9", forKey: "a")
        XCTAssertEqual(entity.orderedPairs.map { "\($0.key)=\($0.value)" }, ["a=9", "b=2"])
        entity.append(value: "4", forKey: "a")
        entity.removeValue(forKey: "a")
        XCTAssertEqual(entity.orderedPairs.map { "\($0.key)=\($0.value)" }, ["b=2"])
        XCTAssertNil(entity.value(forKey: "a"))
    }

    func testEntitiesAreEqualOnlyWithTheSamePairsInOrderAndTheSameKeyComparison() {
        var first = RestManager.RestEntity()
        var second = RestManager.RestEntity()
        first.add(value: "1", forKey: "a")
        second.add(value: "1", forKey: "a")
        XCTAssertEqual(first, second)
        second.add(value: "2", forKey: "a")
        XCTAssertNotEqual(first, second, "another value")
        var reordered = RestManager.RestEntity()
        reordered.add(value: "2", forKey: "b")
        reordered.add(value: "1", forKey: "a")
        first.add(value: "2", forKey: "b")
        XCTAssertNotEqual(first, reordered, "another order")
        var headers = RestManager.RestEntity(ignoringKeyCase: true)
        headers.add(value: "1", forKey: "a")
        headers.add(value: "2", forKey: "b")
        XCTAssertNotEqual(first, headers, "another key comparison")
    }

    func testHeaderChangesFromManyThreadsAreAllKept() {
        let rest = self.rest!
        DispatchQueue.concurrentPerform(iterations: 2000) { index in
            rest.requestHttpHeaders.add(value: "\(index)", forKey: "X-\(index)")
            rest.urlQueryParameters.append(value: "\(index)", forKey: "q")
        }
        XCTAssertEqual(rest.requestHttpHeaders.totalItems(), 2000)
        XCTAssertEqual(rest.urlQueryParameters.totalItems(), 2000)
    }

    func testRedirectsToGetDropEveryBodyHeader() throws {
        for code in [301, 302, 303] {
            rest.requestHttpHeaders = RestManager.RestEntity()
            for (name, value) in [
                ("Content-Type", "text/plain"), ("Content-Encoding", "identity"), ("Content-Language", "en"),
                ("Content-Location", "/doc"), ("X-Kept", "yes")
            ] {
                rest.requestHttpHeaders.add(value: value, forKey: name)
            }
            rest.httpBody = Data("payload".utf8)
            let echo = try echo(send(.post, "/_test/redirect/\(code)?to=/_test/echo"))
            XCTAssertEqual(echo.method, "GET", "\(code)")
            XCTAssertEqual(echo.headerNames().filter { $0.lowercased().hasPrefix("content-") }, [], "\(code)")
            XCTAssertEqual(echo.header("X-Kept"), "yes")
        }
    }

    func testBodyHeadersGoOnlyWithABody() throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.requestHttpHeaders.add(value: "en", forKey: "Content-Language")
        rest.httpBodyParameters.add(value: "1", forKey: "a")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).header("Content-Type"), "application/json")
        for method in [RestManager.HttpMethod.get, .head, .delete] {
            let results = send(method, "/_test/echo")
            let received = try XCTUnwrap(server.receivedRequests.last)
            XCTAssertEqual(received.method, method.name)
            XCTAssertNil(received.header("Content-Type"), "\(method)")
            XCTAssertNil(received.header("Content-Language"), "\(method)")
            XCTAssertEqual(results.statusCode, 200)
            rest.clearParameters()
        }
    }

    func testAnEmptyBodyDecodesIntoAnOptionalAsNil() async throws {
        struct Thing: Decodable { let id: Int }
        let rest = try XCTUnwrap(self.rest)
        let nothing = try await rest.request(Thing?.self, fromURL: url("/_test/status/204"))
        XCTAssertNil(nothing)
        do {
            _ = try await rest.request(Thing.self, fromURL: url("/_test/status/204"))
            XCTFail("no error")
        } catch RestManager.CustomError.emptyBody(let status) {
            XCTAssertEqual(status, 204)
        }
        let something = try await rest.request([String: Int]?.self, fromURL: url("/_test/status/200"))
        XCTAssertEqual(something, ["status": 200])
    }

    func testPasswordsAndSecretQueryValuesAreRedactedWhereverARequestIsPrinted() throws {
        let hint = ": it did not complete within timeoutInterval (the manager's, request's or call's: raise it to wait longer)"
        rest.urlQueryParameters.add(value: "k1", forKey: "api_key")
        rest.urlQueryParameters.add(value: "t1", forKey: "access_token")
        rest.urlQueryParameters.add(value: "p1", forKey: "password")
        rest.urlQueryParameters.add(value: "2", forKey: "page")
        let target = URL(string: "http://alice:s3cret@example.com/x?token=t0")!
        let line = try rest.curlCommand(forURL: target, withHttpMethod: .get)
        XCTAssertTrue(
            line.hasPrefix(
                "curl 'http://alice:<redacted>@example.com/x?token=<redacted>&api_key=<redacted>&access_token=<redacted>&password=<redacted>&page=2'"),
            line)
        for secret in ["s3cret", "t0", "k1", "t1", "p1"] { XCTAssertFalse(line.contains(secret), secret) }
        let revealed = try rest.curlCommand(forURL: target, withHttpMethod: .get, revealingSecrets: true)
        XCTAssertTrue(revealed.contains("alice:s3cret@") && revealed.contains("token=t0"), revealed)
        // Odd URLs stay as they are, and nothing traps.
        for odd in ["http://h", "http://@h/?", "http://a:@h/?=&&token", "http://u:p:q@h:1/p?token=a=b#token=c", "mailto:x?token=1"] {
            _ = try? rest.curlCommand(forURL: try XCTUnwrap(URL(string: odd)), withHttpMethod: .get)
        }
        let odd = try rest.curlCommand(forURL: URL(string: "http://u:p:q@h:1/p?token=a=b#token=c")!, withHttpMethod: .get)
        XCTAssertTrue(odd.hasPrefix("curl 'http://u:<redacted>@h:1/p?token=<redacted>&api_key=<redacted>&access_token"), odd)
        let timeout = RestManager.CustomError.timedOut(URL(string: "http://bob:pw@h/a?token=x&b=1")!, after: 1)
        XCTAssertEqual(timeout.localizedDescription, "The request to http://bob:<redacted>@h/a?token=<redacted>&b=1 timed out after 1.0 s\(hint).")
        // Only the secret values change: empty pairs and the fragment stay as they were sent.
        let sparse = RestManager.CustomError.timedOut(URL(string: "http://h/a?&b=1&&token=x&#f")!, after: 2)
        XCTAssertEqual(sparse.localizedDescription, "The request to http://h/a?&b=1&&token=<redacted>&#f timed out after 2.0 s\(hint).")
        // `key` and `auth` are secrets only as whole names.
        let named = RestManager.CustomError.timedOut(try XCTUnwrap(URL(string: "http://h/a?key=k1&auth=a1&keyboard=q&author=r")), after: 1)
        XCTAssertEqual(
            named.localizedDescription, "The request to http://h/a?key=<redacted>&auth=<redacted>&keyboard=q&author=r timed out after 1.0 s\(hint).")
        // Without a path the authority ends at "?" or "#": the query after it is still redacted.
        for (text, printed) in [
            ("http://h?token=x", "http://h?token=<redacted>"), ("http://u:p@h?token=x#f", "http://u:<redacted>@h?token=<redacted>#f")
        ] {
            let error = RestManager.CustomError.timedOut(try XCTUnwrap(URL(string: text)), after: 1)
            XCTAssertEqual(error.localizedDescription, "The request to \(printed) timed out after 1.0 s\(hint).")
        }
    }

    /// Other redirect settings change the answer: not shared. Another callback queue does not (each caller is called
    /// back on its own, `DeduplicationTests.testSharedCallersAreCalledBackOnTheirOwnQueues`): shared.
    func testRequestsWithOtherRedirectSettingsAreNotShared() {
        rest.deduplicatesRequests = true
        let group = DispatchGroup()
        let box = ResultBox<Int>()
        for (follows, queue) in [(true, DispatchQueue.global()), (false, DispatchQueue.global()), (true, DispatchQueue(label: "other"))] {
            rest.followsRedirects = follows
            rest.callbackQueue = queue
            group.enter()
            rest.makeRequest(toURL: url("/_test/redirect/302?to=/_test/delay%3Fseconds%3D1"), withHttpMethod: .get) { results in
                box.set(results.statusCode ?? 0)
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(box.all.sorted(), [200, 200, 302], "the caller that does not follow redirects got the 302, the others the answer")
        XCTAssertEqual(server.receivedRequests.filter { $0.path == "/_test/redirect/302" }.count, 2)
    }

    func testAProxyChallengeIsDeliveredAsItsStatus() {
        let results = send(.get, "/_test/proxy-auth")
        XCTAssertNil(results.error)
        XCTAssertEqual(results.statusCode, 407)
    }

    /// The tutorial's and every UI app's pattern: each request started on the main thread, from
    /// the previous one's completion, more in flight than the connection limit.
    func testRequestsStartedOnTheMainThreadUseAtMostTheConnectionLimit() throws {
        let manager = RestManager(maximumConnectionsPerHost: 4)
        manager.callbackQueue = .main
        let done = expectation(description: "all finished")
        let loop = MainThreadLoop(manager: manager, target: url("/api/users?page=1"), total: 2000) { done.fulfill() }
        XCTAssertTrue(Thread.isMainThread)
        for _ in 0..<12 { loop.startOne() }
        wait(for: [done], timeout: 60)
        XCTAssertTrue(loop.allOnMainThread)
        XCTAssertLessThanOrEqual(server.acceptedConnectionCount, 4)
    }

    #if canImport(FoundationNetworking)
    func testIPv6LiteralHostsFailWithTheReason() {
        let done = expectation(description: "failed")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: URL(string: "http://[::1]:\(server.port)/_test/echo")!, withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 10)
        guard case .invalidURL(_, let reason) = box.value?.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: box.value?.error))")
        }
        XCTAssertEqual(
            reason,
            "FoundationNetworking cannot connect to IPv6 literal hosts (swift-corelibs-foundation #5496, error -1000); use a host name such as localhost"
        )
        XCTAssertEqual(server.handledRequestCount, 0)
    }
    #endif
}

/// Starts requests on the main thread, each from the previous one's completion (also on main).
private final class MainThreadLoop: @unchecked Sendable {
    private let manager: RestManager
    private let target: URL
    private let total: Int
    private let whenDone: @Sendable () -> Void
    private var started = 0
    private var finished = 0
    private(set) var allOnMainThread = true

    init(manager: RestManager, target: URL, total: Int, whenDone: @escaping @Sendable () -> Void) {
        (self.manager, self.target, self.total, self.whenDone) = (manager, target, total, whenDone)
    }

    func startOne() {
        started += 1
        manager.makeRequest(toURL: target, withHttpMethod: .get) { _ in
            if !Thread.isMainThread { self.allOnMainThread = false }
            self.finished += 1
            if self.started < self.total { self.startOne() }
            if self.finished == self.total { self.whenDone() }
        }
    }
}
