import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import HeapStatistics
import MockServer
import RestManager

/// The seam for attempts: adapt and decide, in order, for every attempt, within the deadline and the attempt cap.
final class InterceptorTests: MockServerTestCase {
    /// Signs each attempt: `X-Timestamp` (milliseconds and the attempt) and an HMAC-SHA-256 over method, path and timestamp.
    struct Signer: RestManager.Interceptor {
        static let key = Array("s3cret-key".utf8)

        static func signature(method: String, path: String, timestamp: String) -> String {
            HMAC.sha256Hex(key: key, message: Array("\(method)\n\(path)\n\(timestamp)".utf8))
        }

        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            var signed = request
            let timestamp = "\(Int64(Date().timeIntervalSince1970 * 1000)).\(attempt)"
            signed.setValue(timestamp, forHTTPHeaderField: "X-Timestamp")
            let signature = Self.signature(method: request.httpMethod ?? "GET", path: request.url?.path ?? "", timestamp: timestamp)
            signed.setValue(signature, forHTTPHeaderField: "X-Signature")
            return signed
        }
    }

    struct RetryOnce503: RestManager.Interceptor {
        func decide(after results: RestManager.Results, for request: URLRequest, attempt: Int) async -> RestManager.AttemptDecision {
            results.statusCode == 503 && attempt == 1 ? .retry(after: 0) : .deliver
        }
    }

    /// Appends its name to `X-Order` when adapting and to `log` when deciding.
    struct Recorder: RestManager.Interceptor {
        let name: String
        let log: ResultBox<String>
        var decision: RestManager.AttemptDecision = .deliver

        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            var adapted = request
            let order = request.value(forHTTPHeaderField: "X-Order").map { $0 + "," } ?? ""
            adapted.setValue(order + name, forHTTPHeaderField: "X-Order")
            return adapted
        }

        func decide(after results: RestManager.Results, for request: URLRequest, attempt: Int) async -> RestManager.AttemptDecision {
            log.set("\(name): \(results.statusCode ?? 0) \(String(decoding: results.data ?? Data(), as: UTF8.self))")
            return decision
        }
    }

    struct Failing: RestManager.Interceptor {
        let error: Error
        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest { throw error }
    }

    struct Always: RestManager.Interceptor {
        let delay: TimeInterval
        func decide(after results: RestManager.Results, for request: URLRequest, attempt: Int) async -> RestManager.AttemptDecision {
            .retry(after: delay)
        }
    }

    /// Holds each call in `adapt` until `gate` opens; `entered` is fulfilled when a call arrives.
    struct WaitsToAdapt: RestManager.Interceptor {
        let gate: Gate
        let entered: XCTestExpectation
        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            entered.fulfill()
            await gate.wait()
            return request
        }
    }

    /// Fulfils `adapted` when a call reaches it: the interceptors before it have returned.
    struct Signals: RestManager.Interceptor {
        let adapted: XCTestExpectation
        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            adapted.fulfill()
            return request
        }
    }

    func testTheHMACHelperMatchesRFC4231() {
        let digest = HMAC.sha256Hex(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
        XCTAssertEqual(digest, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    }

    /// A signer on the manager, a 503-once retry on the request, composed with the authenticator: each attempt is signed anew.
    func testASignerAndARetryComposeWithTheAuthenticator() throws {
        rest.authenticator = RestManager.Authenticator(credential: .init(accessToken: "t0")) { _ in .init(accessToken: "t1") }
        rest.interceptors.append(Signer())
        server.enqueue(MockServer.Response(status: 503))
        server.stub(path: "/signed") { request in
            let timestamp = request.header("X-Timestamp") ?? ""
            let valid = request.header("X-Signature") == Signer.signature(method: request.method, path: request.path, timestamp: timestamp)
            return valid && request.header("Authorization") == "Bearer t0" ? .text("signed") : MockServer.Response(status: 401)
        }
        var request = RestManager.Request(.put, url: url("/signed"))
        request.interceptors = [RetryOnce503()]
        request.body = Data("x".utf8)
        let results = send(request)
        XCTAssertEqual(results.statusCode, 200)
        XCTAssertEqual(results.data, Data("signed".utf8))
        let received = server.receivedRequests
        XCTAssertEqual(received.count, 2)
        XCTAssertEqual(received.map { $0.header("Authorization") }, ["Bearer t0", "Bearer t0"])
        let stamps = received.compactMap { $0.header("X-Timestamp") }
        XCTAssertEqual(stamps.map { $0.split(separator: ".").last.map(String.init) }, ["1", "2"], "a timestamp per attempt")
        for request in received {
            let expected = Signer.signature(method: "PUT", path: "/signed", timestamp: request.header("X-Timestamp") ?? "")
            XCTAssertEqual(request.header("X-Signature"), expected)
        }
    }

    func testTheManagersInterceptorsRunInOrderThenTheRequests() {
        let log = ResultBox<String>()
        rest.interceptors = [Recorder(name: "A", log: log), Recorder(name: "B", log: log)]
        var request = RestManager.Request(url: url("/_test/status/201"))
        request.interceptors = [Recorder(name: "C", log: log)]
        XCTAssertEqual(send(request).statusCode, 201)
        XCTAssertEqual(server.receivedRequests.map { $0.header("X-Order") }, ["A,B,C"])
        let body = #"{"status":201}"#
        XCTAssertEqual(log.all, ["A: 201 \(body)", "B: 201 \(body)", "C: 201 \(body)"])
    }

    /// `deliverInstead` hands the next interceptors and the caller the replacement.
    func testDeliverInsteadReplacesTheResultsForTheRestOfTheChain() {
        let log = ResultBox<String>()
        let replacement = RestManager.Results(withData: Data("replaced".utf8), response: nil, error: nil)
        rest.interceptors = [Recorder(name: "A", log: log, decision: .deliverInstead(replacement)), Recorder(name: "B", log: log)]
        let results = send(.get, "/_test/status/500")
        XCTAssertEqual(results.data, Data("replaced".utf8))
        XCTAssertNil(results.statusCode)
        XCTAssertEqual(log.all, [#"A: 500 {"status":500}"#, "B: 0 replaced"])
    }

    /// What `adapt` throws reaches the caller as it was thrown: it can catch its own error by type.
    func testAThrowingAdaptEndsTheCallBeforeAnythingIsSent() async {
        struct Offline: Error, Equatable { var reason: String }
        rest.interceptors = [Failing(error: Offline(reason: "airplane mode"))]
        XCTAssertEqual(send(.get, "/x").error as? Offline, Offline(reason: "airplane mode"))
        do {
            _ = try await rest.request(String.self, fromURL: url("/x"))
            XCTFail("no error")
        } catch let error as Offline {
            XCTAssertEqual(error.reason, "airplane mode")
        } catch { XCTFail("\(error)") }
        rest.interceptors = [Failing(error: RestManager.CustomError.invalidTimeout(-1))]
        guard case .invalidTimeout(-1)? = send(.get, "/x").error as? RestManager.CustomError else { return XCTFail("not as is") }
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// A call cancelled while an interceptor adapts it completes once with `.cancelled`; when the adapt returns, it is
    /// neither reported `started` nor sent. (A mutant that let a finished call go on after its adapt reported it.)
    func testACallCancelledWhileAdaptingIsNeverSent() {
        let gate = Gate()
        let entered = expectation(description: "adapting")
        let adapted = expectation(description: "adapted")
        let events = ResultBox<String>()
        rest.eventHandler = { events.set("\($0)") }
        rest.interceptors = [WaitsToAdapt(gate: gate, entered: entered), Signals(adapted: adapted)]
        let done = expectation(description: "completed")
        let outcome = ResultBox<RestManager.Results>()
        let handle = rest.makeRequest(toURL: url("/x"), withHttpMethod: .get) {
            outcome.set($0)
            done.fulfill()
        }
        wait(for: [entered], timeout: 15)
        handle.cancel()
        wait(for: [done], timeout: 15)
        gate.open()
        wait(for: [adapted], timeout: 15)
        // What follows an adapt runs at once: half a second shows it even on a loaded machine.
        Thread.sleep(forTimeInterval: 0.5)
        guard case .cancelled? = outcome.value?.error as? RestManager.CustomError else { return XCTFail("not cancelled") }
        XCTAssertEqual(outcome.count, 1)
        XCTAssertEqual(events.all.filter { $0.hasPrefix("started") }, [])
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// What `adapt` returns is checked like the caller's headers: no CR/LF, no framing headers.
    func testAnAdaptedRequestIsValidatedLikeAnyOther() {
        struct Smuggler: RestManager.Interceptor {
            let name: String
            let value: String
            func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
                var adapted = request
                adapted.setValue(value, forHTTPHeaderField: name)
                return adapted
            }
        }
        // (A value with CR or LF never gets this far: URLRequest drops it.)
        for (name, value) in [("Content-Length", "0"), ("Transfer-Encoding", "chunked"), ("Bad Name", "x")] {
            rest.interceptors = [Smuggler(name: name, value: value)]
            guard case .invalidHeader(let refused, _)? = send(.post, "/x").error as? RestManager.CustomError else {
                return XCTFail("\(name) was not refused")
            }
            XCTAssertEqual(refused, name)
        }
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// An adapted URL is checked like the caller's: http(s) only (before, `ftp://` made libcurl speak FTP to that host
    /// and `data:` was "answered"), with its scheme in lower case (`HTTP://` was "unsupported URL" on Linux), at most
    /// 1,000,000 bytes (before, one byte more went to libcurl and failed as "Network error -1: Out of memory").
    func testAnAdaptedURLIsValidatedLikeAnyOther() {
        struct Mover: RestManager.Interceptor {
            let target: String
            func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
                var moved = request
                moved.url = URL(string: target)
                return moved
            }
        }
        for target in ["ftp://127.0.0.1/x", "data:text/plain,hello", "file:///etc/hostname", "http://127.0.0.1:0/x", ""] {
            rest.interceptors = [Mover(target: target)]
            guard case .invalidURL(let refused, _)? = send(.get, "/x").error as? RestManager.CustomError else {
                return XCTFail("\(target) was not refused")
            }
            XCTAssertEqual(refused, target.isEmpty ? "file:///" : target, "no URL at all is refused too")
        }
        let prefix = "http://127.0.0.1:\(server.port)/long?q="
        let long = prefix + String(repeating: "a", count: 1_000_001 - prefix.utf8.count)
        rest.interceptors = [Mover(target: long)]
        guard case .invalidURL(let shown, let reason)? = send(.get, "/x").error as? RestManager.CustomError else {
            return XCTFail("a URL of 1,000,001 bytes was not refused")
        }
        XCTAssertEqual(shown, String(long.prefix(60)) + "…")
        XCTAssertEqual(reason, "it is longer than 1,000,000 bytes")
        XCTAssertEqual(server.receivedRequests.count, 0)
        rest.interceptors = [Mover(target: "HTTP://127.0.0.1:\(server.port)/moved")]
        XCTAssertEqual(send(.get, "/x").statusCode, 404)
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/moved"])
    }

    func testAnInterceptorThatAlwaysRetriesStopsAtTheAttemptCap() {
        rest.interceptors = [Always(delay: 0)]
        server.stub(path: "/busy", response: MockServer.Response(status: 503))
        XCTAssertEqual(send(.get, "/busy", timeout: 60).statusCode, 503)
        XCTAssertEqual(RestManager.maximumAttempts, 100)
        XCTAssertEqual(server.receivedRequests.count, 100)
    }

    /// A retry whose delay would end after the deadline delivers the current results at once.
    func testARetryPastTheDeadlineDeliversTheCurrentResults() {
        rest.interceptors = [Always(delay: 30)]
        rest.timeoutInterval = 5
        let started = Date()
        XCTAssertEqual(send(.get, "/_test/status/503").statusCode, 503)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "delivered before the deadline, not timed out")
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    /// The retry policy is an interceptor too: it runs after the others and can be one in a request's chain.
    func testTheRetryPolicyIsAnInterceptor() {
        var request = RestManager.Request(url: url("/_test/status/204"))
        request.interceptors = [RestManager.RetryPolicy(maximumRetries: 1, initialDelay: 0)]
        server.enqueue(MockServer.Response(status: 502))
        XCTAssertEqual(send(request).statusCode, 204)
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    /// A call with interceptors leaves nothing behind: the task that runs their steps ends with the call. (Left
    /// waiting for steps that never come, it kept about 4.5 KB a call.) The heap is not measured under sanitizers.
    func testACallWithInterceptorsLeavesNoTaskBehind() async {
        struct Passes: RestManager.Interceptor {}
        rest.interceptors = [Passes()]
        for _ in 1...100 { _ = await rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) }
        server.clearReceivedRequests()
        let before = heap_statistics_live_bytes()
        for _ in 1...1_000 { _ = await rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) }
        server.clearReceivedRequests()
        let after = heap_statistics_live_bytes()
        if before > 0 {
            let growthPerCall = (Double(after) - Double(before)) / 1_000
            XCTAssertLessThan(growthPerCall, 2_048, "the live heap grew \(Int(growthPerCall)) bytes a call")
        }
    }

    enum Trace {
        @TaskLocal static var id: String?
    }

    /// Sends the calling task's trace ID (a task-local value) as `X-Trace`, and records the one `decide` sees.
    struct TraceHeader: RestManager.Interceptor {
        let decided: ResultBox<String>

        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            var request = request
            request.setValue(Trace.id ?? "none", forHTTPHeaderField: "X-Trace")
            return request
        }

        func decide(after results: RestManager.Results, for request: URLRequest, attempt: Int) async -> RestManager.AttemptDecision {
            decided.set(Trace.id ?? "none")
            return .deliver
        }
    }

    /// Interceptors run in the calling task's context on every attempt: a retry (started by a timer) and a call whose
    /// multipart body was assembled from a file (on another thread) see the caller's task-local values.
    func testInterceptorsSeeTheCallersTaskLocalValuesOnEveryAttempt() async throws {
        server.stub(path: "/traced") { _ in .text("ok") }
        server.enqueue(MockServer.Response(status: 503))
        var request = RestManager.Request(url: url("/traced"))
        let decided = ResultBox<String>()
        request.interceptors = [TraceHeader(decided: decided), RetryOnce503()]
        let retried = await Trace.$id.withValue("t-1") { await rest.makeRequest(request) }
        XCTAssertEqual(retried.statusCode, 200)
        let file = scratch.appendingPathComponent("part.txt")
        try Data("part".utf8).write(to: file)
        rest.interceptors = [TraceHeader(decided: decided)]
        rest.addFile(at: file, fieldName: "file", mimeType: "text/plain")
        let uploaded = await Trace.$id.withValue("t-2") { await rest.makeRequest(toURL: url("/traced"), withHttpMethod: .post) }
        XCTAssertEqual(uploaded.statusCode, 200)
        XCTAssertEqual(server.receivedRequests.map { $0.header("X-Trace") ?? "-" }, ["t-1", "t-1", "t-2"])
        XCTAssertEqual(decided.all, ["t-1", "t-1", "t-2"], "what decide saw")
    }

}
