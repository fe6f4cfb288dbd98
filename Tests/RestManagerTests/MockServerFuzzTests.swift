import Foundation
import XCTest
import HeapStatistics
@testable import MockServer

/// Structure-aware fuzzing of the mock server: requests built from their parts, with the numbers
/// in request lines, queries, headers and chunk sizes pushed to extremes, headers duplicated and
/// reordered, line endings switched, and the bytes split across reads at random points.
///
/// `RESTMANAGER_FUZZ_SEED` replays a run (the seed is printed); `RESTMANAGER_FUZZ_COUNT` sets how
/// many requests go through the parser and router in-process (default 100,000).
final class MockServerFuzzTests: MockServerTestCase {
    override var serverConfiguration: MockServer.Configuration {
        var configuration = MockServer.Configuration()
        configuration.recordsRequests = false
        configuration.maximumHeaderBytes = 4096
        configuration.maximumBodyBytes = 64 * 1024
        return configuration
    }

    private static let seed: UInt64 = {
        let environment = ProcessInfo.processInfo.environment["RESTMANAGER_FUZZ_SEED"].flatMap { UInt64($0) }
        let seed = environment ?? UInt64(Date().timeIntervalSince1970 * 1000)
        print("MockServer fuzz seed: \(seed) (replay with RESTMANAGER_FUZZ_SEED=\(seed))")
        return seed
    }()

    private static let count =
        ProcessInfo.processInfo.environment["RESTMANAGER_FUZZ_COUNT"].flatMap { Int($0) } ?? (TestScale.quick ? 5_000 : 100_000)

    func testParserAndRouterTakeExtremeRequestsSplitAnywhere() {
        var generator = SeededGenerator(seed: Self.seed)
        let server = self.server!
        var outcomes: [String: Int] = [:]
        // Warm up once so that lazily built tables do not count as growth.
        _ = Routes.reply(to: ReceivedRequest(try! XCTUnwrap(FuzzRequest.parseOne(FuzzRequest.make(&generator))), connectionID: 0), server: server)
        let heapBefore = heap_statistics_live_bytes()
        for _ in 0..<Self.count {
            let bytes = FuzzRequest.make(&generator)
            var parser = RequestParser(maximumHeaderBytes: 4096, maximumBodyBytes: 64 * 1024)
            // Feed it as a client would send it: in pieces split at random points, pipelined requests after each other.
            var cuts = (0..<Int.random(in: 0...4, using: &generator)).map { _ in Int.random(in: 0...bytes.count, using: &generator) }
            cuts.append(bytes.count)
            cuts.sort()
            var start = 0
            var outcome = "incomplete"
            for cut in cuts {
                var finished = false
                while !finished, start <= cut {
                    switch parser.parse(bytes[start..<cut]) {
                    case .incomplete:
                        finished = true
                    case .complete(let request, let consumed):
                        XCTAssertGreaterThan(consumed, 0)
                        XCTAssertLessThanOrEqual(start + consumed, cut)
                        start += consumed
                        outcome = "complete"
                        _ = Routes.reply(to: ReceivedRequest(request, connectionID: 0), server: server)
                        if start == cut { finished = true }
                    case .failure(let status, _):
                        XCTAssertTrue([400, 408, 413, 431, 501, 505].contains(status), "\(status)")
                        outcome = "\(status)"
                        start = bytes.count + 1
                        finished = true
                    }
                }
                if start > bytes.count { break }
            }
            outcomes[outcome, default: 0] += 1
        }
        let heapAfter = heap_statistics_live_bytes()
        if heapBefore > 0 {
            XCTAssertLessThan(Double(heapAfter) - Double(heapBefore), 4 * 1024 * 1024, "heap grew over the fuzz run (seed \(Self.seed))")
        }
        // Every class of outcome is reached, or the generator has lost its structure.
        for expected in ["complete", "400", "413", "501"] {
            XCTAssertGreaterThan(outcomes[expected] ?? 0, Self.count / 200, "\(expected): \(outcomes) (seed \(Self.seed))")
        }
        print("MockServer fuzz outcomes over \(Self.count) requests: \(outcomes.sorted { $0.key < $1.key })")
    }

    func testFuzzedRequestsOverSocketsInPiecesGetAnAnswerOrAClose() throws {
        var generator = SeededGenerator(seed: Self.seed &+ 1)
        for _ in 0..<1_000 {
            let bytes = FuzzRequest.make(&generator, slow: false)
            let client = try RawClient(port: server.port)
            var offset = 0
            while offset < bytes.count {
                let piece = Int.random(in: 1...max(1, bytes.count - offset), using: &generator)
                client.send(Array(bytes[offset..<(offset + piece)]))
                offset += piece
            }
            client.finishSending()
            let (text, closed) = client.readUntilClosed(timeout: 10)
            XCTAssertTrue(closed, "no close for \(String(decoding: bytes, as: UTF8.self).debugDescription) (seed \(Self.seed))")
            XCTAssertTrue(text.isEmpty || text.hasPrefix("HTTP/1.1 "), text)
        }
        let client = try RawClient(port: server.port)
        client.send("GET /api/users/1 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertTrue(client.readResponses(1).first?.hasPrefix("HTTP/1.1 200") ?? false, "the server stopped answering")
    }
}

/// Builds requests from their parts, with numbers at their extremes.
enum FuzzRequest {
    static let numbers = [
        "0", "1", "-1", "-5", "+3", " 3", "3 ", "007", "2147483647", "2147483648", "4294967296",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "99999999999999999999999",
        "1e300", "nan", "inf", "-0", "0x10", "1.5", "", "1000000", "1000001", "-1000000"
    ]
    static let hexNumbers = [
        "0", "1", "a", "F", "-5", "+3", " 3", "3 ", "0x3", "FFFFFFFFFFFFFFFF", "7FFFFFFFFFFFFFFF",
        "8000000000000000", "FFFFFFFFFFFFFFFFFFFFFFFF", "000000000000000000001", "g", "", "3;ext=1", "3 ;x"
    ]
    static let targets = [
        "/api/users?page=%@&per_page=%@", "/api/users/%@", "/api/unknown?page=%@", "/api/users?delay=%@",
        "/_test/bytes/%@", "/_test/status/%@", "/_test/redirect/%@?to=/x", "/_test/redirect-chain/%@",
        "/_test/stall?bytes=%@&seconds=%@", "/_test/delay?seconds=%@", "/_test/echo?status=%@",
        "/img/faces/%@-image.jpg", "/_test/response-headers?X-A=%@", "/api/login"
    ]
    static let methods = ["GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "G ET", ""]

    /// One request; `slow` false leaves out the endpoints that take long over a socket: delays,
    /// stalls and generated bodies of up to 64 GiB (in-process, the router only builds the answer).
    static func make<G: RandomNumberGenerator>(_ generator: inout G, slow: Bool = true) -> [UInt8] {
        func pick(_ list: [String]) -> String { list[Int.random(in: 0..<list.count, using: &generator)] }
        var target = pick(slow ? targets : targets.filter { !["delay", "stall", "bytes"].contains(where: $0.contains) })
        while let range = target.range(of: "%@") {
            target.replaceSubrange(range, with: pick(numbers).replacingOccurrences(of: " ", with: "%20"))
        }
        let method = pick(methods)
        let version = Int.random(in: 0..<20, using: &generator) == 0 ? pick(["HTTP/1.0", "HTTP/2", "HTTP/1.1 ", "http/1.1"]) : "HTTP/1.1"
        var headers: [String] = ["Host: x"]
        let chunked = Int.random(in: 0..<3, using: &generator) == 0
        var body = ""
        if chunked {
            headers.append("Transfer-Encoding: " + pick(["chunked", "chunked", "chunked", "gzip", "gzip, chunked", "chunked, chunked"]))
            for _ in 0..<Int.random(in: 0...3, using: &generator) {
                let size = pick(hexNumbers)
                body += "\(size)\r\n\(String(repeating: "x", count: Int.random(in: 0...4, using: &generator)))\r\n"
            }
            body += "0\r\n\r\n"
        } else if Int.random(in: 0..<2, using: &generator) == 0 {
            body = #"{"email":"eve.holt@reqres.in","password":"p"}"#
            headers.append("Content-Length: " + (Int.random(in: 0..<2, using: &generator) == 0 ? "\(body.utf8.count)" : pick(numbers)))
            headers.append("Content-Type: application/json")
        }
        // Duplicate, add and reorder headers.
        for _ in 0..<max(0, Int.random(in: -2...2, using: &generator)) {
            headers.append(
                pick([
                    "Host: y", "Content-Length: \(pick(numbers))", "Transfer-Encoding: chunked", "X-N: \(pick(numbers))",
                    "Expect: 100-continue", "Connection: close", "Bad Name: v", ": empty", "X-Long: " + String(repeating: "a", count: 5000)
                ]))
        }
        headers.shuffle(using: &generator)
        let lineEnd = { (generator: inout G) -> String in
            switch Int.random(in: 0..<60, using: &generator) {
            case 0: return "\n";
            case 1: return "\r";
            default: return "\r\n"
            }
        }
        var text = "\(method) \(target) \(version)" + lineEnd(&generator)
        for header in headers { text += header + lineEnd(&generator) }
        text += lineEnd(&generator) + body
        var bytes = Array(text.utf8)
        if Int.random(in: 0..<10, using: &generator) == 0, !bytes.isEmpty {
            bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
        }
        return bytes
    }

    /// Parses a request that may be incomplete; used for warming up.
    static func parseOne(_ bytes: [UInt8]) -> ParsedRequest? {
        let fallback = Array("GET /api/users HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        if case .complete(let request, _) = RequestParser.parse(bytes[...], maximumHeaderBytes: 4096, maximumBodyBytes: 65536) { return request }
        if case .complete(let request, _) = RequestParser.parse(fallback[...], maximumHeaderBytes: 4096, maximumBodyBytes: 65536) { return request }
        return nil
    }
}
