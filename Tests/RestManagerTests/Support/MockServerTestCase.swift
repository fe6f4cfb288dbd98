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

    #if os(Linux)
    /// Resets the process's peak resident size (VmHWM) and returns it, so that a test can read its own peak after.
    func resetPeakResidentBytes() throws -> Int {
        try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        return try peakResidentBytes()
    }

    /// The process's peak resident size since the last reset (VmHWM).
    func peakResidentBytes() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
        let kilobytes = try XCTUnwrap(Int(line.split(separator: " ").dropFirst().first ?? ""))
        return kilobytes * 1024
    }
    #endif

    /// A URL on the mock server; `path` may carry a query.
    func url(_ path: String) -> URL {
        URL(string: server.baseURL.absoluteString + path)!  // test-controlled text
    }

    /// Calls `download` (on `manager`, else the fixture's) and waits (up to `timeout`) for its completion; nil when it
    /// never comes.
    @discardableResult
    func download(
        _ path: String, to destination: URL, using manager: RestManager? = nil, timeoutInterval: TimeInterval? = nil,
        timeout: TimeInterval = 60, progress: (@Sendable (RestManager.TransferProgress) -> Void)? = nil
    ) -> Result<URL, RestManager.CustomError>? {
        let done = expectation(description: "download \(path)")
        let box = ResultBox<Result<URL, RestManager.CustomError>>()
        (manager ?? rest).download(fromURL: url(path), to: destination, timeoutInterval: timeoutInterval, progress: progress) { result in
            box.set(result)
            done.fulfill()
        }
        wait(for: [done], timeout: timeout)
        return box.value
    }

    /// Calls `makeRequest` and waits for its completion, failing the test if it never comes.
    /// `base` sends to another server than the fixture's (e.g. `http://127.0.0.1:8080`).
    @discardableResult
    func send(
        _ method: RestManager.HttpMethod, _ path: String, using manager: RestManager? = nil, base: String? = nil,
        timeout: TimeInterval = 15, file: StaticString = #filePath, line: UInt = #line
    ) -> RestManager.Results {
        let done = expectation(description: "\(method) \(path)")
        let box = ResultBox<RestManager.Results>()
        let target = base.flatMap { URL(string: $0 + path) } ?? url(path)
        (manager ?? rest).makeRequest(toURL: target, withHttpMethod: method) { results in
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

    /// Sends a value request and waits for its completion, failing the test if it never comes.
    @discardableResult
    func send(
        _ request: RestManager.Request, using manager: RestManager? = nil, timeout: TimeInterval = 15,
        file: StaticString = #filePath, line: UInt = #line
    ) -> RestManager.Results {
        let done = expectation(description: "\(request.method) \(request.url)")
        let box = ResultBox<RestManager.Results>()
        (manager ?? rest).makeRequest(request) { results in
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

    /// Starts `path` held in `adapt` by an interceptor of its own (after the manager's) until `gate` opens, and returns
    /// once the manager's interceptors have adapted it: open the gate, then wait for `answered` before reading `results`.
    func startHeld(_ path: String, until gate: Gate) -> (answered: XCTestExpectation, results: ResultBox<RestManager.Results>) {
        let adapted = expectation(description: "\(path) adapted by the manager's interceptors")
        adapted.assertForOverFulfill = false  // a resend adapts again
        var held = RestManager.Request(url: url(path))
        held.interceptors = [InterceptorTests.WaitsToAdapt(gate: gate, entered: adapted)]
        let answered = expectation(description: "\(path) answered")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(held) { results in
            box.set(results)
            answered.fulfill()
        }
        wait(for: [adapted], timeout: 15)
        return (answered, box)
    }

    /// Waits (off the cooperative pool) until the server has received `count` requests.
    func serverReceived(_ count: Int, file: StaticString = #filePath, line: UInt = #line) async {
        let server = self.server!
        let arrived = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: server.waitForRequests(count, timeout: 20)) }
        }
        XCTAssertTrue(arrived, "the server did not receive \(count) requests", file: file, line: line)
    }

    /// Runs `script` with python3 (after it, `arguments`) as a loopback server that prints its port on its first line,
    /// and waits for that line. The test stops it (`defer { python.stop() }`).
    func startPythonServer(_ script: String, named name: String, arguments: [String] = []) throws -> PythonServer {
        let file = scratch.appendingPathComponent("\(name).py")
        let output = scratch.appendingPathComponent("\(name).out")
        try script.write(to: file, atomically: true, encoding: .utf8)
        let child = try ChildProcess(
            path: "/usr/bin/env", arguments: ["python3", file.path] + arguments, environment: ProcessInfo.processInfo.environment,
            stdoutPath: output.path, stderrPath: scratch.appendingPathComponent("\(name).err").path)
        let server = PythonServer(child: child, output: output)
        let listening = expectation(for: NSPredicate { _, _ in server.log.contains("\n") }, evaluatedWith: nil)
        wait(for: [listening], timeout: 30)
        guard server.port != nil else {
            server.stop()
            throw NSError(domain: "PythonServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "\(name) printed no port"])
        }
        return server
    }

    /// What every loopback socket server of a test needs, before its own `serve(connection)`: a listener on a free port
    /// (printed first), `read_until(connection, pending, done)` (bytes until `done(bytes)`, None when the peer closed
    /// first), and each connection served on a thread of its own.
    private static let socketServerPrelude = """
        import hashlib, socket, struct, sys, threading
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        print(listener.getsockname()[1], flush=True)
        def read_until(connection, pending, done):
            while not done(pending):
                chunk = connection.recv(65536)
                if not chunk:
                    return None
                pending += chunk
            return pending

        """

    /// Starts a loopback server whose python `script` defines `serve(connection)`, called for each connection (see
    /// `socketServerPrelude`); `sys.argv[1...]` are `arguments`. The test stops it.
    func startSocketServer(serving script: String, named name: String, arguments: [String] = []) throws -> PythonServer {
        let loop = "while True:\n    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()\n"
        return try startPythonServer(Self.socketServerPrelude + script + loop, named: name, arguments: arguments)
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
        let candidates = [
            Bundle.main.bundleURL, Bundle(for: MockServerTestCase.self).bundleURL.deletingLastPathComponent(),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        ]
        return candidates.map { $0.appendingPathComponent("restdemo") }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// A scratch folder for this test, removed in tearDown.
    private(set) var scratch: URL!

    /// A character device to offer as a file: run as root, a node of this test's own in `scratch`, because a bug that
    /// removes or renames over what it was given (a mutant did) must not take the machine's device with it; otherwise
    /// `/dev/zero`, which only root can remove.
    func characterDevice() -> URL {
        let node = scratch.appendingPathComponent("device")
        return makeDeviceNode(at: node) ? node : URL(fileURLWithPath: "/dev/zero")
    }

    /// Makes a character device node at `url` like `/dev/null` (1,3: writes vanish, reads end at once); false when
    /// the process may not (only root may).
    func makeDeviceNode(at url: URL) -> Bool {
        #if os(Linux)
        getuid() == 0 && mknod(url.path, S_IFCHR | 0o666, dev_t(1 << 8 | 3)) == 0
        #else
        false
        #endif
    }

    /// Runs restdemo with `--base-url` pointing at the mock unless `useServer` is false. Output goes to
    /// files (not pipes) and the test waits for the process to end, so nothing can block on a full pipe.
    /// (posix_spawn, not Foundation's Process: on Linux a Process object is never freed, which
    /// LeakSanitizer would report against the tests.)
    /// `stdoutPath` and `stderrPath` send the output elsewhere (`/dev/full`); `Run` has it empty then.
    func restdemo(
        _ arguments: [String], useServer: Bool = true, environment: [String: String] = [:], stdoutPath: String? = nil,
        stderrPath: String? = nil, file: StaticString = #filePath, line: UInt = #line
    ) throws -> Run {
        let binary = try XCTUnwrap(Self.restdemoBinary, "build restdemo first (swift build)", file: file, line: line)
        var processEnvironment = ProcessInfo.processInfo.environment
        processEnvironment["XDG_CACHE_HOME"] = scratch.appendingPathComponent("cache").path
        processEnvironment["XDG_CONFIG_HOME"] = scratch.appendingPathComponent("config").path
        processEnvironment["RESTDEMO_BASE_URL"] = nil
        // A crash (the toolchain trap one test provokes) ends at once instead of running the
        // backtracer, which can hang under the sanitizers.
        processEnvironment["SWIFT_BACKTRACE"] = "enable=no"
        processEnvironment.merge(environment) { _, new in new }
        let outPath = scratch.appendingPathComponent("out-\(UUID().uuidString)").path
        let errPath = scratch.appendingPathComponent("err-\(UUID().uuidString)").path
        let child = try ChildProcess(
            path: binary.path,
            arguments: (useServer ? ["--base-url", server.baseURL.absoluteString] : []) + arguments,
            environment: processEnvironment, stdoutPath: stdoutPath ?? outPath,
            stderrPath: stderrPath ?? errPath)
        let finished = expectation(description: "restdemo \(arguments.joined(separator: " "))")
        let outcome = ResultBox<ChildProcess.Outcome>()
        DispatchQueue.global().async {
            outcome.set(child.waitForExit())
            finished.fulfill()
        }
        if XCTWaiter.wait(for: [finished], timeout: 120) != .completed {
            child.kill()
            wait(for: [finished], timeout: 10)
            XCTFail("restdemo did not finish", file: file, line: line)
        }
        let result = outcome.value ?? ChildProcess.Outcome(status: -1, signal: 0)
        return Run(
            status: result.status, crashed: result.signal != 0,
            stdout: stdoutPath == nil ? ChildProcess.readFile(outPath) : "",
            stderr: stderrPath == nil ? ChildProcess.readFile(errPath) : "")
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

/// Opens once; `wait()` returns when it is open.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func open() {
        lock.lock()
        isOpen = true
        let waiting = waiters
        waiters = []
        lock.unlock()
        waiting.forEach { $0.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            lock.lock()
            if isOpen {
                lock.unlock()
                continuation.resume()
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }
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

/// A loopback server a test runs with python3 (`startPythonServer`): its port, then what it logs.
struct PythonServer {
    let child: ChildProcess
    let output: URL
    /// Everything it printed so far.
    var log: String { ChildProcess.readFile(output.path) }
    /// The port it printed first.
    var port: String? { log.split(separator: "\n").first.map(String.init) }

    func stop() {
        child.kill()
        _ = child.waitForExit()
    }
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
        let length =
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        let headBytes = Array(text[..<headEnd.upperBound].utf8).count
        guard buffer.count >= headBytes + length else { return nil }
        return (String(decoding: buffer[..<(headBytes + length)], as: UTF8.self), headBytes + length)
    }
}

/// A child process started with posix_spawn, its output redirected to files.
final class ChildProcess: @unchecked Sendable {
    struct Outcome: Sendable {
        /// The exit status, or -1 when a signal ended the process.
        let status: Int32
        /// The signal that ended the process, or 0.
        let signal: Int32
    }

    let pid: pid_t

    init(path: String, arguments: [String], environment: [String: String], stdoutPath: String, stderrPath: String) throws {
        #if os(Linux)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard result == 0 else { throw NSError(domain: "posix_spawn", code: Int(result)) }
        self.pid = pid
    }

    /// Blocks until the process ends.
    func waitForExit() -> Outcome {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signal = status & 0x7F
        return signal == 0 ? Outcome(status: (status >> 8) & 0xFF, signal: 0) : Outcome(status: -1, signal: signal)
    }

    func kill() { _ = Foundation.kill(pid, SIGKILL) }

    func interrupt() { _ = Foundation.kill(pid, SIGINT) }

    /// A whole file as text, read with POSIX calls.
    static func readFile(_ path: String) -> String {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return "" }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, 65536) }
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// How many file descriptors this process has open (for leak checks).
///
/// libdispatch opens a timer descriptor for a clock the first time a timer on that clock is armed. On a loaded machine
/// that happened between a test's two counts (alone in its process, as `swift test --parallel` runs it: 4 of 12 runs
/// with three busy cores) and read as a leak, so a timer on each clock has fired before the first count.
func openDescriptorCount() -> Int {
    _ = dispatchClocksArmed
    #if os(Linux)
    return (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    #else
    return (0..<4096).filter { fcntl(Int32($0), F_GETFD) != -1 }.count
    #endif
}

private let dispatchClocksArmed: Bool = {
    let fired = DispatchGroup()
    fired.enter()
    fired.enter()
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.001) { fired.leave() }
    DispatchQueue.global().asyncAfter(wallDeadline: .now() + 0.001) { fired.leave() }
    return fired.wait(timeout: .now() + 60) == .success
}()
