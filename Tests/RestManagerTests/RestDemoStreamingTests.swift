import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MockServer
import XCTest
@testable import RestManager

/// `restdemo stream` and `restdemo events`: lines and events printed as they arrive; Ctrl-C ends them cleanly.
final class RestDemoStreamingTests: MockServerTestCase {
    func testStreamPrintsEachLineOfTheBody() throws {
        let run = try restdemo(["stream", "/_test/stream?count=4&interval=0.01"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "The\nquick\nbrown\nfox\n")
    }

    func testEventsPrintsOneLinePerEventAndEndsAtThe204() throws {
        let run = try restdemo(["events", "/_test/events?count=3&interval=0.01"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "message\t1\tThe\nmessage\t2\tquick\nmessage\t3\tbrown\ndone\t3\t[DONE]\n")
        XCTAssertEqual(server.receivedRequests.map { $0.header("Last-Event-ID") }, [nil, "3"])
    }

    func testEventsShowsLineBreaksInDataAsBackslashN() throws {
        server.enqueue(.events([.init(id: "a", event: "note", data: "two\nlines", retry: 10)]))
        server.enqueue(MockServer.Response(status: 204))
        let run = try restdemo(["events", "/multi"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "note\ta\ttwo\\nlines\n")
    }

    /// A hostile server's escape sequences (set the title: OSC 0; clear the screen: CSI 2J; write the clipboard:
    /// OSC 52; a C1 CSI) reach the terminal escaped, as `cat -v` shows them; a tab stays a tab.
    func testControlCharactersFromTheServerAreShownEscaped() throws {
        let hostile = "\u{1B}]0;pwned\u{07}title\u{1B}[2Jclear\u{1B}]52;c;aGk=\u{07}\u{9B}31m\u{7F}\tend"
        server.enqueue(.events([.init(id: "7", event: "note\u{1B}", data: hostile)]))
        server.enqueue(MockServer.Response(status: 204))
        let events = try restdemo(["events", "/hostile"])
        XCTAssertEqual(events.status, 0, events.stderr)
        XCTAssertEqual(events.stdout, "note^[\t7\t^[]0;pwned^Gtitle^[[2Jclear^[]52;c;aGk=^GM-^[31m^?\tend\n")
        server.stub(path: "/hostile-lines", response: MockServer.Response(status: 200, body: Data("ok\n\u{1B}]0;x\u{07}\u{1B}c\n".utf8)))
        let stream = try restdemo(["stream", "/hostile-lines"])
        XCTAssertEqual(stream.status, 0, stream.stderr)
        XCTAssertEqual(stream.stdout, "ok\n^[]0;x^G^[c\n", stream.stderr)
    }

    func testANon2xxAnswerIsOneLineOnStderrAndExit1() throws {
        let run = try restdemo(["stream", "/_test/status/503"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.stdout, "")
        XCTAssertTrue(run.stderr.hasSuffix("/_test/status/503: HTTP 503\n"), run.stderr)
        XCTAssertEqual(run.stderr.filter { $0 == "\n" }.count, 1, run.stderr)
    }

    /// An answer that is not what the command reads (JSON to `events`, a 206 that breaks its `Content-Range` to
    /// `download`) is a bad answer, exit 65 as for JSON that does not decode: the network was reachable.
    func testAnAnswerOfTheWrongKindExits65() throws {
        let events = try restdemo(["events", "/api/users/2"])
        XCTAssertEqual(events.status, 65, events.stderr)
        let reason = "The answer is not an event stream: its Content-Type is 'application/json; charset=utf-8', not text/event-stream"
        XCTAssertTrue(events.stderr.hasSuffix("/api/users/2: Network error -1017: \(reason)\n"), events.stderr)
        server.stub(path: "/long", response: MockServer.Response(status: 206, headers: [("Content-Range", "bytes 0-1/2")], body: Data("abc".utf8)))
        let download = try restdemo(["download", "/long", "-o", scratch.appendingPathComponent("long").path, "--quiet"])
        XCTAssertEqual(download.status, 65, download.stderr)
        XCTAssertTrue(download.stderr.hasSuffix("the 206 answer is longer than its Content-Range\n"), download.stderr)
        XCTAssertEqual(download.stderr.filter { $0 == "\n" }.count, 1, download.stderr)
    }

    func testAMissingURLIsAUsageError() throws {
        let run = try restdemo(["events"])
        XCTAssertEqual(run.status, 64)
        XCTAssertEqual(run.stderr, "restdemo: missing URL (see 'restdemo events --help')\n")
    }

    /// A server that is down is reconnected to for ever, as WHATWG says: each reconnection is a line on stderr,
    /// --verbose or not, so a user sees why nothing comes. A stream that ended normally is reconnected to quietly.
    func testEachReconnectionAfterAFailureIsALineOnStderr() throws {
        let gone = MockServer()
        try gone.start()
        let down = gone.baseURL.absoluteString + "/down"
        gone.stop()
        let (child, folder, _, err) = try startEvents(down)
        defer { try? FileManager.default.removeItem(at: folder) }
        let deadline = Date(timeIntervalSinceNow: 60)
        while ChildProcess.readFile(err).components(separatedBy: "\n").count < 3, Date() < deadline { usleep(10_000) }
        child.interrupt()
        XCTAssertEqual(child.waitForExit().status, 130)
        let lines = ChildProcess.readFile(err).split(separator: "\n").prefix(2).map(String.init)
        XCTAssertEqual(lines.count, 2, ChildProcess.readFile(err))
        for (index, line) in lines.enumerated() {
            XCTAssertTrue(line.hasPrefix("restdemo: retrying GET \(down) after attempt \(index + 1) in "), line)
            XCTAssertTrue(line.hasSuffix(": network error -1004"), line)
        }

        server.stub("GET", path: "/ends", response: .events([.init(data: "one", retry: 50)]))
        let (ends, endsFolder, out, endsErr) = try startEvents("/ends")
        defer { try? FileManager.default.removeItem(at: endsFolder) }
        while ChildProcess.readFile(out).components(separatedBy: "\n").count < 3, Date() < deadline { usleep(10_000) }
        ends.interrupt()
        XCTAssertEqual(ends.waitForExit().status, 130)
        XCTAssertTrue(ChildProcess.readFile(out).hasPrefix("message\t-\tone\nmessage\t-\tone\n"), ChildProcess.readFile(out))
        XCTAssertEqual(ChildProcess.readFile(endsErr), "", "a stream that ended is reconnected to quietly")
    }

    /// The mock's token stream ends without a pause or a line on stderr: its last event asks for a reconnection after
    /// 0.1 s, which gets the 204 that ends the command.
    func testTheMocksEventStreamEndsAtOnceAndQuietly() throws {
        let run = try restdemo(["events", "/_test/events?count=2&interval=0.01"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "")
        XCTAssertEqual(run.stdout, "message\t1\tThe\nmessage\t2\tquick\ndone\t2\t[DONE]\n")
        let body = String(decoding: try XCTUnwrap(try? Data(contentsOf: url("/_test/events?count=1&interval=0"))), as: UTF8.self)
        XCTAssertTrue(body.hasSuffix("retry: 100\nid: 1\nevent: done\ndata: [DONE]\n\n"), body)
    }

    /// A stream that goes quiet for --timeout is reconnected to, and the line says to raise --timeout (the library's
    /// own text names its idleTimeoutInterval, which a user of the command cannot set).
    func testAQuietStreamsReconnectionSaysToRaiseTheTimeoutOption() throws {
        server.stub("GET", path: "/quiet", response: .events([.init(data: "one", retry: 50), .init(data: "two", after: 120)]))
        let (child, folder, _, err) = try startEvents("/quiet", options: ["--timeout", "0.5"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let deadline = Date(timeIntervalSinceNow: 60)
        while !ChildProcess.readFile(err).contains("\n"), Date() < deadline { usleep(10_000) }
        child.interrupt()
        XCTAssertEqual(child.waitForExit().status, 130)
        let url = "\(server.baseURL.absoluteString)/quiet"
        let expected =
            "restdemo: retrying GET \(url) after attempt 1 in 0.10 s: The request to \(url) timed out after 0.5 s: "
            + "no byte was sent or received for that long (raise --timeout to wait longer)."
        XCTAssertEqual(ChildProcess.readFile(err).split(separator: "\n").first.map(String.init), expected)
    }

    func testCtrlCEndsAStreamWithStatus130AndClosesTheConnection() throws {
        server.stub("GET", path: "/live", response: .events([.init(data: "first"), .init(data: "never", after: 120)]))
        let (child, folder, out, err) = try startEvents("/live")
        defer { try? FileManager.default.removeItem(at: folder) }
        // The first event printed: the stream is open and waiting.
        let deadline = Date(timeIntervalSinceNow: 60)
        while ChildProcess.readFile(out).isEmpty, Date() < deadline { usleep(10_000) }
        XCTAssertEqual(ChildProcess.readFile(out), "message\t-\tfirst\n")
        XCTAssertEqual(server.openConnectionCount, 1)
        child.interrupt()
        let outcome = child.waitForExit()
        XCTAssertEqual(outcome.signal, 0)
        XCTAssertEqual(outcome.status, 130)
        XCTAssertEqual(ChildProcess.readFile(err), "")
        while server.openConnectionCount > 0, Date() < deadline { usleep(10_000) }
        XCTAssertEqual(server.openConnectionCount, 0)
    }

    /// Starts `restdemo events PATH` against the server, its stdout and stderr in files of a new folder, which the
    /// caller removes.
    private func startEvents(
        _ path: String, options: [String] = []
    ) throws -> (child: ChildProcess, folder: URL, out: String, err: String) {
        let binary = try XCTUnwrap(Self.restdemoBinary)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("restdemo-events-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let out = folder.appendingPathComponent("out").path
        let err = folder.appendingPathComponent("err").path
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let child = try ChildProcess(
            path: binary.path, arguments: ["--base-url", server.baseURL.absoluteString] + options + ["events", path],
            environment: environment, stdoutPath: out, stderrPath: err)
        return (child, folder, out, err)
    }
}
