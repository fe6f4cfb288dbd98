import Foundation
import XCTest
import MockServer
import RestManager

/// `MockServer.stop()` under a file upload: the body under way arrives whole first (`stopGracePeriod`), because
/// closing the connection under a FoundationNetworking file upload crashes the client's process
/// (`EasyHandle.swift:484`, libcurl 43): the first of five stops under a 512 MiB upload did before.
final class MockServerStopGraceTests: MockServerTestCase {
    func testStoppingUnderAFileUploadLetsItsBodyArriveWhole() throws {
        let size = 64 << 20
        let file = scratch.appendingPathComponent("upload.bin")
        try Data(count: size).write(to: file)
        let halfway = expectation(description: "8 MiB sent")
        halfway.assertForOverFulfill = false
        let done = expectation(description: "upload")
        let box = ResultBox<RestManager.Results>()
        rest.upload(
            fileAt: file, toURL: url("/_test/upload"),
            progress: { if $0.completedBytes >= 8 << 20 { halfway.fulfill() } }
        ) { results in
            box.set(results)
            done.fulfill()
        }
        // 8 MiB sent: more than the sockets hold, so the server has read the head and is reading the body.
        wait(for: [halfway], timeout: 60)
        let stopping = Date()
        server.stop()
        XCTAssertLessThan(Date().timeIntervalSince(stopping), 30)
        wait(for: [done], timeout: 60)
        let results = try XCTUnwrap(box.value)
        XCTAssertNil(results.error)
        XCTAssertEqual(results.statusCode, 200)
        let receipt = try JSONSerialization.jsonObject(with: results.data ?? Data()) as? [String: Any]
        XCTAssertEqual(receipt?["bytes"] as? Int, size, "\(String(describing: receipt))")
    }
}
