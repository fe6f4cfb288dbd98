// The one fixture every test file shares: a MockServer started before each test and stopped after it,
// plus helpers to call RestManager and read what the server saw.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

class MockServerTestCase: XCTestCase {
    /// Overridden by tests that need other server settings.
    var serverConfiguration: MockServer.Configuration { MockServer.Configuration() }

    private(set) var server: MockServer!
    private(set) var rest: RestManager!

    override func setUpWithError() throws {
        try super.setUpWithError()
        server = MockServer(configuration: serverConfiguration)
        try server.start()
        rest = RestManager()
        rest.timeoutInterval = 10
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("restmanager-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() {
        if let scratch { try? FileManager.default.removeItem(at: scratch) }
        server?.stop()
        server = nil
        rest = nil
        super.tearDown()
    }

    /// A URL on the mock server; `path` may carry a query.
    func url(_ path: String) -> URL {
        URL(string: server.baseURL.absoluteString + path)!  // test-controlled text
    }

    /// Calls `makeRequest` and waits for its completion, failing the test if it never comes.
    @discardableResult
    func send(_ method: RestManager.HttpMethod, _ path: String, using manager: RestManager? = nil,
              timeout: TimeInterval = 15, file: StaticString = #filePath, line: UInt = #line) -> RestManager.Results {
        let done = expectation(description: "\(method) \(path)")
        let box = ResultBox<RestManager.Results>()
        (manager ?? rest).makeRequest(toURL: url(path), withHttpMethod: method) { results in
            box.set(results)
            done.fulfill()
        }
        wait(for: [done], timeout: timeout)
        guard let results = box.value else {
            XCTFail("no completion", file: file, line: line)
            return RestManager.Results(withError: RestManager.CustomError.failedToCreateRequest)
        }
        return results
    }

    /// Waits (off the cooperative pool) until the server has received `count` requests.
    func serverReceived(_ count: Int, file: StaticString = #filePath, line: UInt = #line) async {
        let server = self.server!
        let arrived = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: server.waitForRequests(count, timeout: 20)) }
        }
        XCTAssertTrue(arrived, "the server did not receive \(count) requests", file: file, line: line)
    }

    /// Decodes the `/_test/echo` answer.
    func echo(_ results: RestManager.Results, file: StaticString = #filePath, line: UInt = #line) throws -> Echo {
        XCTAssertNil(results.error, "request failed: \(String(describing: results.error))", file: file, line: line)
        return try results.decode(Echo.self)
    }
    // MARK: - Running the restdemo binary

    /// What a run of the restdemo binary produced.
    struct Run {
        let status: Int32
        let crashed: Bool
        let stdout: String
        let stderr: String
    }

    /// The built restdemo next to the test bundle (swift test builds it).
    static var restdemoBinary: URL? {
        let candidates = [Bundle.main.bundleURL, Bundle(for: MockServerTestCase.self).bundleURL.deletingLastPathComponent(),
                          URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        return candidates.map { $0.appendingPathComponent("restdemo") }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// A scratch folder for this test, removed in tearDown.
    private(set) var scratch: URL!

    /// Runs restdemo with `--base-url` pointing at the mock unless `useServer` is false. Output goes to
    /// files (not pipes) and the test waits for the process to end, so nothing can block on a full pipe.
    func restdemo(_ arguments: [String], useServer: Bool = true, environment: [String: String] = [:],
                  file: StaticString = #filePath, line: UInt = #line) throws -> Run {
        let binary = try XCTUnwrap(Self.restdemoBinary, "build restdemo first (swift build)", file: file, line: line)
        let process = Process()
        process.executableURL = binary
        process.arguments = (useServer ? ["--base-url", server.baseURL.absoluteString] : []) + arguments
        var processEnvironment = ProcessInfo.processInfo.environment
        processEnvironment["XDG_CACHE_HOME"] = scratch.appendingPathComponent("cache").path
        processEnvironment["RESTDEMO_BASE_URL"] = nil
        // A crash (the toolchain trap one test provokes) ends at once instead of running the
        // backtracer, which can hang under the sanitizers.
        processEnvironment["SWIFT_BACKTRACE"] = "enable=no"
        processEnvironment.merge(environment) { _, new in new }
        process.environment = processEnvironment
        let outURL = scratch.appendingPathComponent("out-\(UUID().uuidString)")
        let errURL = scratch.appendingPathComponent("err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        let finished = expectation(description: "restdemo \(arguments.joined(separator: " "))")
        process.terminationHandler = { _ in finished.fulfill() }
        try process.run()
        wait(for: [finished], timeout: 120)
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            XCTFail("restdemo did not finish", file: file, line: line)
        }
        return Run(status: process.terminationStatus, crashed: process.terminationReason == .uncaughtSignal,
                   stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
                   stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "")
    }
}

/// What `/_test/echo` reports about the request it received.
struct Echo: Decodable {
    let method: String
    let path: String
    let rawQuery: String?
    let query: [[String]]
    let headers: [[String]]
    let body: String

    var bodyData: Data { Data(base64Encoded: body) ?? Data() }
    var bodyText: String { String(decoding: bodyData, as: UTF8.self) }
    var queryPairs: [(String, String)] { query.map { ($0[0], $0[1]) } }

    func header(_ name: String) -> String? {
        headers.first { $0[0].lowercased() == name.lowercased() }?[1]
    }

    func headerNames() -> [String] { headers.map { $0[0] } }
}

/// A value set from a completion handler and read by the test after waiting.
final class ResultBox<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Value] = []

    func set(_ value: Value) { lock.lock(); stored.append(value); lock.unlock() }
    var value: Value? { lock.lock(); defer { lock.unlock() }; return stored.first }
    var all: [Value] { lock.lock(); defer { lock.unlock() }; return stored }
    var count: Int { lock.lock(); defer { lock.unlock() }; return stored.count }
}

/// A blocking TCP client for raw-socket tests; every read is bounded by a poll timeout.
final class RawClient {
    let descriptor: Int32

    init(port: UInt16, host: String = "127.0.0.1") throws {
        #if os(Linux)
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(descriptor)
            throw NSError(domain: "RawClient", code: Int(errno))
        }
    }

    deinit { close(descriptor) }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            #if os(Linux)
            let flags = Int32(MSG_NOSIGNAL)
            #else
            let flags: Int32 = 0
            #endif
            let written = bytes.withUnsafeBytes { Foundation.send(descriptor, $0.baseAddress! + offset, bytes.count - offset, flags) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Half-closes: the server sees the end of the request stream.
    func finishSending() { shutdown(descriptor, Int32(SHUT_WR)) }

    /// Reads until the server closes or `timeout` passes with nothing new; returns what arrived.
    func readUntilClosed(timeout: TimeInterval = 5) -> (text: String, closed: Bool) {
        var bytes: [UInt8] = []
        while true {
            switch readSome(timeout: timeout) {
            case .data(let chunk): bytes += chunk
            case .closed: return (String(decoding: bytes, as: UTF8.self), true)
            case .timedOut: return (String(decoding: bytes, as: UTF8.self), false)
            }
        }
    }

    /// Reads until `count` complete responses (by Content-Length) have arrived.
    func readResponses(_ count: Int, timeout: TimeInterval = 5) -> [String] {
        var buffer: [UInt8] = []
        var responses: [String] = []
        while responses.count < count {
            if let (response, used) = Self.firstResponse(in: buffer) {
                responses.append(response)
                buffer.removeFirst(used)
                continue
            }
            guard case .data(let chunk) = readSome(timeout: timeout) else { break }
            buffer += chunk
        }
        return responses
    }

    enum ReadResult { case data([UInt8]), closed, timedOut }

    func readSome(timeout: TimeInterval) -> ReadResult {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, Int32(timeout * 1000)) > 0 else { return .timedOut }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, 65536, 0) }
        return count > 0 ? .data(Array(chunk[..<count])) : .closed
    }

    private static func firstResponse(in buffer: [UInt8]) -> (String, Int)? {
        let text = String(decoding: buffer, as: UTF8.self)
        guard let headEnd = text.range(of: "\r\n\r\n") else { return nil }
        let head = String(text[..<headEnd.lowerBound])
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        let headBytes = Array(text[..<headEnd.upperBound].utf8).count
        guard buffer.count >= headBytes + length else { return nil }
        return (String(decoding: buffer[..<(headBytes + length)], as: UTF8.self), headBytes + length)
    }
}
