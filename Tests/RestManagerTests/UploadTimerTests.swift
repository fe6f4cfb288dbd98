import Foundation
import XCTest
@testable import RestManager

/// FoundationNetworking's own request timer tears a transfer down when it fires, and under a file upload's reader
/// that traps the process as a cancel does: a file upload's request gets none (the library ends the call itself).
final class UploadTimerTests: XCTestCase {
    func testAFileUploadGetsNoFoundationTimerAndOtherCallsGetOneAfterTheDeadline() throws {
        var upload = RestManager.Request(.post, url: try XCTUnwrap(URL(string: "http://127.0.0.1:9/u")))
        upload.bodyFile = URL(fileURLWithPath: "/dev/null")
        upload.timeoutInterval = 0.005
        let snapshot = RestManager.Snapshot()
        XCTAssertEqual(try RestManager.RequestBuilder.build(upload, snapshot: snapshot).timeoutInterval, 1e8)
        upload.bodyFile = nil
        XCTAssertEqual(try RestManager.RequestBuilder.build(upload, snapshot: snapshot).timeoutInterval, 2)
    }
}
