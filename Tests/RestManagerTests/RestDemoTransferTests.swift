import Foundation
import XCTest
import MockServer
import RestManager

/// `restdemo download` and `restdemo upload`, run as a child process against the mock.
final class RestDemoTransferTests: MockServerTestCase {
    private func pattern(_ count: Int) -> Data { Data((0..<count).map { UInt8($0 % 251) }) }

    func testDownloadSavesTheFileAndReportsPlainProgressWhenStderrIsNotATerminal() throws {
        let target = scratch.appendingPathComponent("deep/folder/file.bin")
        let run = try restdemo(["download", url("/_test/files/3000000").absoluteString, "-o", target.path])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, target.path + "\n")
        XCTAssertEqual(try Data(contentsOf: target), pattern(3_000_000))
        let lines = run.stderr.split(separator: "\n")
        XCTAssertTrue(lines.last?.hasPrefix("100%  2.9 MiB of 2.9 MiB  ") == true, run.stderr)
        XCTAssertFalse(run.stderr.contains("\r"))
    }

    func testAnInterruptedDownloadResumesWhenRunAgain() throws {
        let target = scratch.appendingPathComponent("file.bin")
        let cut = try restdemo(["download", url("/_test/files/500000?dropAfter=123456").absoluteString, "--output", target.path, "--quiet"])
        XCTAssertEqual(cut.status, 69, cut.stderr)
        // One line, no progress (--quiet): the URL and the network error.
        XCTAssertTrue(cut.stderr.hasPrefix("restdemo: \(url("/_test/files/500000?dropAfter=123456").absoluteString): Network error "), cut.stderr)
        XCTAssertEqual(cut.stderr.filter { $0 == "\n" }.count, 1)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: target.path + ".part")), pattern(123_456))
        let again = try restdemo(["download", url("/_test/files/500000").absoluteString, "-o", target.path, "--quiet"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(try Data(contentsOf: target), pattern(500_000))
        XCTAssertEqual(server.lastRequest(path: "/_test/files/500000")?.header("Range"), "bytes=123456-")
    }

    /// A resumed download's rate counts only the bytes this run moved (500,000 bytes were already on disk; the rest
    /// arrives at 250,000 bytes a second): about 244 KiB/s, where counting the file on disk would say twice that.
    /// Plain lines (stderr not a terminal) are never printed twice in a row.
    func testAResumedDownloadsRateCountsOnlyThisRunsBytesAndNoLineRepeats() throws {
        let whole = pattern(1_000_000)
        server.stub(path: "/resumable") { request in
            if request.header("Range") == "bytes=500000-" {
                let start = 500_000
                var answer = MockServer.Response(
                    status: 206, headers: [("ETag", "\"v\""), ("Content-Range", "bytes \(start)-999999/1000000")],
                    body: whole.subdata(in: start..<1_000_000))
                answer.bytesPerSecond = 250_000
                return answer
            }
            var cut = MockServer.Response(status: 200, headers: [("ETag", "\"v\"")], body: whole)
            cut.fault = .closeMidBody
            return cut
        }
        let target = scratch.appendingPathComponent("resumed.bin")
        let first = try restdemo(["download", url("/resumable").absoluteString, "-o", target.path, "--quiet"])
        XCTAssertEqual(first.status, 69, first.stderr)
        let kept = try Data(contentsOf: URL(fileURLWithPath: target.path + ".part")).count
        XCTAssertTrue(kept == 500_000, "\(kept) bytes kept")
        let again = try restdemo(["download", url("/resumable").absoluteString, "-o", target.path])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(try Data(contentsOf: target), whole)
        let lines = again.stderr.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.last?.hasPrefix("100%  976.6 KiB of 976.6 KiB  ") == true, again.stderr)
        let rate = lines.last.flatMap { $0.components(separatedBy: "  ").dropFirst(2).first } ?? ""
        let perSecond = rate.hasSuffix(" KiB/s") ? Double(rate.dropLast(6)) ?? .infinity : .infinity
        // 500,000 bytes at 250,000 a second (the throttle lets a first burst go at once): about 244 KiB/s, at most about
        // 280; counting the 500,000 on disk says twice that, about 490.
        XCTAssertLessThanOrEqual(perSecond, 300, "this run's rate, not the file's: \(rate)")
        XCTAssertFalse(zip(lines, lines.dropFirst()).contains { $0 == $1 }, again.stderr)
    }

    /// Ctrl-C keeps the partial file and says where it is and how to go on; exit 130, as shells expect.
    func testCtrlCSaysWhereThePartialFileIsAndHowToResume() throws {
        let binary = try XCTUnwrap(Self.restdemoBinary)
        let target = scratch.appendingPathComponent("interrupted.bin")
        let err = scratch.appendingPathComponent("err").path
        var slow = MockServer.Response(status: 200, headers: [("ETag", "\"s\"")], body: pattern(20_000_000))
        slow.bytesPerSecond = 1_000_000
        server.stub(path: "/slow", response: slow)
        let stalled = url("/slow").absoluteString
        let child = try ChildProcess(
            path: binary.path, arguments: ["download", stalled, "-o", target.path, "--quiet"],
            environment: ProcessInfo.processInfo.environment, stdoutPath: scratch.appendingPathComponent("out").path,
            stderrPath: err)
        let part = target.path + ".part"
        let deadline = Date(timeIntervalSinceNow: 60)
        let size = { (try? FileManager.default.attributesOfItem(atPath: part)[.size] as? Int) ?? 0 }
        while size() == 0, Date() < deadline {
            usleep(10_000)  // waiting for bytes on disk: the event the test needs
        }
        child.interrupt()
        XCTAssertEqual(child.waitForExit().status, 130)
        XCTAssertGreaterThan(size(), 0)
        XCTAssertEqual(
            ChildProcess.readFile(err), "restdemo: interrupted; what arrived is kept in \(part): run the same command again to resume\n")
    }

    /// A transfer's help lists its own --timeout (idle time), not also the global one (per request).
    func testATransfersHelpListsTimeoutOnce() throws {
        for command in ["download", "upload", "stream", "events"] {
            let help = try restdemo([command, "--help"], useServer: false).stdout
            XCTAssertEqual(help.components(separatedBy: "--timeout").count - 1, 1, "\(command): \(help)")
        }
        let users = try restdemo(["users", "--help"], useServer: false).stdout
        XCTAssertTrue(users.contains("--timeout SECONDS  per request (default 30)"), users)
    }

    /// --timeout is a transfer's idle time: a server that goes quiet ends it with a line that says so.
    func testAStalledDownloadEndsAfterTheTimeoutWithOneLine() throws {
        let stalled = url("/_test/stall?bytes=1000&seconds=30").absoluteString
        let run = try restdemo(["--timeout", "1", "download", stalled, "-o", scratch.appendingPathComponent("s").path, "--quiet"])
        XCTAssertEqual(run.status, 69)
        XCTAssertEqual(
            run.stderr,
            "restdemo: \(stalled): timed out after 1.0 s: no byte was sent or received for that long (raise --timeout to wait longer)\n")
    }

    func testDownloadErrorsExitWithOneLine() throws {
        let target = scratch.appendingPathComponent("x.bin")
        let missing = try restdemo(["download", url("/_test/status/404").absoluteString, "-o", target.path])
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.stderr, "restdemo: \(url("/_test/status/404").absoluteString): HTTP 404\n")
        let noOutput = try restdemo(["download", url("/_test/files/1").absoluteString])
        XCTAssertEqual(noOutput.status, 64)
        XCTAssertTrue(noOutput.stderr.hasPrefix("restdemo: missing -o FILE"), noOutput.stderr)
        let badURL = try restdemo(["download", "ftp://example.com/x", "-o", target.path])
        XCTAssertEqual(badURL.status, 64)
        XCTAssertTrue(badURL.stderr.hasPrefix("restdemo: URL must be an absolute http(s) URL or a /path, not 'ftp://example.com/x'"), badURL.stderr)
    }

    func testUploadStreamsTheFileAndPrintsTheAnswer() throws {
        let file = scratch.appendingPathComponent("photo.jpg")
        try Data("not really a jpeg".utf8).write(to: file)
        let run = try restdemo([
            "upload", file.path, "/_test/upload", "--method", "PUT",
            "--content-type", "image/jpeg", "--quiet"
        ])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "HTTP 200\n{\"method\":\"PUT\",\"bytes\":17,\"fnv1a64\":\"886d974ddbafbdb4\",\"contentType\":\"image/jpeg\"}\n")
    }

    func testUploadOfAMissingFileExits66() throws {
        let missing = scratch.appendingPathComponent("gone.bin")
        let run = try restdemo(["upload", missing.path, url("/_test/upload").absoluteString])
        XCTAssertEqual(run.status, 66)
        XCTAssertEqual(run.stderr, "restdemo: cannot read \(missing.path): it does not exist\n")
        XCTAssertEqual(server.receivedRequests.count, 0)
        let badMethod = try restdemo(["upload", missing.path, url("/_test/upload").absoluteString, "--method", "GET"])
        XCTAssertEqual(badMethod.status, 64)
    }
}
