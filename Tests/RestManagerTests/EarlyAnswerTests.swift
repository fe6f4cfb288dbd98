import Foundation
import XCTest
import MockServer
import RestManager

/// A server that answers before the body is in (a 413 for a body too large, as nginx does) and then closes the
/// connection, resets it, or keeps reading: every body is a stream of the library's now, and each call must complete
/// once, with the server's answer or a transport error, never hang or take the process down.
final class EarlyAnswerTests: MockServerTestCase {
    /// Reads a request's head, answers 413 with `Connection: close`, then does what its first argument says.
    private static let earlyServer = """
        mode = sys.argv[1]
        def serve(connection):
            if read_until(connection, b"", lambda pending: b"\\r\\n\\r\\n" in pending) is None:
                return connection.close()
            connection.sendall(b"HTTP/1.1 413 Payload Too Large\\r\\nContent-Length: 9\\r\\nConnection: close\\r\\n\\r\\ntoo large")
            if mode == "reset":
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif mode == "drain":
                connection.settimeout(5)
                try:
                    while connection.recv(1 << 20):
                        pass
                except OSError:
                    pass
            connection.close()

        """

    private func outcomes(_ mode: String) throws -> [String] {
        let python = try startSocketServer(serving: Self.earlyServer, named: "early_\(mode)", arguments: [mode])
        defer { python.stop() }
        let target = try XCTUnwrap(URL(string: "http://127.0.0.1:\(try XCTUnwrap(python.port))/upload"))
        let large = scratch.appendingPathComponent("large.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: large.path, contents: nil))
        XCTAssertEqual(truncate(large.path, 50_000_000), 0)
        let outcomes = ResultBox<String>()
        for round in 0..<12 {
            let manager = RestManager()
            manager.timeoutInterval = 30
            let done = expectation(description: "\(mode) \(round)")
            let record: @Sendable (RestManager.Results) -> Void = { results in
                switch results.error as? RestManager.CustomError {
                case nil: outcomes.set("\(results.statusCode ?? 0) \(String(decoding: results.data ?? Data(), as: UTF8.self))")
                case .transport?: outcomes.set("transport")
                case let other: outcomes.set("\(String(describing: other))")
                }
                done.fulfill()
            }
            switch round % 3 {
            case 0: manager.upload(fileAt: large, toURL: target, completion: record)
            case 1:
                manager.httpBody = Data(count: 16_000)
                manager.makeRequest(toURL: target, withHttpMethod: .post, completion: record)
            default:
                manager.httpBody = Data(count: 5_000_000)
                manager.makeRequest(toURL: target, withHttpMethod: .put, completion: record)
            }
            wait(for: [done], timeout: 60)
        }
        return outcomes.all
    }

    func testAnEarlyAnswerThenACloseCompletesEachCall() throws {
        let all = try outcomes("close")
        XCTAssertEqual(all.count, 12)
        XCTAssertEqual(all.filter { $0 != "413 too large" && $0 != "transport" }, [], "\(all)")
    }

    func testAnEarlyAnswerThenAResetCompletesEachCall() throws {
        let all = try outcomes("reset")
        XCTAssertEqual(all.count, 12)
        XCTAssertEqual(all.filter { $0 != "413 too large" && $0 != "transport" }, [], "\(all)")
    }

    func testAnEarlyAnswerWhileTheServerReadsOnDeliversIt() throws {
        let all = try outcomes("drain")
        XCTAssertEqual(all, Array(repeating: "413 too large", count: 12))
    }
}
