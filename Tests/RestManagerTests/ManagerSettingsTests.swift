import Dispatch
import Foundation
import RestManager
import XCTest

/// The manager's settings as their documentation states them: the defaults, and each one reading back what was
/// written (the tutorial's properties are read as often as they are written).
final class ManagerSettingsTests: XCTestCase {
    func testTheDefaultsAreTheDocumentedOnes() {
        let rest = RestManager()
        XCTAssertEqual(rest.timeoutInterval, 60)
        XCTAssertEqual(rest.idleTimeoutInterval, 60)
        XCTAssertTrue(rest.followsRedirects)
        XCTAssertEqual(rest.maximumRedirects, 10)
        XCTAssertEqual(rest.maximumResponseSize, 104_857_600)
        XCTAssertFalse(rest.deduplicatesRequests)
        XCTAssertNil(rest.baseURL)
        XCTAssertNil(rest.httpBody)
        XCTAssertNil(rest.eventHandler)
        XCTAssertTrue(rest.interceptors.isEmpty)
        XCTAssertEqual(rest.requestHttpHeaders.totalItems(), 0)
        XCTAssertEqual(rest.urlQueryParameters.totalItems(), 0)
        XCTAssertEqual(rest.httpBodyParameters.totalItems(), 0)
        XCTAssertEqual(rest.callbackQueue.label, DispatchQueue.global(qos: .userInitiated).label)
        XCTAssertNil(rest.retryPolicy)
        XCTAssertNil(rest.authenticator)
    }

    /// The retry policy's documented defaults, and the manager reading back the policy it was given.
    func testTheRetryPolicysDefaultsAndItsPlace() {
        let policy = RestManager.RetryPolicy()
        XCTAssertEqual(policy.maximumRetries, 2)
        XCTAssertEqual(policy.initialDelay, 0.5)
        XCTAssertEqual(policy.maximumDelay, 30)
        XCTAssertEqual(policy.retryableStatusCodes, [408, 429, 500, 502, 503, 504])
        XCTAssertEqual(policy.retryableMethods, [.get, .head, .put, .delete, .options])
        let rest = RestManager()
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 4)
        XCTAssertEqual(rest.retryPolicy?.maximumRetries, 4)
        XCTAssertTrue(rest.interceptors.isEmpty, "the policy runs after every interceptor, not as one of them")
        rest.retryPolicy = nil
        XCTAssertNil(rest.retryPolicy)
    }

    /// Every setting set to a value other than its default (and other than every other setting's) reads it back.
    func testEachSettingReadsBackWhatWasWritten() throws {
        let rest = RestManager()
        let queue = DispatchQueue(label: "ManagerSettingsTests")
        rest.timeoutInterval = 7
        rest.idleTimeoutInterval = 11
        rest.followsRedirects = false
        rest.maximumRedirects = 3
        rest.maximumResponseSize = 5
        rest.deduplicatesRequests = true
        rest.baseURL = URL(string: "http://127.0.0.1:1/api")
        rest.httpBody = Data("raw".utf8)
        rest.callbackQueue = queue
        rest.eventHandler = { _ in }
        rest.requestHttpHeaders.add(value: "v", forKey: "X-Header")
        rest.urlQueryParameters.add(value: "q", forKey: "query")
        rest.httpBodyParameters.add(value: "b", forKey: "field")
        XCTAssertEqual(rest.timeoutInterval, 7)
        XCTAssertEqual(rest.idleTimeoutInterval, 11)
        XCTAssertFalse(rest.followsRedirects)
        XCTAssertEqual(rest.maximumRedirects, 3)
        XCTAssertEqual(rest.maximumResponseSize, 5)
        XCTAssertTrue(rest.deduplicatesRequests)
        XCTAssertEqual(rest.baseURL?.absoluteString, "http://127.0.0.1:1/api")
        XCTAssertEqual(rest.httpBody, Data("raw".utf8))
        XCTAssertTrue(rest.callbackQueue === queue)
        XCTAssertNotNil(rest.eventHandler)
        XCTAssertEqual(rest.requestHttpHeaders.value(forKey: "x-header"), "v")
        XCTAssertEqual(rest.urlQueryParameters.orderedPairs.map(\.key), ["query"])
        XCTAssertEqual(rest.httpBodyParameters.value(forKey: "field"), "b")
        rest.maximumResponseSize = nil
        XCTAssertNil(rest.maximumResponseSize)
        rest.clearParameters()
        XCTAssertNil(rest.httpBody)
        XCTAssertEqual(rest.urlQueryParameters.totalItems() + rest.httpBodyParameters.totalItems(), 0)
        XCTAssertEqual(rest.requestHttpHeaders.value(forKey: "X-Header"), "v", "clearParameters keeps the headers")
    }
}
