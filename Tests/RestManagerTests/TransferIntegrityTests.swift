import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// Every byte kept where it belongs: full disks fail, hostile ranges fail, links and special files are never written.
final class TransferIntegrityTests: MockServerTestCase {
    private func pattern(_ range: Range<Int>) -> Data { Data(range.map { UInt8($0 % 251) }) }
    private func destination(_ name: String = "file.bin") -> URL { scratch.appendingPathComponent(name) }
    private func partial(_ destination: URL) -> URL { URL(fileURLWithPath: destination.path + ".part") }
    private func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

    private func failureReason(_ result: Result<URL, RestManager.CustomError>?, file: StaticString = #filePath, line: UInt = #line) -> String {
        guard case .failure(let error)? = result else {
            XCTFail("not a failure: \(String(describing: result))", file: file, line: line)
            return ""
        }
        return error.localizedDescription
    }

    /// A file-size limit stands in for a full disk: writes past it fail with EFBIG (SIGXFSZ ignored meanwhile).
    private func withFileSizeLimit<Result>(_ bytes: rlim_t, _ body: () throws -> Result) rethrows -> Result {
        var saved = rlimit()
        getrlimit(fileSizeResource, &saved)
        var limited = saved
        limited.rlim_cur = bytes
        let previous = signal(SIGXFSZ, SIG_IGN)
        setrlimit(fileSizeResource, &limited)
        defer {
            setrlimit(fileSizeResource, &saved)
            signal(SIGXFSZ, previous)
        }
        return try body()
    }

    func testADownloadThatFillsTheDiskFailsAndNothingAppears() {
        let target = destination()
        let reason = withFileSizeLimit(8_000_000) { failureReason(download("/_test/files/12000000", to: target)) }
        XCTAssertTrue(reason.hasPrefix("The file '\(partial(target).path)' cannot be used: "), reason)
        XCTAssertFalse(exists(target), "the destination appears only complete")
        XCTAssertLessThanOrEqual(fileSize(partial(target)), 8_000_000)
    }

    func testAMultipartBodyThatFillsTheDiskIsNotSent() throws {
        let big = scratch.appendingPathComponent("big.bin")
        try Data(count: 12_000_000).write(to: big)
        rest.addFile(at: big, fieldName: "f", mimeType: "application/octet-stream")
        let results = withFileSizeLimit(8_000_000) { send(.post, "/_test/upload") }
        guard case .fileAccessFailed? = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(server.receivedRequests.count, 0, "no truncated body went out")
    }

    /// A 206 longer than its Content-Range: the bytes past it are not written, the call fails, the part keeps what was right.
    func testA206LongerThanItsContentRangeFailsAndKeepsOnlyTheVerifiedBytes() {
        server.stub(path: "/long") { _ in
            MockServer.Response(
                status: 206, headers: [("Content-Range", "bytes 0-99/100"), ("ETag", "\"v1\"")], body: Data(repeating: 7, count: 150))
        }
        let target = destination()
        let reason = failureReason(download("/long", to: target))
        XCTAssertEqual(reason, "Network error -1017: The server's answer is unusable: the 206 answer is longer than its Content-Range")
        XCTAssertFalse(exists(target))
        XCTAssertEqual(try Data(contentsOf: partial(target)), Data(repeating: 7, count: 100))
    }

    /// A Content-Range that ends at Int64.max is no range (the byte after it does not fit): refused, never a crash.
    func testAContentRangeEndingAtInt64MaxFailsWithoutACrash() {
        server.stub(path: "/endless-range") { _ in
            MockServer.Response(
                status: 206, headers: [("Content-Range", "bytes 0-9223372036854775807/*"), ("ETag", "\"v1\"")],
                body: Data(repeating: 7, count: 10))
        }
        let target = destination()
        let reason = failureReason(download("/endless-range", to: target))
        XCTAssertEqual(reason, "Network error -1017: The server's answer is unusable: twice in a row an answer did not continue the file as asked")
        XCTAssertEqual(server.receivedRequests.count, 2)
        XCTAssertFalse(exists(target))
        XCTAssertFalse(exists(partial(target)))
    }

    /// Empty 206 answers make no progress: the call fails after three of them instead of asking forever.
    func testEmpty206AnswersEndAfterThreeTries() {
        server.stub(path: "/empty") { _ in
            MockServer.Response(status: 206, headers: [("Content-Range", "bytes 0-99/100"), ("ETag", "\"v1\""), ("Content-Length", "0")])
        }
        let reason = failureReason(download("/empty", to: destination()))
        XCTAssertEqual(reason, "Network error -1017: The server's answer is unusable: 3 answers in a row took the file no further")
        XCTAssertEqual(server.receivedRequests.count, 3)
    }

    /// A server that answers every request with the same first part of the file, and no validator to ask for the rest
    /// by, ends the call after three answers that took the file no further (it used to ask for ever, bytes moving).
    func testTheSameFirstPartAgainAndAgainEndsAfterThreeTries() {
        server.stub(path: "/first-part") { _ in
            MockServer.Response(status: 206, headers: [("Content-Range", "bytes 0-9/20")], body: Data(repeating: 7, count: 10))
        }
        let reason = failureReason(download("/first-part", to: destination(), timeoutInterval: 30))
        XCTAssertEqual(reason, "Network error -1017: The server's answer is unusable: 3 answers in a row took the file no further")
        XCTAssertEqual(server.receivedRequests.count, 4)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Range") }, [nil, nil, nil, nil])
    }

    /// A planted `out.bin.part -> victim` link is refused, never truncated, overwritten or appended to.
    func testPartialFilesThatAreLinksAreNeverWrittenThrough() throws {
        let victim = scratch.appendingPathComponent("victim")
        try Data("precious".utf8).write(to: victim)
        let target = destination("out.bin")
        try FileManager.default.createSymbolicLink(at: partial(target), withDestinationURL: victim)
        let linked = failureReason(download("/_test/files/1000", to: target))
        XCTAssertEqual(linked, "The file '\(partial(target).path)' cannot be used: it is a symbolic link.")
        let validatorTarget = destination("other.bin")
        let validator = URL(fileURLWithPath: validatorTarget.path + ".part.validator")
        try FileManager.default.createSymbolicLink(at: validator, withDestinationURL: victim)
        try pattern(0..<500).write(to: partial(validatorTarget))
        server.clearReceivedRequests()
        let validatorLinked = failureReason(download("/_test/files/1000", to: validatorTarget))
        XCTAssertEqual(validatorLinked, "The file '\(validator.path)' cannot be used: it is a symbolic link.")
        // The linked validator is not read either: nothing is resumed by what it points to.
        let sent = server.receivedRequests.first
        XCTAssertNil(sent?.header("Range"))
        XCTAssertNil(sent?.header("If-Range"))
        XCTAssertEqual(try Data(contentsOf: victim), Data("precious".utf8))
        XCTAssertFalse(exists(target))
        XCTAssertFalse(exists(validatorTarget))
    }

    /// A server whose ETag is not quoted (`ETag: v1`, against RFC 9110 §8.8.3 but common) still has a partial file
    /// resumed: the 206 must carry the validator that was sent, whichever header it came from. Before, an unquoted
    /// ETag was taken for a date, compared with the 206's `Last-Modified`, and every resume started over.
    func testAPartialFileIsResumedWithAnUnquotedETag() throws {
        let body = pattern(0..<1000)
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        server.stub(path: "/unquoted") { request in
            let headers = [("ETag", "v1"), ("Last-Modified", lastModified)]
            guard request.header("If-Range") == "v1", request.header("Range") == "bytes=500-" else {
                return MockServer.Response(status: 200, headers: headers, body: body)
            }
            return MockServer.Response(
                status: 206, headers: headers + [("Content-Range", "bytes 500-999/1000")], body: body.subdata(in: 500..<1000))
        }
        let target = destination("unquoted.bin")
        try body.prefix(500).write(to: partial(target))
        try Data("v1".utf8).write(to: URL(fileURLWithPath: target.path + ".part.validator"))
        XCTAssertEqual(try XCTUnwrap(download("/unquoted", to: target)).get(), target)
        XCTAssertEqual(try Data(contentsOf: target), body)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Range") ?? "none" }, ["bytes=500-"])
    }

    /// A destination that is itself a symbolic link is replaced by the downloaded file, as a rename replaces a link:
    /// the file it pointed to is neither written through nor removed.
    func testADestinationThatIsALinkIsReplacedAndWhatItPointsToKept() throws {
        let victim = scratch.appendingPathComponent("elsewhere")
        try Data("precious".utf8).write(to: victim)
        let target = destination("linked.bin")
        try FileManager.default.createSymbolicLink(at: target, withDestinationURL: victim)
        XCTAssertEqual(try XCTUnwrap(download("/_test/files/1000", to: target)).get(), target)
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<1000))
        XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: target.path), "a regular file now")
        XCTAssertEqual(try Data(contentsOf: victim), Data("precious".utf8))
    }

    /// A file that grows while it is sent: exactly its announced length goes on the wire (FoundationNetworking's own
    /// file reader reads to the end, past `Content-Length`, and a keep-alive server ran what followed as a request),
    /// and the call fails saying so. The same through a symbolic link to the file (its size is the file's).
    func testAFileThatGrowsWhileItIsSentFails() async throws {
        // A file read whole is answered a second after its body, so that it grows (at the first progress report) before
        // the answer comes; the mock takes a large body only at `/_test/upload`.
        var late = MockServer.Response.text("received")
        late.delay = 1
        server.stub("POST", path: "/upload-late", response: late)
        // Sizes that are no multiple of any read's length: the last read must stop at the announced length.
        let small = 1_000_003
        let large = (256 << 20) + 3
        for (size, linked) in [(small, false), (small, true), (large, false), (large, true)] {
            let file = scratch.appendingPathComponent("growing-\(size)-\(linked).bin")
            XCTAssertTrue(FileManager.default.createFile(atPath: file.path, contents: nil))
            XCTAssertEqual(truncate(file.path, off_t(size)), 0)
            let link = scratch.appendingPathComponent("link-to-growing-\(size).bin")
            if linked { try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file) }
            let sent = linked ? link : file
            let smuggled = Data("GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
            let grown = ResultBox<Bool>()
            // A manager (a connection pool) of its own: the server may read the first file's extra bytes as a request,
            // and its answer to them would be read as the next upload's on a reused connection.
            let manager = RestManager()
            server.clearReceivedRequests()
            let path = size == small ? "/upload-late" : "/_test/upload"
            let results = await manager.upload(fileAt: sent, toURL: url(path)) { progress in
                guard grown.all.isEmpty, progress.completedBytes > 0, let handle = FileHandle(forWritingAtPath: file.path) else { return }
                handle.seekToEndOfFile()
                handle.write(smuggled)
                try? handle.close()
                grown.set(true)
            }
            XCTAssertEqual(grown.all, [true], "the file grew while it was sent")
            guard case .fileAccessFailed(sent, "it changed size while it was sent")? = results.error as? RestManager.CustomError else {
                XCTFail("\(size) linked \(linked): \(results.statusCode ?? 0) \(String(describing: results.error))")
                continue
            }
            // Bytes past the body would arrive as a second request: give one a second to show up.
            try await Task.sleep(nanoseconds: 1_000_000_000)
            XCTAssertEqual(server.receivedRequests.map(\.path), [path], "nothing past Content-Length")
            XCTAssertEqual(server.receivedRequests.first?.header("Content-Length"), "\(size)")
            if size == small {
                XCTAssertEqual(server.receivedRequests.first?.body.count, size, "exactly the announced length")
            }
        }
    }

    /// A file that shrinks while it is sent: the request is aborted when the file ends before its announced length,
    /// and the call fails saying why (not with libcurl's "aborted by callback").
    func testAFileThatShrinksWhileItIsSentFails() async throws {
        let file = scratch.appendingPathComponent("shrinking.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: file.path, contents: nil))
        XCTAssertEqual(truncate(file.path, off_t(256 << 20)), 0)
        let shrunk = ResultBox<Bool>()
        let results = await rest.upload(fileAt: file, toURL: url("/_test/upload")) { progress in
            guard shrunk.all.isEmpty, progress.completedBytes > 0 else { return }
            shrunk.set(truncate(file.path, off_t(1 << 20)) == 0)
        }
        XCTAssertEqual(shrunk.all, [true], "the file shrank while it was sent")
        guard case .fileAccessFailed(file, "it changed size while it was sent")? = results.error as? RestManager.CustomError else {
            return XCTFail("\(results.statusCode ?? 0) \(String(describing: results.error))")
        }
    }

    /// An upload through a symbolic link (relative, as `ln -s` makes them) sends the whole file and reports its size:
    /// FoundationNetworking alone takes the link's own size (8 bytes here) and sends that much of the file. A small and a
    /// large file (up to 10 MB went from memory once).
    func testAnUploadThroughALinkSendsTheWholeFile() async throws {
        for size in [100_000, 10_000_001] {
            let file = scratch.appendingPathComponent("real.bin")
            try Data((0..<size).map { UInt8(truncatingIfNeeded: $0 * 7) }).write(to: file)
            let link = scratch.appendingPathComponent("link-\(size).bin")
            XCTAssertEqual(symlink("real.bin", link.path), 0)
            let direct = await rest.upload(fileAt: file, toURL: url("/_test/upload"))
            let last = ResultBox<RestManager.TransferProgress>()
            let linked = await rest.upload(fileAt: link, toURL: url("/_test/upload")) { last.set($0) }
            XCTAssertNil(linked.error)
            let answer = String(decoding: linked.data ?? Data(), as: UTF8.self)
            XCTAssertTrue(answer.contains("\"bytes\":\(size),"), answer)
            XCTAssertEqual(linked.data, direct.data, "the same bytes (the answer has their hash)")
            XCTAssertEqual(server.receivedRequests.last?.header("Content-Length"), "\(size)")
            XCTAssertEqual(last.all.last, RestManager.TransferProgress(completedBytes: Int64(size), totalBytes: Int64(size)))
        }
    }

    func testSpecialFilesAndOverlongNamesAreRefusedUpFront() throws {
        let fifo = destination("fifo")
        XCTAssertEqual(mkfifo(fifo.path, 0o644), 0)
        for special in [fifo, characterDevice()] {
            XCTAssertEqual(
                failureReason(download("/_test/files/10", to: special)),
                "The file '\(special.path)' cannot be used: it is not a regular file (a device, FIFO or socket).")
        }
        for length in [241, 255] {
            let long = destination(String(repeating: "n", count: length))
            XCTAssertEqual(
                failureReason(download("/_test/files/10", to: long)),
                "The file '\(long.path)' cannot be used: its name is longer than 240 bytes (its partial files add 15).")
            XCTAssertFalse(exists(partial(long)))
        }
        XCTAssertEqual(server.receivedRequests.count, 0, "nothing was asked for")
        let fits = destination(String(repeating: "n", count: 240))
        XCTAssertEqual(try XCTUnwrap(download("/_test/files/10", to: fits)).get(), fits)
        XCTAssertEqual(try Data(contentsOf: fits), pattern(0..<10))
    }

    /// A `.part` that is a device (planted, or swapped in under the name) is never truncated or written: refused as
    /// not a regular file, and left as it was.
    func testAPartialFileThatIsADeviceIsRefused() throws {
        let target = destination()
        try XCTSkipUnless(makeDeviceNode(at: partial(target)), "only root can make a device node")
        XCTAssertEqual(
            failureReason(download("/_test/files/10", to: target)),
            "The file '\(partial(target).path)' cannot be used: it is not a regular file.")
        var status = stat()
        XCTAssertEqual(lstat(partial(target).path, &status), 0)
        XCTAssertEqual(status.st_mode & S_IFMT, S_IFCHR)
        XCTAssertFalse(exists(target))
    }
}

private func fileSize(_ url: URL) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.intValue ?? 0
}

#if os(Linux)
private let fileSizeResource = __rlimit_resource_t(RLIMIT_FSIZE.rawValue)
#else
private let fileSizeResource = RLIMIT_FSIZE
#endif

/// One writer per destination: two downloads resuming one `.part` left 222,784 of 20,000,000 bytes, both "successful".
final class DownloadDestinationLockTests: MockServerTestCase {
    private func pattern(_ count: Int) -> Data { Data((0..<count).map { UInt8($0 % 251) }) }

    private func start(_ path: String, to destination: URL, _ box: ResultBox<Result<URL, RestManager.CustomError>>) -> XCTestExpectation {
        let done = expectation(description: "download \(path)")
        rest.download(fromURL: url(path), to: destination) { result in
            box.set(result)
            done.fulfill()
        }
        return done
    }

    /// Downloads to one destination started 2 ms apart, so that new ones open the lock while others finish (and unlink
    /// it): each has the destination to itself or fails at once, and the file is whole, never two writers' bytes.
    func testDownloadsRacingForOneDestinationNeverShareIt() throws {
        let target = scratch.appendingPathComponent("raced.bin")
        let boxes = (0..<40).map { _ in ResultBox<Result<URL, RestManager.CustomError>>() }
        var done: [XCTestExpectation] = []
        for box in boxes {
            done.append(start("/_test/files/300000", to: target, box))
            Thread.sleep(forTimeInterval: 0.002)
        }
        wait(for: done, timeout: 120)
        var successes = 0
        for box in boxes {
            switch box.value {
            case .success?: successes += 1
            case .failure(let error)?:
                XCTAssertTrue(error.localizedDescription.hasSuffix("another download to it is in progress."), "\(error)")
            case nil: XCTFail("no completion")
            }
        }
        XCTAssertGreaterThan(successes, 1)
        XCTAssertEqual(try Data(contentsOf: target), pattern(300_000))
    }

    func testASecondDownloadToADestinationInUseFailsAtOnce() throws {
        let target = scratch.appendingPathComponent("shared.bin")
        let first = ResultBox<Result<URL, RestManager.CustomError>>()
        let second = ResultBox<Result<URL, RestManager.CustomError>>()
        // The first call holds the destination from the moment `download` returns.
        let firstDone = start("/_test/files/200000", to: target, first)
        let secondDone = start("/_test/files/200000", to: target, second)
        wait(for: [secondDone, firstDone], timeout: 30)
        guard case .failure(let error)? = second.value else { return XCTFail("\(String(describing: second.value))") }
        XCTAssertEqual(error.localizedDescription, "The file '\(target.path)' cannot be used: another download to it is in progress.")
        XCTAssertEqual(try first.value?.get(), target)
        XCTAssertEqual(try Data(contentsOf: target), pattern(200_000))
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.path + ".part.lock"), "removed with the finished download")
        // Once it has ended, the destination is free again.
        let third = ResultBox<Result<URL, RestManager.CustomError>>()
        wait(for: [start("/_test/files/10", to: target, third)], timeout: 30)
        XCTAssertEqual(try third.value?.get(), target)
    }

    func testACancelledDownloadFreesItsDestination() throws {
        let target = scratch.appendingPathComponent("cancelled.bin")
        let first = ResultBox<Result<URL, RestManager.CustomError>>()
        let done = expectation(description: "cancelled")
        rest.download(fromURL: url("/_test/stall?bytes=100000&seconds=30"), to: target) { result in
            first.set(result)
            done.fulfill()
        }.cancel()
        wait(for: [done], timeout: 10)
        let second = ResultBox<Result<URL, RestManager.CustomError>>()
        wait(for: [start("/_test/files/10", to: target, second)], timeout: 30)
        XCTAssertEqual(try second.value?.get(), target)
    }
}
