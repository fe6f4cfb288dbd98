import Foundation
import XCTest
@testable import MockServer

/// Many connections at once (the fuzzing is in MockServerFuzzTests).
final class MockServerStressTests: MockServerTestCase {
    func testHundredsOfRequestsOverDozensOfConnections() throws {
        let connections = 32
        let perConnection = 12
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
}
