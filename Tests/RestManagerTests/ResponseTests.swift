import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import RestManager

/// `Response`: status at once, headers read from the HTTP response when first asked for.
final class ResponseTests: XCTestCase {
    private let target = URL(string: "http://127.0.0.1/")!  // a literal

    func testHeadersAreReadFromTheHTTPResponse() throws {
        let http = try XCTUnwrap(
            HTTPURLResponse(
                url: target, statusCode: 201, httpVersion: "HTTP/1.1",
                headerFields: ["ETag": "\"v1\"", "X-Count": "3"]))
        let response = RestManager.Response(fromURLResponse: http)
        XCTAssertEqual(response.httpStatusCode, 201)
        XCTAssertEqual(response.headers.value(forKey: "etag"), "\"v1\"")
        XCTAssertEqual(response.headers.value(forKey: "X-COUNT"), "3")
        XCTAssertEqual(response.headers.totalItems(), 2)
    }

    /// A peer's 20,000 header lines are read in one pass (adding each by name took 6 s: a server could stall a caller).
    func testTwentyThousandHeadersAreReadInLinearTime() throws {
        let fields = Dictionary(uniqueKeysWithValues: (0..<20_000).map { ("X-H\($0)", "v\($0)") })
        let http = try XCTUnwrap(HTTPURLResponse(url: target, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields))
        let started = Date()
        let headers = RestManager.Response(fromURLResponse: http).headers
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "linear: about 10 ms here")
        XCTAssertEqual(headers.totalItems(), 20_000)
        XCTAssertEqual(headers.value(forKey: "x-h19999"), "v19999")
    }

    func testSettingHeadersReplacesThemInThatCopyOnly() throws {
        let http = try XCTUnwrap(
            HTTPURLResponse(
                url: target, statusCode: 200, httpVersion: "HTTP/1.1",
                headerFields: ["ETag": "a"]))
        let original = RestManager.Response(fromURLResponse: http)
        var edited = original
        edited.headers.add(value: "b", forKey: "etag")
        XCTAssertEqual(edited.headers.value(forKey: "ETag"), "b")
        XCTAssertEqual(original.headers.value(forKey: "ETag"), "a")
        edited.headers = RestManager.RestEntity()
        XCTAssertEqual(edited.headers.totalItems(), 0)
        XCTAssertEqual(original.headers.totalItems(), 1)
    }

    func testWithoutAnHTTPResponseThereIsNoStatusAndNoHeader() {
        let plain = URLResponse(url: target, mimeType: nil, expectedContentLength: 0, textEncodingName: nil)
        for response in [RestManager.Response(fromURLResponse: nil), RestManager.Response(fromURLResponse: plain)] {
            XCTAssertEqual(response.httpStatusCode, 0)
            XCTAssertEqual(response.headers.totalItems(), 0)
        }
    }

    func testHeadersReadFromManyThreadsAtOnceAgree() throws {
        let http = try XCTUnwrap(
            HTTPURLResponse(
                url: target, statusCode: 200, httpVersion: "HTTP/1.1",
                headerFields: ["A": "1", "B": "2", "C": "3"]))
        let response = RestManager.Response(fromURLResponse: http)  // one copy shared by every thread
        let agreed = ResultBox<Bool>()
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            agreed.set(response.headers.value(forKey: "b") == "2" && response.headers.totalItems() == 3)
        }
        XCTAssertEqual(agreed.all, Array(repeating: true, count: 64))
    }
}
