import Foundation
import XCTest
import RestManager

final class AuthChallengeTests: MockServerTestCase {
    func testBasicChallengeWithoutCredentialsCompletesWith401() {
        let started = Date()
        let results = send(.get, "/_test/basic-auth")
        XCTAssertNil(results.error)
        XCTAssertEqual(results.response?.httpStatusCode, 401)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertFalse(results.isSuccess)
    }

    func testBasicCredentialsInAHeaderAreAccepted() throws {
        rest.requestHttpHeaders.add(value: "Basic " + Data("user:passwd".utf8).base64EncodedString(), forKey: "Authorization")
        let results = send(.get, "/_test/basic-auth")
        XCTAssertEqual(results.response?.httpStatusCode, 200)
        XCTAssertTrue(results.isSuccess)
    }
}
