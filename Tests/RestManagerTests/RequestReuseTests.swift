import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import RestManager

/// A call repeated with nothing changed sends the request built for the previous one again
/// (`LastRequest`); every change between calls must still reach the server.
final class RequestReuseTests: MockServerTestCase {
    func testARepeatedCallSendsTheSameRequestAgain() throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.urlQueryParameters.add(value: "1", forKey: "page")
        rest.httpBodyParameters.add(value: "morpheus", forKey: "name")
        let first = try echo(send(.post, "/_test/echo"))
        let second = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(second.method, "POST")
        XCTAssertEqual(second.rawQuery, "page=1")
        XCTAssertEqual(second.bodyText, #"{"name":"morpheus"}"#)
        XCTAssertEqual(second.header("Content-Type"), "application/json")
        XCTAssertEqual(first.rawQuery, second.rawQuery)
        XCTAssertEqual(first.bodyText, second.bodyText)
        XCTAssertEqual(first.headers.sorted { $0[0] < $1[0] }, second.headers.sorted { $0[0] < $1[0] })
    }

    func testEveryChangeBetweenCallsIsSent() throws {
        _ = try echo(send(.post, "/_test/echo")) // built and kept
        rest.requestHttpHeaders.add(value: "a", forKey: "X-Step")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).header("X-Step"), "a")
        rest.requestHttpHeaders.add(value: "b", forKey: "x-step") // replaced in place
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).header("X-Step"), "b")
        rest.urlQueryParameters.add(value: "2", forKey: "page")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).rawQuery, "page=2")
        rest.httpBodyParameters.add(value: "neo", forKey: "name")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).bodyText, #"{"name":"neo"}"#)
        rest.httpBodyParameters.add(value: "trinity", forKey: "name")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).bodyText, #"{"name":"trinity"}"#)
        rest.httpBodyParameters = RestManager.RestEntity()
        rest.httpBody = Data("first".utf8)
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).bodyText, "first")
        rest.httpBody = Data("second".utf8)
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).bodyText, "second")
        rest.httpBody = nil
        rest.addFile(Data("bytes".utf8), fieldName: "file", fileName: "a.txt", mimeType: "text/plain")
        let multipart = try echo(send(.post, "/_test/echo"))
        XCTAssertTrue(multipart.header("Content-Type")?.hasPrefix("multipart/form-data; boundary=") ?? false)
        XCTAssertTrue(multipart.bodyText.contains("bytes"))
        // Same state, another URL or method.
        XCTAssertEqual(try echo(send(.post, "/_test/echo?extra=1")).rawQuery, "extra=1&page=2")
        XCTAssertEqual(try echo(send(.put, "/_test/echo")).method, "PUT")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).method, "POST")
    }

    func testReuseNeedsTheSameStateURLMethodAndTimeout() throws {
        let reuse = RestManager.LastRequest()
        let target = url("/_test/echo")
        var snapshot = RestManager.Snapshot()
        snapshot.bodyParameters.add(value: "1", forKey: "a")
        let first = try reuse.request(url: target, method: .post, snapshot: snapshot)
        XCTAssertEqual(first.timeoutInterval, 61) // 60 s, plus Foundation's second (see build)
        XCTAssertEqual(try reuse.request(url: target, method: .post, snapshot: snapshot), first)

        var longer = snapshot
        longer.timeout = 120 // as `makeRequest(…, timeoutInterval: 120)` does for one call
        XCTAssertEqual(try reuse.request(url: target, method: .post, snapshot: longer).timeoutInterval, 121)
        XCTAssertEqual(try reuse.request(url: target, method: .post, snapshot: snapshot).timeoutInterval, 61)

        var changed = snapshot
        changed.bodyParameters.add(value: "2", forKey: "a")
        XCTAssertNotEqual(changed.content, snapshot.content)
        XCTAssertEqual(try reuse.request(url: target, method: .post, snapshot: changed).httpBody, Data(#"{"a":"2"}"#.utf8))
        // A copy that was changed back to equal values is still a change: numbers are never reused.
        changed.bodyParameters.add(value: "1", forKey: "a")
        XCTAssertNotEqual(changed.content, snapshot.content)
        XCTAssertEqual(try reuse.request(url: target, method: .post, snapshot: changed).httpBody, Data(#"{"a":"1"}"#.utf8))
        XCTAssertEqual(RestManager.Snapshot().content, RestManager.Snapshot().content) // both empty
    }

    func testAnInvalidCallIsNotKeptAndStaysAnError() {
        let reuse = RestManager.LastRequest()
        var snapshot = RestManager.Snapshot()
        snapshot.headers.add(value: "x", forKey: "Bad Name")
        for _ in 0..<2 {
            XCTAssertThrowsError(try reuse.request(url: url("/_test/echo"), method: .get, snapshot: snapshot))
        }
    }
}
