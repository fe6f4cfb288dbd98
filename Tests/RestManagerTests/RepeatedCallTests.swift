import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import RestManager

/// The manager's state persists between calls: a repeated call sends the same request again, and
/// every change between calls reaches the server.
final class RepeatedCallTests: MockServerTestCase {
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
        _ = try echo(send(.post, "/_test/echo"))  // built and kept
        rest.requestHttpHeaders.add(value: "a", forKey: "X-Step")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).header("X-Step"), "a")
        rest.requestHttpHeaders.add(value: "b", forKey: "x-step")  // replaced in place
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
}
