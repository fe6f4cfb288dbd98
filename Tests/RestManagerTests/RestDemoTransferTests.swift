import Foundation
import XCTest
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
