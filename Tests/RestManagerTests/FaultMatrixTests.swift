import Foundation
import XCTest
import MockServer
import RestManager

/// Each fault: the right typed error, the completion exactly once, no crash, no hang.
final class FaultMatrixTests: MockServerTestCase {
    private enum Expected {
        case transport(URLError.Code?)
        case timedOut, tooManyRedirects, invalidURL, invalidHeader, cancelled
        case status(Int)
    }

    /// Sends, waits for the completion, then proves no second completion comes: a later request on
    /// the same serial callback queue completes after anything the first could still deliver.
    private func check(
        _ path: String, _ expected: Expected, timeout: TimeInterval = 10,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let queue = DispatchQueue(label: "fault-matrix")
        rest.callbackQueue = queue
        rest.timeoutInterval = timeout
        let count = ResultBox<RestManager.Results>()
        let done = expectation(description: path)
        rest.makeRequest(toURL: url(path), withHttpMethod: .get) {
            count.set($0); done.fulfill()
        }
        wait(for: [done], timeout: timeout + 10)
        rest.timeoutInterval = 10
        let sentinel = expectation(description: "sentinel")
        rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) { _ in sentinel.fulfill() }
        wait(for: [sentinel], timeout: 10)
        queue.sync {}
        XCTAssertEqual(count.count, 1, "\(path): completions", file: file, line: line)
        guard let results = count.value else { return }
        let error = results.error as? RestManager.CustomError
        switch (expected, error) {
        case (.transport(let code?), .transport(let urlError)?): XCTAssertEqual(urlError.code, code, path, file: file, line: line)
        case (.transport(nil), .transport?), (.timedOut, .timedOut?), (.tooManyRedirects, .tooManyRedirects?),
            (.invalidURL, .invalidURL?), (.invalidHeader, .invalidHeader?), (.cancelled, .cancelled?):
            break
        case (.status(let code), nil): XCTAssertEqual(results.statusCode, code, path, file: file, line: line)
        default:
            XCTFail(
                "\(path): expected \(expected), got \(String(describing: results.error)) / \(String(describing: results.statusCode))", file: file,
                line: line)
        }
    }

    func testFaults() {
        check("/_test/hang", .timedOut, timeout: 0.5)
        check("/_test/delay?seconds=5", .timedOut, timeout: 0.3)
        check("/_test/close-before-response", .transport(nil))
        check("/_test/close-mid-body", .transport(nil))
        check("/_test/wrong-length", .timedOut, timeout: 1)
        check("/_test/garbage", .transport(nil))
        check("/_test/status/500", .status(500))
        check("/_test/status/503", .status(503))
        check("/_test/redirect-loop", .tooManyRedirects)
        check("/_test/basic-auth", .status(401))
        check("/_test/bytes/\(20 << 20)", .status(200), timeout: 120)
    }

    func testInvalidInputFaults() {
        rest.requestHttpHeaders.add(value: "a\r\nb", forKey: "X-Injected")
        check("/_test/echo", .invalidHeader)
        rest.requestHttpHeaders = RestManager.RestEntity()
        let done = expectation(description: "invalid URL")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: URL(string: "ftp://127.0.0.1/")!, withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 10)
        guard case .invalidURL? = box.value?.error as? RestManager.CustomError else { return XCTFail("\(String(describing: box.value?.error))") }
    }

    func testNetworkFaults() {
        let done = expectation(description: "refused and unresolvable")
        done.expectedFulfillmentCount = 2
        let box = ResultBox<RestManager.Results>()
        let closedPort = server.port
        server.stop()
        for target in ["http://127.0.0.1:\(closedPort)/", "http://host.invalid/"] {
            rest.makeRequest(toURL: URL(string: target)!, withHttpMethod: .get) {
                box.set($0); done.fulfill()
            }
        }
        wait(for: [done], timeout: 30)
        let codes = box.all.compactMap { results -> URLError.Code? in
            if case .transport(let error)? = results.error as? RestManager.CustomError { return error.code }
            return nil
        }
        XCTAssertEqual(Set(codes), [.cannotConnectToHost, .cannotFindHost])
    }

    /// Swift 6.3.x on Linux kills the client process when libcurl finishes an answer whose head FoundationNetworking
    /// never saw end, or lost (swift-corelibs-foundation #5285): a server that drops the connection inside the status
    /// line or headers, after a 1xx head too, or starts a header line with a bare CR or a NUL (libcurl ends the head
    /// there; FoundationNetworking waits for CRLF), or ends a chunked body with a trailer field — a valid answer, whose
    /// trailer libcurl hands over as a header line that FoundationNetworking takes for the start of a new head. Each
    /// runs in a child process (the restdemo binary) and what happens is recorded, so that a toolchain change is
    /// noticed. (`HostileResponseFuzzTests` keeps to answers that do not trap.)
    func testHeadsThatTrapFoundationNetworkingInAChildProcess() throws {
        let heads = [
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\rX-After: a bare CR\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\0Content-Length: 2\r\n\r\nok",
            "HTTP/1.1 200 OK\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Checksum: 1\r\n\r\n"
        ]
        for (index, head) in heads.enumerated() {
            server.stub(path: "/trap\(index)/*", response: .raw([.init(head)]))
        }
        let bases = ["/_test/close-in-headers"] + heads.indices.map { "/trap\($0)" }
        for base in bases {
            let run = try restdemo(["--base-url", server.baseURL.absoluteString + base, "users"], useServer: false)
            if run.crashed {
                // The known toolchain trap: documented in the README under "Guarantees and known toolchain limits".
                XCTAssertTrue(run.stderr.contains("Transfer completed, but there's no response"), "\(base): \(run.stderr)")
            } else {
                // A fixed toolchain: the library reports a clean transport error and restdemo exits 69.
                XCTAssertEqual(run.status, 69, "\(base): \(run.stderr)")
                XCTAssertTrue(run.stderr.hasPrefix("restdemo: cannot reach "), "\(base): \(run.stderr)")
            }
        }
        XCTAssertGreaterThanOrEqual(server.receivedRequests.count, bases.count, "each reached the server")
    }
}
