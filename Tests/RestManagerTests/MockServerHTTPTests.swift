import Foundation
import XCTest
import MockServer

/// HTTP/1.1 behaviour of the mock server, over raw sockets.
final class MockServerHTTPTests: MockServerTestCase {
    override var serverConfiguration: MockServer.Configuration {
        var configuration = MockServer.Configuration()
        configuration.maximumHeaderBytes = 2048
        configuration.maximumBodyBytes = 4096
        configuration.idleTimeout = 0.5
        configuration.maximumConnections = 16
        return configuration
    }

    private func client() throws -> RawClient { try RawClient(port: server.port) }

    func testKeepAliveServesSeveralRequestsOnOneConnection() throws {
        let connection = try client()
        for index in 0..<3 {
            connection.send("GET /_test/echo?i=\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = connection.readResponses(1)
            XCTAssertEqual(response.count, 1)
            XCTAssertTrue(response.first?.hasPrefix("HTTP/1.1 200 OK\r\n") ?? false)
            XCTAssertTrue(response.first?.contains("Connection: keep-alive\r\n") ?? false)
        }
        XCTAssertEqual(Set(server.receivedRequests.map(\.connectionID)).count, 1)
    }

    func testPipelinedRequestsAreAnsweredInOrder() throws {
        let connection = try client()
        connection.send((0..<5).map { "GET /_test/echo?n=\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
        let responses = connection.readResponses(5)
        XCTAssertEqual(responses.count, 5)
        for (index, response) in responses.enumerated() { XCTAssertTrue(response.contains(#""rawQuery":"n=\#(index)""#)) }
    }

    func testHeadersAreWellFormed() throws {
        let connection = try client()
        connection.send("GET /api/users/1 HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try XCTUnwrap(connection.readResponses(1).first)
        let head = response.components(separatedBy: "\r\n\r\n")[0].components(separatedBy: "\r\n")
        for line in head.dropFirst() { XCTAssertNotNil(line.range(of: "^[A-Za-z-]+: \\S", options: .regularExpression), line) }
        XCTAssertTrue(head.contains { $0.hasPrefix("Date: ") && $0.hasSuffix(" GMT") })
        XCTAssertTrue(head.contains { $0.hasPrefix("Content-Length: ") })
    }

    func testHeadHasLengthButNoBody() throws {
        let connection = try client()
        connection.send("HEAD /api/users/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /api/users/1 HTTP/1.1\r\nHost: x\r\n\r\n")
        let (text, _) = connection.readUntilClosed(timeout: 1)
        let heads = text.components(separatedBy: "HTTP/1.1 200 OK")
        XCTAssertEqual(heads.count, 3)
        XCTAssertTrue(heads[1].hasSuffix("\r\n\r\n"), "no body after the HEAD response")
    }

    func testChunkedBodyAndExpectContinue() throws {
        let connection = try client()
        connection.send(
            "POST /_test/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: y\r\n\r\n")
        let chunked = try XCTUnwrap(connection.readResponses(1).first)
        XCTAssertTrue(chunked.contains(#""body":"aGVsbG8gd29ybGQ=""#), chunked)
        connection.send("POST /_test/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        guard case .data(let interim) = connection.readSome(timeout: 2) else { return XCTFail("no 100 Continue") }
        XCTAssertEqual(String(decoding: interim, as: UTF8.self), "HTTP/1.1 100 Continue\r\n\r\n")
        connection.send("abcd")
        XCTAssertTrue(connection.readResponses(1).first?.contains(#""body":"YWJjZA==""#) ?? false)
    }

    func testMalformedRequestsGet400AndAClosedConnection() throws {
        let malformed = [
            "GARBAGE\r\n\r\n",
            "GET /x HTTP/1.1\r\n\r\n",  // no Host
            "GET /x HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n",
            "GET /x HTTP/1.1\r\nHost: x\r\n folded: v\r\n\r\n",
            "GET  /x HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "GET /x HTTP/1.1\r\nHost: x\u{0}\r\n\r\n",
            "GET /x HTTP/1.1\nHost: x\r\n\r\n"
        ]
        for request in malformed {
            let connection = try client()
            connection.send(request)
            let (text, closed) = connection.readUntilClosed()
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 400 "), "\(request.debugDescription) -> \(text)")
            XCTAssertTrue(closed, request.debugDescription)
        }
    }

    func testOversizedHeadIs431AndBodyIs413() throws {
        var connection = try client()
        connection.send("GET /x HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 4000))\r\n\r\n")
        XCTAssertTrue(connection.readUntilClosed().text.hasPrefix("HTTP/1.1 431 "))
        connection = try client()
        connection.send("GET /\(String(repeating: "a", count: 5000))")
        XCTAssertTrue(connection.readUntilClosed().text.hasPrefix("HTTP/1.1 431 "))
        connection = try client()
        connection.send("POST /_test/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
        XCTAssertTrue(connection.readUntilClosed().text.hasPrefix("HTTP/1.1 413 "))
    }

    func testUnsupportedVersionIs505() throws {
        let connection = try client()
        connection.send("GET / HTTP/2.0\r\nHost: x\r\n\r\n")
        XCTAssertTrue(connection.readUntilClosed().text.hasPrefix("HTTP/1.1 505 "))
    }

    func testHTTP10ClosesUnlessKeepAliveIsAsked() throws {
        let connection = try client()
        connection.send("GET /_test/echo HTTP/1.0\r\n\r\n")
        let (text, closed) = connection.readUntilClosed()
        XCTAssertTrue(text.contains("Connection: close"))
        XCTAssertTrue(closed)
    }

    func testIdleConnectionsAreClosed() throws {
        let connection = try client()
        let started = Date()
        let (_, closed) = connection.readUntilClosed(timeout: 5)
        XCTAssertTrue(closed)
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
    }
}

/// The misbehaving test endpoints, with the default idle timeout: "the server holds the connection"
/// must not race a short one.
final class MockServerMisbehavingEndpointTests: MockServerTestCase {
    private func client() throws -> RawClient { try RawClient(port: server.port) }

    func testMisbehavingEndpointsDoWhatTheySay() throws {
        var connection = try client()
        connection.send("GET /_test/close-mid-body HTTP/1.1\r\nHost: x\r\n\r\n")
        var (text, closed) = connection.readUntilClosed()
        XCTAssertTrue(text.hasSuffix("\r\n\r\n0123456789") && closed)
        connection = try client()
        connection.send("GET /_test/close-before-response HTTP/1.1\r\nHost: x\r\n\r\n")
        (text, closed) = connection.readUntilClosed()
        XCTAssertTrue(text.isEmpty && closed)
        connection = try client()
        connection.send("GET /_test/wrong-length HTTP/1.1\r\nHost: x\r\n\r\n")
        (text, closed) = connection.readUntilClosed(timeout: 1)
        XCTAssertTrue(text.contains("Content-Length: 100\r\n") && text.hasSuffix("only ten!\n") && !closed)
    }
}

/// The connection cap, with the default idle timeout (a short one would close held connections itself).
final class MockServerConnectionCapTests: MockServerTestCase {
    override var serverConfiguration: MockServer.Configuration {
        var configuration = MockServer.Configuration()
        configuration.maximumConnections = 16
        return configuration
    }

    private func client() throws -> RawClient { try RawClient(port: server.port) }

    func testAtTheConnectionCapTheLongestWaitingConnectionMakesRoom() throws {
        let held = try (0..<16).map { _ in try client() }
        // Each held connection is accepted before the next check: one request each proves it.
        for connection in held {
            connection.send("GET /_test/echo HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertEqual(connection.readResponses(1).count, 1)
        }
        let extra = try client()
        extra.send("GET /_test/echo HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(extra.readResponses(1).first?.hasPrefix("HTTP/1.1 200 ") ?? false)
        // The first one answered has waited longest for its next request: it was closed.
        XCTAssertTrue(held[0].readUntilClosed(timeout: 20).closed)
        XCTAssertEqual(server.evictedConnectionCount, 1)
        XCTAssertEqual(server.openConnectionCount, 16)
    }

    func testAtTheConnectionCapWithEveryConnectionAnsweringANewClientGets503() throws {
        let held = try (0..<16).map { _ in try client() }
        for connection in held { connection.send("GET /_test/hang HTTP/1.1\r\nHost: x\r\n\r\n") }
        XCTAssertTrue(server.waitForRequests(16))
        let extra = try client()
        XCTAssertTrue(extra.readUntilClosed().text.hasPrefix("HTTP/1.1 503 "))
        XCTAssertEqual(server.evictedConnectionCount, 0)
    }
}

final class MockServerLifecycleTests: XCTestCase {
    func testStopClosesEverythingAndLeaksNoDescriptor() throws {
        let before = openDescriptorCount()
        let server = MockServer()
        try server.start()
        XCTAssertNotEqual(server.port, 0)
        let clients = try (0..<5).map { _ in try RawClient(port: server.port) }
        for client in clients { client.send("GET /_test/echo HTTP/1.1\r\nHost: x\r\n\r\n") }
        for client in clients { XCTAssertEqual(client.readResponses(1).count, 1) }
        let hanging = try RawClient(port: server.port)
        hanging.send("GET /_test/hang HTTP/1.1\r\nHost: x\r\n\r\n")
        let delayed = try RawClient(port: server.port)
        delayed.send("GET /api/users?delay=30 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(server.waitForRequests(7))
        XCTAssertEqual(server.runningThreadCount, 8, "the acceptor and seven connections")
        let started = Date()
        server.stop()
        XCTAssertLessThan(Date().timeIntervalSince(started), 3, "stop() interrupts delays and hangs")
        for client in clients + [hanging, delayed] { XCTAssertTrue(client.readUntilClosed(timeout: 2).closed) }
        XCTAssertEqual(server.openConnectionCount, 0)
        XCTAssertEqual(server.runningThreadCount, 0, "every server thread has ended")
        XCTAssertThrowsError(try RawClient(port: server.port), "the listener is closed")
        _ = (clients, hanging, delayed)
        let after = openDescriptorCount() - clients.count - 2
        XCTAssertEqual(after, before)
    }

    func testBindsLoopbackOnlyAndReportsTheRealPort() throws {
        let server = MockServer()
        try server.start()
        defer { server.stop() }
        XCTAssertEqual(server.baseURL.host, "127.0.0.1")
        XCTAssertGreaterThan(server.port, 0)
        var configuration = MockServer.Configuration()
        configuration.port = server.port
        let second = MockServer(configuration: configuration)
        XCTAssertThrowsError(try second.start()) { error in
            XCTAssertTrue("\(error)".contains("bind"), "\(error)")
        }
    }

    func testIPv6Loopback() throws {
        var configuration = MockServer.Configuration()
        configuration.host = "::1"
        let server = MockServer(configuration: configuration)
        do { try server.start() } catch { throw XCTSkip("no IPv6 loopback here: \(error)") }
        defer { server.stop() }
        XCTAssertEqual(server.baseURL.absoluteString, "http://[::1]:\(server.port)")
    }

    /// A server left running (`restdemo serve`) must not keep every request forever (`receivedRequests` and `takeRequest`).
    func testRecordsOnlyTheMostRecentRequests() throws {
        var configuration = MockServer.Configuration()
        configuration.maximumRecordedRequests = 5
        let server = MockServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        let connection = try RawClient(port: server.port)
        for index in 0..<23 {
            connection.send("GET /_test/echo?i=\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertEqual(connection.readResponses(1).count, 1)
        }
        XCTAssertEqual(server.receivedRequests.map(\.rawQuery), (18..<23).map { "i=\($0)" })
        XCTAssertEqual(server.handledRequestCount, 23)
        // `takeRequest` keeps the same ones.
        XCTAssertEqual((0..<5).compactMap { _ in server.takeRequest(timeout: 0)?.rawQuery }, (18..<23).map { "i=\($0)" })
        XCTAssertNil(server.takeRequest(timeout: 0))
    }
}
