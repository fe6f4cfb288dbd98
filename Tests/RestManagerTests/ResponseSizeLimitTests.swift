import Foundation
import XCTest
import RestManager

/// `maximumResponseSize`: bodies are counted as they arrive (decoded), and the transfer stops at the limit.
final class ResponseSizeLimitTests: MockServerTestCase {
    private func tooLarge(_ results: RestManager.Results) -> Int? {
        guard case .responseTooLarge(let limit) = results.error as? RestManager.CustomError else { return nil }
        return limit
    }

    /// An upload's answer and a multipart call's answer obey the limit as they arrive: 50,000 bytes come at once,
    /// then the server waits 30 s; the call ends at the limit instead of waiting for the whole answer.
    func testTheLimitHoldsForAnUploadsAnswerAndAMultipartCallsAnswer() async throws {
        rest.maximumResponseSize = 10_000
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 1000).write(to: file)
        let started = Date()
        let uploaded = await rest.upload(fileAt: file, toURL: url("/_test/stall?bytes=100000&seconds=30"))
        XCTAssertEqual(tooLarge(uploaded), 10_000)
        rest.addFile(at: file, fieldName: "doc", mimeType: "application/octet-stream")
        let multipart = await rest.makeRequest(toURL: url("/_test/stall?bytes=100000&seconds=30"), withHttpMethod: .post)
        XCTAssertEqual(tooLarge(multipart), 10_000)
        XCTAssertLessThan(Date().timeIntervalSince(started), 25, "an answer was read whole before the limit applied")
    }

    func testTheDefaultIsOneHundredMebibytes() {
        XCTAssertEqual(RestManager().maximumResponseSize, 104_857_600)
    }

    func testABodyPastTheLimitFailsAndOneAtTheLimitArrives() {
        rest.maximumResponseSize = 1000
        XCTAssertEqual(tooLarge(send(.get, "/_test/bytes/1001")), 1000)
        let atLimit = send(.get, "/_test/bytes/1000")
        XCTAssertNil(atLimit.error)
        XCTAssertEqual(atLimit.data, Data((0..<1000).map { UInt8($0 % 251) }))
        rest.maximumResponseSize = nil
        XCTAssertEqual(send(.get, "/_test/bytes/3000000").data?.count, 3_000_000)
        rest.maximumResponseSize = 0
        XCTAssertEqual(tooLarge(send(.get, "/_test/bytes/1")), 0)
        XCTAssertNil(send(.get, "/_test/bytes/0").error)
    }

    /// A negative limit is 0: the property reads 0 and a one-byte body is too large.
    func testANegativeLimitIsZero() {
        rest.maximumResponseSize = -5
        XCTAssertEqual(rest.maximumResponseSize, 0)
        XCTAssertEqual(tooLarge(send(.get, "/_test/bytes/1")), 0)
    }

    func testTheMessageNamesTheProperty() {
        XCTAssertEqual(
            RestManager.CustomError.responseTooLarge(limit: 5).localizedDescription,
            "The response body is larger than 5 bytes; raise RestManager.maximumResponseSize (nil for no limit) to accept it.")
    }

    /// The first half of the body arrives, then the server stalls for 30 s: only a transfer stopped
    /// at the limit (not after the whole body) can fail before the 10 s timeout.
    func testTheTransferStopsAtTheLimitNotAtTheEnd() {
        rest.maximumResponseSize = 100_000
        let started = Date()
        let results = send(.get, "/_test/stall?bytes=1048576&seconds=30")
        XCTAssertEqual(tooLarge(results), 100_000, "\(String(describing: results.error))")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    func testInMemoryDownloadsObeyIt() async throws {
        let rest = try XCTUnwrap(self.rest)
        rest.maximumResponseSize = 10
        do {
            _ = try await rest.data(fromURL: url("/_test/bytes/11"))
            XCTFail("no error")
        } catch RestManager.CustomError.responseTooLarge(let limit) {
            XCTAssertEqual(limit, 10)
        }
        let nothing = await rest.getData(fromURL: url("/_test/bytes/11"))
        XCTAssertNil(nothing)
        let ten = await rest.getData(fromURL: url("/_test/bytes/10"))
        XCTAssertEqual(ten?.count, 10)
    }

    /// A gzip body of about 1 MB that expands to 128 MiB, under a limit of 4 MiB: only counting
    /// the expanded bytes catches it, and memory then stays near the limit.
    func testAGzipBombCostsNoMoreThanTheLimit() throws {
        rest.maximumResponseSize = 4 << 20
        rest.timeoutInterval = 60  // generous for the sanitizers' builds
        #if os(Linux)
        let peakBefore = try resetPeakResidentBytes()
        #endif
        let results = send(.get, "/_test/gzip-bomb/134217728", timeout: 90)
        XCTAssertEqual(tooLarge(results), 4 << 20, "\(String(describing: results.error))")
        #if os(Linux)
        let growth = try peakResidentBytes() - peakBefore
        // AddressSanitizer's quarantine keeps freed chunks resident: under it (`ASAN_OPTIONS` set by .ci/sanitizers) the
        // bound is looser; the plain run holds the real one.
        let bound = ProcessInfo.processInfo.environment["ASAN_OPTIONS"] == nil ? 32 << 20 : 64 << 20
        XCTAssertLessThan(growth, bound, "peak memory grew by \(growth >> 20) MiB")
        #endif
    }
}
