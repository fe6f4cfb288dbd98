import Foundation
import XCTest
import MockServer
import RestManager

/// `upload(fileAt:)` and `addFile(at:)`: bodies streamed from disk, with progress.
final class UploadTests: MockServerTestCase {
    private struct Receipt: Decodable, Equatable {
        var method: String
        var bytes: Int
        var fnv1a64: String
        var contentType: String?
    }

    /// FNV-1a 64, written out here independently of the mock's.
    private func fnv1a64(_ data: Data) -> String {
        var hash: UInt64 = 14_695_981_039_346_656_037
        for byte in data { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
        return String(hash, radix: 16)
    }

    private func file(_ name: String, _ data: Data) throws -> URL {
        let url = scratch.appendingPathComponent(name)
        try data.write(to: url)
        return url
    }

    private func upload(
        _ file: URL, to path: String, method: RestManager.HttpMethod = .post,
        progress: (@Sendable (RestManager.TransferProgress) -> Void)? = nil
    ) -> RestManager.Results? {
        let done = expectation(description: "upload")
        let box = ResultBox<RestManager.Results>()
        rest.upload(fileAt: file, toURL: url(path), withHttpMethod: method, progress: progress) { results in
            box.set(results)
            done.fulfill()
        }
        wait(for: [done], timeout: 300)
        return box.value
    }

    func testEmptyAndOneHundredMebibyteFilesArriveWhole() throws {
        let empty = try XCTUnwrap(upload(try file("empty.bin", Data()), to: "/_test/upload"))
        XCTAssertEqual(
            try empty.decode(Receipt.self),
            Receipt(method: "POST", bytes: 0, fnv1a64: "cbf29ce484222325", contentType: "application/octet-stream"))
        let size = DownloadTests.largeSize
        let large = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 >> 3) })
        let source = try file("large.bin", large)
        let results = try XCTUnwrap(upload(source, to: "/_test/upload", method: .put))
        XCTAssertEqual(
            try results.decode(Receipt.self),
            Receipt(method: "PUT", bytes: size, fnv1a64: fnv1a64(large), contentType: "application/octet-stream"))
        XCTAssertEqual(try Data(contentsOf: source), large, "the caller's file stays as it was")
    }

    func testTheContentLengthIsTheFileSizeAndTheManagersContentTypeWins() throws {
        rest.requestHttpHeaders.add(value: "image/png", forKey: "Content-Type")
        rest.urlQueryParameters.add(value: "2", forKey: "page")
        let results = try XCTUnwrap(upload(try file("image.png", Data("PNG!".utf8)), to: "/_test/echo"))
        let echo = try self.echo(results)
        XCTAssertEqual(echo.bodyText, "PNG!")
        XCTAssertEqual(echo.header("Content-Length"), "4")
        XCTAssertEqual(echo.header("Content-Type"), "image/png")
        XCTAssertNil(echo.rawQuery)
    }

    func testAMissingFileFailsBeforeAnythingIsSent() throws {
        let missing = scratch.appendingPathComponent("deleted.bin")
        let results = try XCTUnwrap(upload(missing, to: "/_test/upload"))
        guard case .fileAccessFailed(let url, let reason)? = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(url, missing)
        XCTAssertEqual(reason, "it does not exist")
        XCTAssertEqual(results.error?.localizedDescription, "The file '\(missing.path)' cannot be used: it does not exist.")
        XCTAssertEqual(server.receivedRequests.count, 0)
        let folder = try XCTUnwrap(upload(scratch, to: "/_test/upload"))
        guard case .fileAccessFailed(_, "it is a folder")? = folder.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: folder.error))")
        }
    }

    /// A FIFO went out as `Content-Length: 0` and succeeded; `/dev/zero` never ended: only regular files are uploaded.
    func testAFIFOOrADeviceIsNotUploaded() throws {
        let fifo = scratch.appendingPathComponent("pipe")
        XCTAssertEqual(mkfifo(fifo.path, 0o600), 0)
        for special in [fifo, characterDevice()] {
            let results = try XCTUnwrap(upload(special, to: "/_test/upload"))
            guard case .fileAccessFailed(special, "it is not a regular file (a device, FIFO or socket)")? = results.error as? RestManager.CustomError
            else { return XCTFail("\(special.path): \(String(describing: results.error))") }
        }
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    func testAGetCannotUploadAFile() throws {
        let results = try XCTUnwrap(upload(try file("a.bin", Data("a".utf8)), to: "/_test/upload", method: .get))
        guard case .bodyEncodingFailed(let reason)? = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(reason, "a GET request cannot carry a body")
    }

    func testProgressEndsWithTheFileSize() throws {
        let reports = ResultBox<RestManager.TransferProgress>()
        let data = Data(count: 30_000_000)
        let results = try XCTUnwrap(upload(try file("zeros.bin", data), to: "/_test/upload") { reports.set($0) })
        XCTAssertEqual(try results.decode(Receipt.self).bytes, 30_000_000)
        XCTAssertEqual(reports.all.last, RestManager.TransferProgress(completedBytes: 30_000_000, totalBytes: 30_000_000))
        XCTAssertEqual(reports.all.map(\.completedBytes), reports.all.map(\.completedBytes).sorted())
    }

    /// Reports while the answer is awaited (a server that takes 0.5 s to answer: five progress ticks) know the total
    /// too: on Linux a body stream's task does not (`countOfBytesExpectedToSend` stays 0), the file's size does.
    func testEveryProgressReportHasTheFileSizeAsItsTotal() throws {
        var slow = MockServer.Response(status: 200, body: Data("ok".utf8))
        slow.delay = 0.5
        server.stub("POST", path: "/slow-upload", response: slow)
        let reports = ResultBox<RestManager.TransferProgress>()
        let results = try XCTUnwrap(upload(try file("small.bin", Data(count: 1_000)), to: "/slow-upload") { reports.set($0) })
        XCTAssertEqual(results.statusCode, 200)
        XCTAssertEqual(Set(reports.all.map(\.totalBytes)), [1_000], "\(reports.all)")
    }

    func testA303TurnsTheUploadIntoAGetWithoutBody() throws {
        let results = try XCTUnwrap(upload(try file("a.bin", Data("abc".utf8)), to: "/_test/redirect/303?to=/_test/echo"))
        let echo = try self.echo(results)
        XCTAssertEqual(echo.method, "GET")
        XCTAssertEqual(echo.bodyText, "")
        XCTAssertNil(echo.header("Content-Type"))
    }

    func testA307SendsTheFileAgain() throws {
        let results = try XCTUnwrap(upload(try file("a.bin", Data("abc".utf8)), to: "/_test/redirect/307?to=/_test/echo"))
        let echo = try self.echo(results)
        XCTAssertEqual(echo.method, "POST")
        XCTAssertEqual(echo.bodyText, "abc")
    }

    func testAFileAddedByURLIsStreamedAsAMultipartPart() throws {
        let before = Self.temporaryMultipartFiles()  // another process's (or a crashed run's) are not this test's
        let notes = try file("notes.txt", Data("hello\nworld".utf8))
        rest.httpBodyParameters.add(value: "Holiday", forKey: "title")
        rest.addFile(at: notes, fieldName: "doc", mimeType: "text/plain")
        rest.addFile(at: notes, fieldName: "copy", fileName: "renamed \"x\".txt", mimeType: "text/plain")
        let echo = try self.echo(send(.post, "/_test/echo"))
        let contentType = try XCTUnwrap(echo.header("Content-Type"))
        XCTAssertTrue(contentType.hasPrefix("multipart/form-data; boundary="), contentType)
        let boundary = String(contentType.dropFirst("multipart/form-data; boundary=".count))
        XCTAssertEqual(
            echo.bodyText,
            """
            --\(boundary)\r
            Content-Disposition: form-data; name="title"\r
            \r
            Holiday\r
            --\(boundary)\r
            Content-Disposition: form-data; name="doc"; filename="notes.txt"\r
            Content-Type: text/plain\r
            \r
            hello
            world\r
            --\(boundary)\r
            Content-Disposition: form-data; name="copy"; filename="renamed %22x%22.txt"\r
            Content-Type: text/plain\r
            \r
            hello
            world\r
            --\(boundary)--\r

            """)
        XCTAssertEqual(echo.header("Content-Length"), "\(echo.bodyData.count)")
        // The assembled body lives in a temporary file only while the call does.
        waitUntilTemporaryMultipartFilesAreGone(since: before)
    }

    /// Assembling a multipart body closes every file it read: twenty calls with two parts from disk each leave the
    /// process with the descriptors it had after the first (its connection included), not forty more.
    func testAssemblingAMultipartBodyLeavesNoFileOpen() throws {
        let notes = try file("notes.txt", Data("hello".utf8))
        rest.addFile(at: notes, fieldName: "doc", mimeType: "text/plain")
        rest.addFile(at: notes, fieldName: "copy", mimeType: "text/plain")
        XCTAssertEqual(send(.post, "/_test/echo").statusCode, 200)
        let afterFirst = openDescriptorCount()
        for _ in 1...20 { XCTAssertEqual(send(.post, "/_test/echo").statusCode, 200) }
        let settled = XCTNSPredicateExpectation(predicate: NSPredicate { _, _ in openDescriptorCount() <= afterFirst + 4 }, object: nil)
        wait(for: [settled], timeout: 10)
        XCTAssertLessThanOrEqual(openDescriptorCount(), afterFirst + 4)
    }

    /// Waits until every temporary multipart file made since `before` has been removed.
    private func waitUntilTemporaryMultipartFilesAreGone(since before: Set<String>) {
        let leftovers = XCTNSPredicateExpectation(
            predicate: NSPredicate { _, _ in Self.temporaryMultipartFiles().subtracting(before).isEmpty }, object: nil)
        wait(for: [leftovers], timeout: 10)
    }

    private static func temporaryMultipartFiles() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)) ?? []
        // This process's only: with `--parallel`, other test processes assemble bodies in the same folder meanwhile.
        let mine = "RestManager-\(ProcessInfo.processInfo.processIdentifier)-"
        return Set(names.filter { $0.hasPrefix(mine) && $0.hasSuffix(".multipart") })
    }

    /// The body lives in a temporary file while the call runs (the server answers after a second).
    func testTheMultipartBodyIsStreamedFromATemporaryFileDuringTheCall() throws {
        let before = Self.temporaryMultipartFiles()
        rest.addFile(at: try file("notes.txt", Data("hello".utf8)), fieldName: "doc", mimeType: "text/plain")
        let done = expectation(description: "answered")
        rest.makeRequest(toURL: url("/_test/delay?seconds=1"), withHttpMethod: .post) { _ in done.fulfill() }
        XCTAssertTrue(server.waitForRequests(1))
        XCTAssertEqual(Self.temporaryMultipartFiles().subtracting(before).count, 1)
        wait(for: [done], timeout: 10)
    }

    /// GET and HEAD send no body: files added by URL are not read, and the call succeeds.
    /// A call that fails after its multipart body was assembled (a header with a line break is refused when the
    /// request is built) removes the body's temporary file.
    func testTheTemporaryFileIsRemovedWhenTheRequestCannotBeBuilt() throws {
        let before = Self.temporaryMultipartFiles()
        rest.addFile(at: try file("notes.txt", Data("hello".utf8)), fieldName: "doc", mimeType: "text/plain")
        rest.requestHttpHeaders.add(value: "a\r\nb", forKey: "X-Bad")
        let results = send(.post, "/_test/echo")
        guard case .invalidHeader(name: "X-Bad", _)? = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertEqual(Self.temporaryMultipartFiles().subtracting(before), [])
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// A sparse file of `gibibytes` (no disk used): copying it into a multipart body takes seconds at least.
    private func sparseFile(gibibytes: Int) throws -> URL {
        let url = scratch.appendingPathComponent("sparse.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: url.path, contents: nil))
        XCTAssertEqual(truncate(url.path, off_t(gibibytes) << 30), 0)
        return url
    }

    /// A call cancelled while its multipart body is still being assembled stops the copy and sends nothing.
    func testACallCancelledWhileItsBodyIsAssembledSendsNothing() throws {
        let before = Self.temporaryMultipartFiles()
        rest.addFile(at: try sparseFile(gibibytes: 16), fieldName: "doc", mimeType: "application/octet-stream")
        let done = expectation(description: "cancelled")
        let box = ResultBox<RestManager.Results>()
        let handle = rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .post) { results in
            box.set(results)
            done.fulfill()
        }
        handle.cancel()
        wait(for: [done], timeout: 10)
        guard case .cancelled? = box.value?.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: box.value?.error))")
        }
        // The copy stops at the next MiB: its temporary file goes long before 16 GiB could have been written.
        waitUntilTemporaryMultipartFilesAreGone(since: before)
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// Assembling the body is part of the call: the deadline ends a copy that would take far longer, and the
    /// `finished` event names the call's method.
    func testTheDeadlineCoversAssemblingTheBody() throws {
        let before = Self.temporaryMultipartFiles()
        rest.addFile(at: try sparseFile(gibibytes: 16), fieldName: "doc", mimeType: "application/octet-stream")
        let events = ResultBox<String>()
        rest.eventHandler = { events.set($0.description) }
        rest.timeoutInterval = 0.3
        let started = Date()
        let results = send(.post, "/_test/echo")
        guard case .timedOut(_, 0.3, .wholeCall)? = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 8, "16 GiB were copied before the deadline applied")
        waitUntilTemporaryMultipartFilesAreGone(since: before)
        XCTAssertEqual(server.receivedRequests.count, 0)
        XCTAssertEqual(events.all.count, 1)
        XCTAssertTrue(events.all.first?.hasPrefix("finished POST \(url("/_test/echo").absoluteString) failed:") == true, "\(events.all)")
    }

    /// A FIFO (or a device) added by URL is refused before anything is read: it would block the copy forever.
    func testAFIFOAddedByURLIsRefused() throws {
        let fifo = scratch.appendingPathComponent("slow.fifo")
        XCTAssertEqual(mkfifo(fifo.path, 0o600), 0)
        rest.addFile(at: fifo, fieldName: "doc", mimeType: "text/plain")
        let results = send(.post, "/_test/echo")
        guard case .fileAccessFailed(fifo, "it is not a regular file (a device, FIFO or socket)")? = results.error as? RestManager.CustomError
        else { return XCTFail("\(String(describing: results.error))") }
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    func testAGetOrHeadAfterAddingAFileByURLSendsNoBody() throws {
        rest.addFile(at: try file("notes.txt", Data("hello".utf8)), fieldName: "doc", mimeType: "text/plain")
        let get = try echo(send(.get, "/_test/echo"))
        XCTAssertEqual(get.bodyText, "")
        XCTAssertNil(get.header("Content-Type"))
        XCTAssertEqual(send(.head, "/_test/echo").statusCode, 200)
    }

    func testAMissingFileAddedByURLFailsTheCall() throws {
        let missing = scratch.appendingPathComponent("gone.txt")
        rest.addFile(at: missing, fieldName: "doc", mimeType: "text/plain")
        guard case .fileAccessFailed(missing, "it does not exist")? = send(.post, "/_test/echo").error as? RestManager.CustomError else {
            return XCTFail("a missing file was sent")
        }
        XCTAssertEqual(server.receivedRequests.count, 0)
        XCTAssertThrowsError(try rest.makeURLRequest(toURL: url("/_test/echo"), withHttpMethod: .post))
    }

    /// `makeURLRequest` and `curlCommand` check files added by URL as a call does: a FIFO or a device is refused, and
    /// the assembled body's temporary file does not stay. Before, a FIFO blocked them forever and `/dev/zero` filled the
    /// memory.
    func testMakeURLRequestRefusesAFIFOOrADeviceAddedByURL() throws {
        let before = Self.temporaryMultipartFiles()
        let fifo = scratch.appendingPathComponent("slow.fifo")
        XCTAssertEqual(mkfifo(fifo.path, 0o600), 0)
        for file in [fifo, characterDevice()] {
            rest.clearParameters()
            rest.addFile(at: file, fieldName: "doc", mimeType: "text/plain")
            let outcomes = ResultBox<String>()
            let done = expectation(description: file.path)
            DispatchQueue.global().async { [rest = rest!, target = url("/_test/echo")] in
                let calls: [() throws -> Void] = [
                    { _ = try rest.makeURLRequest(toURL: target, withHttpMethod: .post) },
                    { _ = try rest.curlCommand(forURL: target, withHttpMethod: .put) }
                ]
                for call in calls {
                    do {
                        try call()
                        outcomes.set("no error")
                    } catch {
                        outcomes.set("\(error)")
                    }
                }
                done.fulfill()
            }
            wait(for: [done], timeout: 20)
            let refusal = "The file '\(file.path)' cannot be used: it is not a regular file (a device, FIFO or socket)."
            XCTAssertEqual(outcomes.all, [refusal, refusal])
        }
        rest.clearParameters()
        rest.addFile(at: try self.file("n.txt", Data("xyz".utf8)), fieldName: "doc", mimeType: "text/plain")
        XCTAssertNoThrow(try rest.makeURLRequest(toURL: url("/_test/echo"), withHttpMethod: .post))
        XCTAssertEqual(Self.temporaryMultipartFiles().subtracting(before), [])
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    func testMakeURLRequestShowsAFileAddedByURLInTheBody() throws {
        rest.addFile(at: try file("n.txt", Data("xyz".utf8)), fieldName: "doc", mimeType: "text/plain")
        let request = try rest.makeURLRequest(toURL: url("/_test/echo"), withHttpMethod: .post)
        XCTAssertTrue(
            String(decoding: request.httpBody ?? Data(), as: UTF8.self)
                .contains("filename=\"n.txt\"\r\nContent-Type: text/plain\r\n\r\nxyz\r\n"))
    }
}
