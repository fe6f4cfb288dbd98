import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// Every call ends, with the right outcome, whatever the peer does: an error answer whose body never ends is cut at
/// 64 KiB on every path, with no deadline and no size limit to end it otherwise.
final class EveryCallEndsTests: MockServerTestCase {
    /// Answers every request with `500` and a chunked body of "x" that never ends (until the client goes).
    static let endlessErrorServer = """
        import time
        def serve(connection):
            pending = read_until(connection, b"", lambda b: b"\\r\\n\\r\\n" in b)
            if pending is None:
                return
            head = pending.split(b"\\r\\n\\r\\n")[0].lower()
            length = [int(l.split(b":")[1]) for l in head.split(b"\\r\\n") if l.startswith(b"content-length:")]
            body = pending.split(b"\\r\\n\\r\\n", 1)[1]
            if length and read_until(connection, body, lambda b: len(b) >= length[0]) is None:
                return
            connection.sendall(b"HTTP/1.1 500 Internal Server Error\\r\\nContent-Type: text/event-stream\\r\\n"
                               b"Transfer-Encoding: chunked\\r\\n\\r\\n")
            try:
                while True:
                    connection.sendall(b"2000\\r\\n" + b"x" * 8192 + b"\\r\\n")
                    time.sleep(0.001)  # 8 MB/s: a flood at full speed would keep this server from taking new calls
            except OSError:
                connection.close()

        """

    private var endless: PythonServer!
    private var endlessURL: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        endless = try startSocketServer(serving: Self.endlessErrorServer, named: "endless_error")
        endlessURL = URL(string: "http://127.0.0.1:\(try XCTUnwrap(endless.port))/endless")
        // Nothing else would end these calls: no whole-call deadline, no size limit, bytes keep arriving.
        rest.timeoutInterval = 3_600
        rest.idleTimeoutInterval = 3_600
        rest.maximumResponseSize = nil
    }

    override func tearDown() {
        endless?.stop()
        super.tearDown()
    }

    private let firstBytes = Data(repeating: UInt8(ascii: "x"), count: 65_536)

    /// Runs `body` and waits up to a minute for it to end (it should within a second); nil when it did not.
    private func ended<Value: Sendable>(
        _ body: @escaping @Sendable (RestManager) async throws -> Value
    ) async -> Result<Value, any Error>? {
        let box = ResultBox<Result<Value, any Error>>()
        let done = expectation(description: "the call ended")
        let rest = self.rest!
        let task = Task {
            do { box.set(.success(try await body(rest))) } catch { box.set(.failure(error)) }
            done.fulfill()
        }
        await fulfillment(of: [done], timeout: 60)
        task.cancel()
        return box.value
    }

    private func assertCutError<Value>(
        _ outcome: Result<Value, any Error>?, file: StaticString = #filePath, line: UInt = #line
    ) {
        guard case .failure(let error) = outcome,
            case .unacceptableStatusCode(let code, let body) = error as? RestManager.CustomError
        else { return XCTFail("\(String(describing: outcome))", file: file, line: line) }
        XCTAssertEqual(code, 500, file: file, line: line)
        XCTAssertEqual(body, firstBytes, file: file, line: line)
    }

    private func assertCutAnswer(
        _ outcome: Result<RestManager.Results, any Error>?, file: StaticString = #filePath, line: UInt = #line
    ) {
        let results = try? outcome?.get()
        XCTAssertNil(results?.error, file: file, line: line)
        XCTAssertEqual(results?.statusCode, 500, file: file, line: line)
        XCTAssertEqual(results?.data, firstBytes, file: file, line: line)
    }

    func testMakeRequestGetsTheStatusAndTheFirst64KiB() async {
        let url = endlessURL!
        assertCutAnswer(await ended { await $0.makeRequest(toURL: url, withHttpMethod: .get) })
    }

    func testValidatingCallsThrowTheStatusWithTheFirst64KiB() async {
        let url = endlessURL!
        assertCutError(await ended { try await $0.data(fromURL: url) })
        assertCutError(await ended { try await $0.request(String.self, for: RestManager.Request(.post, url: url)) })
    }

    func testAStreamThrowsTheStatusWithTheFirst64KiB() async {
        let url = endlessURL!
        assertCutError(await ended { try await $0.stream(RestManager.Request(url: url)).1 })
    }

    func testAnEventStreamThrowsTheStatusWithTheFirst64KiB() async {
        let url = endlessURL!
        assertCutError(
            await ended { rest in
                for try await event in rest.events(for: RestManager.Request(url: url)) { return event.data }
                return "no event"
            })
    }

    func testADownloadThrowsTheStatusWithTheFirst64KiBAndWritesNothing() async {
        let url = endlessURL!
        let destination = scratch.appendingPathComponent("never.bin")
        assertCutError(await ended { try await $0.download(fromURL: url, to: destination) })
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path + ".part"))
    }

    func testAnUploadGetsTheStatusAndTheFirst64KiB() async throws {
        let url = endlessURL!
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 100_000).write(to: file)
        assertCutAnswer(await ended { await $0.upload(fileAt: file, toURL: url) })
    }
}
