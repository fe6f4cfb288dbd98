import Foundation
import XCTest
import RestManager

final class CurlCommandTests: MockServerTestCase {
    func testCurlLineMatchesTheRequestAndRedactsSecrets() throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.requestHttpHeaders.add(value: "Bearer top-secret", forKey: "Authorization")
        rest.requestHttpHeaders.add(value: "session=abc", forKey: "Cookie")
        rest.requestHttpHeaders.add(value: "reqres-free-v1", forKey: "x-api-key")
        rest.urlQueryParameters.add(value: "a b", forKey: "q")
        rest.httpBodyParameters.add(value: "it's", forKey: "name")
        let target = URL(string: "https://reqres.in/api/users")!
        let line = try rest.curlCommand(forURL: target, withHttpMethod: .patch)
        XCTAssertTrue(line.hasPrefix("curl -X PATCH 'https://reqres.in/api/users?q=a%20b'"), line)
        XCTAssertTrue(line.contains("-H 'Authorization: <redacted>'"))
        XCTAssertTrue(line.contains("-H 'Cookie: <redacted>'"))
        XCTAssertTrue(line.lowercased().contains("-h 'x-api-key: <redacted>'"), line)
        XCTAssertTrue(line.contains("-H 'Content-Type: application/json'"), line)
        XCTAssertTrue(line.contains(#"--data-binary '{"name":"it'\''s"}'"#), line)
        for secret in ["top-secret", "session=abc", "reqres-free-v1"] { XCTAssertFalse(line.contains(secret)) }
        let revealed = try rest.curlCommand(forURL: target, withHttpMethod: .patch, revealingSecrets: true)
        XCTAssertTrue(revealed.contains("Bearer top-secret"))
    }

    /// A JSON body with no secret goes into the line byte for byte (key order and spacing kept): a body a signature
    /// covers must send the same bytes again. One with a secret is rewritten (keys sorted), its secret redacted.
    func testCurlLineKeepsABodyWithoutSecretsByteForByte() throws {
        var request = RestManager.Request(.post, url: try XCTUnwrap(URL(string: "http://127.0.0.1:1/orders")))
        request.headers.add(value: "application/json", forKey: "Content-Type")
        request.body = Data(#"{"zeta": 1, "alpha": [2, 3]}"#.utf8)
        XCTAssertTrue(try rest.curlCommand(for: request).hasSuffix(#"--data-binary '{"zeta": 1, "alpha": [2, 3]}'"#))
        request.body = Data(#"{"zeta": 1, "token": "t"}"#.utf8)
        XCTAssertTrue(try rest.curlCommand(for: request).hasSuffix(#"--data-binary '{"token":"<redacted>","zeta":1}'"#))
    }

    func testCurlLineOfAGetHasNoBodyAndNoMethodFlag() throws {
        rest.httpBodyParameters.add(value: "ignored", forKey: "x")
        let line = try rest.curlCommand(forURL: URL(string: "http://127.0.0.1:1/a")!, withHttpMethod: .get)
        XCTAssertTrue(line.hasPrefix("curl 'http://127.0.0.1:1/a' -H"), line)
        XCTAssertFalse(line.contains("--data"))
    }

    /// HEAD is `--head` (with `-X HEAD` curl waits for a body that never comes); other methods are `-X NAME`.
    func testCurlLineOfAHeadUsesTheHeadFlag() throws {
        let target = try XCTUnwrap(URL(string: "http://127.0.0.1:1/a"))
        let head = try rest.curlCommand(forURL: target, withHttpMethod: .head)
        XCTAssertTrue(head.hasPrefix("curl --head 'http://127.0.0.1:1/a' -H"), head)
        XCTAssertFalse(head.contains("-X"), head)
        let delete = try rest.curlCommand(forURL: target, withHttpMethod: .delete)
        XCTAssertTrue(delete.hasPrefix("curl -X DELETE 'http://127.0.0.1:1/a' -H"), delete)
    }

    func testCurlRefusesInvalidInputLikeMakeRequest() {
        rest.requestHttpHeaders.add(value: "a\nb", forKey: "X-Bad")
        XCTAssertThrowsError(try rest.curlCommand(forURL: URL(string: "http://127.0.0.1/")!, withHttpMethod: .get))
    }

    func testRequestActuallySentMatchesTheCurlHeaders() throws {
        rest.requestHttpHeaders.add(value: "yes", forKey: "X-Check")
        let line = try rest.curlCommand(forURL: url("/_test/echo"), withHttpMethod: .get)
        let echo = try echo(send(.get, "/_test/echo"))
        for name in ["X-Check", "Accept", "User-Agent"] {
            XCTAssertTrue(line.contains("-H '\(name): \(echo.header(name) ?? "?")'"), name)
        }
    }
}
