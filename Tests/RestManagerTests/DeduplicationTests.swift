import Foundation
import XCTest
import RestManager

final class DeduplicationTests: MockServerTestCase {
    private func fire(_ count: Int, _ method: RestManager.HttpMethod, _ path: String) -> [RestManager.Results] {
        let box = ResultBox<RestManager.Results>()
        let group = DispatchGroup()
        for _ in 0..<count {
            group.enter()
            rest.makeRequest(toURL: url(path), withHttpMethod: method) {
                box.set($0); group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 15), .success)
        return box.all
    }

    func testIdenticalConcurrentGetsShareOneNetworkCall() {
        rest.deduplicatesRequests = true
        let results = fire(8, .get, "/_test/delay?seconds=0.5")
        XCTAssertEqual(results.count, 8)
        XCTAssertTrue(results.allSatisfy { $0.statusCode == 200 })
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testDifferentHeadersAreNotShared() {
        rest.deduplicatesRequests = true
        let group = DispatchGroup()
        for value in ["a", "b"] {
            group.enter()
            rest.requestHttpHeaders.add(value: value, forKey: "X-Variant")
            rest.makeRequest(toURL: url("/_test/delay?seconds=0.3"), withHttpMethod: .get) { _ in group.leave() }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    /// Header values are compared exactly: two GETs whose values differ only in letter case are two calls (a token
    /// or a signature is case-sensitive).
    func testHeaderValuesDifferingInCaseAreNotShared() {
        rest.deduplicatesRequests = true
        let group = DispatchGroup()
        for value in ["abc", "ABC"] {
            group.enter()
            var request = RestManager.Request(url: url("/_test/delay?seconds=0.3"))
            request.headers.add(value: value, forKey: "X-Token")
            rest.makeRequest(request) { _ in group.leave() }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(server.receivedRequests.map { $0.header("X-Token") }.sorted { ($0 ?? "") < ($1 ?? "") }, ["ABC", "abc"])
    }

    /// The whole URL keys a shared call: two paths alike with other queries, or on another host, are two calls,
    /// each answered with its own.
    func testGetsToTheSamePathWithOtherQueriesOrHostsAreNotShared() throws {
        rest.deduplicatesRequests = true
        let targets = [
            url("/_test/delay?seconds=0.3&n=1"), url("/_test/delay?seconds=0.3&n=2"),
            try XCTUnwrap(URL(string: "http://localhost:\(server.port)/_test/delay?seconds=0.3&n=1"))
        ]
        let answers = ResultBox<(URL, String)>()
        let group = DispatchGroup()
        for target in targets {
            group.enter()
            rest.makeRequest(toURL: target, withHttpMethod: .get) { results in
                let echo = try? results.decode(Echo.self)
                answers.set((target, "\(echo?.rawQuery ?? "") \(echo?.header("Host") ?? "")"))
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 15), .success)
        XCTAssertEqual(server.receivedRequests.count, 3)
        for (target, seen) in answers.all {
            XCTAssertEqual(seen, "\(target.query ?? "") \(target.host ?? ""):\(server.port)")
        }
    }

    /// A caller that joins a shared call later keeps its own deadline: the first caller times out at 1 s, the one
    /// that joined 0.6 s later gets the answer at 1.3 s (it got the first caller's deadline and timed out with it).
    func testALateJoinerKeepsItsOwnDeadline() {
        rest.deduplicatesRequests = true
        rest.timeoutInterval = 1
        let outcomes = ResultBox<(String, String, TimeInterval)>()
        let group = DispatchGroup()
        let started = Date()
        let rest = self.rest!
        let target = url("/_test/delay?seconds=1.3")
        for (name, delay) in [("first", 0.0), ("joiner", 0.6)] {
            group.enter()
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) {
                rest.makeRequest(toURL: target, withHttpMethod: .get) { results in
                    let outcome = results.error.map { "\($0)" } ?? "HTTP \(results.statusCode ?? 0)"
                    outcomes.set((name, outcome, Date().timeIntervalSince(started)))
                    group.leave()
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 15), .success)
        let byName = Dictionary(uniqueKeysWithValues: outcomes.all.map { ($0.0, ($0.1, $0.2)) })
        XCTAssertTrue(byName["first"]?.0.contains("timed out after 1.0 s") == true, "\(byName)")
        XCTAssertEqual(byName["joiner"]?.0, "HTTP 200", "\(byName)")
        XCTAssertGreaterThanOrEqual(byName["joiner"]?.1 ?? 0, 1.3)
        XCTAssertEqual(server.receivedRequests.count, 1, "shared")
    }

    /// A caller's own deadline holds when it would share a call: a short one does not cut a longer one's call short,
    /// and a long one does not stretch a short one's.
    func testCallsWithOtherDeadlinesAreNotShared() {
        rest.deduplicatesRequests = true
        let box = ResultBox<(TimeInterval, RestManager.Results)>()
        let group = DispatchGroup()
        for timeout in [0.5, 10] {
            var request = RestManager.Request(url: url("/_test/delay?seconds=1.5"))
            request.timeoutInterval = timeout
            group.enter()
            rest.makeRequest(request) { results in
                box.set((timeout, results))
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 15), .success)
        let outcomes = Dictionary(uniqueKeysWithValues: box.all.map { ($0.0, $0.1) })
        XCTAssertEqual(outcomes[10]?.statusCode, 200, "the 10 s caller is not cut at 0.5 s")
        guard case .timedOut(_, let after, .wholeCall)? = outcomes[0.5]?.error as? RestManager.CustomError else {
            return XCTFail("the 0.5 s caller times out: \(String(describing: outcomes[0.5]?.error))")
        }
        XCTAssertEqual(after, 0.5)
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    /// Calls are shared as the interceptors adapted them, the authenticator's token included: after a logout and
    /// another user's login, a GET identical to one still in flight goes out with the new token and gets its own answer
    /// (before, it joined the first user's call and got that user's answer). Calls with the same token share one.
    func testACallWithAnotherUsersTokenIsNotShared() async throws {
        rest.deduplicatesRequests = true
        let authenticator = RestManager.Authenticator(credential: .init(accessToken: "alice")) { _ in
            throw URLError(.userAuthenticationRequired)
        }
        rest.authenticator = authenticator
        let rest = self.rest!
        let target = url("/_test/delay?seconds=2")
        let seen = { @Sendable (results: RestManager.Results) in (try? results.decode(Echo.self))?.header("Authorization") }
        let alice = Task { seen(await rest.makeRequest(RestManager.Request(url: target))) }
        let deadline = Date(timeIntervalSinceNow: 10)
        while server.receivedRequests.isEmpty, Date() < deadline { usleep(5_000) }
        authenticator.credential = nil
        authenticator.credential = .init(accessToken: "bob")
        let bob = (0..<2).map { _ in Task { seen(await rest.makeRequest(RestManager.Request(url: target))) } }
        var answers = [await alice.value]
        for task in bob { answers.append(await task.value) }
        XCTAssertEqual(answers, ["Bearer alice", "Bearer bob", "Bearer bob"])
        XCTAssertEqual(server.receivedRequests.map { $0.header("Authorization") }, ["Bearer alice", "Bearer bob"])
    }

    /// A size limit changes the outcome: a caller with a 10-byte limit and one without never share a call (the second
    /// would get the first's `.responseTooLarge`, or the first a body past its limit).
    func testCallsWithOtherSizeLimitsAreNotShared() {
        rest.deduplicatesRequests = true
        let box = ResultBox<(Int?, RestManager.Results)>()
        let group = DispatchGroup()
        for limit in [10, nil] {
            rest.maximumResponseSize = limit
            group.enter()
            rest.makeRequest(toURL: url("/_test/delay?seconds=0.5"), withHttpMethod: .get) { results in
                box.set((limit, results))
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 15), .success)
        let limited = box.all.first { $0.0 == 10 }?.1
        let unlimited = box.all.first { $0.0 == nil }?.1
        guard case .responseTooLarge(10)? = limited?.error as? RestManager.CustomError else {
            return XCTFail("the 10-byte caller: \(String(describing: limited?.error))")
        }
        XCTAssertEqual(unlimited?.statusCode, 200)
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    /// Callers with other callback queues share one call, and each completion runs on its caller's own queue.
    func testSharedCallersAreCalledBackOnTheirOwnQueues() {
        rest.deduplicatesRequests = true
        let key = DispatchSpecificKey<Int>()
        let box = ResultBox<(Int, Int?)>()
        let group = DispatchGroup()
        for number in 1...3 {
            let queue = DispatchQueue(label: "caller \(number)")
            queue.setSpecific(key: key, value: number)
            rest.callbackQueue = queue
            group.enter()
            rest.makeRequest(toURL: url("/_test/delay?seconds=2"), withHttpMethod: .get) { _ in
                box.set((number, DispatchQueue.getSpecific(key: key)))
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 15), .success)
        XCTAssertEqual(box.all.sorted { $0.0 < $1.0 }.map { $0.1 }, [1, 2, 3])
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testPostsAreNeverShared() {
        rest.deduplicatesRequests = true
        XCTAssertEqual(fire(4, .post, "/_test/delay?seconds=0.3").count, 4)
        XCTAssertEqual(server.receivedRequests.count, 4)
    }

    func testOffByDefault() {
        XCTAssertEqual(fire(3, .get, "/_test/delay?seconds=0.3").count, 3)
        XCTAssertEqual(server.receivedRequests.count, 3)
    }

    func testOneCallerCancellingDoesNotCancelTheOthers() {
        rest.deduplicatesRequests = true
        let box = ResultBox<RestManager.Results>()
        let group = DispatchGroup()
        var handles: [RestManager.RequestHandle] = []
        for _ in 0..<3 {
            group.enter()
            handles.append(
                rest.makeRequest(toURL: url("/_test/delay?seconds=2"), withHttpMethod: .get) {
                    box.set($0); group.leave()
                })
        }
        // Two seconds of answer: the cancel comes first however busy the machine is.
        handles[0].cancel()
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
        let outcomes = box.all
        XCTAssertEqual(outcomes.filter { ($0.error as? RestManager.CustomError)?.isCancellation ?? false }.count, 1)
        XCTAssertEqual(outcomes.filter { $0.statusCode == 200 }.count, 2)
    }
}
