import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
@testable import RestManager

/// Same origin = same scheme, host and port (a missing port is the scheme's default).
final class OriginTests: MockServerTestCase {
    func testDefaultPortsCountAsTheSameOrigin() throws {
        func same(_ first: String, _ second: String) throws -> Bool {
            RestManager.isSameOrigin(try XCTUnwrap(URL(string: first)), try XCTUnwrap(URL(string: second)))
        }
        XCTAssertTrue(try same("http://h/a", "http://h:80/b"))
        XCTAssertTrue(try same("https://h/a", "https://h:443/b"))
        XCTAssertTrue(try same("HTTP://H/a", "http://h/b"))
        XCTAssertFalse(try same("http://h/a", "http://h:443/b"))
        XCTAssertFalse(try same("https://h/a", "https://h:80/b"))
        XCTAssertFalse(try same("http://h/a", "https://h/a"))
        XCTAssertFalse(try same("http://h:8080/a", "http://h:8081/a"))
    }

    func testSecretsAreDroppedWhenARedirectChangesOnlyThePort() throws {
        let other = MockServer()
        try other.start()
        defer { other.stop() }
        rest.requestHttpHeaders.add(value: "Bearer secret", forKey: "Authorization")
        rest.requestHttpHeaders.add(value: "stays", forKey: "X-Other")
        rest.requestHttpHeaders.add(value: "text/plain", forKey: "Accept")
        let target = "http://127.0.0.1:\(other.port)/_test/echo"
        let echo = try echo(send(.get, "/_test/redirect/307?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!))
        XCTAssertEqual(echo.header("Host"), "127.0.0.1:\(other.port)")
        XCTAssertNil(echo.header("Authorization"))
        XCTAssertNil(echo.header("X-Other"), "only the safe list follows to another origin")
        XCTAssertEqual(echo.header("Accept"), "text/plain")
    }
}
