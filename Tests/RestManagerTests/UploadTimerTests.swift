import Foundation
import XCTest
@testable import RestManager

/// FoundationNetworking's own request timer counts whole seconds (0.5 fires at once) and traps beyond `Int`
/// milliseconds: every request gets one that fires after the library's own deadline (its seconds rounded up, plus one),
/// a file upload too (its body is a stream of the library's now, with no file reader for the timer to trap under).
final class UploadTimerTests: XCTestCase {
    func testFoundationsTimerComesAfterTheLibrarysDeadline() throws {
        var upload = RestManager.Request(.post, url: try XCTUnwrap(URL(string: "http://127.0.0.1:9/u")))
        upload.bodyFile = URL(fileURLWithPath: "/dev/null")
        upload.timeoutInterval = 0.005
        let snapshot = RestManager.Snapshot()
        XCTAssertEqual(try RestManager.RequestBuilder.build(upload, snapshot: snapshot).timeoutInterval, 2)
        upload.bodyFile = nil
        upload.timeoutInterval = 2.5
        XCTAssertEqual(try RestManager.RequestBuilder.build(upload, snapshot: snapshot).timeoutInterval, 4)
        upload.timeoutInterval = RestManager.never
        XCTAssertEqual(try RestManager.RequestBuilder.build(upload, snapshot: snapshot).timeoutInterval, 1e8 + 1)
    }
}
