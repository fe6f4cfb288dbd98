import Foundation
import XCTest
import MockServer
import RestManager

/// Transfers end when no byte moves for `idleTimeoutInterval`, never because they are long; `timeoutInterval` on the
/// call bounds the whole transfer, and the manager's (for API calls) does not apply.
final class TransferTimeoutTests: MockServerTestCase {
    /// 6 pieces of 1,000 bytes, 0.25 s apart: at least 1.25 s however fast the machine.
    private func stubSlowFile() -> Data {
        let piece = Data(repeating: 0x61, count: 1000)
        server.stub("GET", path: "/slow", response: .streamed((0..<6).map { _ in MockServer.Response.Piece(after: 0.25, piece) }))
        return Data(repeating: 0x61, count: 6000)
    }

    func testADownloadOutlastsTheManagersTimeoutWhileBytesArrive() throws {
        rest.timeoutInterval = 0.5
        let expected = stubSlowFile()
        let target = scratch.appendingPathComponent("slow.bin")
        XCTAssertEqual(try XCTUnwrap(download("/slow", to: target)).get(), target)
        XCTAssertEqual(try Data(contentsOf: target), expected)
    }

    func testTimeoutIntervalOnTheCallBoundsTheWholeDownload() throws {
        _ = stubSlowFile()
        guard case .failure(.timedOut(_, let after, .wholeCall))? = download("/slow", to: scratch.appendingPathComponent("a"), timeoutInterval: 0.5)
        else { return XCTFail("no timeout") }
        XCTAssertEqual(after, 0.5)
    }

    /// The first 50,000 bytes come at once, then nothing for 30 s: the idle timeout ends the call, and the bytes that
    /// arrived stay in the partial file.
    func testAStalledDownloadEndsAfterTheIdleTimeout() throws {
        rest.idleTimeoutInterval = 2
        let target = scratch.appendingPathComponent("stalled.bin")
        let started = Date()
        let outcome = download("/_test/stall?bytes=100000&seconds=30", to: target)
        guard case .failure(let error)? = outcome, case .timedOut(_, let after, .idle) = error else {
            return XCTFail("no idle timeout: \(String(describing: outcome))")
        }
        XCTAssertEqual(after, 2)
        XCTAssertEqual(
            error.localizedDescription,
            "The request to \(url("/_test/stall?bytes=100000&seconds=30")) timed out after 2.0 s: no byte was sent or "
                + "received for that long (raise the manager's idleTimeoutInterval to wait longer).")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 2)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20)
        let partial = try Data(contentsOf: URL(fileURLWithPath: target.path + ".part"))
        XCTAssertEqual(partial, Data((0..<50_000).map { UInt8($0 % 251) }))
    }

    /// The body goes out at once, then the answer never comes: idle, whatever the manager's timeout.
    func testAnUploadWhoseAnswerNeverComesEndsAfterTheIdleTimeout() throws {
        rest.timeoutInterval = 1000
        rest.idleTimeoutInterval = 1
        var silent = MockServer.Response(status: 200)
        silent.delay = 30
        server.stub("POST", path: "/silent", response: silent)
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 10_000).write(to: file)
        let done = expectation(description: "upload")
        let box = ResultBox<RestManager.Results>()
        rest.upload(fileAt: file, toURL: url("/silent")) { results in
            box.set(results)
            done.fulfill()
        }
        wait(for: [done], timeout: 20)
        guard case .timedOut(_, let after, .idle)? = box.value?.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: box.value?.error))")
        }
        XCTAssertEqual(after, 1)
    }

    /// Bytes going out count as activity: an upload that a server reads slowly, with nothing coming back until the
    /// end, outlasts the idle timeout while it sends. The server reads 64 KiB every 20 ms up to 20 MiB of the 24, then
    /// the rest at once: the bytes waiting in the sockets' buffers (several MiB on loopback) leave the sender unseen,
    /// so a slow reader's last buffers' worth must drain within the idle timeout.
    func testAnUploadTheServerReadsSlowlyIsNotIdleWhileItSends() throws {
        let python = try startSocketServer(
            serving: """
                import time
                def serve(connection):
                    pending = read_until(connection, b"", lambda b: b"\\r\\n\\r\\n" in b)
                    head, _, body = pending.partition(b"\\r\\n\\r\\n")
                    lines = [line for line in head.split(b"\\r\\n") if line.lower().startswith(b"content-length:")]
                    length = int(lines[0].split(b":")[1])
                    received = len(body)
                    while received < length:
                        chunk = connection.recv(65536)
                        if not chunk:
                            return
                        received += len(chunk)
                        if received < 20 << 20:
                            time.sleep(0.02)
                    answer = str(received).encode()
                    connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(answer), answer))
                    connection.close()

                """, named: "slow_reader")
        defer { python.stop() }
        rest.idleTimeoutInterval = 2
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 24 << 20).write(to: file)
        let done = expectation(description: "upload")
        let box = ResultBox<RestManager.Results>()
        let target = try XCTUnwrap(URL(string: "http://127.0.0.1:\(try XCTUnwrap(python.port))/slow"))
        rest.upload(fileAt: file, toURL: target) { results in
            box.set(results)
            done.fulfill()
        }
        wait(for: [done], timeout: 120)
        XCTAssertNil(box.value?.error)
        XCTAssertEqual(box.value?.data.map { String(decoding: $0, as: UTF8.self) }, "25165824")
    }

    func testAnUploadOutlastsTheManagersTimeoutAndTimeoutIntervalOnTheCallBoundsIt() async throws {
        rest.timeoutInterval = 0.2
        var slow = MockServer.Response.text("done")
        slow.delay = 0.6
        server.stub("PUT", path: "/slow-answer", response: slow)
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 1000).write(to: file)
        let results = await rest.upload(fileAt: file, toURL: url("/slow-answer"), withHttpMethod: .put)
        XCTAssertNil(results.error)
        XCTAssertEqual(results.data.map { String(decoding: $0, as: UTF8.self) }, "done")
        let bounded = await rest.upload(fileAt: file, toURL: url("/slow-answer"), withHttpMethod: .put, timeoutInterval: 0.2)
        guard case .timedOut(_, let after, .wholeCall)? = bounded.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: bounded.error))")
        }
        XCTAssertEqual(after, 0.2)
    }
    /// An idle timeout that is NaN, zero or negative is refused by every call that uses it, before anything is sent
    /// (NaN trapped in the timer); infinity means none. Plain calls do not use it.
    func testAnIdleTimeoutThatIsNotPositiveIsRefusedByStreamsAndTransfers() async throws {
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 100).write(to: file)
        for idle in [Double.nan, 0, -1, -Double.infinity] {
            rest.idleTimeoutInterval = idle
            let refused = "Invalid timeout \(idle): it must be a positive number of seconds."
            do {
                _ = try await rest.stream(RestManager.Request(url: url("/_test/bytes/10")))
                XCTFail("the stream was sent with an idle timeout of \(idle)")
            } catch {
                XCTAssertEqual(error.localizedDescription, refused)
            }
            do {
                _ = try await rest.download(fromURL: url("/_test/bytes/10"), to: scratch.appendingPathComponent("d"))
                XCTFail("the download was sent with an idle timeout of \(idle)")
            } catch {
                XCTAssertEqual(error.localizedDescription, refused)
            }
            let uploaded = await rest.upload(fileAt: file, toURL: url("/upload"))
            XCTAssertEqual(uploaded.error?.localizedDescription, refused)
            rest.addFile(at: file, fieldName: "doc", mimeType: "application/octet-stream")
            let multipart = await rest.makeRequest(toURL: url("/upload"), withHttpMethod: .post)
            XCTAssertEqual(multipart.error?.localizedDescription, refused)
            rest.clearParameters()
            XCTAssertNil(send(.get, "/_test/bytes/10").error)
        }
        XCTAssertEqual(server.receivedRequests.count, 4)
        rest.idleTimeoutInterval = .infinity
        let (body, _) = try await rest.stream(RestManager.Request(url: url("/_test/bytes/10")))
        var count = 0
        for try await chunk in body { count += chunk.count }
        XCTAssertEqual(count, 10)
    }
}
