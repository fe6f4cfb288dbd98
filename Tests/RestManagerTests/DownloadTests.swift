import Foundation
import XCTest
import MockServer
@testable import RestManager

/// `download(fromURL:to:)`: bytes to disk as they arrive, atomic appearance, resume with Range/If-Range.
final class DownloadTests: MockServerTestCase {
    /// 100 MiB; `RESTMANAGER_LARGE_TRANSFER_BYTES` makes it smaller under the sanitizers (16 MiB in a quick run).
    static let largeSize =
        ProcessInfo.processInfo.environment["RESTMANAGER_LARGE_TRANSFER_BYTES"].flatMap { Int($0) } ?? (TestScale.quick ? 16 << 20 : 104_857_600)

    /// The mock's generated files: byte i is i mod 251.
    private func pattern(_ range: Range<Int>) -> Data { Data(range.map { UInt8($0 % 251) }) }

    private func destination(_ name: String = "file.bin") -> URL { scratch.appendingPathComponent("nested/dir/" + name) }

    private func partial(_ destination: URL) -> URL { URL(fileURLWithPath: destination.path + ".part") }

    private func requests(to path: String) -> [ReceivedRequestSummary] {
        server.receivedRequests.filter { $0.path == path }.map {
            ReceivedRequestSummary(range: $0.header("Range"), ifRange: $0.header("If-Range"), acceptEncoding: $0.header("Accept-Encoding"))
        }
    }

    private struct ReceivedRequestSummary: Equatable {
        var range: String?
        var ifRange: String?
        var acceptEncoding: String?
    }

    func testSizesZeroOneOneBlockAndAHundredMebibytesArriveByteForByte() throws {
        for size in [0, 1, 65_511, 65_512] {
            let target = destination("size-\(size).bin")
            XCTAssertEqual(try XCTUnwrap(download("/_test/files/\(size)", to: target)).get(), target)
            XCTAssertEqual(try Data(contentsOf: target), pattern(0..<size), "size \(size)")
            for leftover in ["", ".validator", ".lock"] {
                XCTAssertFalse(FileManager.default.fileExists(atPath: partial(target).path + leftover), "size \(size): .part\(leftover)")
            }
        }
        let large = destination("large.bin")
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/\(Self.largeSize)", to: large, timeout: 300)).get())
        XCTAssertEqual(try Data(contentsOf: large), pattern(0..<Self.largeSize))
        XCTAssertEqual(requests(to: "/_test/files/1"), [ReceivedRequestSummary(range: nil, ifRange: nil, acceptEncoding: "identity")])
        XCTAssertEqual(requests(to: "/_test/files/0").map(\.range), [nil])
    }

    /// One request for the whole file, however large: no round trip per window on a far server (what waits in memory
    /// for a slow disk is bounded by back-pressure instead, `TransferBackPressureTests`).
    func testALargeFileArrivesFromOneRequest() throws {
        let target = destination()
        let reports = ResultBox<RestManager.TransferProgress>()
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/20000000", to: target, timeout: 60) { reports.set($0) }).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<20_000_000))
        XCTAssertEqual(
            requests(to: "/_test/files/20000000"),
            [ReceivedRequestSummary(range: nil, ifRange: nil, acceptEncoding: "identity")])
        let large = "/_test/files/100000000"
        XCTAssertNoThrow(try XCTUnwrap(download(large, to: destination("large.bin"), timeout: 120)).get())
        XCTAssertEqual(
            requests(to: large).map(\.range), [nil])
        XCTAssertEqual(reports.all.last, RestManager.TransferProgress(completedBytes: 20_000_000, totalBytes: 20_000_000))
        XCTAssertEqual(reports.all.map(\.completedBytes), reports.all.map(\.completedBytes).sorted())
        XCTAssertFalse(FileManager.default.fileExists(atPath: partial(target).path + ".validator"))
    }

    /// Stubs `path` as a 10,000,000-byte file served in 206s of at most 8 MiB whatever `Range` and `If-Range` say; the
    /// nth request (from 1) gets version `version(n)`, whose ETag is `"vN"` and whose bytes are all N.
    private func stubChangingFile(_ path: String, version: @escaping @Sendable (Int) -> UInt8) {
        let served = ResultBox<Bool>()  // the requests are sequential: one answer at a time
        server.stub(path: path) { request in
            served.set(true)
            let number = version(served.count)
            let first = Int(request.header("Range")?.dropFirst(6).prefix { $0 != "-" } ?? "") ?? 0
            let count = min(10_000_000 - first, 8_388_608)
            return MockServer.Response(
                status: 206, headers: [("ETag", "\"v\(number)\""), ("Content-Range", "bytes \(first)-\(first + count - 1)/10000000")],
                body: Data(repeating: number, count: count))
        }
    }

    private func rangesAndValidators(to path: String) -> [[String?]] {
        server.receivedRequests.filter { $0.path == path }.map { [$0.header("Range"), $0.header("If-Range")] }
    }

    /// A server that sends less than asked and ignores If-Range, whose file changes after the first answer: that answer
    /// is not continued with the new version's bytes; the download starts over and the file is the new version whole.
    func testAFileThatChangesBetweenAnswersStartsOver() throws {
        stubChangingFile("/changing") { $0 == 1 ? 1 : 2 }
        let target = destination()
        XCTAssertNoThrow(try XCTUnwrap(download("/changing", to: target, timeout: 60)).get())
        XCTAssertEqual(try Data(contentsOf: target), Data(repeating: 2, count: 10_000_000))
        XCTAssertEqual(
            rangesAndValidators(to: "/changing"),
            [[nil, nil], ["bytes=8388608-", "\"v1\""], [nil, nil], ["bytes=8388608-", "\"v2\""]])
    }

    /// Range units are case-insensitive (RFC 9110 §14.1): `BYTES 0-9999/10000` continues the file like `bytes`.
    func testAContentRangeInCapitalsIsUnderstood() throws {
        server.stub(path: "/capitals") { _ in
            MockServer.Response(
                status: 206, headers: [("ETag", "\"c1\""), ("Content-Range", "BYTES 0-9999/10000")], body: Data(repeating: 7, count: 10_000))
        }
        let target = destination()
        XCTAssertNoThrow(try XCTUnwrap(download("/capitals", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), Data(repeating: 7, count: 10_000))
        XCTAssertEqual(rangesAndValidators(to: "/capitals"), [[nil, nil]])
    }

    /// A file that changes on every request cannot be downloaded: it starts over once, then fails, at once.
    func testAFileThatKeepsChangingFailsAfterStartingOverOnce() throws {
        stubChangingFile("/restless") { UInt8($0 % 250) }
        rest.timeoutInterval = 10  // starting over again and again would end here
        let target = destination()
        guard case .failure(let error)? = download("/restless", to: target, timeout: 60) else { return XCTFail("no failure") }
        XCTAssertEqual(
            error.localizedDescription,
            "Network error -1017: The server's answer is unusable: twice in a row an answer did not continue the file as asked")
        XCTAssertEqual(
            rangesAndValidators(to: "/restless"),
            [[nil, nil], ["bytes=8388608-", "\"v1\""], [nil, nil], ["bytes=8388608-", "\"v3\""]])
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.path))
    }

    func testAnUnknownLengthArrivesAndItsFinalProgressHasTheSize() throws {
        let target = destination()
        let reports = ResultBox<RestManager.TransferProgress>()
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/300000?chunked=1&ignoreRange=1", to: target) { reports.set($0) }).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<300_000))
        XCTAssertEqual(reports.all.last, RestManager.TransferProgress(completedBytes: 300_000, totalBytes: 300_000))
        XCTAssertTrue(reports.all.dropLast().allSatisfy { $0.totalBytes == nil })
    }

    func testProgressNeverGoesBackAndEndsAtOneHundredPercent() throws {
        let reports = ResultBox<RestManager.TransferProgress>()
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/52428800", to: destination(), timeout: 60) { reports.set($0) }).get())
        let figures = reports.all
        XCTAssertEqual(figures.last, RestManager.TransferProgress(completedBytes: 52_428_800, totalBytes: 52_428_800))
        XCTAssertEqual(figures.last?.fractionCompleted, 1)
        XCTAssertEqual(figures.map(\.fractionCompleted), figures.map { Double($0.completedBytes) / 52_428_800 })
        XCTAssertEqual(figures.map(\.completedBytes), figures.map(\.completedBytes).sorted())
        XCTAssertEqual(Set(figures.map(\.totalBytes)), [52_428_800])
    }

    /// `fractionCompleted`: the share done, at most 1 (a server may send more than it announced), 1 for an empty
    /// transfer, nil when the size is not known.
    func testTheFractionCompletedOfEachKindOfFigure() {
        let figures = [(25, 100), (100, 100), (150, 100), (0, 0), (7, nil)].map {
            RestManager.TransferProgress(completedBytes: Int64($0.0), totalBytes: $0.1.map { Int64($0) })
        }
        XCTAssertEqual(figures.map(\.fractionCompleted), [0.25, 1, 1, 1, nil])
    }

    /// Only figures that moved are reported: half a second without a byte (five progress ticks) reports nothing.
    func testAFigureIsReportedOnce() throws {
        let pieces = [MockServer.Response.Piece(Data(count: 1000)), .init(after: 0.5, Data(count: 1000))]
        server.stub("GET", path: "/pause", response: .streamed(pieces))
        let reports = ResultBox<RestManager.TransferProgress>()
        XCTAssertNoThrow(try XCTUnwrap(download("/pause", to: destination()) { reports.set($0) }).get())
        let figures = reports.all
        XCTAssertEqual(figures.last, RestManager.TransferProgress(completedBytes: 2000, totalBytes: 2000))
        XCTAssertEqual(figures.count, Set(figures.map { "\($0.completedBytes) \(String(describing: $0.totalBytes))" }).count, "\(figures)")
    }

    /// A chunked answer whose last tick already had every byte (its size unknown then): the final report still comes,
    /// with the size, because a figure whose total changed is new too. The two seconds before the answer ends leave
    /// time for that tick on any machine.
    func testTheFinalReportComesAfterATickThatHadEveryByte() throws {
        let pieces = [MockServer.Response.Piece(Data(count: 1000)), .init(after: 2, Data())]
        server.stub("GET", path: "/slow-end", response: .streamed(pieces))
        let reports = ResultBox<RestManager.TransferProgress>()
        XCTAssertNoThrow(try XCTUnwrap(download("/slow-end", to: destination()) { reports.set($0) }).get())
        XCTAssertEqual(
            Array(reports.all.suffix(2)),
            [.init(completedBytes: 1000, totalBytes: nil), .init(completedBytes: 1000, totalBytes: 1000)])
    }

    /// Interrupted at several points (seeded), each time resumed from the bytes on disk.
    func testAnInterruptedDownloadResumesWhereItStopped() throws {
        var generator = SeededGenerator(seed: 17)
        let size = 1_000_000
        for _ in 0..<4 {
            let cut = Int.random(in: 1..<size, using: &generator)
            let target = destination("resume-\(cut).bin")
            server.clearReceivedRequests()
            guard case .failure(let error)? = download("/_test/files/\(size)?dropAfter=\(cut)", to: target) else {
                return XCTFail("the cut download succeeded")
            }
            guard case .transport = error else { return XCTFail("\(error)") }
            XCTAssertEqual(try Data(contentsOf: partial(target)), pattern(0..<cut))
            XCTAssertFalse(FileManager.default.fileExists(atPath: target.path))
            XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/\(size)", to: target)).get())
            XCTAssertEqual(try Data(contentsOf: target), pattern(0..<size), "cut at \(cut)")
            XCTAssertEqual(
                requests(to: "/_test/files/\(size)").last,
                ReceivedRequestSummary(range: "bytes=\(cut)-", ifRange: "\"1000000-v1\"", acceptEncoding: "identity"))
        }
    }

    func testResumingCountsTheBytesAlreadyOnDisk() throws {
        let target = destination()
        _ = download("/_test/files/400000?dropAfter=100000", to: target)
        let reports = ResultBox<RestManager.TransferProgress>()
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/400000", to: target) { reports.set($0) }).get())
        XCTAssertEqual(reports.all.last, RestManager.TransferProgress(completedBytes: 400_000, totalBytes: 400_000))
        XCTAssertTrue(reports.all.allSatisfy { $0.completedBytes >= 100_000 && $0.totalBytes == 400_000 }, "\(reports.all)")
    }

    /// Cuts a 200,000-byte download after 5,000 bytes (`cutQuery` added), downloads it again with
    /// `againQuery`, checks the file is whole, and returns what the server received for the second call.
    private func cutThenDownloadAgain(
        cutQuery: String = "", againQuery: String = "",
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> [ReceivedRequestSummary] {
        let target = destination()
        _ = download("/_test/files/200000?dropAfter=5000" + cutQuery, to: target)
        server.clearReceivedRequests()
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/200000" + againQuery, to: target)).get(), file: file, line: line)
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<200_000), file: file, line: line)
        return requests(to: "/_test/files/200000")
    }

    func testAServerThatIgnoresRangeStartsOver() throws {
        XCTAssertEqual(try cutThenDownloadAgain(againQuery: "?ignoreRange=1").last?.range, "bytes=5000-")
    }

    /// Cut, then answered whole (200) and cut again: the third call resumes the second answer's bytes, with its validator.
    func testADownloadInterruptedTwiceResumesFromTheSecondAnswer() throws {
        let target = destination()
        _ = download("/_test/files/200000?dropAfter=5000", to: target)
        _ = download("/_test/files/200000?ignoreRange=1&dropAfter=7000", to: target)
        XCTAssertEqual(try Data(contentsOf: partial(target)), pattern(0..<7000))
        server.clearReceivedRequests()
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/200000", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<200_000))
        XCTAssertEqual(
            requests(to: "/_test/files/200000"),
            [ReceivedRequestSummary(range: "bytes=7000-", ifRange: "\"200000-v1\"", acceptEncoding: "identity")])
    }

    /// Cut before the first byte: an empty partial file is nothing to resume, so no `If-Range` goes; cut again later,
    /// the third call resumes with the validator the second answer gave (written afresh, not added to the first).
    func testADownloadCutBeforeItsFirstByteStartsFromNothing() throws {
        let target = destination()
        _ = download("/_test/files/3000?dropAfter=0", to: target)
        XCTAssertEqual(try Data(contentsOf: partial(target)), Data())
        server.clearReceivedRequests()
        _ = download("/_test/files/3000?dropAfter=1000", to: target)
        XCTAssertEqual(try Data(contentsOf: partial(target)), pattern(0..<1000))
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/3000", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<3000))
        XCTAssertEqual(
            requests(to: "/_test/files/3000"),
            [
                ReceivedRequestSummary(range: nil, ifRange: nil, acceptEncoding: "identity"),
                ReceivedRequestSummary(range: "bytes=1000-", ifRange: "\"3000-v1\"", acceptEncoding: "identity")
            ])
    }

    func testAChangedFileStartsOver() throws {
        XCTAssertEqual(try cutThenDownloadAgain(againQuery: "?version=2").last?.ifRange, "\"200000-v1\"")
    }

    /// A server that honours Range but not If-Range: its 206 with another ETag is not appended to.
    func testARangeOfAChangedFileIsNotAppended() throws {
        XCTAssertEqual(try cutThenDownloadAgain(againQuery: "?version=2&ignoreIfRange=1").map(\.range), ["bytes=5000-", nil])
    }

    func testTheLastModifiedDateIsTheValidatorWithoutAnETag() throws {
        XCTAssertEqual(try cutThenDownloadAgain(cutQuery: "&validators=date-only").last?.ifRange, "Wed, 15 Nov 2023 22:13:20 GMT")
    }

    /// Without a validator a partial file is never resumed (it could mix two versions of the file): the file is asked
    /// for whole.
    func testAFileWithoutValidatorsIsNeverResumedAndIsAskedForWhole() throws {
        XCTAssertEqual(try cutThenDownloadAgain(cutQuery: "&validators=none").map(\.range), [nil])
        server.clearReceivedRequests()
        let target = destination("whole.bin")
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/200000?validators=none", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<200_000))
        XCTAssertEqual(requests(to: "/_test/files/200000").map(\.range), [nil])
    }

    /// A 206 is appended only where the partial file ends: one that starts elsewhere (a misbehaving cache answering
    /// from byte 0) makes the download start over, and the file is right.
    func testA206ThatStartsElsewhereIsNotAppended() throws {
        let target = destination("shifted.bin")
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try pattern(0..<100).write(to: partial(target))
        try Data("\"v1\"".utf8).write(to: URL(fileURLWithPath: target.path + ".part.validator"))
        let whole = pattern(0..<300)
        server.stub(path: "/shifted") { request in
            let resuming = request.header("Range")?.hasPrefix("bytes=100-") == true
            let body = resuming ? whole.prefix(200) : whole
            return MockServer.Response(
                status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes 0-\(body.count - 1)/300")], body: body)
        }
        XCTAssertNoThrow(try XCTUnwrap(download("/shifted", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), whole)
        XCTAssertEqual(rangesAndValidators(to: "/shifted"), [["bytes=100-", "\"v1\""], [nil, nil]])
    }

    /// Writes `count` bytes of the pattern as `target`'s partial file, with `validator` to resume it by.
    private func makePartial(_ target: URL, count: Int, validator: String = "\"v1\"") throws {
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try pattern(0..<count).write(to: partial(target))
        try Data(validator.utf8).write(to: URL(fileURLWithPath: target.path + ".part.validator"))
    }

    /// A resumed 206 whose body is longer than its Content-Range fails, whatever the offset, and the destination
    /// does not appear (nothing past the range is written).
    func testAResumed206LongerThanItsContentRangeFailsWhateverTheOffset() throws {
        for offset in [1, 100, 4_095, 4_096, 70_000] {
            let target = destination("long-\(offset).bin")
            try makePartial(target, count: offset)
            let body = pattern(offset..<(offset + 150))
            server.stub(path: "/long-\(offset)") { _ in
                MockServer.Response(
                    status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes \(offset)-\(offset + 99)/\(offset + 100)")],
                    body: body)
            }
            guard case .failure(let error)? = download("/long-\(offset)", to: target) else { return XCTFail("offset \(offset)") }
            XCTAssertEqual(
                error.localizedDescription, "Network error -1017: The server's answer is unusable: the 206 answer is longer than its Content-Range",
                "offset \(offset)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: target.path), "offset \(offset)")
            XCTAssertEqual(try Data(contentsOf: partial(target)), pattern(0..<(offset + 100)), "only the range is written")
        }
    }

    /// A 206 that carries neither an ETag nor a Last-Modified (a server that does not repeat them) resumes: only a
    /// validator that comes back different starts over.
    func testA206WithoutValidatorsResumes() throws {
        let target = destination("bare.bin")
        try makePartial(target, count: 100)
        let rest = pattern(100..<300)
        server.stub(path: "/bare") { _ in
            MockServer.Response(status: 206, headers: [("Content-Range", "bytes 100-299/300")], body: rest)
        }
        XCTAssertNoThrow(try XCTUnwrap(download("/bare", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<300))
        XCTAssertEqual(rangesAndValidators(to: "/bare"), [["bytes=100-", "\"v1\""]])
    }

    /// A server that sends less than asked (299 bytes an answer here) is asked for the rest until the total: the
    /// file is complete, never one byte short.
    func testShortAnswersContinueUntilTheLastByte() throws {
        let whole = pattern(0..<300)
        server.stub(path: "/short-answers") { request in
            let first = Int(request.header("Range")?.dropFirst(6).prefix { $0 != "-" } ?? "") ?? 0
            let body = whole[first..<min(300, first + 299)]
            return MockServer.Response(
                status: 206, headers: [("ETag", "\"s1\""), ("Content-Range", "bytes \(first)-\(first + body.count - 1)/300")],
                body: Data(body))
        }
        let target = destination("short.bin")
        XCTAssertNoThrow(try XCTUnwrap(download("/short-answers", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), whole)
        XCTAssertEqual(rangesAndValidators(to: "/short-answers"), [[nil, nil], ["bytes=299-", "\"s1\""]])
    }

    /// RFC 9110 §14.4: `bytes first-last/total` with first ≤ last < total, or `*` for an unknown total.
    func testContentRangeIsReadAsRFC9110Says() {
        let read = { (text: String) in RestManager.DownloadFile.contentRange(text).map { [$0.start, $0.last, $0.total ?? -1] } }
        XCTAssertEqual(read("bytes 0-99/100"), [0, 99, 100])
        XCTAssertEqual(read("bytes 5-5/*"), [5, 5, -1])
        XCTAssertEqual(read("BYTES 0-0/1"), [0, 0, 1])
        XCTAssertNil(read("bytes 0-99/99"))
        XCTAssertNil(read("bytes 0-100/99"))
        XCTAssertNil(read("bytes 5-4/10"))
        XCTAssertNil(read("bytes */100"))
        XCTAssertNil(read("items 0-1/2"))
        for garbled in ["bytes 0-99/1x0", "bytes 0-99/abc", "bytes 0-99/-100", "bytes 0-99/100 ", "bytes 0-99/", "bytes 0-99/+100"] {
            XCTAssertNil(read(garbled), "a garbled total is no range: \(garbled)")
        }
        XCTAssertNil(read("bytes 0-9223372036854775807/*"), "the byte after the range must fit in an Int64")
        XCTAssertEqual(read("bytes 0-9223372036854775806/*"), [0, 9_223_372_036_854_775_806, -1])
    }

    /// A download that starts over (the file changed) never reports less than it already did.
    func testProgressNeverGoesBackWhenADownloadStartsOver() throws {
        let served = ResultBox<Bool>()
        server.stub(path: "/restarting") { request in
            served.set(true)
            let version = served.count == 1 ? 1 : 2
            let first = Int(request.header("Range")?.dropFirst(6).prefix { $0 != "-" } ?? "") ?? 0
            let count = min(10_000_000 - first, 8_388_608)
            var response = MockServer.Response(
                status: 206,
                headers: [("ETag", "\"v\(version)\""), ("Content-Range", "bytes \(first)-\(first + count - 1)/10000000")],
                body: Data(repeating: UInt8(version), count: count))
            // About a second an answer, so that progress is reported within each.
            response.bytesPerSecond = 8_000_000
            return response
        }
        let reports = ResultBox<RestManager.TransferProgress>()
        let target = destination("restarting.bin")
        XCTAssertNoThrow(try XCTUnwrap(download("/restarting", to: target, timeout: 60) { reports.set($0) }).get())
        XCTAssertEqual(try Data(contentsOf: target), Data(repeating: 2, count: 10_000_000))
        let completed = reports.all.map(\.completedBytes)
        XCTAssertEqual(completed, completed.sorted(), "progress went back")
        XCTAssertEqual(reports.all.last, RestManager.TransferProgress(completedBytes: 10_000_000, totalBytes: 10_000_000))
    }

    /// A weak ETag (`W/…`) does not promise the same bytes (RFC 9110 §8.8.1): `Last-Modified` resumes instead.
    func testAWeakETagIsNeverAResumeValidator() throws {
        let date = "Wed, 15 Nov 2023 22:13:20 GMT"
        server.stub(path: "/weak") { request in
            let first = Int(request.header("Range")?.dropFirst(6).prefix { $0 != "-" } ?? "") ?? 0
            let count = min(10_000_000 - first, 8_388_608)
            return MockServer.Response(
                status: 206,
                headers: [("ETag", "W/\"w1\""), ("Last-Modified", date), ("Content-Range", "bytes \(first)-\(first + count - 1)/10000000")],
                body: Data(repeating: 7, count: count))
        }
        XCTAssertNoThrow(try XCTUnwrap(download("/weak", to: destination("weak.bin"))).get())
        XCTAssertEqual(rangesAndValidators(to: "/weak"), [[nil, nil], ["bytes=8388608-", date]])
    }

    /// A partial file longer than the server's file: 416, then one clean start.
    func testARangePastTheEndStartsOver() throws {
        let target = destination()
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(count: 2000).write(to: partial(target))
        try Data("\"1000-v1\"".utf8).write(to: URL(fileURLWithPath: partial(target).path + ".validator"))
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/1000", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<1000))
        XCTAssertEqual(requests(to: "/_test/files/1000").map(\.range), ["bytes=2000-", nil])
    }

    /// A 416 to a request that asked for no range is the server's error, not a stale partial file: delivered once as
    /// `.unacceptableStatusCode(416, …)`, with nothing sent again and nothing left on disk.
    func testA416ToARequestWithoutARangeIsAnError() throws {
        server.stub("GET", path: "/odd", response: .text("no", status: 416))
        let target = destination("odd.bin")
        let result = try XCTUnwrap(download("/odd", to: target))
        guard case .failure(.unacceptableStatusCode(416, let body)) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(body, Data("no".utf8))
        XCTAssertEqual(server.receivedRequests.count, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.path))
    }

    /// A server that refuses a range past the end of its file (416, as httpbin does) instead of shortening it: the
    /// rest is asked for open-ended, with the validator, and appended; nothing is downloaded twice.
    func testAServerRefusingAnOverlongRangeIsAskedForTheRest() throws {
        let target = destination()
        let path = "/_test/files/102400"
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try pattern(0..<50_000).write(to: partial(target))
        try Data("\"102400-v1\"".utf8).write(to: URL(fileURLWithPath: partial(target).path + ".validator"))
        XCTAssertNoThrow(try XCTUnwrap(download(path + "?strictRanges=1", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<102_400))
        let expected = [
            ReceivedRequestSummary(range: "bytes=50000-", ifRange: "\"102400-v1\"", acceptEncoding: "identity")
        ]
        XCTAssertEqual(requests(to: path), expected)
        XCTAssertFalse(FileManager.default.fileExists(atPath: partial(target).path))
    }

    func testAnErrorStatusFailsAndLeavesTheExistingFileAlone() throws {
        let target = destination()
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: target)
        guard case .failure(.unacceptableStatusCode(404, let body))? = download("/_test/status/404", to: target) else {
            return XCTFail("a 404 did not fail")
        }
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "{\"status\":404}")
        XCTAssertEqual(try Data(contentsOf: target), Data("keep me".utf8))
    }

    /// Nothing is reported before a 2xx answer starts the file (here a 404 that takes 0.4 s).
    /// An error answer's body is kept for the error up to its first 64 KiB.
    func testAnErrorAnswersBodyIsKeptUpToSixtyFourKibibytes() throws {
        let page = Data((0..<100_000).map { UInt8($0 % 199) })
        server.stub(path: "/big-error", response: MockServer.Response(status: 500, body: page))
        guard case .failure(.unacceptableStatusCode(500, let body))? = download("/big-error", to: destination()) else {
            return XCTFail("a 500 did not fail")
        }
        XCTAssertEqual(body, page.prefix(65_536))
    }

    func testNoProgressIsReportedForAnErrorAnswer() throws {
        var slow = MockServer.Response(status: 404, body: Data("gone".utf8))
        slow.delay = 0.4
        server.stub(path: "/slow-missing", response: slow)
        let reports = ResultBox<RestManager.TransferProgress>()
        guard case .failure(.unacceptableStatusCode(404, _))? = download("/slow-missing", to: destination(), progress: { reports.set($0) }) else {
            return XCTFail("a 404 did not fail")
        }
        XCTAssertEqual(reports.all, [])
    }

    /// `maximumResponseSize` bounds bodies kept in memory; a file on disk may be larger.
    func testTheResponseSizeLimitDoesNotApplyToAFileOnDisk() throws {
        rest.maximumResponseSize = 10
        let target = destination()
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/100000", to: target)).get())
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<100_000))
    }

    func testAFolderAsDestinationIsAnError() throws {
        try FileManager.default.createDirectory(at: destination(), withIntermediateDirectories: true)
        guard case .failure(.fileAccessFailed(let url, let reason))? = download("/_test/files/10", to: destination()) else {
            return XCTFail("a folder was accepted")
        }
        XCTAssertEqual(url, destination())
        XCTAssertEqual(reason, "it is a folder")
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// A destination whose folder cannot be made (a file stands where a folder must go): the error says so, and
    /// nothing is asked of the server.
    func testADestinationWhoseFolderCannotBeMadeIsAnError() throws {
        let blocker = scratch.appendingPathComponent("blocker")
        XCTAssertTrue(FileManager.default.createFile(atPath: blocker.path, contents: Data("x".utf8)))
        let target = blocker.appendingPathComponent("sub/file.bin")
        guard case .failure(.fileAccessFailed(let url, let reason))? = download("/_test/files/10", to: target) else {
            return XCTFail("a file in place of a folder was accepted")
        }
        XCTAssertEqual(url, target)
        XCTAssertTrue(reason.hasPrefix("its folder cannot be created ("), reason)
        XCTAssertEqual(server.receivedRequests.count, 0)
        XCTAssertEqual(try Data(contentsOf: blocker), Data("x".utf8))
    }

    func testCancellingMidwayKeepsThePartialFileAndCompletesOnce() throws {
        let target = destination()
        let done = expectation(description: "cancelled")
        let firstProgress = expectation(description: "progress")
        firstProgress.assertForOverFulfill = false
        let box = ResultBox<Result<URL, RestManager.CustomError>>()
        let handle = rest.download(fromURL: url("/_test/files/68719476736"), to: target, progress: { _ in firstProgress.fulfill() }) {
            box.set($0)
            done.fulfill()
        }
        wait(for: [firstProgress], timeout: 10)
        handle.cancel()
        wait(for: [done], timeout: 10)
        guard case .failure(.cancelled)? = box.value else { return XCTFail("\(String(describing: box.value))") }
        XCTAssertEqual(box.count, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target.path))
        XCTAssertGreaterThan(((try? FileManager.default.attributesOfItem(atPath: partial(target).path))?[.size] as? NSNumber)?.intValue ?? 0, 0)
    }

    func testARedirectIsFollowedAndTheAsyncFormReturnsTheDestination() async throws {
        let target = destination()
        let result = try await rest.download(fromURL: url("/_test/redirect/302?to=/_test/files/777"), to: target)
        XCTAssertEqual(result, target)
        XCTAssertEqual(try Data(contentsOf: target), pattern(0..<777))
    }

    func testTheManagersHeadersGoButNotItsQuery() throws {
        rest.requestHttpHeaders.add(value: "secret-key", forKey: "X-Api-Key")
        rest.urlQueryParameters.add(value: "2", forKey: "page")
        XCTAssertNoThrow(try XCTUnwrap(download("/_test/files/10", to: destination())).get())
        let received = try XCTUnwrap(server.lastRequest(path: "/_test/files/10"))
        XCTAssertEqual(received.header("X-Api-Key"), "secret-key")
        XCTAssertNil(received.rawQuery)
        XCTAssertEqual(received.method, "GET")
    }
}
