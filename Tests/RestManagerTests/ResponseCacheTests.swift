import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import HeapStatistics
import RestManager

/// RFC 9110 §13 and RFC 9111 as the in-memory cache add-on keeps them, against a real socket.
final class ResponseCacheTests: MockServerTestCase {
    private var cache: RestManager.ResponseCache!

    override func setUpWithError() throws {
        try super.setUpWithError()
        cache = RestManager.ResponseCache()
        rest.interceptors.append(cache)
    }

    /// `/doc`: a body per version, a strong ETag, 304 to a matching If-None-Match; `headers` added to every answer.
    private func serve(version: @escaping @Sendable () -> Int = { 1 }, headers: [(String, String)] = [("Cache-Control", "no-cache")]) {
        server.stub(path: "/doc") { request in
            let etag = "\"v\(version())\""
            if request.header("If-None-Match") == etag { return MockServer.Response(status: 304, headers: [("ETag", etag)] + headers) }
            return MockServer.Response(status: 200, headers: [("ETag", etag)] + headers, body: Data("body \(version())".utf8))
        }
    }

    private func cacheStatus(_ results: RestManager.Results) -> String? { Self.cacheStatus(results) }

    private static func cacheStatus(_ results: RestManager.Results) -> String? {
        results.response?.headers.value(forKey: RestManager.ResponseCache.statusHeader)
    }

    private func conditions() -> [String] { server.receivedRequests.map { $0.header("If-None-Match") ?? "-" } }

    /// What the entry for `path` counts against `maximumBytes` (body, headers, key and overhead), measured on a cache
    /// of its own; the server is asked once.
    private func entryCost(_ path: String) -> Int {
        let probe = RestManager.ResponseCache()
        let manager = RestManager()
        manager.interceptors = [probe]
        _ = send(.get, path, using: manager)
        return probe.currentBytes
    }

    func testA304IsDeliveredAsTheStoredAnswerWithItsHeadersUpdated() {
        serve(headers: [("Cache-Control", "no-cache"), ("X-Version", "a")])
        let first = send(.get, "/doc")
        XCTAssertEqual(first.data, Data("body 1".utf8))
        XCTAssertNil(cacheStatus(first))
        server.stub(path: "/doc") { request in
            MockServer.Response(status: 304, headers: [("ETag", "\"v1\""), ("X-Version", "b"), ("Cache-Control", "no-cache")])
        }
        let second = send(.get, "/doc")
        XCTAssertEqual(second.statusCode, 200, "the stored 200, not the 304")
        XCTAssertEqual(second.data, Data("body 1".utf8))
        XCTAssertEqual(second.response?.headers.value(forKey: "X-Version"), "b", "headers updated from the 304 (RFC 9111 §4.3.4)")
        XCTAssertEqual(cacheStatus(second), "revalidated")
        XCTAssertEqual(conditions(), ["-", "\"v1\""])
    }

    func testAChangedResourceReplacesTheEntry() {
        let version = VersionBox()
        serve(version: { version.value })
        XCTAssertEqual(send(.get, "/doc").data, Data("body 1".utf8))
        version.value = 2
        XCTAssertEqual(send(.get, "/doc").data, Data("body 2".utf8))
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "revalidated")
        XCTAssertEqual(conditions(), ["-", "\"v1\"", "\"v2\""])
    }

    func testLastModifiedIsSentAsIfModifiedSince() {
        server.stub(path: "/dated") { request in
            request.header("If-Modified-Since") == "Sun, 06 Nov 1994 08:49:37 GMT"
                ? MockServer.Response(status: 304)
                : MockServer.Response(status: 200, headers: [("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT")], body: Data("d".utf8))
        }
        _ = send(.get, "/dated")
        let second = send(.get, "/dated")
        XCTAssertEqual(second.data, Data("d".utf8))
        XCTAssertEqual(cacheStatus(second), "revalidated")
        XCTAssertEqual(server.receivedRequests.map { $0.header("If-Modified-Since") ?? "-" }, ["-", "Sun, 06 Nov 1994 08:49:37 GMT"])
    }

    /// Fresh by max-age: answered without a request; `no-cache` in the request revalidates anyway.
    func testAFreshAnswerIsServedWithoutARequest() {
        serve(headers: [("Cache-Control", "max-age=60")])
        _ = send(.get, "/doc")
        let fresh = send(.get, "/doc")
        XCTAssertEqual(fresh.data, Data("body 1".utf8))
        XCTAssertEqual(cacheStatus(fresh), "fresh")
        XCTAssertEqual(server.receivedRequests.count, 1)
        rest.requestHttpHeaders.add(value: "no-cache", forKey: "Cache-Control")
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "revalidated")
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    /// `s-maxage` is for shared caches, and an `Age` counts against `max-age`.
    func testSMaxAgeIsIgnoredAndAgeCounts() {
        serve(headers: [("Cache-Control", "s-maxage=600")])
        _ = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "revalidated")
        let oldAtArrival = secondGetStatus([("Cache-Control", "max-age=60"), ("Age", "60")])
        XCTAssertEqual(oldAtArrival, "revalidated", "60 s old at arrival: already stale")
    }

    /// RFC 9111 §5.2.1.1: a request's `max-age` bounds the age of an answer served without asking (the answer's `Age`
    /// counts): `max-age=0` always revalidates. Before, only the request's `no-cache` did.
    func testARequestsMaxAgeBoundsTheAgeOfAFreshAnswer() {
        serve(headers: [("Cache-Control", "max-age=600"), ("Age", "100")])
        _ = send(.get, "/doc")
        var request = RestManager.Request(url: url("/doc"))
        for (maxAge, expected) in [("200", "fresh"), ("50", "revalidated"), ("0", "revalidated"), ("x", "fresh")] {
            request.headers.add(value: "max-age=\(maxAge)", forKey: "Cache-Control")
            XCTAssertEqual(cacheStatus(send(request)), expected, "max-age=\(maxAge)")
        }
        XCTAssertEqual(conditions(), ["-", "\"v1\"", "\"v1\""])
    }

    /// RFC 9111 §4: an answer from the cache carries its age now in `Age`, whether the server sent one, none, or a 304
    /// without one. Before, the `Age` it arrived with went out unchanged (or none): a caller reading it took a 2-minute-old
    /// answer for a new one.
    func testACachedAnswerCarriesItsCurrentAge() {
        let age = { (results: RestManager.Results) in results.response?.headers.value(forKey: "Age") ?? "none" }
        serve(headers: [("Cache-Control", "max-age=600"), ("Age", "100")])
        XCTAssertEqual(age(send(.get, "/doc")), "100")
        Thread.sleep(forTimeInterval: 1.2)
        let fresh = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(fresh), "fresh")
        XCTAssertTrue((101...130).contains(Int(age(fresh)) ?? 0), "100 s old when stored, 1.2 s ago: \(age(fresh))")
        server.removeAllStubs()
        cache.removeAll()
        serve(headers: [("Cache-Control", "max-age=600")])
        _ = send(.get, "/doc")
        Thread.sleep(forTimeInterval: 1.2)
        XCTAssertTrue((1...30).contains(Int(age(send(.get, "/doc"))) ?? 0), "stored 1.2 s ago without an Age")
        server.removeAllStubs()
        cache.removeAll()
        serve(headers: [("Cache-Control", "no-cache"), ("Age", "100")])
        _ = send(.get, "/doc")
        server.stub(path: "/doc") { _ in MockServer.Response(status: 304, headers: [("ETag", "\"v1\"")]) }
        let revalidated = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(revalidated), "revalidated")
        XCTAssertTrue((0...30).contains(Int(age(revalidated)) ?? -1), "just revalidated: \(age(revalidated))")
    }

    /// RFC 9111 §5.2.2.4: `no-cache="Set-Cookie"` forbids reusing the named fields without a revalidation, and this
    /// cache replays answers whole: it revalidates. Before, the qualified form counted as no directive, and the answer,
    /// its `Set-Cookie` included, was served fresh.
    func testAQualifiedNoCacheRevalidates() {
        serve(headers: [("Cache-Control", "max-age=60, no-cache=\"Set-Cookie\""), ("Set-Cookie", "session=alice")])
        _ = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "revalidated")
        XCTAssertEqual(conditions(), ["-", "\"v1\""])
    }

    /// RFC 9111 §1.2.2: `max-age` and `Age` are digits only; another form makes the answer stale (revalidated), and
    /// a number past 2^31 is 2^31 (fresh). §5.2: recipients accept a directive's argument quoted too (`"60"`).
    func testMaxAgeIsDigitsOnlyOrQuotedDigits() {
        let cases = [("1e3", "revalidated"), ("inf", "revalidated"), ("+60", "revalidated"), ("60.5", "revalidated")]
        let quoted = [
            ("\"60\"", "fresh"), ("\"60", "revalidated"), ("1600\"", "revalidated"), ("\"\"", "revalidated"),
            ("\"", "revalidated"), ("\"+60\"", "revalidated")
        ]
        for (maxAge, expected) in cases + quoted + [("99999999999999999999999", "fresh")] {
            XCTAssertEqual(secondGetStatus([("Cache-Control", "max-age=\(maxAge)")]), expected, "max-age=\(maxAge)")
        }
        let unreadAge = secondGetStatus([("Cache-Control", "max-age=60"), ("Age", "1e9")])
        XCTAssertEqual(unreadAge, "fresh", "an Age that is not digits does not count")
        let quotedAge = secondGetStatus([("Cache-Control", "max-age=60"), ("Age", "\"100\"")])
        XCTAssertEqual(quotedAge, "revalidated", "a quoted Age counts")
    }

    /// The cache's word on the second GET of `/doc` served with `headers`, starting from an empty cache.
    private func secondGetStatus(_ headers: [(String, String)]) -> String? {
        server.removeAllStubs()
        serve(headers: headers)
        cache.removeAll()
        _ = send(.get, "/doc")
        return cacheStatus(send(.get, "/doc"))
    }

    /// What the cache does not read never makes an answer fresh: an answer with `Expires` (alone, decades ahead), or
    /// with an old `Last-Modified` and no `max-age` (no heuristic freshness, RFC 9111 §4.2.2), is revalidated on every
    /// GET, and one with only `Expires` and no validator is not stored.
    func testExpiresAndAnOldLastModifiedAreRevalidated() {
        let farAhead = "Fri, 01 Jan 2100 00:00:00 GMT"
        let cases = [[("Expires", farAhead)], [("Cache-Control", "public")]]
        for headers in cases {
            server.clearReceivedRequests()
            let second = secondGetStatus(headers + [("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT")])
            XCTAssertEqual(second, "revalidated", "\(headers)")
            XCTAssertEqual(cacheStatus(send(.get, "/doc")), "revalidated", "\(headers)")
            XCTAssertEqual(conditions(), ["-", "\"v1\"", "\"v1\""], "\(headers)")
        }
        server.stub(path: "/expires", response: .init(status: 200, headers: [("Expires", farAhead)], body: Data("e".utf8)))
        _ = send(.get, "/expires")
        XCTAssertNil(cacheStatus(send(.get, "/expires")))
        XCTAssertEqual(server.receivedRequests.filter { $0.path == "/expires" }.count, 2)
    }

    func testNoStoreVaryStarAndAnswersWithoutValidatorsAreNotStored() {
        for (path, headers) in [
            ("/a", [("ETag", "\"x\""), ("Cache-Control", "no-store")]), ("/b", [("ETag", "\"x\""), ("Vary", "*")]),
            ("/c", [("Content-Type", "text/plain")])
        ] {
            server.stub(path: path, response: MockServer.Response(status: 200, headers: headers, body: Data("x".utf8)))
            _ = send(.get, path)
            XCTAssertNil(cacheStatus(send(.get, path)), path)
        }
        XCTAssertTrue(server.receivedRequests.allSatisfy { $0.header("If-None-Match") == nil })
        serve()
        rest.requestHttpHeaders.add(value: "no-store", forKey: "Cache-Control")
        _ = send(.get, "/doc")
        rest.requestHttpHeaders.removeValue(forKey: "Cache-Control")
        XCTAssertNil(server.lastRequest(path: "/doc")?.header("If-None-Match"))
        _ = send(.get, "/doc")
        XCTAssertNil(server.lastRequest(path: "/doc")?.header("If-None-Match"), "a request's no-store kept it out")
    }

    /// `Vary` keys an entry by the request's values of the named headers; `Authorization` always keys it.
    func testVaryAndAuthorizationKeyTheEntries() {
        serve(headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")])
        rest.requestHttpHeaders.add(value: "fr", forKey: "Accept-Language")
        _ = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "fresh")
        rest.requestHttpHeaders.add(value: "de", forKey: "Accept-Language")
        XCTAssertNil(cacheStatus(send(.get, "/doc")), "another language is another entry")
        rest.requestHttpHeaders.add(value: "Bearer alice", forKey: "Authorization")
        XCTAssertNil(cacheStatus(send(.get, "/doc")), "alice's answers are not the anonymous ones")
        rest.requestHttpHeaders.add(value: "Bearer bob", forKey: "Authorization")
        XCTAssertNil(cacheStatus(send(.get, "/doc")), "nor bob's alice's")
        XCTAssertEqual(server.receivedRequests.count, 4)
    }

    /// Any header carrying a credential keys the entries (an API key, a cookie, a token): after a user switch or a
    /// logout, another user's answer is never served.
    func testCredentialHeadersKeyTheEntries() {
        serve(headers: [("Cache-Control", "max-age=60")])
        for name in ["X-API-Key", "Cookie", "Proxy-Authorization", "X-Auth-Token", "PRIVATE-TOKEN", "Ocp-Apim-Subscription-Key"] {
            cache.removeAll()
            rest.requestHttpHeaders.add(value: "alice", forKey: name)
            XCTAssertNil(cacheStatus(send(.get, "/doc")), name)
            XCTAssertEqual(cacheStatus(send(.get, "/doc")), "fresh", "\(name): alice's own answer is hers")
            rest.requestHttpHeaders.add(value: "bob", forKey: name)
            XCTAssertNil(cacheStatus(send(.get, "/doc")), "\(name): bob does not get alice's answer")
            rest.requestHttpHeaders.removeValue(forKey: name)
            XCTAssertNil(cacheStatus(send(.get, "/doc")), "\(name): nor does anyone after a logout")
        }
        XCTAssertEqual(server.receivedRequests.count, 18)
        rest.requestHttpHeaders.add(value: "text/plain", forKey: "Accept")
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "fresh", "a header that carries no credential does not key it")
    }

    /// A caller's own conditional GET is the caller's: its 304 comes back as is, after one request, whether the cache
    /// holds an entry or not.
    func testACallersOwnConditionalGetGetsItsOwn304() {
        serve(headers: [("Cache-Control", "no-cache")])
        var conditional = RestManager.Request(url: url("/doc"))
        conditional.headers.add(value: "\"v1\"", forKey: "If-None-Match")
        let cold = send(conditional)
        XCTAssertEqual(cold.statusCode, 304)
        XCTAssertEqual(server.receivedRequests.count, 1, "one request, not a second without the caller's validator")
        _ = send(.get, "/doc")
        let warm = send(conditional)
        XCTAssertEqual(warm.statusCode, 304, "the caller asked for a 304, not the stored 200")
        XCTAssertNil(cacheStatus(warm))
        XCTAssertEqual(server.receivedRequests.count, 3)
    }

    /// A 304 updates the stored headers in one pass by name: a peer sending 20,000 header lines with both answers
    /// cannot stall the call (and the cache's lock) for minutes. In process, on the interceptor API.
    func testRevalidatingTwentyThousandHeadersIsLinear() async throws {
        let target = try XCTUnwrap(URL(string: "http://127.0.0.1/doc"))
        var fields = Dictionary(uniqueKeysWithValues: (0..<20_000).map { ("X-H\($0)", "old") })
        fields["ETag"] = "\"v1\""
        let stored = try XCTUnwrap(HTTPURLResponse(url: target, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields))
        let request = URLRequest(url: target)
        let first = RestManager.Results(withData: Data("body".utf8), response: RestManager.Response(fromURLResponse: stored), error: nil)
        _ = await cache.decide(after: first, for: request, attempt: 1)
        let conditional = try await cache.adapt(request, attempt: 1)
        XCTAssertEqual(conditional.value(forHTTPHeaderField: "If-None-Match"), "\"v1\"")
        for key in Array(fields.keys) where key != "ETag" { fields[key] = "new" }
        let notModified = try XCTUnwrap(HTTPURLResponse(url: target, statusCode: 304, httpVersion: "HTTP/1.1", headerFields: fields))
        let started = Date()
        let decision = await cache.decide(
            after: RestManager.Results(withData: Data(), response: RestManager.Response(fromURLResponse: notModified), error: nil),
            for: conditional, attempt: 1)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "linear: well under a second here")
        guard case .deliverInstead(let results) = decision else { return XCTFail("\(decision)") }
        XCTAssertEqual(results.data, Data("body".utf8))
        XCTAssertEqual(results.response?.headers.value(forKey: "x-h123"), "new")
    }

    /// A 304 to the cache's revalidation whose entry went meanwhile (evicted, removed) is never the caller's: the cache
    /// asks once more without validators, on a first attempt or a later one (another interceptor's retry).
    func testA304ForAnEntryGoneMeanwhileIsAskedAgainWithoutValidators() {
        let cache: RestManager.ResponseCache = self.cache
        let revalidations = VersionBox()
        revalidations.value = 0
        server.stub(path: "/doc") { request in
            guard request.header("If-None-Match") == "\"v1\"" else {
                return MockServer.Response(status: 200, headers: [("ETag", "\"v1\""), ("Cache-Control", "no-cache")], body: Data("body 1".utf8))
            }
            // The second revalidation is first answered 503, which the interceptor before the cache retries.
            if revalidations.increment() == 2 { return MockServer.Response(status: 503) }
            cache.removeAll()
            return MockServer.Response(status: 304, headers: [("ETag", "\"v1\"")])
        }
        _ = send(.get, "/doc")
        let first = send(.get, "/doc")
        XCTAssertEqual(first.statusCode, 200, "attempt 1: the stored answer went, the body came again")
        XCTAssertEqual(first.data, Data("body 1".utf8))
        XCTAssertEqual(conditions(), ["-", "\"v1\"", "-"])
        rest.interceptors = [InterceptorTests.RetryOnce503(), cache]
        let second = send(.get, "/doc")
        XCTAssertEqual(second.statusCode, 200, "attempt 2: the same")
        XCTAssertEqual(second.data, Data("body 1".utf8))
        XCTAssertEqual(conditions(), ["-", "\"v1\"", "-", "\"v1\"", "\"v1\"", "-"])
    }

    /// RFC 9111 §4.4: an unsafe method drops the URL's entries of every user and variant, not only the caller's own:
    /// alice's POST makes bob's stored answer stale too. A query that extends the URL is another resource.
    func testAnUnsafeMethodDropsEveryUsersEntriesForItsURLOnly() {
        serve(headers: [("Cache-Control", "max-age=60")])
        server.stub(path: "/doc/more") { _ in MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60")]) }
        for user in ["alice", "bob", "carol"] {
            rest.requestHttpHeaders.add(value: "Bearer \(user)", forKey: "Authorization")
            _ = send(.get, "/doc")
            _ = send(.get, "/doc/more")
        }
        rest.requestHttpHeaders.add(value: "Bearer alice", forKey: "Authorization")
        _ = send(.post, "/doc")
        var statuses: [String] = []
        for user in ["alice", "bob", "carol"] {
            rest.requestHttpHeaders.add(value: "Bearer \(user)", forKey: "Authorization")
            statuses.append("\(user) /doc: \(cacheStatus(send(.get, "/doc")) ?? "sent")")
            statuses.append("\(user) /doc/more: \(cacheStatus(send(.get, "/doc/more")) ?? "sent")")
        }
        let expected = ["alice /doc: sent", "alice /doc/more: fresh", "bob /doc: sent", "bob /doc/more: fresh"]
        XCTAssertEqual(statuses, expected + ["carol /doc: sent", "carol /doc/more: fresh"])
    }

    /// The cache remembers the last 1,000 revalidations it sent (a call that ends before its answer leaves its own
    /// behind): with 999 left by calls that failed after it adapted them, a revalidation under way all that time still
    /// has its 304 recognised and gets the stored answer.
    func testARevalidationUnderWayIsRecognisedAfter999LeftBehind() {
        serve()
        server.stub(path: "/other", response: MockServer.Response(status: 200, headers: [("ETag", "\"o\"")], body: Data("o".utf8)))
        _ = send(.get, "/doc")
        _ = send(.get, "/other")
        let gate = Gate()
        let (answered, box) = startHeld("/doc", until: gate)
        var failing = RestManager.Request(url: url("/other"))
        failing.interceptors = [InterceptorTests.Failing(error: RestManager.CustomError.bodyEncodingFailed("left behind"))]
        for _ in 1...999 { XCTAssertNotNil(send(failing).error) }
        gate.open()
        wait(for: [answered], timeout: 15)
        XCTAssertEqual(box.value?.statusCode, 200)
        XCTAssertEqual(box.value.flatMap(cacheStatus), "revalidated")
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/doc", "/other", "/doc"])
    }

    func testUnsafeMethodsDropTheURLsEntries() {
        serve(headers: [("Cache-Control", "max-age=60")])
        for method in [RestManager.HttpMethod.post, .put, .patch, .delete] {
            _ = send(.get, "/doc")
            XCTAssertEqual(cacheStatus(send(.get, "/doc")), "fresh")
            _ = send(method, "/doc")
            XCTAssertNil(cacheStatus(send(.get, "/doc")), "\(method) invalidated it")
            cache.removeAll()
        }
        _ = send(.get, "/doc")
        _ = send(.head, "/doc")
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "fresh", "HEAD is safe")
    }

    /// Least recently used entries go first; an entry larger than the cache is never stored.
    func testEvictionKeepsTheStoredBodiesWithinTheLimit() {
        for name in ["a", "b", "c"] {
            server.stub(
                path: "/\(name)", response: MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60")], body: Data(count: 100)))
        }
        let cost = entryCost("/c")
        XCTAssertGreaterThan(cost, 100 + RestManager.ResponseCache.entryOverhead, "the body, the headers, the key and the overhead")
        cache = RestManager.ResponseCache(maximumBytes: cost * 5 / 2)
        rest.interceptors = [cache]
        server.stub(path: "/big", response: MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60")], body: Data(count: cost * 2)))
        _ = send(.get, "/a")
        _ = send(.get, "/b")
        XCTAssertEqual(cacheStatus(send(.get, "/a")), "fresh", "a is now the most recently used")
        _ = send(.get, "/c")
        XCTAssertEqual(cacheStatus(send(.get, "/a")), "fresh")
        XCTAssertEqual(cacheStatus(send(.get, "/c")), "fresh")
        XCTAssertNil(cacheStatus(send(.get, "/b")), "b, the least recently used, went first")
        _ = send(.get, "/big")
        XCTAssertNil(cacheStatus(send(.get, "/big")), "larger than the whole cache")
        // b came back (a, now the least recently used, went): an answer too large to store evicts nothing.
        XCTAssertEqual(cacheStatus(send(.get, "/c")), "fresh", "an answer too large to store evicts nothing")
        XCTAssertEqual(cacheStatus(send(.get, "/b")), "fresh")
    }

    /// Only answers it can use take room: one without a validator that is stale on arrival (no `max-age`, or an `Age`
    /// that reaches it) is not stored, so it evicts nothing; a body exactly the size of the cache fits; eviction stops
    /// as soon as the bodies fit, at the limit.
    func testOnlyUsableAnswersTakeRoomAndEvictionStopsAtTheLimit() {
        for name in ["a", "b", "e"] {
            server.stub(path: "/\(name)") { request in
                request.header("If-None-Match") == "\"\(name)\""
                    ? MockServer.Response(status: 304, headers: [("ETag", "\"\(name)\"")])
                    : MockServer.Response(status: 200, headers: [("ETag", "\"\(name)\"")], body: Data(count: 6))
            }
        }
        server.stub(path: "/c", response: MockServer.Response(status: 200, body: Data(count: 6)))
        let stale = [("Cache-Control", "max-age=60"), ("Age", "60")]
        server.stub(path: "/d", response: MockServer.Response(status: 200, headers: stale, body: Data(count: 6)))
        cache = RestManager.ResponseCache(maximumBytes: 2 * entryCost("/e"))
        rest.interceptors = [cache]
        for path in ["/a", "/b", "/c", "/d", "/e", "/b", "/e", "/a"] { _ = send(.get, path) }
        let conditional = server.receivedRequests.map { "\($0.path) \($0.header("If-None-Match") ?? "-")" }
        // The first is entryCost's.
        XCTAssertEqual(conditional, ["/e -", "/a -", "/b -", "/c -", "/d -", "/e -", "/b \"b\"", "/e \"e\"", "/a -"])
        server.removeAllStubs()
        serve()
        cache = RestManager.ResponseCache(maximumBytes: entryCost("/doc"))
        rest.interceptors = [cache]
        _ = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "revalidated", "an entry exactly the size of the cache")
    }

    /// An answer with both validators is stored and revalidated with both (RFC 9110 §13.1).
    func testAnAnswerWithBothValidatorsIsRevalidatedWithBoth() {
        let modified = "Sun, 06 Nov 1994 08:49:37 GMT"
        server.stub(path: "/both") { request in
            request.header("If-None-Match") == "\"x\""
                ? MockServer.Response(status: 304, headers: [("ETag", "\"x\"")])
                : MockServer.Response(status: 200, headers: [("ETag", "\"x\""), ("Last-Modified", modified)], body: Data("b".utf8))
        }
        _ = send(.get, "/both")
        let second = send(.get, "/both")
        XCTAssertEqual(cacheStatus(second), "revalidated")
        XCTAssertEqual(second.data, Data("b".utf8))
        let last = server.lastRequest(path: "/both")
        XCTAssertEqual([last?.header("If-None-Match"), last?.header("If-Modified-Since")], ["\"x\"", modified])
    }

    /// The bytes the cache counts go with the entries: after `removeAll` or an invalidating POST, two new answers that
    /// fit together are both kept (a count left at the old entries' bytes would evict one of them).
    func testRemovedEntriesNoLongerCountTowardsTheLimit() {
        let stored = MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60")], body: Data(count: 100))
        for name in ["a", "b", "c", "d"] { server.stub("GET", path: "/\(name)", response: stored) }
        server.stub("POST", path: "/a", response: MockServer.Response(status: 201))
        cache = RestManager.ResponseCache(maximumBytes: entryCost("/d") * 5 / 2)
        rest.interceptors = [cache]
        _ = send(.get, "/a")
        _ = send(.get, "/b")
        cache.removeAll()
        _ = send(.get, "/c")
        _ = send(.get, "/d")
        XCTAssertEqual(cacheStatus(send(.get, "/c")), "fresh", "c kept: a and b no longer count")
        XCTAssertEqual(cacheStatus(send(.get, "/d")), "fresh")
        cache.removeAll()
        _ = send(.get, "/a")
        _ = send(.get, "/b")
        XCTAssertEqual(send(.post, "/a").statusCode, 201)
        _ = send(.get, "/c")
        XCTAssertEqual(cacheStatus(send(.get, "/b")), "fresh", "b kept: the invalidated a no longer counts")
        XCTAssertEqual(cacheStatus(send(.get, "/c")), "fresh")
        XCTAssertEqual(server.receivedRequests.filter { $0.path == "/b" }.count, 2, "b was sent once per fill")
    }

    /// Making room takes time in proportion to the entries, not their square: 20,000 small entries took 79 s to make
    /// room for one large answer when each eviction searched them all again. Ten times the entries may take at most
    /// 40 times as long (linear is about 10; the old way was over 100).
    func testMakingRoomForALargeAnswerTakesLinearTime() async throws {
        func fillAndEvict(_ count: Int) async -> (seconds: TimeInterval, cache: RestManager.ResponseCache) {
            let cache = RestManager.ResponseCache(maximumBytes: count * 1_000)
            let started = Date()
            for index in 0...count {
                let url = URL(string: "http://127.0.0.1:1/\(index)")!
                let size = index == count ? count * 1_000 - 1_000 : 100
                let http = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["ETag": "\"e\""])
                let results = RestManager.Results(withData: Data(count: size), response: RestManager.Response(fromURLResponse: http), error: nil)
                _ = await cache.decide(after: results, for: URLRequest(url: url), attempt: 1)
            }
            return (Date().timeIntervalSince(started), cache)
        }
        // The best of three runs each: a busy machine slows some runs, never speeds one up.
        var small = TimeInterval.infinity
        var large = TimeInterval.infinity
        var cache = RestManager.ResponseCache()
        for _ in 1...3 {
            small = min(small, await fillAndEvict(1_000).seconds)
            let run = await fillAndEvict(10_000)
            large = min(large, run.seconds)
            cache = run.cache
        }
        XCTAssertLessThan(large, small * 40, "\(large) s for 10,000 entries, \(small) s for 1,000")
        // Only the large answer is left: it is revalidated, the small ones are not (no validators asked for).
        let expectations: [(index: Int, validator: String?)] = [(0, nil), (9_999, nil), (10_000, "\"e\"")]
        for (index, expected) in expectations {
            let request = URLRequest(url: URL(string: "http://127.0.0.1:1/\(index)")!)
            let sent = try await cache.adapt(request, attempt: 1)
            XCTAssertEqual(sent.value(forHTTPHeaderField: "If-None-Match"), expected, "entry \(index)")
        }
    }

    /// A stream answered by the cache (a fresh entry: nothing is sent) gets the stored body, as one chunk.
    func testAStreamGetsAFreshCachedAnswerAsItsBody() async throws {
        let stored = MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60")], body: Data("cached body".utf8))
        server.stub("GET", path: "/fresh", response: stored)
        _ = send(.get, "/fresh")
        let (body, response) = try await rest.stream(RestManager.Request(url: url("/fresh")))
        XCTAssertEqual(response.headers.value(forKey: RestManager.ResponseCache.statusHeader), "fresh")
        var chunks: [Data] = []
        for try await chunk in body { chunks.append(chunk) }
        XCTAssertEqual(chunks, [Data("cached body".utf8)])
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    /// Only a non-error answer to an unsafe method invalidates (RFC 9111 §4.4): a POST that failed with a 500, or a
    /// DELETE refused with a 403, changed nothing.
    func testAnUnsafeMethodThatFailedKeepsTheEntries() {
        let item = MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60")], body: Data("item".utf8))
        server.stub("GET", path: "/item", response: item)
        server.stub("POST", path: "/item", response: MockServer.Response(status: 500))
        server.stub("DELETE", path: "/item", response: MockServer.Response(status: 403))
        _ = send(.get, "/item")
        for (method, status) in [(RestManager.HttpMethod.post, 500), (.delete, 403)] {
            XCTAssertEqual(send(method, "/item").statusCode, status)
            XCTAssertEqual(cacheStatus(send(.get, "/item")), "fresh", "\(method) failed: the entry stays")
        }
    }

    /// A 304 to validators the entry no longer has (another call replaced it meanwhile) is not merged into the new
    /// entry: the call asks again, and gets the new body with its own ETag (not the 304's, which names the old one).
    func testA304ForReplacedValidatorsIsNotMergedIntoTheNewEntry() async throws {
        let count = ResultBox<Int>()
        let replaced = DispatchSemaphore(value: 0)
        let noCache = ("Cache-Control", "no-cache")
        server.stub(path: "/doc") { request in
            count.set(0)
            let number = count.count
            let asked = request.header("If-None-Match")
            if number == 1 { return MockServer.Response(status: 200, headers: [("ETag", "\"v1\""), noCache], body: Data("one".utf8)) }
            if number == 2 {
                _ = replaced.wait(timeout: .now() + 10)
                return MockServer.Response(status: 304, headers: [("ETag", "\"v1\""), noCache])
            }
            if asked == "\"v2\"" { return MockServer.Response(status: 304, headers: [("ETag", "\"v2\""), noCache]) }
            return MockServer.Response(status: 200, headers: [("ETag", "\"v2\""), noCache], body: Data("two".utf8))
        }
        XCTAssertEqual(send(.get, "/doc").data, Data("one".utf8))
        let rest = self.rest!
        let target = url("/doc")
        let slow = Task { await rest.makeRequest(toURL: target, withHttpMethod: .get) }
        let deadline = Date(timeIntervalSinceNow: 10)
        while server.receivedRequests.count < 2, Date() < deadline { usleep(5_000) }
        XCTAssertEqual(send(.get, "/doc").data, Data("two".utf8), "the entry is replaced by version 2")
        replaced.signal()
        let late = await slow.value
        XCTAssertEqual(late.data, Data("two".utf8))
        XCTAssertEqual(late.response?.headers.value(forKey: "ETag"), "\"v2\"", "the body and its own validator")
        XCTAssertEqual(conditions(), ["-", "\"v1\"", "\"v1\"", "\"v2\""])
    }

    /// `Vary` names ignore case: an answer naming `accept-language` replaces the one that named `Accept-Language` for
    /// the same language, and the next revalidation sends the new validator.
    func testVaryNamesIgnoreCase() {
        let version = VersionBox()
        server.stub(path: "/doc") { request in
            let etag = "\"v\(version.value)\""
            let headers = [("ETag", etag), ("Vary", version.value == 1 ? "Accept-Language" : "accept-language"), ("Cache-Control", "no-cache")]
            if request.header("If-None-Match") == etag { return MockServer.Response(status: 304, headers: headers) }
            return MockServer.Response(status: 200, headers: headers, body: Data("body \(version.value)".utf8))
        }
        rest.requestHttpHeaders.add(value: "fr", forKey: "Accept-Language")
        _ = send(.get, "/doc")
        version.value = 2
        XCTAssertEqual(send(.get, "/doc").data, Data("body 2".utf8))
        XCTAssertEqual(cacheStatus(send(.get, "/doc")), "revalidated")
        XCTAssertEqual(conditions(), ["-", "\"v1\"", "\"v2\""])
    }

    /// A later interceptor's decide sees the cached answer.
    func testCachedAnswersGoThroughLaterInterceptors() {
        struct Stamp: RestManager.Interceptor {
            func decide(after results: RestManager.Results, for request: URLRequest, attempt: Int) async -> RestManager.AttemptDecision {
                var stamped = results
                stamped.response?.headers.add(value: "seen", forKey: "X-Stamp")
                return .deliverInstead(stamped)
            }
        }
        rest.interceptors.append(Stamp())
        serve(headers: [("Cache-Control", "max-age=60")])
        _ = send(.get, "/doc")
        let cached = send(.get, "/doc")
        XCTAssertEqual(cached.data, Data("body 1".utf8))
        XCTAssertEqual(cacheStatus(cached), "fresh")
        XCTAssertEqual(cached.response?.headers.value(forKey: "X-Stamp"), "seen")
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/doc"])
    }

    /// An answer reached through a redirect is not stored under the URL asked for: that URL may redirect elsewhere next
    /// time (a 302 has no freshness of its own, RFC 9111 §4.2.2). Before, `/avatar` kept serving the old picture its
    /// redirect no longer pointed to, for the picture's max-age.
    /// A redirected GET's final answer is stored under the URL asked for, never fresh (the redirect may lead
    /// elsewhere next time): the next GET asks with its validator, and a 304 from where it leads delivers it.
    func testARedirectedAnswerIsStoredUnderTheRequestsURLAndRevalidated() {
        for name in ["one", "two"] {
            server.stub(path: "/\(name)") { request in
                let etag = "\"\(name)\""
                if request.header("If-None-Match") == etag { return MockServer.Response(status: 304, headers: [("ETag", etag)]) }
                return MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=3600"), ("ETag", etag)], body: Data(name.utf8))
            }
        }
        let version = VersionBox()
        server.stub(path: "/avatar") { _ in
            MockServer.Response(status: 302, headers: [("Location", version.value == 1 ? "/one" : "/two")])
        }
        XCTAssertEqual(send(.get, "/avatar").data, Data("one".utf8))
        let again = send(.get, "/avatar")
        XCTAssertEqual(again.data, Data("one".utf8))
        XCTAssertEqual(cacheStatus(again), "revalidated")
        version.value = 2
        let moved = send(.get, "/avatar")
        XCTAssertEqual(moved.data, Data("two".utf8))
        XCTAssertNil(cacheStatus(moved))
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/avatar", "/one", "/avatar", "/one", "/avatar", "/two"])
        XCTAssertEqual(conditions(), ["-", "-", "\"one\"", "\"one\"", "\"one\"", "\"one\""])
        XCTAssertEqual(cacheStatus(send(.get, "/avatar")), "revalidated", "the new answer replaced the old")
    }

    /// RFC 9111 §3.2: a 304's `Content-Length` describes the 304 (no body), not the stored body: it is not merged. Before,
    /// the revalidated 200 said `Content-Length: 0` over its 6 bytes.
    func testA304sContentLengthDoesNotReplaceTheStoredOne() {
        serve()
        XCTAssertEqual(send(.get, "/doc").response?.headers.value(forKey: "Content-Length"), "6")
        server.stub(path: "/doc") { _ in
            MockServer.Response(status: 304, headers: [("ETag", "\"v1\""), ("Content-Length", "0"), ("Cache-Control", "no-cache")])
        }
        let second = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(second), "revalidated")
        XCTAssertEqual(second.data, Data("body 1".utf8))
        XCTAssertEqual(second.response?.headers.value(forKey: "Content-Length"), "6")
        XCTAssertEqual(second.response?.response?.expectedContentLength, 6)
    }

    /// A 304's header replaces the stored one whatever the case of its name (field names are case-insensitive, RFC
    /// 9110 §5.1): the answer has one `X-Version`, the new one.
    func testA304sHeaderReplacesTheStoredOneWhateverItsCase() {
        serve(headers: [("Cache-Control", "no-cache"), ("X-Version", "a")])
        _ = send(.get, "/doc")
        server.stub(path: "/doc") { _ in MockServer.Response(status: 304, headers: [("ETag", "\"v1\""), ("x-VERSION", "b")]) }
        let second = send(.get, "/doc")
        XCTAssertEqual(cacheStatus(second), "revalidated")
        XCTAssertEqual(second.response?.headers.values(forKey: "X-Version"), ["b"])
    }

    /// nginx 1.22.1 with gzip on, as it answered on 2026-11-28: the 200 carries a weak ETag (`W/"…"`), its 304 the
    /// strong one (the gzip filter does not run on a 304). The stored answer takes the 304's ETag (RFC 9111 §4.3.4), so
    /// the next revalidation asks with that one; every answer is the stored body.
    func testNginxsWeakThenStrongETagIsTakenFromThe304() {
        server.stub(path: "/file.txt") { request in
            let common = [("Server", "nginx/1.22.1"), ("Content-Type", "text/plain"), ("Last-Modified", "Sat, 28 Nov 2026 03:23:01 GMT")]
            guard request.header("If-None-Match") == nil else {
                return MockServer.Response(status: 304, headers: common + [("ETag", "\"6b0a4915-d49\"")])
            }
            let headers = common + [("Vary", "Accept-Encoding"), ("ETag", "W/\"6b0a4915-d49\"")]
            return MockServer.Response(status: 200, headers: headers, body: Data(repeating: 0x61, count: 3401))
        }
        let answers = (1...3).map { _ in send(.get, "/file.txt") }
        XCTAssertEqual(answers.map { cacheStatus($0) }, [nil, "revalidated", "revalidated"])
        XCTAssertEqual(answers.map { $0.data?.count }, [3401, 3401, 3401])
        XCTAssertEqual(conditions(), ["-", "W/\"6b0a4915-d49\"", "\"6b0a4915-d49\""])
        XCTAssertEqual(answers.last?.response?.headers.value(forKey: "ETag"), "\"6b0a4915-d49\"")
    }

    /// A download answered by the cache gets the cached bytes in its file (fresh: no request; stale: after a 304), and a
    /// download's answer, whose body went to a file, is not stored as an empty body for later in-memory calls. Both
    /// reported success with no file, or served an empty body, before.
    func testDownloadsGetTheCachedBytesInTheirFileAndAreNotStoredEmpty() throws {
        serve(headers: [("Cache-Control", "max-age=60")])
        let first = scratch.appendingPathComponent("first.bin")
        XCTAssertEqual(try download("/doc", to: first)?.get(), first)
        XCTAssertEqual(try Data(contentsOf: first), Data("body 1".utf8))
        let inMemory = send(.get, "/doc")
        XCTAssertEqual(inMemory.data, Data("body 1".utf8), "the download's answer was stored without its body")
        XCTAssertNil(cacheStatus(inMemory), "a download's answer is not stored")
        let fresh = scratch.appendingPathComponent("fresh.bin")
        XCTAssertEqual(try download("/doc", to: fresh)?.get(), fresh)
        XCTAssertEqual(try Data(contentsOf: fresh), Data("body 1".utf8), "a fresh cached answer reached no file")
        XCTAssertEqual(server.receivedRequests.count, 2)
        server.removeAllStubs()
        serve(headers: [("Cache-Control", "no-cache")])
        cache.removeAll()
        _ = send(.get, "/doc")
        let revalidated = scratch.appendingPathComponent("revalidated.bin")
        XCTAssertEqual(try download("/doc", to: revalidated)?.get(), revalidated)
        XCTAssertEqual(try Data(contentsOf: revalidated), Data("body 1".utf8), "a 304's stored answer reached no file")
        XCTAssertEqual(conditions().suffix(2), ["-", "\"v1\""])
    }

    /// A cached answer that reaches the download only after its deadline ended the call is not written: the call's
    /// files were let go (another download may hold them by then), and the call reported `.timedOut`.
    func testACachedAnswerArrivingAfterTheDeadlineWritesNoFile() throws {
        serve(headers: [("Cache-Control", "max-age=60")])
        _ = send(.get, "/doc")
        let gate = Gate()
        let decided = expectation(description: "the interceptor after the cache decided")
        rest.interceptors.append(WaitsToDecide(gate: gate, decided: decided))
        let target = scratch.appendingPathComponent("late.bin")
        let done = expectation(description: "download")
        let box = ResultBox<Result<URL, RestManager.CustomError>>()
        rest.download(fromURL: url("/doc"), to: target, timeoutInterval: 0.3) { result in
            box.set(result)
            done.fulfill()
            gate.open()
        }
        wait(for: [done, decided], timeout: 30, enforceOrder: true)
        guard case .failure(.timedOut)? = box.value else { return XCTFail("\(String(describing: box.value))") }
        let deadline = Date(timeIntervalSinceNow: 1)
        while Date() < deadline {
            guard !FileManager.default.fileExists(atPath: target.path) else { return XCTFail("written after the call ended") }
            usleep(10_000)
        }
    }

    func testItComposesWithTheAuthenticatorRetriesAndDeduplication() {
        rest.authenticator = RestManager.Authenticator(credential: .init(accessToken: "t")) { _ in .init(accessToken: "t") }
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0)
        rest.deduplicatesRequests = true
        serve()
        server.enqueue(MockServer.Response(status: 503))
        XCTAssertEqual(send(.get, "/doc").data, Data("body 1".utf8))
        let group = DispatchGroup()
        let statuses = ResultBox<String>()
        for _ in 0..<8 {
            group.enter()
            rest.makeRequest(toURL: url("/doc"), withHttpMethod: .get) { results in
                statuses.set(Self.cacheStatus(results) ?? "none")
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(statuses.all, Array(repeating: "revalidated", count: 8))
        XCTAssertTrue(server.receivedRequests.allSatisfy { $0.header("Authorization") == "Bearer t" })
        XCTAssertEqual(conditions().first, "-")
        XCTAssertEqual(conditions().dropFirst(2).first, "\"v1\"", "after the 503 and the retried 200, a revalidation")
    }

    func testAThousandConcurrentGetsFromSixteenThreads() {
        serve(headers: [("Cache-Control", "max-age=60")])
        server.stub(path: "/other", response: MockServer.Response(status: 200, headers: [("ETag", "\"o\"")], body: Data("o".utf8)))
        let bodies = ResultBox<Data>()
        let group = DispatchGroup()
        let rest = self.rest!
        let base = server.baseURL.absoluteString
        // Cached first (waiting for it, not for the machine's speed): then every /doc of the thousand is fresh.
        XCTAssertEqual(send(.get, "/doc").data, Data("body 1".utf8))
        DispatchQueue.concurrentPerform(iterations: 16) { thread in
            for index in 0..<63 {
                group.enter()
                let path = index % 3 == 0 ? "/other" : "/doc"
                rest.makeRequest(toURL: URL(string: base + path)!, withHttpMethod: .get) { results in
                    bodies.set(results.data ?? Data())
                    group.leave()
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(bodies.count, 1008)
        XCTAssertTrue(bodies.all.allSatisfy { $0 == Data("body 1".utf8) || $0 == Data("o".utf8) })
        XCTAssertEqual(server.receivedRequests.filter { $0.path == "/doc" }.count, 1, "fresh answers came from the network")
    }

    /// The mock's reqres routes: a strong ETag, and a 304 to a matching If-None-Match.
    func testTheMocksReqresRoutesRevalidate() {
        let first = send(.get, "/api/users?page=2")
        let etag = first.response?.headers.value(forKey: "ETag") ?? ""
        XCTAssertTrue(etag.hasPrefix("\"") && !etag.hasPrefix("W/"), etag)
        let second = send(.get, "/api/users?page=2")
        XCTAssertEqual(cacheStatus(second), "revalidated")
        XCTAssertEqual(second.data, first.data)
        XCTAssertEqual(server.receivedRequests.last?.header("If-None-Match"), etag)
    }

    // MARK: - Default-deny keying, logout, 304s, memory, RFC 9111 details

    /// The session's cookie store adds `Cookie` after the interceptors ran: the cache keys on the store's cookies for
    /// the URL itself. alice's fresh answer is hers; after her logout nobody gets it, and bob gets his own.
    func testCookiesTheSessionAddsKeyTheEntriesAndLogoutWorks() throws {
        server.stub(path: "/login") { request in
            let user = request.query("user") ?? "-"
            return MockServer.Response(status: 204, headers: [("Set-Cookie", "sid=\(user); Path=/")])
        }
        server.stub(path: "/private") { request in
            let body = "for " + (request.header("Cookie") ?? "nobody")
            return MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60"), ("Vary", "Cookie")], body: Data(body.utf8))
        }
        let store = HTTPCookieStorage.shared
        let clear = { store.cookies(for: self.url("/"))?.forEach(store.deleteCookie) }
        clear()
        defer { clear() }
        let configuration = URLSessionConfiguration.default
        configuration.httpCookieStorage = store
        let session = RestManager(configuration: configuration)
        session.interceptors.append(RestManager.ResponseCache(cookieStorage: store))
        var seen: [String] = []
        for step in ["alice", "again", "logout", "bob", "again"] {
            switch step {
            case "alice", "bob": XCTAssertEqual(send(.get, "/login?user=\(step)", using: session).statusCode, 204)
            case "logout": clear()
            default: break
            }
            let results = send(.get, "/private", using: session)
            seen.append("\(String(decoding: results.data ?? Data(), as: UTF8.self)) \(cacheStatus(results) ?? "sent")")
        }
        XCTAssertEqual(seen, ["for sid=alice sent", "for sid=alice fresh", "for nobody sent", "for sid=bob sent", "for sid=bob fresh"])
    }

    /// Default-deny: any header outside the harmless set keys the entries, whatever its name; harmless ones and the
    /// names given as `ignoring` do not.
    func testEveryHeaderButTheHarmlessAndIgnoredOnesKeysTheEntries() {
        serve(headers: [("Cache-Control", "max-age=60")])
        var statuses: [String] = []
        for name in ["X-Credential", "X-Jwt-Assertion", "X-Signature", "X-Csrf", "X-Tenant", "X-User", "X-Request-ID"] {
            cache.removeAll()
            for value in ["alice", "alice", "bob", nil] {
                var request = RestManager.Request(url: url("/doc"))
                if let value { request.headers.add(value: value, forKey: name) }
                statuses.append(cacheStatus(send(request)) ?? "sent")
            }
        }
        XCTAssertEqual(statuses, Array(repeating: ["sent", "fresh", "sent", "sent"], count: 7).flatMap { $0 })
        let ignoring = RestManager()
        ignoring.interceptors.append(RestManager.ResponseCache(ignoring: ["x-request-id"]))
        var harmless: [String] = []
        for call in 1...3 {
            var request = RestManager.Request(url: url("/doc"))
            request.headers.add(value: "id-\(call)", forKey: "X-Request-ID")
            for name in ["Accept", "Accept-Language", "User-Agent", "Pragma"] { request.headers.add(value: "v\(call)", forKey: name) }
            harmless.append(cacheStatus(send(request, using: ignoring)) ?? "sent")
        }
        XCTAssertEqual(harmless, ["sent", "fresh", "fresh"])
        XCTAssertEqual(RestManager.ResponseCache.harmlessHeaders.count, 16)
    }

    /// A caller gets a 304 only if it asked a conditional question itself: 1,200 revalidations in flight at once
    /// each get the stored 200 of their own URL (the cache's question is marked on its own request).
    func testTwelveHundredRevalidationsInFlightNeverGetABare304() {
        server.stub(path: "/r/*") { request in
            let etag = "\"\(request.path)\""
            if request.header("If-None-Match") == etag { return MockServer.Response(status: 304, headers: [("ETag", etag)]) }
            return MockServer.Response(status: 200, headers: [("ETag", etag), ("Cache-Control", "no-cache")], body: Data(request.path.utf8))
        }
        for index in 0..<12 { XCTAssertEqual(send(.get, "/r/\(index)").statusCode, 200) }
        let results = ResultBox<String>()
        let group = DispatchGroup()
        for call in 0..<1_200 {
            group.enter()
            rest.makeRequest(toURL: url("/r/\(call % 12)"), withHttpMethod: .get) { answer in
                let body = String(decoding: answer.data ?? Data(), as: UTF8.self)
                results.set("\(answer.statusCode ?? 0) \(body == "/r/\(call % 12)") \(Self.cacheStatus(answer) ?? "-")")
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(Set(results.all), ["200 true revalidated"])
        XCTAssertEqual(results.count, 1_200)
    }

    /// `maximumBytes` bounds headers and keys too: 300 answers with 16 KB of headers and empty bodies through a socket,
    /// then 100,000 through `decide`, keep the cache's count and the heap within the bound (plus a constant).
    func testTheBoundCountsHeadersAndKeysAndHoldsForAHundredThousandEntries() async throws {
        let padding = String(repeating: "p", count: 16_000)
        server.stub(path: "/h/*") { request in
            request.header("If-None-Match") == "\"e\""
                ? MockServer.Response(status: 304, headers: [("ETag", "\"e\"")])
                : MockServer.Response(status: 200, headers: [("ETag", "\"e\""), ("X-Padding", padding)], body: Data())
        }
        let small = RestManager.ResponseCache(maximumBytes: 256 << 10)
        let manager = RestManager()
        manager.interceptors.append(small)
        for index in 0..<300 { _ = await manager.makeRequest(RestManager.Request(url: url("/h/\(index)"))) }
        XCTAssertLessThanOrEqual(small.currentBytes, 256 << 10)
        XCTAssertGreaterThan(small.currentBytes, 13 * 16_000, "the last ones are kept")
        let last = await manager.makeRequest(RestManager.Request(url: url("/h/299")))
        XCTAssertEqual(cacheStatus(last), "revalidated")

        let bound = 1 << 20
        let large = RestManager.ResponseCache(maximumBytes: bound)
        let before = heap_statistics_live_bytes()
        for index in 0..<100_000 {
            let address = URL(string: "http://127.0.0.1:9/u/\(index)")!
            let response = HTTPURLResponse(
                url: address, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["ETag": "\"e\"", "X-Padding": padding])!
            let results = RestManager.Results(withData: Data(), response: RestManager.Response(fromURLResponse: response), error: nil)
            _ = await large.decide(after: results, for: URLRequest(url: address), attempt: 1)
        }
        let growth = Int(heap_statistics_live_bytes()) - Int(before)
        XCTAssertLessThanOrEqual(large.currentBytes, bound)
        XCTAssertGreaterThan(large.currentBytes, bound / 2)
        if before > 0 { XCTAssertLessThan(growth, bound + (4 << 20), "heap growth \(growth) bytes") }
    }

    /// RFC 9110 §4.2.3: host case and percent-encoded unreserved characters do not make another resource; a POST to
    /// `LOCALHOST` invalidates what `localhost` stored.
    func testURLsAreComparedNormalized() {
        serve(headers: [("Cache-Control", "max-age=60")])
        let port = server.baseURL.port ?? 0
        XCTAssertNil(cacheStatus(send(.get, "/doc")))
        XCTAssertEqual(cacheStatus(send(.get, "/%64oc")), "fresh", "%64 is d")
        XCTAssertEqual(cacheStatus(send(.get, "/doc", base: "http://127.0.0.1:\(port)")), "fresh")
        server.stub("POST", path: "/doc", response: MockServer.Response(status: 204))
        XCTAssertEqual(send(.post, "/doc", base: "HTTP://127.0.0.1:\(port)").statusCode, 204)
        XCTAssertNil(cacheStatus(send(.get, "/doc")), "the POST with an upper-case scheme invalidated it")
        XCTAssertEqual(server.receivedRequests.map(\.method), ["GET", "POST", "GET"])
    }

    /// RFC 9111 §4.4: a successful POST also invalidates its same-origin `Location` and `Content-Location`, never
    /// another origin's.
    func testAnUnsafeMethodInvalidatesItsSameOriginLocationAndContentLocation() {
        let port = server.baseURL.port ?? 0
        for path in ["/doc", "/list", "/cl"] {
            server.stub(
                "GET", path: path, response: MockServer.Response(status: 200, headers: [("Cache-Control", "max-age=60")], body: Data(path.utf8)))
        }
        server.stub(
            "POST", path: "/list",
            response: MockServer.Response(status: 201, headers: [("Location", "/doc"), ("Content-Location", "http://localhost:\(port)/cl")]))
        for path in ["/doc", "/cl"] { _ = send(.get, path) }
        _ = send(.get, "/cl", base: "http://localhost:\(port)")
        XCTAssertEqual(send(.post, "/list").statusCode, 201)
        XCTAssertNil(cacheStatus(send(.get, "/doc")), "Location, same origin: invalidated")
        XCTAssertEqual(cacheStatus(send(.get, "/cl")), "fresh", "127.0.0.1's /cl was not named")
        XCTAssertEqual(cacheStatus(send(.get, "/cl", base: "http://localhost:\(port)")), "fresh", "another origin's is kept")
    }

    /// RFC 9111 §5.2.2.5: a 304 that says `no-store` answers its call, then the entry is gone: the next GET asks
    /// without validators. `private` answers are this private cache's to serve fresh (§5.2.2.7).
    func testA304WithNoStoreRemovesTheEntryAndPrivateAnswersAreServed() {
        serve(headers: [("Cache-Control", "no-cache")])
        _ = send(.get, "/doc")
        server.stub(path: "/doc") { request in
            request.header("If-None-Match") == nil
                ? MockServer.Response(status: 200, headers: [("ETag", "\"v2\"")], body: Data("body 2".utf8))
                : MockServer.Response(status: 304, headers: [("ETag", "\"v1\""), ("Cache-Control", "no-store")])
        }
        let revalidated = send(.get, "/doc")
        XCTAssertEqual(revalidated.data, Data("body 1".utf8))
        XCTAssertEqual(cacheStatus(revalidated), "revalidated")
        XCTAssertEqual(send(.get, "/doc").data, Data("body 2".utf8))
        XCTAssertEqual(conditions(), ["-", "\"v1\"", "-"])
        server.stub(
            path: "/private", response: MockServer.Response(status: 200, headers: [("Cache-Control", "private, max-age=60")], body: Data("mine".utf8))
        )
        _ = send(.get, "/private")
        XCTAssertEqual(cacheStatus(send(.get, "/private")), "fresh")
    }

    /// 2,000 GETs of 200 URLs from 16 threads for two users, half of the URLs revalidating: every caller gets the body
    /// of its own URL and user (the suite runs under ThreadSanitizer in CI).
    func testTwoThousandConcurrentGetsOfTwoHundredURLsForTwoUsers() {
        server.stub(path: "/u/*") { request in
            let user = request.header("Authorization") ?? "-"
            let index = Int(request.path.dropFirst(3)) ?? 0
            let etag = "\"\(request.path) \(user)\""
            let control = index % 2 == 0 ? "max-age=60" : "no-cache"
            if request.header("If-None-Match") == etag {
                return MockServer.Response(status: 304, headers: [("ETag", etag), ("Cache-Control", control)])
            }
            return MockServer.Response(status: 200, headers: [("ETag", etag), ("Cache-Control", control)], body: Data("\(request.path) \(user)".utf8))
        }
        let wrong = ResultBox<String>()
        let group = DispatchGroup()
        let rest = self.rest!
        let base = server.baseURL.absoluteString
        DispatchQueue.concurrentPerform(iterations: 16) { thread in
            for call in 0..<125 {
                let index = (thread * 125 + call) % 200
                let user = call % 2 == 0 ? "Bearer alice" : "Bearer bob"
                var request = RestManager.Request(url: URL(string: base + "/u/\(index)")!)
                request.headers.add(value: user, forKey: "Authorization")
                group.enter()
                rest.makeRequest(request) { results in
                    let body = String(decoding: results.data ?? Data(), as: UTF8.self)
                    if results.statusCode != 200 || body != "/u/\(index) \(user)" {
                        wrong.set("\(index) \(user): \(results.statusCode ?? 0) \(body)")
                    }
                    group.leave()
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(wrong.all, [])
    }

    /// RFC 3986 §6.2.3: scheme and host case, the default port and an escaped unreserved character name the same
    /// resource; another port or scheme is another. On the interceptor API, in process: no server listens on port 80.
    func testTheDefaultPortAndCaseNameTheSameURL() async throws {
        let cache = RestManager.ResponseCache()
        let stored = try XCTUnwrap(URL(string: "http://example.test:80/x"))
        let http = try XCTUnwrap(
            HTTPURLResponse(url: stored, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=60"]))
        let results = RestManager.Results(withData: Data("x".utf8), response: RestManager.Response(fromURLResponse: http), error: nil)
        _ = await cache.decide(after: results, for: URLRequest(url: stored), attempt: 1)
        var served: [String] = []
        for address in ["http://EXAMPLE.test/x", "HTTP://example.test:80/%78", "http://example.test:8080/x", "https://example.test:443/x"] {
            do {
                _ = try await cache.adapt(URLRequest(url: try XCTUnwrap(URL(string: address))), attempt: 1)
                served.append("sent")
            } catch is RestManager.Answer {
                served.append("fresh")
            }
        }
        XCTAssertEqual(served, ["fresh", "fresh", "sent", "sent"])
    }
}

final class VersionBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 1
    var value: Int {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }

    /// Adds one and returns the new value.
    func increment() -> Int {
        lock.withLock {
            stored += 1
            return stored
        }
    }
}

/// Decides only once its gate is open.
private struct WaitsToDecide: RestManager.Interceptor {
    let gate: Gate
    let decided: XCTestExpectation

    func decide(after results: RestManager.Results, for request: URLRequest, attempt: Int) async -> RestManager.AttemptDecision {
        await gate.wait()
        decided.fulfill()
        return .deliver
    }
}
