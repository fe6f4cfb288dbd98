import Foundation
import XCTest
import MockServer
import RestManager

/// A server (or a proxy) that resets the connection once it has read a request's head, before the body: with a body
/// read from a file, FoundationNetworking's file reader then resumes a transfer the reset already ended, and traps the
/// process (`EasyHandle.swift:484`, `try!` on libcurl's code 43): 20 of 30 uploads of 16 KB, 8 of 30 of 50 MB, raw
/// `uploadTask(fromFile:)` 17 of 20. The library sends a file as a body stream of its own, which has no such reader:
/// each of these calls fails cleanly, once, small and large files alike.
final class UploadConnectionResetTests: MockServerTestCase {
    /// Accepts connections, reads each request's head, and resets the connection (SO_LINGER 0) without answering.
    private static let resettingServer = """
        def serve(connection):
            read_until(connection, b"", lambda pending: b"\\r\\n\\r\\n" in pending)
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            connection.close()

        """

    func testAServerThatResetsUnderAFileUploadFailsTheCallCleanly() throws {
        let python = try startSocketServer(serving: Self.resettingServer, named: "resetting_server")
        defer { python.stop() }
        let port = try XCTUnwrap(python.port)
        let target = try XCTUnwrap(URL(string: "http://127.0.0.1:\(port)/upload"))
        let file = scratch.appendingPathComponent("body.bin")
        try Data(repeating: 7, count: 16_000).write(to: file)
        // Past the 10 MB that once went from memory (and 8 of 30 of 50 MB trapped in the file reader).
        let large = scratch.appendingPathComponent("large.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: large.path, contents: nil))
        XCTAssertEqual(truncate(large.path, 50_000_000), 0)
        for round in 0..<30 {
            // A third multipart bodies assembled in a temporary file, which goes the same way; a third large files.
            let manager = RestManager()
            let done = expectation(description: "upload \(round)")
            let outcome = ResultBox<RestManager.Results>()
            if round % 3 != 1 {
                manager.upload(fileAt: round % 3 == 0 ? file : large, toURL: target) { results in
                    outcome.set(results)
                    done.fulfill()
                }
            } else {
                manager.addFile(at: file, fieldName: "file", mimeType: "application/octet-stream")
                manager.makeRequest(toURL: target, withHttpMethod: .post) { results in
                    outcome.set(results)
                    done.fulfill()
                }
            }
            wait(for: [done], timeout: 60)
            guard case .transport(let error)? = outcome.value?.error as? RestManager.CustomError else {
                return XCTFail("round \(round): \(String(describing: outcome.value?.error))")
            }
            XCTAssertTrue([.networkConnectionLost, .unknown].contains(error.code), "round \(round): \(error)")
        }
    }
}
