import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// Exactly one `finished` event per call, on every path, with the call's method, before its completion runs.
final class EventTests: MockServerTestCase {
    private let events = ResultBox<String>()

    override func setUpWithError() throws {
        try super.setUpWithError()
        let events = self.events
        rest.eventHandler = { events.set($0.description) }
    }

    private var finishedLines: [String] { events.all.filter { $0.hasPrefix("finished") } }

    /// Runs `call` and returns the `finished` lines seen when its completion ran.
    private func finishedWhenCompleted(_ call: (@escaping @Sendable (RestManager.Results) -> Void) -> Void) -> [String] {
        let done = expectation(description: "completion")
        let seen = ResultBox<[String]>()
        let events = self.events
        call { _ in
            seen.set(events.all.filter { $0.hasPrefix("finished") })
            done.fulfill()
        }
        wait(for: [done], timeout: 15)
        return seen.value ?? []
    }

    func testTheFinishedEventComesBeforeTheCompletionOnSuccessAndFailure() {
        let ok = finishedWhenCompleted { rest.makeRequest(toURL: url("/_test/status/201"), withHttpMethod: .put, completion: $0) }
        XCTAssertEqual(ok.count, 1, "\(ok)")
        XCTAssertTrue(ok.first?.hasPrefix("finished PUT \(server.baseURL.absoluteString)/_test/status/201 HTTP 201 in ") ?? false, "\(ok)")
        rest.requestHttpHeaders.add(value: "a\nb", forKey: "X-Bad")
        let invalid = finishedWhenCompleted { rest.makeRequest(toURL: url("/x"), withHttpMethod: .delete, completion: $0) }
        XCTAssertEqual(invalid.count, 2)
        let failed = "finished DELETE \(server.baseURL.absoluteString)/x failed: Invalid request header"
        XCTAssertTrue(invalid.last?.hasPrefix(failed) ?? false, "\(invalid)")
    }

    /// A file added by URL that is missing fails while the body is assembled: one `finished POST`, as for any call.
    func testAFailedMultipartAssemblyAndAFailedUploadBuildEachReportOnePostFinished() {
        rest.addFile(at: scratch.appendingPathComponent("missing.jpg"), fieldName: "f", mimeType: "image/jpeg")
        let multipart = finishedWhenCompleted { rest.makeRequest(toURL: url("/upload"), withHttpMethod: .post, completion: $0) }
        XCTAssertEqual(multipart.count, 1, "\(multipart)")
        XCTAssertTrue(multipart.first?.hasPrefix("finished POST \(server.baseURL.absoluteString)/upload failed: The file ") ?? false, "\(multipart)")
        rest.clearParameters()
        let upload = finishedWhenCompleted { completion in
            rest.upload(fileAt: scratch.appendingPathComponent("missing.bin"), toURL: url("/upload"), withHttpMethod: .put, completion: completion)
        }
        XCTAssertEqual(upload.count, 2, "\(upload)")
        XCTAssertTrue(upload.last?.hasPrefix("finished PUT \(server.baseURL.absoluteString)/upload failed: The file ") ?? false, "\(upload)")
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    func testACancelledCallAndEachDeduplicatedCallerReportOnce() {
        let cancelled = finishedWhenCompleted { completion in
            rest.makeRequest(toURL: url("/_test/delay?seconds=5"), withHttpMethod: .get, completion: completion).cancel()
        }
        XCTAssertEqual(cancelled.count, 1)
        XCTAssertTrue(cancelled.first?.contains("failed: The request was cancelled.") ?? false, "\(cancelled)")
        rest.deduplicatesRequests = true
        let group = DispatchGroup()
        for _ in 0..<3 {
            group.enter()
            rest.makeRequest(toURL: url("/_test/delay?seconds=0.3"), withHttpMethod: .get) { _ in group.leave() }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 15), .success)
        XCTAssertEqual(finishedLines.count, 4, "\(finishedLines)")
        XCTAssertEqual(finishedLines.filter { $0.contains("HTTP 200") }.count, 3)
        XCTAssertEqual(server.receivedRequests.filter { $0.target == "/_test/delay?seconds=0.3" }.count, 1, "one network call")
    }

    /// A call cancelled on the wire is named as it was built (the base URL joined, the query added), not by the
    /// relative URL it was made with.
    func testACancelledCallIsNamedAsBuilt() throws {
        rest.baseURL = server.baseURL
        var request = RestManager.Request(url: try XCTUnwrap(URL(string: "_test/delay?seconds=5")))
        request.queryParameters.add(value: "2", forKey: "page")
        let cancelled = finishedWhenCompleted { completion in rest.makeRequest(request, completion: completion).cancel() }
        XCTAssertEqual(cancelled.count, 1, "\(cancelled)")
        let named = "finished GET \(server.baseURL.absoluteString)/_test/delay?seconds=5&page=2 failed: The request was cancelled. in "
        XCTAssertTrue(cancelled.first?.hasPrefix(named) ?? false, "\(cancelled)")
    }

    /// The duration counts from the call's start: at least the server's delay, and it says milliseconds.
    /// `started` names the request as the interceptors made it (their headers, their URL), not as the caller built it.
    func testTheStartedEventShowsTheRequestAsAdapted() throws {
        let moved = url("/_test/echo?moved=1")
        rest.interceptors = [
            NoSilentChangeTests.Adapting { request in
                request.setValue("yes", forHTTPHeaderField: "X-Signed")
                request.url = moved
            }
        ]
        let started = ResultBox<URLRequest>()
        rest.eventHandler = { event in
            if case .started(let request, _) = event { started.set(request) }
        }
        XCTAssertEqual(send(.get, "/_test/status/200").statusCode, 200)
        XCTAssertEqual(started.count, 1)
        XCTAssertEqual(started.value?.value(forHTTPHeaderField: "X-Signed"), "yes")
        XCTAssertEqual(started.value?.url, moved)
    }

    func testTheDurationCoversTheWholeCall() throws {
        server.stub(path: "/slow") { _ in
            var response = MockServer.Response(status: 200)
            response.delay = 0.3
            return response
        }
        _ = finishedWhenCompleted { rest.makeRequest(toURL: url("/slow"), withHttpMethod: .get, completion: $0) }
        let line = try XCTUnwrap(finishedLines.first)
        let milliseconds = try XCTUnwrap(line.split(separator: " ").dropLast().last.flatMap { Double($0) }, line)
        XCTAssertGreaterThanOrEqual(milliseconds, 300, line)
        XCTAssertTrue(line.hasSuffix(" ms"), line)
    }
}
