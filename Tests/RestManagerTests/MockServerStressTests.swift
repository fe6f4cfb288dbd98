import Foundation
import XCTest
@testable import MockServer

/// Many connections at once, and random or mutated bytes thrown at the parser.
final class MockServerStressTests: MockServerTestCase {
    func testHundredsOfRequestsOverDozensOfConnections() throws {
        let connections = 32, perConnection = 12
        let port = server.port
        let failures = ResultBox<String>()
        DispatchQueue.concurrentPerform(iterations: connections) { connectionIndex in
            guard let client = try? RawClient(port: port) else { return failures.set("connect \(connectionIndex)") }
            // Half pipelined in one write, half one at a time.
            let requests = (0..<perConnection).map { "GET /_test/echo?c=\(connectionIndex)&r=\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }
            var responses: [String] = []
            if connectionIndex % 2 == 0 {
                client.send(requests.joined())
                responses = client.readResponses(perConnection, timeout: 10)
            } else {
                for request in requests {
                    client.send(request)
                    responses += client.readResponses(1, timeout: 10)
                }
            }
            for (index, response) in responses.enumerated() where !response.contains(#""rawQuery":"c=\#(connectionIndex)&r=\#(index)""#) {
                failures.set("wrong answer on \(connectionIndex)/\(index)")
            }
            if responses.count != perConnection { failures.set("\(responses.count) answers on \(connectionIndex)") }
        }
        XCTAssertEqual(failures.all, [])
        XCTAssertEqual(server.handledRequestCount, connections * perConnection)
    }

    func testParserTakesRandomAndMutatedInputWithoutCrashing() {
        var generator = SeededGenerator(seed: 2026)
        let seeds = [
            "GET /api/users?page=2 HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
            "POST /api/users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"name\":\"neo\"}\r\n",
            "PUT /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n0\r\n\r\n",
        ].map { Array($0.utf8) }
        var outcomes: [String: Int] = [:]
        for iteration in 0..<100_000 {
            var bytes = seeds[iteration % seeds.count]
            if iteration % 4 == 0 {
                bytes = (0..<Int.random(in: 0...200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            } else {
                for _ in 0..<Int.random(in: 1...6, using: &generator) where !bytes.isEmpty {
                    let position = Int.random(in: 0..<bytes.count, using: &generator)
                    switch Int.random(in: 0..<4, using: &generator) {
                    case 0: bytes[position] = UInt8.random(in: 0...255, using: &generator)
                    case 1: bytes.remove(at: position)
                    case 2: bytes.insert(contentsOf: [13, 10], at: position)
                    default: bytes.insert(contentsOf: Array(repeating: bytes[position], count: Int.random(in: 1...3000, using: &generator)), at: position)
                    }
                }
            }
            switch RequestParser.parse(bytes[...], maximumHeaderBytes: 2048, maximumBodyBytes: 4096) {
            case .incomplete: outcomes["incomplete", default: 0] += 1
            case .complete(_, let consumed):
                XCTAssertLessThanOrEqual(consumed, bytes.count)
                outcomes["complete", default: 0] += 1
            case .failure(let status, _):
                XCTAssertTrue([400, 413, 431, 501, 505].contains(status), "\(status)")
                outcomes["\(status)", default: 0] += 1
            }
        }
        XCTAssertGreaterThan(outcomes["400"] ?? 0, 1000)
        XCTAssertGreaterThan(outcomes["complete"] ?? 0, 1000)
    }

    func testMutatedRequestsOverSocketsGetAnAnswerOrAClose() throws {
        var generator = SeededGenerator(seed: 11)
        let seed = Array("GET /_test/echo?a=1 HTTP/1.1\r\nHost: x\r\nX-A: b\r\nConnection: close\r\n\r\n".utf8)
        for _ in 0..<300 {
            var bytes = seed
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            let client = try RawClient(port: server.port)
            client.send(bytes)
            client.finishSending()
            // Whatever the mutation, the server answers (a response, or 400/413/431/501/505) or just
            // closes an incomplete request; it always closes once the client has finished.
            let (text, closed) = client.readUntilClosed(timeout: 5)
            XCTAssertTrue(closed)
            XCTAssertTrue(text.isEmpty || text.hasPrefix("HTTP/1.1 "), text)
        }
        // The server is still healthy.
        let client = try RawClient(port: server.port)
        client.send("GET /api/users/1 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(client.readResponses(1).first?.hasPrefix("HTTP/1.1 200") ?? false)
    }
}
