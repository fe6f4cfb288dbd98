import Foundation
import XCTest
import MockServer
import RestManager

/// libcurl sends a request again on a fresh connection when the reused one it went out on died before an answer (a
/// keep-alive server closing an idle connection as the request arrives: Node's default is 5 s). It asks for the body
/// from its start again, which FoundationNetworking gives only for a body stream, by asking the session's delegate for
/// a new one; a body given as `Data` or a file went out again without the bytes already sent, and the request waited
/// for its deadline. Every body the library sends can be sent again whole: each call here succeeds, the bytes intact.
final class ConnectionResendTests: MockServerTestCase {
    /// Answers each connection's first request with the body's length and SHA-256; reads the head and 1,000 bytes of
    /// a connection's second request, then closes the connection without answering.
    private static let closingServer = """
        def serve(connection):
            pending = b""
            for number in (1, 2):
                pending = read_until(connection, pending, lambda data: b"\\r\\n\\r\\n" in data)
                if pending is None:
                    return connection.close()
                head, _, pending = pending.partition(b"\\r\\n\\r\\n")
                fields = dict(line.split(b":", 1) for line in head.split(b"\\r\\n")[1:] if b":" in line)
                length = int(fields.get(b"Content-Length", b"0"))
                wanted = length if number == 1 else min(1000, length)
                pending = read_until(connection, pending, lambda data: len(data) >= wanted)
                if pending is None:
                    return connection.close()
                if number == 2:
                    print("closed under a request", flush=True)
                    return connection.close()
                body, pending = pending[:length], pending[length:]
                answer = b"%d %s" % (len(body), hashlib.sha256(body).hexdigest().encode())
                connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n%s" % (len(answer), answer))

        """

    private let body = Data((0..<16_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
    private let expected = "16000 55198960419de96a7e1be466606fbcbd99e6003f648700ae1e8240b0b6885ff4"

    private func answers(_ send: (RestManager, URL) async throws -> RestManager.Results) async throws -> [String] {
        let python = try startSocketServer(serving: Self.closingServer, named: "closing_server")
        defer { python.stop() }
        let target = try XCTUnwrap(URL(string: "http://127.0.0.1:\(try XCTUnwrap(python.port))/upload"))
        let manager = RestManager()
        // Generous for 16 KB on loopback; a body sent again without its bytes waited all of it.
        manager.timeoutInterval = 20
        manager.idleTimeoutInterval = 20
        var answers: [String] = []
        for _ in 0..<2 {
            let results = try await send(manager, target)
            answers.append(results.error.map { "\($0)" } ?? String(decoding: results.data ?? Data(), as: UTF8.self))
        }
        XCTAssertTrue(python.log.contains("closed under a request"), "the second request's connection was closed")
        return answers
    }

    func testABodyInMemoryIsSentAgainWhole() async throws {
        let body = self.body
        let answers = try await answers { manager, target in
            manager.httpBody = body
            return await manager.makeRequest(toURL: target, withHttpMethod: .post)
        }
        XCTAssertEqual(answers, [expected, expected])
    }

    func testAFileIsSentAgainWhole() async throws {
        let file = scratch.appendingPathComponent("body.bin")
        try body.write(to: file)
        let answers = try await answers { manager, target in await manager.upload(fileAt: file, toURL: target) }
        XCTAssertEqual(answers, [expected, expected])
    }
}
