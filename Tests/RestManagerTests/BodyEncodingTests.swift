import Foundation
import XCTest
import RestManager

final class BodyEncodingTests: MockServerTestCase {
    func testJSONBodyIsCompactAndOrdered() throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "morpheus", forKey: "name")
        rest.httpBodyParameters.add(value: "leader \"quoted\" \\ / é\n", forKey: "job")
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(echo.bodyText, #"{"name":"morpheus","job":"leader \"quoted\" \\ / é\n"}"#)
        XCTAssertEqual(echo.header("Content-Type"), "application/json")
    }

    /// Control characters without a short escape go as `\u00XX`, lower-case hex, as JSONSerialization writes them.
    func testControlCharactersAreEscapedWithLowerCaseHex() throws {
        rest.httpBodyParameters.add(value: "\u{0}\u{0F}\u{1B}\u{1F}\t", forKey: "c")
        XCTAssertEqual(try echo(send(.post, "/_test/echo")).bodyText, #"{"c":"\u0000\u000f\u001b\u001f\t"}"#)
    }

    /// Body parameters without a `Content-Type` go as JSON, and say so.
    func testBodyParametersWithoutAContentTypeGoAsJSONAndSaySo() throws {
        rest.httpBodyParameters.add(value: "neo", forKey: "name")
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(echo.bodyText, #"{"name":"neo"}"#)
        XCTAssertEqual(echo.header("Content-Type"), "application/json")
    }

    func testJSONIsRecognisedUnderAnySpellingWithParametersAndPlusJSON() throws {
        for contentType in [
            "application/json; charset=utf-8", "application/json ; charset=utf-8", "APPLICATION/JSON",
            "application/vnd.api+json"
        ] {
            rest.requestHttpHeaders = RestManager.RestEntity()
            rest.requestHttpHeaders.add(value: contentType, forKey: "content-TYPE")
            rest.httpBodyParameters.add(value: "1", forKey: "a")
            let echo = try echo(send(.post, "/_test/echo"))
            XCTAssertEqual(echo.bodyText, #"{"a":"1"}"#, contentType)
            XCTAssertEqual(echo.header("content-type"), contentType)
        }
    }

    func testFormBodyUsesWHATWGEncodingInOrder() throws {
        rest.requestHttpHeaders.add(value: "application/x-www-form-urlencoded", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "a+b c&d=e/f*~-._", forKey: "q")
        rest.httpBodyParameters.add(value: "é", forKey: "second field")
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(echo.bodyText, "q=a%2Bb+c%26d%3De%2Ff*%7E-._&second+field=%C3%A9")
    }

    func testRandomUnicodeFormFieldsRoundTrip() throws {
        var generator = SeededGenerator(seed: 7)
        for _ in 0..<15 {
            var entity = RestManager.RestEntity()
            var expected: [(String, String)] = []
            for index in 0..<4 {
                let name = "f\(index)" + SeededGenerator.randomText(&generator, length: 5)
                let value = SeededGenerator.randomText(&generator, length: 10)
                entity.add(value: value, forKey: name)
                expected.append((name, value))
            }
            // The server decodes a query exactly as a form body: send the form encoding as a query.
            let echo = try echo(send(.get, "/_test/echo?" + entity.formURLEncoded))
            XCTAssertEqual(echo.queryPairs.map(\.0), expected.map(\.0))
            XCTAssertEqual(echo.queryPairs.map(\.1), expected.map(\.1))
        }
    }

    func testEncodableBodyIsSentAsJSON() throws {
        struct Job: Codable, Equatable { let name: String; let level: Int }
        try rest.setHttpBody(Job(name: "neo", level: 1))
        let echo = try echo(send(.put, "/_test/echo"))
        XCTAssertEqual(try JSONDecoder().decode(Job.self, from: echo.bodyData), Job(name: "neo", level: 1))
        XCTAssertEqual(echo.header("Content-Type"), "application/json")
    }

    func testBodyThatCannotBeEncodedIsAClearError() {
        struct Bad: Encodable { let value = Double.nan }
        XCTAssertThrowsError(try rest.setHttpBody(Bad())) { error in
            guard case .bodyEncodingFailed = error as? RestManager.CustomError else { return XCTFail("\(error)") }
        }
    }

    func testRawBodyIsSentAsIs() throws {
        rest.requestHttpHeaders.add(value: "text/plain", forKey: "Content-Type")
        rest.httpBody = Data([0, 1, 2, 255])
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(echo.bodyData, Data([0, 1, 2, 255]))
        XCTAssertEqual(echo.header("Content-Type"), "text/plain")
    }

    /// Without a type the bytes say nothing of themselves: libcurl would label them a form, the library says octets.
    func testAnUntypedRawBodyGoesAsOctetStream() throws {
        rest.httpBody = Data([0, 1, 2, 255])
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertEqual(echo.bodyData, Data([0, 1, 2, 255]))
        XCTAssertEqual(echo.header("Content-Type"), "application/octet-stream")
    }

    func testParametersWithAnUnsupportedContentTypeAreAnError() {
        rest.requestHttpHeaders.add(value: "text/plain", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "1", forKey: "a")
        let results = send(.post, "/_test/echo")
        guard case .bodyEncodingFailed = results.error as? RestManager.CustomError else { return XCTFail("\(String(describing: results.error))") }
        XCTAssertTrue(server.receivedRequests.isEmpty)
    }

    func testClearParametersEmptiesPerRequestStateButKeepsHeaders() throws {
        rest.requestHttpHeaders.add(value: "v", forKey: "X-Kept")
        rest.urlQueryParameters.add(value: "1", forKey: "q")
        rest.httpBodyParameters.add(value: "1", forKey: "b")
        rest.httpBody = Data("x".utf8)
        rest.clearParameters()
        let echo = try echo(send(.post, "/_test/echo"))
        XCTAssertNil(echo.rawQuery)
        XCTAssertEqual(echo.bodyData, Data())
        XCTAssertEqual(echo.header("X-Kept"), "v")
    }
}
