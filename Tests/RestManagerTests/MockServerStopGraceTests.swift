import Foundation
import XCTest
import MockServer
import RestManager

/// `MockServer.stop()` under a file upload: the body under way arrives whole first (`stopGracePeriod`), because
/// closing the connection under a FoundationNetworking file upload crashes the client's process
/// (`EasyHandle.swift:484`, libcurl 43): the first of five stops under a 512 MiB upload did before.
final class MockServerStopGraceTests: MockServerTestCase {
    /// Long enough that waiting for it shows (the upload below needs well under a second of it).
    override var serverConfiguration: MockServer.Configuration {
        var configuration = MockServer.Configuration()
        configuration.stopGracePeriod = 30
        return configuration
    }

    /// Only a body under way gets the grace: a client that sent half a head (no body can be under way) is cut off
    /// at once, so slow or hostile clients cannot hold a test's tearDown.
    func testAHalfSentHeadDoesNotHoldTheStop() throws {
        let client = try RawClient(port: server.port)
        client.send("GET /_test/echo HTTP/1.1\r\nHost: x\r\n")
        let deadline = Date(timeIntervalSinceNow: 10)
        while server.openConnectionCount == 0, Date() < deadline { usleep(5_000) }
        usleep(200_000)  // for the server to read the bytes; a reading that comes later only weakens the check
        let started = Date()
        server.stop()
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "stop() waited for a head that never came")
        XCTAssertTrue(client.readUntilClosed(timeout: 5).closed)
    }

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
