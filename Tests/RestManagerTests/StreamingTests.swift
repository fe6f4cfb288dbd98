import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HeapStatistics
import MockServer
import XCTest
@testable import RestManager

/// `stream(_:)`: the head first, the body as it arrives, bounded memory, cancellation and timeouts, on real sockets.
final class StreamingTests: MockServerTestCase {
    private func request(_ path: String) -> RestManager.Request { RestManager.Request(url: url(path)) }

    /// Waits (up to `seconds`) until `condition` holds.
    private func eventually(_ seconds: TimeInterval = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while !condition() {
            if Date() > deadline { return false }
            usleep(5_000)
        }
        return true
    }

    /// Once its head is handed over, a stream is never sent again: a body cut short ends with its error even under a
    /// retry policy that retries GETs (the reader would get the first bytes again).
    func testAStreamCutShortIsNotSentAgainAfterItsHead() async throws {
        rest.retryPolicy = RestManager.RetryPolicy(initialDelay: 0)
        var cut = MockServer.Response(status: 200, headers: [("Content-Type", "text/plain")], body: Data("0123456789".utf8))
        cut.fault = .closeMidBody
        server.stub("GET", path: "/cut", response: cut)
        let (body, _) = try await rest.stream(RestManager.Request(url: url("/cut")))
        var received = Data()
        do {
            for try await chunk in body { received += chunk }
            XCTFail("a body cut short ends with an error")
        } catch {
            XCTAssertNotNil(error as? RestManager.CustomError, "\(error)")
        }
        XCTAssertEqual(received, Data("01234".utf8))
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testTheHeadIsReturnedBeforeTheBodyIsWritten() async throws {
        server.stub("GET", path: "/slow", response: .streamed([.init(after: 60, "late")], contentType: "text/plain"))
        let started = Date()
        let (body, response) = try await rest.stream(request("/slow"))
        // The body comes 60 s after the head: returning at all before then shows the head was not held back.
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
        XCTAssertEqual(response.httpStatusCode, 200)
        XCTAssertEqual(response.headers.value(forKey: "Content-Type"), "text/plain")
        _ = body
    }

    func testEachChunkReachesTheReaderBeforeTheNextIsWritten() async throws {
        server.stub("GET", path: "/tokens", response: .streamed([.init("Hel"), .init(after: 60, "lo")]))
        let (body, _) = try await rest.stream(request("/tokens"))
        var iterator = body.makeAsyncIterator()
        let first = try await iterator.next()
        XCTAssertEqual(first.map { String(decoding: $0, as: UTF8.self) }, "Hel")
    }

    func testTheChunksMakeTheWholeBodyInOrder() async throws {
        let pieces = (0..<20).map { MockServer.Response.Piece(after: 0.01, "piece \($0);") }
        server.stub("GET", path: "/feed", response: .streamed(pieces))
        let (body, _) = try await rest.stream(request("/feed"))
        var received = Data()
        for try await chunk in body { received.append(chunk) }
        XCTAssertEqual(String(decoding: received, as: UTF8.self), (0..<20).map { "piece \($0);" }.joined())
    }

    func testLinesAreSplitAtLFCRLFAndCRWithEmptyLinesKeptAndTheLastLineDelivered() async throws {
        // It starts with an empty line: no line end came before the first LF, so it ends a line of its own.
        let text = "\none\ntwo\r\nthree\rfour\r\r\n\nfünf"
        let bytes = Array(text.utf8)
        // The same stream split at every byte offset, each piece written after a pause so that it arrives alone.
        for split in 1..<bytes.count {
            server.removeAllStubs()
            let pieces = [MockServer.Response.Piece(Data(bytes[..<split])), .init(after: 0.005, Data(bytes[split...]))]
            server.stub("GET", path: "/lines", response: .streamed(pieces))
            let (body, _) = try await rest.stream(request("/lines"))
            var lines: [String] = []
            for try await line in body.lines { lines.append(line) }
            XCTAssertEqual(lines, ["", "one", "two", "three", "four", "", "", "fünf"], "split at \(split)")
        }
    }

    func testTheSplitterHandlesEveryThreeWaySplitOfCRLFAndMultiByteUTF8() {
        let bytes = Array("a\r\n\r\rb\n€x\r".utf8) + [0xFF] + Array("\ry".utf8)
        for first in 0...bytes.count {
            for second in first...bytes.count {
                var splitter = RestManager.LineSplitter()
                var lines: [String] = []
                for piece in [bytes[..<first], bytes[first..<second], bytes[second...]] {
                    XCTAssertNoThrow(try splitter.split(Data(piece), into: &lines))
                }
                if let last = splitter.finish() { lines.append(last) }
                XCTAssertEqual(lines, ["a", "", "", "b", "€x", "\u{FFFD}", "y"], "split at \(first), \(second)")
            }
        }
    }

    func testAOneMebibyteLineArrivesWhole() async throws {
        let line = String(repeating: "x", count: 1 << 20)
        let pieces = stride(from: 0, to: line.utf8.count, by: 16_384).map { start in
            MockServer.Response.Piece(Data(Array(line.utf8)[start..<min(line.utf8.count, start + 16_384)]))
        }
        server.stub("GET", path: "/long", response: .streamed(pieces + [.init("\nend")]))
        let (body, _) = try await rest.stream(request("/long"))
        var lines: [String] = []
        for try await line in body.lines { lines.append(line) }
        XCTAssertEqual(lines.map(\.utf8.count), [1 << 20, 3])
        XCTAssertEqual(lines.last, "end")
    }

    /// A peer that never ends a line cannot take the process's memory: past `maximumUnreadBytes` (16 MiB) in one line,
    /// `lines` ends with an error and no line. A line of exactly the limit is delivered.
    func testALineLongerThanTheLimitEndsTheStreamWithAnError() async throws {
        let mebibyte = Data(repeating: UInt8(ascii: "x"), count: 1 << 20)
        let sixteen = (0..<16).map { _ in MockServer.Response.Piece(mebibyte) }
        server.stub("GET", path: "/exact", response: .streamed(sixteen + [.init("\nend")]))
        let (exact, _) = try await rest.stream(request("/exact"))
        var lengths: [Int] = []
        for try await line in exact.lines { lengths.append(line.utf8.count) }
        XCTAssertEqual(lengths, [16 << 20, 3])
        server.stub("GET", path: "/endless", response: .streamed(sixteen + [.init("x\n"), .init(after: 60, "never")]))
        let (body, _) = try await rest.stream(request("/endless"))
        var lines = 0
        do {
            for try await _ in body.lines { lines += 1 }
            XCTFail("a line of 16 MiB and a byte was read whole")
        } catch {
            XCTAssertEqual(error.localizedDescription, "Network error -1103: A line of the stream is longer than 16777216 bytes")
        }
        XCTAssertEqual(lines, 0)
        XCTAssertTrue(eventually { server.openConnectionCount == 0 }, "the call was not cancelled")
    }

    func testANon2xxHeadThrowsWithItsBody() async throws {
        server.stub("GET", path: "/missing", response: .text("no such feed", status: 404))
        do {
            _ = try await rest.stream(request("/missing"))
            XCTFail("a 404 must throw")
        } catch RestManager.CustomError.unacceptableStatusCode(let status, let body) {
            XCTAssertEqual(status, 404)
            XCTAssertEqual(String(decoding: body, as: UTF8.self), "no such feed")
        }
    }

    func testAnErrorBodyIsKeptToItsFirst64KiB() async throws {
        server.stub("GET", path: "/huge-error", response: .text(String(repeating: "e", count: 200_000), status: 500))
        do {
            _ = try await rest.stream(request("/huge-error"))
            XCTFail("a 500 must throw")
        } catch RestManager.CustomError.unacceptableStatusCode(let status, let body) {
            XCTAssertEqual(status, 500)
            XCTAssertEqual(body.count, 65_536)
        }
    }

    func testAConnectionRefusedThrowsATransportError() async throws {
        let closed = url("/x")
        server.stop()
        do {
            _ = try await rest.stream(RestManager.Request(url: closed))
            XCTFail("a refused connection must throw")
        } catch RestManager.CustomError.transport(let error) {
            XCTAssertEqual(error.code, .cannotConnectToHost)
        }
    }

    func testLeavingTheLoopClosesTheConnectionAndCompletesOnce() async throws {
        let finished = ResultBox<String>()
        rest.eventHandler = { event in
            if case .finished = event { finished.set(event.description) }
        }
        let pieces = (0..<600).map { MockServer.Response.Piece(after: 0.1, "tick \($0)\n") }
        server.stub("GET", path: "/ticks", response: .streamed(pieces))
        let (body, _) = try await rest.stream(request("/ticks"))
        for try await line in body.lines {
            XCTAssertEqual(line, "tick 0")
            break
        }
        XCTAssertTrue(eventually { server.openConnectionCount == 0 }, "the server still sees the connection")
        XCTAssertTrue(eventually { finished.count == 1 })
        usleep(200_000)
        XCTAssertEqual(finished.count, 1)
        XCTAssertTrue(finished.value?.hasPrefix("finished GET ") == true, finished.value ?? "")
        XCTAssertTrue(finished.value?.contains("cancelled") == true, finished.value ?? "")
    }

    func testCancellingTheReadingTaskEndsTheStreamWithCancelled() async throws {
        server.stub("GET", path: "/quiet", response: .streamed([.init("first"), .init(after: 60, "never")]))
        let (body, _) = try await rest.stream(request("/quiet"))
        let reader = Task { () -> Error? in
            do {
                for try await _ in body {}
                return nil
            } catch { return error }
        }
        XCTAssertTrue(eventually { server.openConnectionCount == 1 })
        reader.cancel()
        let error = await reader.value
        XCTAssertEqual((error as? RestManager.CustomError)?.isCancellation, true, "\(String(describing: error))")
        XCTAssertTrue(eventually { server.openConnectionCount == 0 })
    }

    /// Cancelling the task while `stream` waits for the head (a server that would answer after a minute): `stream`
    /// throws `.cancelled` at once and the connection closes, instead of waiting for the head.
    func testCancellingWhileWaitingForTheHeadEndsTheCallAtOnce() async throws {
        server.stub("GET", path: "/late-head", response: .raw([.init(after: 60, "HTTP/1.1 200 OK\r\n\r\n")]))
        let outcome = ResultBox<String>()
        let ended = expectation(description: "stream returned or threw")
        let caller = Task { [rest = rest!, target = request("/late-head")] in
            do {
                _ = try await rest.stream(target)
                outcome.set("a stream")
            } catch {
                outcome.set("\(error)")
            }
            ended.fulfill()
        }
        XCTAssertTrue(eventually { server.openConnectionCount == 1 })
        caller.cancel()
        // Bounded: a call that waits for the head (the bug) fails the test in 20 s instead of the minute.
        await fulfillment(of: [ended], timeout: 20)
        XCTAssertEqual(outcome.all, ["The request was cancelled."])
        XCTAssertTrue(eventually { server.openConnectionCount == 0 }, "the server still sees the connection")
    }

    /// One consumer: a second task reading the body while another waits gets a clear error at once (it used to wait
    /// for ever, its continuation overwritten); leaving its loop cancels the call, so the other ends with `.cancelled`.
    func testASecondReaderAtTheSameTimeGetsAnErrorAndNeitherHangs() async throws {
        server.stub("GET", path: "/one", response: .streamed([.init("a"), .init(after: 60, "never")]))
        let (body, _) = try await rest.stream(request("/one"))
        let read = { @Sendable () async -> String in
            var text = ""
            do {
                for try await chunk in body { text += String(decoding: chunk, as: UTF8.self) }
            } catch {
                text += "|" + error.localizedDescription
            }
            return text
        }
        let outcomes = ResultBox<String>()
        let ended = expectation(description: "both readers ended")
        ended.expectedFulfillmentCount = 2
        let readers = (0..<2).map { _ in
            Task {
                outcomes.set(await read())
                ended.fulfill()
            }
        }
        // Bounded: a reader that waits for ever (the bug) fails the test instead of hanging the suite.
        await fulfillment(of: [ended], timeout: 20)
        readers.forEach { $0.cancel() }
        XCTAssertEqual(
            Set(outcomes.all.map { $0.hasPrefix("a|") ? String($0.dropFirst()) : $0 }),
            [
                "|Network error -1: Two tasks read one ResponseBody at the same time; a body has one reader",
                "|The request was cancelled."
            ])
        XCTAssertTrue(eventually { server.openConnectionCount == 0 })
    }

    func testDroppingAnUnreadBodyClosesTheConnection() async throws {
        server.stub("GET", path: "/unread", response: .streamed([.init("x"), .init(after: 60, "y")]))
        do {
            let (body, _) = try await rest.stream(request("/unread"))
            _ = body
        }
        XCTAssertTrue(eventually { server.openConnectionCount == 0 })
    }

    func testTheIdleTimeoutEndsAStreamThatStopsSending() async throws {
        let (chunks, seconds) = try await readStreamThatStalls(idleTimeout: 0.5)
        XCTAssertEqual(seconds, 0.5)
        XCTAssertEqual(chunks, ["a"])
    }

    /// A short idle timeout is checked often enough to fire near its time: 50 ms without a byte ends the stream well
    /// before a second has passed (checks once a second made it fire at 1 s at the earliest).
    func testAShortIdleTimeoutFiresNearItsTime() async throws {
        let started = Date()
        let (_, seconds) = try await readStreamThatStalls(idleTimeout: 0.05)
        XCTAssertEqual(seconds, 0.05)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0)
    }

    /// Reads a stream that sends "a", then nothing for a minute, with `idleTimeout`: the chunks read and the seconds
    /// its `.timedOut` names (nil, and a failure, when it ended some other way).
    private func readStreamThatStalls(idleTimeout: TimeInterval) async throws -> (chunks: [String], seconds: TimeInterval?) {
        rest.idleTimeoutInterval = idleTimeout
        server.stub("GET", path: "/stalls", response: .streamed([.init("a"), .init(after: 60, "b")]))
        let (body, _) = try await rest.stream(request("/stalls"))
        var chunks: [String] = []
        do {
            for try await chunk in body { chunks.append(String(decoding: chunk, as: UTF8.self)) }
            XCTFail("an idle stream must end with an error")
        } catch RestManager.CustomError.timedOut(_, let seconds, .idle) {
            return (chunks, seconds)
        }
        return (chunks, nil)
    }

    /// Exactly `maximumUnreadBytes` waiting is within the bound: a reader that takes nothing until the whole 16 MiB body
    /// has arrived (the call has finished) then gets every byte and a clean end.
    func testExactlyTheUnreadLimitWaitingIsKeptWhole() async throws {
        let finished = expectation(description: "the call finished")
        let outcome = ResultBox<String>()
        rest.eventHandler = { event in
            guard case let .finished(_, results, _) = event else { return }
            outcome.set(results.error.map { "\($0)" } ?? "success")
            finished.fulfill()
        }
        let size = RestManager.ResponseBody.maximumUnreadBytes
        let (body, _) = try await rest.stream(request("/_test/files/\(size)"))
        await fulfillment(of: [finished], timeout: 60)
        XCTAssertEqual(outcome.value, "success")
        var count = 0
        for try await chunk in body { count += chunk.count }
        XCTAssertEqual(count, size)
    }

    /// The idle timeout is the longest gap between bytes, not the longest stream: chunks 0.1 s apart for 1.2 s with an
    /// idle timeout of 0.4 s arrive whole.
    func testChunksArrivingForLongerThanTheIdleTimeoutDoNotEndItAsIdle() async throws {
        rest.idleTimeoutInterval = 0.4
        let received = try await readSteadyStream()
        XCTAssertEqual(received, (0..<12).map { "\($0)," }.joined())
    }

    func testAHealthyStreamOutlivesTheManagersWholeCallTimeout() async throws {
        rest.timeoutInterval = 0.3
        let received = try await readSteadyStream()
        XCTAssertEqual(received, (0..<12).map { "\($0)," }.joined())
    }

    /// The whole body of a stream of 12 chunks 0.1 s apart ("0,", "1,", …).
    private func readSteadyStream() async throws -> String {
        let pieces = (0..<12).map { MockServer.Response.Piece(after: 0.1, "\($0),") }
        server.stub("GET", path: "/steady", response: .streamed(pieces))
        let (body, _) = try await rest.stream(request("/steady"))
        var received = ""
        for try await chunk in body { received += String(decoding: chunk, as: UTF8.self) }
        return received
    }

    func testTheRequestsTimeoutIntervalBoundsTheWholeStream() async throws {
        let pieces = (0..<600).map { MockServer.Response.Piece(after: 0.05, "\($0),") }
        server.stub("GET", path: "/endless", response: .streamed(pieces))
        var request = request("/endless")
        request.timeoutInterval = 0.5
        let (body, _) = try await rest.stream(request)
        do {
            for try await _ in body {}
            XCTFail("the request's deadline must end the stream")
        } catch RestManager.CustomError.timedOut(_, let seconds, .wholeCall) {
            XCTAssertEqual(seconds, 0.5)
        }
    }

    func testA401HeadIsRefreshedAndResentBeforeAnyByte() async throws {
        let refreshes = ResultBox<Int>()
        rest.authenticator = RestManager.Authenticator(credential: .init(accessToken: "old")) { _ in
            refreshes.set(1)
            return .init(accessToken: "new")
        }
        server.stub("GET", path: "/private-feed") { request in
            guard request.header("Authorization") == "Bearer new" else { return .text("expired", status: 401) }
            return .streamed([.init("secret "), .init(after: 0.01, "data")])
        }
        let (body, response) = try await rest.stream(request("/private-feed"))
        var received = Data()
        for try await chunk in body { received.append(chunk) }
        XCTAssertEqual(response.httpStatusCode, 200)
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "secret data")
        XCTAssertEqual(refreshes.count, 1)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Authorization") }, ["Bearer old", "Bearer new"])
    }

    func testInterceptorsAdaptTheStreamedRequest() async throws {
        struct Tag: RestManager.Interceptor {
            func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
                var request = request
                request.setValue("attempt-\(attempt)", forHTTPHeaderField: "X-Tag")
                return request
            }
        }
        rest.interceptors = [Tag()]
        server.stub("GET", path: "/tagged", response: .streamed([.init("ok")]))
        let (body, _) = try await rest.stream(request("/tagged"))
        for try await _ in body {}
        XCTAssertEqual(server.lastRequest(path: "/tagged")?.header("X-Tag"), "attempt-1")
    }

    func testAReaderThatFallsBehindEndsTheStreamWithBoundedMemory() async throws {
        // 1 GiB offered (the server closes the connection before its last byte, so it never stays open for reuse); the
        // reader takes one chunk and stops. The stream ends once the unread bytes pass the bound: the connection closes.
        var reader: RestManager.ResponseBody.AsyncIterator?
        let peak = try await peakHeapGrowth {
            let (body, _) = try await rest.stream(request("/_test/files/1073741824?dropAfter=1073741823"))
            reader = body.makeAsyncIterator()
            _ = try await reader?.next()
        }
        assertHeapGrowthIsBounded([peak])
        var iterator = try XCTUnwrap(reader)
        var unread = 0
        do {
            while let chunk = try await iterator.next() { unread += chunk.count }
            XCTFail("a reader that fell behind must get an error")
        } catch RestManager.CustomError.transport(let error) {
            XCTAssertEqual(error.code, .dataLengthExceedsMaximum)
        }
        XCTAssertLessThanOrEqual(unread, RestManager.ResponseBody.maximumUnreadBytes)
        XCTAssertGreaterThan(unread, RestManager.ResponseBody.maximumUnreadBytes - 65_536)
    }

    /// A reader that leaves the loop while loopback brings the body as fast as it can: the call is cancelled off the
    /// delegate queue, which goes on taking libcurl's chunks (cancelled on it, `cancel()` held the queue while libcurl
    /// read on and queued chunks behind it: 22 MiB to the whole GiB). The connection closes and the heap stays
    /// bounded, eight times in a row, each with a new manager (a cancel on the delegate queue passed the bound about one
    /// time in four).
    func testLeavingTheLoopOfAFastBodyKeepsTheHeapBounded() async throws {
        var peaks: [Int] = []
        for _ in 1...8 {
            let peak = try await peakHeapGrowth {
                // A manager of its own: its session's first connection.
                let (body, _) = try await RestManager().stream(request("/_test/files/1073741824?dropAfter=1073741823"))
                for try await _ in body { break }
            }
            peaks.append(peak)
        }
        assertHeapGrowthIsBounded(peaks)
    }

    /// How far the heap grew (a thread samples it every millisecond) while `body` ran and until the server saw every
    /// connection close.
    private func peakHeapGrowth(_ body: () async throws -> Void) async throws -> Int {
        let heapBefore = heap_statistics_live_bytes()
        let peak = ResultBox<Int>()
        let sampling = ResultBox<Bool>()
        let sampler = Thread {
            var most = 0
            while sampling.value == nil {
                most = max(most, heap_statistics_live_bytes() - heapBefore)
                usleep(1_000)
            }
            peak.set(most)
        }
        sampler.start()
        try await body()
        XCTAssertTrue(eventually(120) { server.openConnectionCount == 0 }, "the connection stayed open")
        sampling.set(true)
        XCTAssertTrue(eventually { peak.count == 1 })
        return peak.value ?? .max
    }

    /// Each peak under 64 MiB, in a plain run: the sanitizers' allocators keep freed chunks (quarantine, shadow).
    private func assertHeapGrowthIsBounded(_ peaks: [Int], file: StaticString = #filePath, line: UInt = #line) {
        let sanitized = ["ASAN_OPTIONS", "TSAN_OPTIONS"].contains { ProcessInfo.processInfo.environment[$0] != nil }
        if heap_statistics_live_bytes() > 0, !sanitized {
            XCTAssertLessThan(peaks.max() ?? .max, 64 << 20, "the heap grew past 64 MiB: \(peaks)", file: file, line: line)
        }
    }

    /// A reader slower than the network does not slow the network down: on Linux that wait would hold
    /// FoundationNetworking's one queue, and every call in the process with it. Once `maximumUnreadBytes` wait for it,
    /// the stream ends: the reader gets the bytes already received, in order, then `dataLengthExceedsMaximum`. A
    /// network held for the reader (up to half a second, each time it fell behind) brought the whole 256 MiB to a
    /// reader taking all that waits every 0.3 s; loopback brings 16 MiB far sooner, even under the sanitizers.
    func testAReaderSlowerThanTheNetworkEndsItsStreamInsteadOfSlowingIt() async throws {
        let size = 256 << 20
        let (body, _) = try await rest.stream(request("/_test/files/\(size)?dropAfter=\(size - 1)"))
        var count = 0
        var largest = 0
        var misplaced: Int?
        do {
            for try await chunk in body {
                // Byte i of the pattern is i mod 251: each chunk starts where the last ended.
                if chunk.first != UInt8(count % 251), misplaced == nil { misplaced = count }
                count += chunk.count
                largest = max(largest, chunk.count)
                try await Task.sleep(nanoseconds: 300_000_000)
            }
            XCTFail("a reader slower than the network must get an error, not the whole body")
        } catch RestManager.CustomError.transport(let error) {
            XCTAssertEqual(error.code, .dataLengthExceedsMaximum)
        }
        XCTAssertNil(misplaced, "a chunk out of order")
        // What waited for the reader when the stream ended came as one chunk, within the bound; the rest never came.
        XCTAssertGreaterThan(largest, RestManager.ResponseBody.maximumUnreadBytes - 65_536)
        XCTAssertLessThanOrEqual(largest, RestManager.ResponseBody.maximumUnreadBytes)
        XCTAssertLessThan(count, size - 1)
        XCTAssertTrue(eventually { server.openConnectionCount == 0 }, "the connection stayed open")
    }

    func testTheBodyIsNotKeptWholeWhileItStreams() async throws {
        // 256 MiB read as it comes: far more than maximumResponseSize, which applies to bodies kept in memory. Under
        // the sanitizers (RESTMANAGER_LARGE_TRANSFER_BYTES, 16 MiB) a slowed reader could fall 16 MiB behind a
        // loopback flood, which ends a stream by design: there the body is no larger than that bound.
        rest.maximumResponseSize = 1 << 20
        let size =
            ProcessInfo.processInfo.environment["RESTMANAGER_LARGE_TRANSFER_BYTES"].flatMap { Int($0) } ?? (TestScale.quick ? 16 << 20 : 268_435_456)
        let (body, _) = try await rest.stream(request("/_test/files/\(size)"))
        var count = 0
        var position = 0
        var patternHolds = true
        for try await chunk in body {
            // Byte i of the pattern is i mod 251: each chunk starts where the last ended.
            if chunk.first != UInt8(position % 251) { patternHolds = false }
            position += chunk.count
            count += chunk.count
        }
        XCTAssertEqual(count, size)
        XCTAssertTrue(patternHolds)
    }

    func testStreamsAreNeverDeduplicated() async throws {
        rest.deduplicatesRequests = true
        server.stub("GET", path: "/shared", response: .streamed([.init("a"), .init(after: 0.2, "b")]))
        let rest = self.rest!
        let shared = request("/shared")
        async let first = rest.stream(shared)
        async let second = rest.stream(shared)
        let bodies = try await [first.0, second.0]
        for body in bodies {
            var received = Data()
            for try await chunk in body { received.append(chunk) }
            XCTAssertEqual(received, Data("ab".utf8))
        }
        XCTAssertEqual(server.receivedRequests.count, 2)
    }
}
