// restbench: RestManager against raw URLSession and the tutorial's design, measured in one run,
// interleaved, against the mock server running in a child process (so CPU and memory are the client's).
//
//   swift run -c release restbench [--quick] [--json] [--svg FILE] [--transfers] [--latency [MS] [--window MIB]] [--cache]
//     [--streaming] [--stall] [--requests]

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Dispatch
import HeapStatistics
import MockServer
import RestManager

let arguments = Set(CommandLine.arguments.dropFirst())

// MARK: - Child mode: the server

if arguments.contains("--serve") {
    var configuration = MockServer.Configuration()
    configuration.recordsRequests = false
    configuration.maximumConnections = 2048
    let server = MockServer(configuration: configuration)
    do { try server.start() } catch {
        FileHandle.standardError.write(Data("restbench: cannot start the mock server: \(error)\n".utf8))
        exit(69)
    }
    // `--latency`: delay proxies in front of the server, one per round trip asked for ("50:PORT 100:PORT").
    let roundTrips = (ProcessInfo.processInfo.environment["RESTBENCH_ROUND_TRIPS"] ?? "").split(separator: ",").compactMap { Int($0) }
    let window = Int(ProcessInfo.processInfo.environment["RESTBENCH_WINDOW"] ?? "") ?? 0
    let proxies = roundTrips.map { LatencyProxy(upstreamPort: server.port, roundTrip: $0, window: window) }
    let proxyPorts = zip(roundTrips, proxies).compactMap { milliseconds, proxy in proxy.start().map { " \(milliseconds):\($0)" } }
    FileHandle.standardOutput.write(Data(("\(server.port)" + proxyPorts.joined() + "\n").utf8))
    _ = FileHandle.standardInput.readDataToEndOfFile()  // runs until the parent closes our stdin
    server.stop()
    exit(0)
}

// --svg FILE writes a chart of the ratios to raw URLSession.
let svgPath: String? = {
    let list = Array(CommandLine.arguments.dropFirst())
    guard let index = list.firstIndex(of: "--svg") else { return nil }
    return index + 1 < list.count ? list[index + 1] : ""
}()
// --latency [MS]: the transfer rows through a delay proxy, at MS ms round trip (default: 0, 50 and 100).
let latencyRoundTrips: [Int]? = {
    let list = Array(CommandLine.arguments.dropFirst())
    guard let index = list.firstIndex(of: "--latency") else { return nil }
    guard index + 1 < list.count, let milliseconds = Int(list[index + 1]), (0...10_000).contains(milliseconds) else { return [0, 50, 100] }
    return [milliseconds]
}()
let latencyValue = latencyRoundTrips.flatMap { $0.count == 1 ? ["\($0[0])"] : nil } ?? []
// --window MIB: the delay proxy bounds the bytes unacknowledged in each direction, as a TCP window (0: no bound).
let windowValue: String? = {
    let list = Array(CommandLine.arguments.dropFirst())
    guard let index = list.firstIndex(of: "--window") else { return nil }
    return index + 1 < list.count ? list[index + 1] : ""
}()
let windowMebibytes = windowValue.map { Int($0) ?? -1 } ?? 0
let unknown = arguments.subtracting(
    ["--quick", "--json", "--svg", "--transfers", "--cache", "--streaming", "--stall", "--requests", "--latency", "--window"]
        + (svgPath.map { [$0] } ?? [])
        + latencyValue + (windowValue.map { [$0] } ?? []))
guard (0...1024).contains(windowMebibytes) else {
    FileHandle.standardError.write(Data("restbench: --window needs MiB from 0 to 1024, not '\(windowValue ?? "")'\n".utf8))
    exit(64)
}
guard unknown.isEmpty, svgPath != "" else {
    FileHandle.standardError.write(
        Data(
            "restbench: unknown option \(unknown.sorted().joined(separator: " ")) (usage: restbench [--quick] [--json] [--svg FILE] [--transfers] [--latency [MS]] [--window MIB] [--cache] [--streaming] [--stall] [--requests])\n"
                .utf8))
    exit(64)
}
let quick = arguments.contains("--quick")
let json = arguments.contains("--json")
let rounds = quick ? 3 : 7

func progress(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

// MARK: - Start the server in a child process

let child = Process()
child.executableURL = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
child.arguments = ["--serve"]
var childEnvironment = ProcessInfo.processInfo.environment
childEnvironment["RESTBENCH_WINDOW"] = String(windowMebibytes << 20)
childEnvironment["RESTBENCH_ROUND_TRIPS"] = (latencyRoundTrips ?? []).filter { $0 > 0 }.map(String.init).joined(separator: ",")
child.environment = childEnvironment
let childInput = Pipe()
let childOutput = Pipe()
child.standardInput = childInput
child.standardOutput = childOutput
do { try child.run() } catch {
    progress("restbench: cannot start the server process: \(error)")
    exit(69)
}
let portLine = String(decoding: childOutput.fileHandleForReading.availableData, as: UTF8.self)
let portWords = portLine.split(whereSeparator: \.isWhitespace)
/// The delay proxies' ports by round trip in milliseconds.
let proxyPorts = Dictionary(
    portWords.dropFirst().compactMap { word -> (Int, UInt16)? in
        let parts = word.split(separator: ":")
        guard parts.count == 2, let milliseconds = Int(parts[0]), let port = UInt16(parts[1]) else { return nil }
        return (milliseconds, port)
    }, uniquingKeysWith: { first, _ in first })
guard let port = portWords.first.flatMap({ UInt16($0) }) else {
    progress("restbench: the server process did not report a port")
    exit(69)
}
let base = "http://127.0.0.1:\(port)"
func url(_ path: String) -> URL { URL(string: base + path)! }  // built from our own literals and port

// MARK: - Clients

func tunedSession() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.httpCookieStorage = nil
    configuration.urlCredentialStorage = nil
    return URLSession(configuration: configuration)
}

let rawSession = tunedSession()

/// The smallest delegate that makes redirects and auth challenges behave the same on Linux and Apple
/// platforms; measured on its own to show what any such client pays for it on Linux.
final class RedirectRefusingDelegate: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}

let delegateSession: URLSession = {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.httpCookieStorage = nil
    configuration.urlCredentialStorage = nil
    return URLSession(configuration: configuration, delegate: RedirectRefusingDelegate(), delegateQueue: nil)
}()
let defaultSession = URLSession(configuration: .default)

func raw(_ session: URLSession, _ request: URLRequest) -> Sender {
    { done in
        session.dataTask(with: request) { _, response, error in
            done(error == nil && (response as? HTTPURLResponse)?.statusCode ?? 0 < 300)
        }.resume()
    }
}

/// Raw, with the completion re-dispatched to a global queue: what any client pays that delivers
/// completions on a queue of the caller's choice rather than on URLSession's own delegate queue.
func rawWithCallbackHop(_ session: URLSession, _ request: URLRequest) -> Sender {
    let send = raw(session, request)
    return { done in send { success in DispatchQueue.global(qos: .userInitiated).async { done(success) } } }
}

/// Raw, awaited through the smallest correct async wrapper (a continuation resumed by the completion
/// handler): what any `async` client over URLSession pays for the hop back into the awaiting task.
/// URLSession's own `data(for:)` is not used: on Linux 6.3 it can deadlock (swift-corelibs-foundation #5412).
func rawAwaited(_ session: URLSession, _ request: URLRequest) -> Sender {
    let send = raw(session, request)
    return { done in Task { done(await withCheckedContinuation { continuation in send { continuation.resume(returning: $0) } }) } }
}

/// The tutorial's design: hop to a global queue, make a new session, send.
func tutorial(_ request: URLRequest) -> Sender {
    { done in
        DispatchQueue.global(qos: .userInitiated).async {
            let session = URLSession(configuration: .default)
            session.dataTask(with: request) { _, response, error in
                done(error == nil && (response as? HTTPURLResponse)?.statusCode ?? 0 < 300)
            }.resume()
        }
    }
}

func manager(configure: (RestManager) -> Void = { _ in }) -> RestManager {
    let rest = RestManager(maximumConnectionsPerHost: 6)
    configure(rest)
    return rest
}

func completion(_ rest: RestManager, _ method: RestManager.HttpMethod, _ target: URL) -> Sender {
    { done in rest.makeRequest(toURL: target, withHttpMethod: method) { done($0.isSuccess) } }
}

func asyncAwait(_ rest: RestManager, _ method: RestManager.HttpMethod, _ target: URL) -> Sender {
    { done in Task { done(await rest.makeRequest(toURL: target, withHttpMethod: method).isSuccess) } }
}

func getData(_ rest: RestManager, _ target: URL) -> Sender {
    { done in rest.getData(fromURL: target) { done($0 != nil) } }
}

func clients(get target: URL) -> [(name: String, sender: Sender)] {
    let request = URLRequest(url: target)
    let rest = manager()
    // An app's usual setup: a bearer token added to every call by the authentication add-on (an interceptor).
    let authenticated = manager { rest in
        rest.authenticator = RestManager.Authenticator(credential: .init(accessToken: "bench-token")) { _ in
            throw RestManager.CustomError.authenticationFailed(reason: "restbench never refreshes")
        }
    }
    return [
        ("raw URLSession", raw(rawSession, request)), ("raw URLSession .default", raw(defaultSession, request)),
        ("raw URLSession + delegate", raw(delegateSession, request)),
        ("raw URLSession + callback hop", rawWithCallbackHop(rawSession, request)),
        ("raw URLSession + await", rawAwaited(rawSession, request)),
        ("RestManager", completion(rest, .get, target)), ("RestManager async", asyncAwait(rest, .get, target)),
        ("RestManager + authenticator", completion(authenticated, .get, target)),
        ("RestManager + authenticator async", asyncAwait(authenticated, .get, target)),
        ("tutorial design", tutorial(request))
    ]
}

func clients(postJSON target: URL) -> [(name: String, sender: Sender)] {
    var request = URLRequest(url: target)
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(#"{"name":"morpheus","job":"leader"}"#.utf8)
    let rest = manager { rest in
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "morpheus", forKey: "name")
        rest.httpBodyParameters.add(value: "leader", forKey: "job")
    }
    return [
        ("raw URLSession", raw(rawSession, request)), ("raw URLSession .default", raw(defaultSession, request)),
        ("raw URLSession + callback hop", rawWithCallbackHop(rawSession, request)),
        ("raw URLSession + await", rawAwaited(rawSession, request)),
        ("RestManager", completion(rest, .post, target)), ("RestManager async", asyncAwait(rest, .post, target)),
        ("tutorial design", tutorial(request))
    ]
}

// --transfers: only the large-transfer scenarios (a quicker look at them).
if arguments.contains("--transfers") {
    // 4 MiB as well as large: small transfers are where per-call costs show.
    let small = TransferBench.run(base: base, bytes: 4 << 20, rounds: quick ? 5 : 21)
    for row in small + TransferBench.run(base: base, bytes: quick ? 64 << 20 : 1 << 30, rounds: quick ? 1 : 3) {
        let extra = row.extra ?? [:]
        print(
            String(
                format: "%@, %@: %.0f MiB/s (%.2f× the first), resident memory at most %+.1f MiB during the transfer%@",
                row.scenario, row.client, extra["mebibytesPerSecond"] ?? 0, row.ratioToRaw ?? 0, extra["residentGrowthMiB"] ?? 0,
                row.failures > 0 ? ", \(row.failures) failed" : ""))
    }
    childInput.fileHandleForWriting.closeFile()
    child.waitUntilExit()
    exit(0)
}

// --latency: the transfer rows at each round trip, through the child's delay proxies.
if let roundTrips = latencyRoundTrips {
    for milliseconds in roundTrips {
        let proxied = milliseconds == 0 ? base : proxyPorts[milliseconds].map { "http://127.0.0.1:\($0)" }
        guard let proxied else {
            progress("restbench: no delay proxy for \(milliseconds) ms")
            continue
        }
        let rows = TransferBench.run(base: proxied, bytes: quick ? 32 << 20 : 256 << 20, rounds: quick ? 1 : 2)
        let link = milliseconds > 0 && windowMebibytes > 0 ? " (\(windowMebibytes) MiB window)" : ""
        for row in rows {
            let extra = row.extra ?? [:]
            print(
                String(
                    format: "%d ms RTT%@, %@, %@: %.0f MiB/s (%.2f× the first), resident memory at most %+.1f MiB%@", milliseconds,
                    link, row.scenario, row.client, extra["mebibytesPerSecond"] ?? 0, row.ratioToRaw ?? 0, extra["residentGrowthMiB"] ?? 0,
                    row.failures > 0 ? ", \(row.failures) failed" : ""))
        }
    }
    childInput.fileHandleForWriting.closeFile()
    child.waitUntilExit()
    exit(0)
}

// --cache: only the response cache's rows.
func cacheLine(_ row: Row) -> String {
    String(
        format: "%@, %@: %.0f requests/s (%.1f× RestManager without the cache), %.1f MiB of bodies over the network%@",
        row.scenario, row.client, row.requestsPerSecond, row.ratioToRaw ?? 0, (row.extra?["bodyBytesReceived"] ?? 0) / 1_048_576,
        row.failures > 0 ? ", \(row.failures) failed" : "")
}
// --streaming: only the streaming rows.
func streamingLine(_ row: Row) -> String {
    if let worst = row.extra?["worstMicroseconds"] {
        let read = (row.extra?["streamReadBytes"] ?? 0) / 1_048_576
        let stream = [
            0: String(format: " (the stream: %.1f MiB read, not ended 5 s later)", read),
            1: String(format: " (the stream: %.1f MiB read, then an error: its reader fell behind)", read),
            2: String(format: " (the stream: %.1f MiB read, then its end or another error)", read)
        ]
        return String(
            format: "%@, %@: median %.1f ms, worst %.1f ms%@", row.scenario, row.client, row.p50Microseconds / 1000,
            worst / 1000, row.extra?["streamEnded"].flatMap { stream[Int($0)] } ?? "")
    }
    if row.ratioToRaw == nil {
        return String(
            format: "%@, %@: p50 %.0f µs, p99 %.0f µs%@", row.scenario, row.client, row.p50Microseconds, row.p99Microseconds,
            row.failures > 0 ? ", \(row.failures) lines missing" : "")
    }
    let bytes = row.scenario.contains("MiB")
    return String(
        format: "%@, %@: %.0f %@ per second (%.2f× the raw delegate)%@", row.scenario, row.client,
        bytes ? row.requestsPerSecond / 1_048_576 : row.requestsPerSecond, bytes ? "MiB" : "events", row.ratioToRaw ?? 0,
        row.failures > 0 ? ", \(row.failures) runs incomplete" : "")
}
func streamingRows() -> [Row] {
    StreamingBench.run(base: base, events: quick ? 10_000 : 100_000, bytes: quick ? 128 << 20 : 1 << 30, rounds: quick ? 3 : 5)
}
// --stall: only the rows of small GETs beside another manager's slow stream reader.
if arguments.contains("--stall") {
    for row in StreamingBench.stall(base: base, bytes: 200 << 20, requests: 30) { print(streamingLine(row)) }
    childInput.fileHandleForWriting.closeFile()
    child.waitUntilExit()
    exit(0)
}
if arguments.contains("--streaming") {
    for row in streamingRows() { print(streamingLine(row)) }
    childInput.fileHandleForWriting.closeFile()
    child.waitUntilExit()
    exit(0)
}

if arguments.contains("--cache") {
    for row in CacheBench.run(base: base, count: quick ? 100 : 1000) { print(cacheLine(row)) }
    childInput.fileHandleForWriting.closeFile()
    child.waitUntilExit()
    exit(0)
}

// MARK: - Scenarios over the network

/// The rows as a table: one line each, numbers right-aligned.
func printTable(_ rows: [Row]) {
    func number(_ value: Double?, _ digits: Int = 0) -> String { value.map { String(format: "%.\(digits)f", $0) } ?? "-" }
    let header = ["scenario", "client", "in flight", "req/s", "p50 µs", "p99 µs", "CPU µs/req", "× raw"]
    let table = rows.map { row in
        [
            row.scenario, row.client, row.inFlight == 0 ? "-" : String(row.inFlight), number(row.requestsPerSecond),
            number(row.p50Microseconds), number(row.p99Microseconds), number(row.cpuMicrosecondsPerRequest), number(row.ratioToRaw, 2)
        ]
    }
    let widths = header.indices.map { column in ([header] + table).map { $0[column].count }.max() ?? 0 }
    for line in [header] + table {
        print(
            line.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return column >= 2 ? padding + cell : cell + padding
            }.joined(separator: "  "))
    }
}

var rows: [Row] = []
let scale = quick ? 1 : 4
let users = url("/api/users")
for (inFlight, count) in [(1, 150 * scale), (8, 400 * scale), (64, 800 * scale)] {
    progress("GET /api/users, \(inFlight) in flight…")
    rows += compare(
        scenario: "GET /api/users", inFlight: inFlight, count: count, rounds: rounds,
        clients: clients(get: users), baseline: "raw URLSession")
}
progress("POST JSON…")
rows += compare(
    scenario: "POST /api/users JSON", inFlight: 1, count: 150 * scale, rounds: rounds,
    clients: clients(postJSON: users), baseline: "raw URLSession")
for (label, size, count) in [("1 MiB", 1 << 20, 40 * scale), ("16 MiB", 16 << 20, 5 * scale)] {
    progress("\(label) getData…")
    let body = url("/_test/bytes/\(size)")
    let asyncManager = manager()
    rows += compare(
        scenario: "getData \(label)", inFlight: 1, count: count, rounds: rounds,
        clients: [
            ("raw URLSession", raw(rawSession, URLRequest(url: body))),
            ("RestManager", getData(manager(), body)),
            ("RestManager async", { done in Task { done(await asyncManager.getData(fromURL: body) != nil) } }),
            ("tutorial design", tutorial(URLRequest(url: body)))
        ], baseline: "raw URLSession")
}

// --requests: only the request rows above (GET, POST, getData), with the same rounds.
if arguments.contains("--requests") {
    printTable(rows)
    childInput.fileHandleForWriting.closeFile()
    child.waitUntilExit()
    exit(0)
}

// MARK: - Connections used by sequential requests

func serverStats() -> (connections: Int, requests: Int) {
    let done = DispatchSemaphore(value: 0)
    let box = StatsBox()
    rawSession.dataTask(with: url("/_test/stats")) { data, _, _ in
        struct Stats: Decodable { let acceptedConnections: Int; let handledRequests: Int }
        if let stats = data.flatMap({ try? JSONDecoder().decode(Stats.self, from: $0) }) {
            box.set((stats.acceptedConnections, stats.handledRequests))
        }
        done.signal()
    }.resume()
    done.wait()
    return box.value
}

final class StatsBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = (0, 0)
    func set(_ value: (Int, Int)) { lock.lock(); stored = value; lock.unlock() }
    var value: (Int, Int) { lock.lock(); defer { lock.unlock() }; return stored }
}

let sequentialManager = manager()
let before = serverStats()
_ = ClosedLoop.measure(completion(sequentialManager, .get, users), inFlight: 1, count: 200)
let after = serverStats()
let sequentialConnections = after.connections - before.connections

// MARK: - Requests started on the main thread

/// Each request started on the main thread (the first ones from here, the rest from the previous
/// completion, hopped to main), as UI apps and the tutorial do; the main run loop turns meanwhile.
/// Reports the new connections the server accepted for the run.
func mainThreadRow(_ client: String, _ sender: @escaping Sender, inFlight: Int, count: Int) -> Row {
    let onMain: Sender = { done in
        if Thread.isMainThread { sender(done) } else { DispatchQueue.main.async { sender(done) } }
    }
    let before = serverStats().connections
    let sample = ClosedLoop.measure(onMain, inFlight: inFlight, count: count, spinningMainRunLoop: true)
    let connections = serverStats().connections - before
    return Row(
        scenario: "GET started on the main thread", client: client, inFlight: inFlight,
        requestsPerSecond: sample.requestsPerSecond, p50Microseconds: sample.p50Microseconds,
        p99Microseconds: sample.p99Microseconds, cpuMicrosecondsPerRequest: sample.cpuMicrosecondsPerRequest,
        ratioToRaw: nil, failures: sample.failures, extra: ["connections": Double(connections)])
}

var mainThreadRows: [Row] = []
for inFlight in [8, 12] {
    progress("GET started on the main thread, \(inFlight) in flight…")
    // Fresh sessions each, so that the connections counted are this run's (both limited to 6 per host).
    let rawMain = tunedSession()
    let restMain = manager()
    var pair: [Row] = []
    for round in 0..<rounds {
        let raw = mainThreadRow("raw URLSession", raw(rawMain, URLRequest(url: users)), inFlight: inFlight, count: 200 * scale)
        let rest = mainThreadRow("RestManager", completion(restMain, .get, users), inFlight: inFlight, count: 200 * scale)
        pair += round % 2 == 0 ? [raw, rest] : [rest, raw]
    }
    for client in ["raw URLSession", "RestManager"] {
        let runs = pair.filter { $0.client == client }
        let rawRate = Statistics.median(pair.filter { $0.client == "raw URLSession" }.map(\.requestsPerSecond))
        let rate = Statistics.median(runs.map(\.requestsPerSecond))
        mainThreadRows.append(
            Row(
                scenario: "GET started on the main thread", client: client, inFlight: inFlight,
                requestsPerSecond: rate, p50Microseconds: Statistics.median(runs.map(\.p50Microseconds)),
                p99Microseconds: Statistics.median(runs.map(\.p99Microseconds)),
                cpuMicrosecondsPerRequest: Statistics.median(runs.map { $0.cpuMicrosecondsPerRequest ?? 0 }),
                ratioToRaw: rate / rawRate, failures: runs.map(\.failures).reduce(0, +),
                extra: ["connections": Double(runs.map { Int($0.extra?["connections"] ?? 0) }.reduce(0, +))]))
    }
}
rows += mainThreadRows

// MARK: - Large transfers

progress("transfers to and from disk…")
// 4 MiB as well as large: small transfers are where per-call costs show.
let transferRows =
    TransferBench.run(base: base, bytes: 4 << 20, rounds: quick ? 5 : 21)
    + TransferBench.run(base: base, bytes: quick ? 64 << 20 : 1 << 30, rounds: quick ? 1 : 3)
rows += transferRows

// MARK: - The response cache

progress("the response cache…")
let cacheRows = CacheBench.run(base: base, count: quick ? 100 : 1000)
rows += cacheRows

// MARK: - Streaming

progress("streaming…")
let streamRows = streamingRows()
rows += streamRows

// MARK: - Ten thousand requests at once

/// `count` requests started at once from this thread: rate, peak threads, resident memory.
func burstRow(_ client: String, _ sender: @escaping Sender, count: Int) -> Row {
    let residentBefore = Clock.residentBytes()
    let threadsBefore = Clock.threadCount()
    let peak = PeakSample(Clock.threadCount)
    let sample = ClosedLoop.measure(sender, inFlight: count, count: count)
    let peakThreads = peak.stop()
    let residentAfter = Clock.residentBytes()
    return Row(
        scenario: "\(count) GET started at once", client: client, inFlight: count,
        requestsPerSecond: sample.requestsPerSecond, p50Microseconds: sample.p50Microseconds,
        p99Microseconds: sample.p99Microseconds, cpuMicrosecondsPerRequest: sample.cpuMicrosecondsPerRequest,
        ratioToRaw: nil, failures: sample.failures,
        extra: [
            "peakThreads": Double(peakThreads), "threadsBefore": Double(threadsBefore),
            "residentGrowthMiB": Double(residentAfter - residentBefore) / 1_048_576
        ])
}

progress("10,000 requests at once…")
let burst = quick ? 2000 : 10_000
let burstRawRow = burstRow("raw URLSession", raw(tunedSession(), URLRequest(url: users)), count: burst)
let burstRestRow = burstRow("RestManager", completion(manager(), .get, users), count: burst)
let eightInFlight = rows.first { $0.scenario == "GET /api/users" && $0.client == "RestManager" && $0.inFlight == 8 }?.requestsPerSecond ?? 0
let burstRows = [burstRawRow, burstRestRow].map { row -> Row in
    var row = row
    row.extra?["ratioToEightInFlight"] = eightInFlight > 0 ? row.requestsPerSecond / eightInFlight : 0
    return row
}
rows += burstRows

// MARK: - Request preparation, no network

func preparation(_ name: String, client: String, iterations: Int, _ body: @escaping @Sendable () -> Bool) -> Row {
    let sender: Sender = { done in done(body()) }
    let runs = (0..<3).map { _ in ClosedLoop.measure(sender, inFlight: 1, count: iterations) }
    return Row(
        scenario: name, client: client, inFlight: 0,
        requestsPerSecond: Statistics.median(runs.map(\.requestsPerSecond)),
        p50Microseconds: Statistics.median(runs.map(\.p50Microseconds)),
        p99Microseconds: Statistics.median(runs.map(\.p99Microseconds)),
        cpuMicrosecondsPerRequest: Statistics.median(runs.map(\.cpuMicrosecondsPerRequest)),
        ratioToRaw: nil, failures: runs.map(\.failures).reduce(0, +))
}

progress("request preparation…")
let queryManager = manager { rest in for index in 0..<1000 { rest.urlQueryParameters.add(value: "value \(index)+&", forKey: "key\(index)") } }
let formManager = manager { rest in
    rest.requestHttpHeaders.add(value: "application/x-www-form-urlencoded", forKey: "Content-Type")
    for index in 0..<100 { rest.httpBodyParameters.add(value: "value \(index) é+&", forKey: "field\(index)") }
}
let multipartManager = manager { rest in
    rest.httpBodyParameters.add(value: "holiday", forKey: "title")
    rest.addFile(Data(repeating: 0xAB, count: 1 << 20), fieldName: "photo", fileName: "big.bin", mimeType: "application/octet-stream")
}
let target = url("/upload")
let iterations = quick ? 200 : 1000
let queryItems = (0..<1000).map { URLQueryItem(name: "key\($0)", value: "value \($0)+&") }
let preparationRows = [
    preparation("prepare: 1,000 query parameters", client: "RestManager", iterations: iterations) {
        (try? queryManager.makeURLRequest(toURL: target, withHttpMethod: .get)) != nil
    },
    preparation("prepare: 1,000 query parameters", client: "URLComponents.queryItems", iterations: iterations) {
        var components = URLComponents(url: target, resolvingAgainstBaseURL: false)
        components?.queryItems = queryItems
        return components?.url.map { URLRequest(url: $0) } != nil
    },
    preparation("prepare: form body, 100 fields", client: "RestManager", iterations: iterations) {
        (try? formManager.makeURLRequest(toURL: target, withHttpMethod: .post))?.httpBody != nil
    },
    preparation("prepare: multipart 1 MiB", client: "RestManager", iterations: quick ? 50 : 200) {
        (try? multipartManager.makeURLRequest(toURL: target, withHttpMethod: .post))?.httpBody?.count ?? 0 > 1 << 20
    }
]
rows += preparationRows

// MARK: - The mock server alone

progress("mock server alone…")
func serverAlone(connections: Int, seconds: Double) -> Row {
    let request = Array("GET /api/users/2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
    let group = DispatchGroup()
    let box = LatencyBox()
    let deadline = Clock.nanoseconds() + UInt64(seconds * 1e9)
    for _ in 0..<connections {
        group.enter()
        Thread {
            defer { group.leave() }
            guard let socket = BenchSocket(port: port) else { return }
            var latencies: [UInt64] = []
            while Clock.nanoseconds() < deadline {
                let started = Clock.nanoseconds()
                guard socket.roundTrip(request) else { break }
                latencies.append(Clock.nanoseconds() - started)
            }
            box.add(latencies)
        }.start()
    }
    group.wait()
    let sorted = box.all.sorted()
    return Row(
        scenario: "mock server alone", client: "raw sockets, keep-alive", inFlight: connections,
        requestsPerSecond: Double(sorted.count) / seconds, p50Microseconds: Statistics.percentileMicroseconds(sorted, 0.5),
        p99Microseconds: Statistics.percentileMicroseconds(sorted, 0.99), cpuMicrosecondsPerRequest: nil, ratioToRaw: nil, failures: 0)
}

final class LatencyBox: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [UInt64] = []
    func add(_ more: [UInt64]) { lock.lock(); values += more; lock.unlock() }
    var all: [UInt64] { lock.lock(); defer { lock.unlock() }; return values }
}

rows += [serverAlone(connections: 8, seconds: quick ? 1 : 3), serverAlone(connections: 64, seconds: quick ? 1 : 3)]

// MARK: - Memory

progress("memory…")
/// Watches every 100th request handle it is offered: watching each would itself grow the heap being measured.
final class WeakHandles: @unchecked Sendable {
    private let lock = NSLock()
    private var offered = 0
    private var handles: [() -> AnyObject?] = []
    func offer(_ handle: AnyObject) {
        lock.lock()
        if offered % 100 == 0 { handles.append { [weak handle] in handle } }
        offered += 1
        lock.unlock()
    }
    var alive: Int { lock.lock(); defer { lock.unlock() }; return handles.filter { $0() != nil }.count }
}

/// Live-heap growth per request over `requests` sequential requests (after a warm-up).
func memoryRow(_ client: String, _ sender: @escaping Sender, requests: Int, tracked: WeakHandles? = nil) -> Row {
    _ = ClosedLoop.measure(sender, inFlight: 1, count: 500)
    let start = heap_statistics_live_bytes()
    let sample = ClosedLoop.measure(sender, inFlight: 1, count: requests)
    let end = heap_statistics_live_bytes()
    let growth = (Double(end) - Double(start)) / Double(requests)
    var extra = ["heapGrowthBytesPerRequest": growth]
    if let tracked {
        // The last completion may still be returning on its queue: give it up to a second.
        let deadline = Clock.nanoseconds() + 1_000_000_000
        while tracked.alive > 0 && Clock.nanoseconds() < deadline { sched_yield() }
        extra["requestHandlesAliveAfterCompletion"] = Double(tracked.alive)
    }
    return Row(
        scenario: "memory: \(requests) sequential GET", client: client, inFlight: 1,
        requestsPerSecond: sample.requestsPerSecond, p50Microseconds: sample.p50Microseconds,
        p99Microseconds: sample.p99Microseconds, cpuMicrosecondsPerRequest: sample.cpuMicrosecondsPerRequest,
        ratioToRaw: nil, failures: sample.failures, extra: extra)
}

let memoryRequests = quick ? 3000 : 20000
let memoryManager = manager()
let tracked = WeakHandles()
let trackedSender: Sender = { done in
    tracked.offer(memoryManager.makeRequest(toURL: users, withHttpMethod: .get) { done($0.isSuccess) })
}
let memoryRows = [
    memoryRow("raw URLSession", raw(rawSession, URLRequest(url: users)), requests: memoryRequests),
    memoryRow("raw URLSession + delegate", raw(delegateSession, URLRequest(url: users)), requests: memoryRequests),
    memoryRow("RestManager", trackedSender, requests: memoryRequests, tracked: tracked)
]
rows += memoryRows
let peakResident = Clock.peakResidentBytes()

childInput.fileHandleForWriting.closeFile()
child.waitUntilExit()

if let svgPath {
    do { try Data(Chart.svg(rows).utf8).write(to: URL(fileURLWithPath: svgPath)) } catch {
        progress("restbench: cannot write \(svgPath): \(error.localizedDescription)")
        exit(74)
    }
}

// MARK: - Report

if json {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    rows.append(
        Row(
            scenario: "process", client: "restbench", inFlight: 0, requestsPerSecond: 0, p50Microseconds: 0,
            p99Microseconds: 0, cpuMicrosecondsPerRequest: nil, ratioToRaw: nil, failures: 0,
            extra: ["peakResidentBytes": Double(peakResident), "sequentialConnections": Double(sequentialConnections)]))
    FileHandle.standardOutput.write(((try? encoder.encode(rows)) ?? Data("[]".utf8)) + Data("\n".utf8))
} else {
    printTable(rows)
    print("")
    for row in rows where row.failures > 0 { print("\(row.scenario), \(row.client): \(row.failures) requests failed") }
    for row in memoryRows {
        let growth = row.extra?["heapGrowthBytesPerRequest"] ?? 0
        let alive = row.extra?["requestHandlesAliveAfterCompletion"].map { ", request handles alive after completion: \(Int($0))" } ?? ""
        print("\(row.scenario), \(row.client): live heap growth \(String(format: "%.2f", growth)) bytes/request\(alive)")
    }
    for row in mainThreadRows {
        print(
            "\(row.scenario), \(row.client), \(row.inFlight) in flight: \(Int(row.extra?["connections"] ?? 0)) TCP connections over \(rounds) runs (limit 6 per run)"
        )
    }
    for row in transferRows {
        let extra = row.extra ?? [:]
        print(
            String(
                format: "%@, %@: %.0f MiB/s (%.2f× the first), resident memory at most %+.1f MiB during the transfer",
                row.scenario, row.client, extra["mebibytesPerSecond"] ?? 0, row.ratioToRaw ?? 0, extra["residentGrowthMiB"] ?? 0))
    }
    for row in cacheRows { print(cacheLine(row)) }
    for row in streamRows { print(streamingLine(row)) }
    for row in burstRows {
        let extra = row.extra ?? [:]
        print(
            String(
                format: "%@, %@: %.2f× RestManager's 8-in-flight rate, peak threads %d (%d before), resident memory %+.1f MiB after",
                row.scenario, row.client, extra["ratioToEightInFlight"] ?? 0, Int(extra["peakThreads"] ?? 0),
                Int(extra["threadsBefore"] ?? 0), extra["residentGrowthMiB"] ?? 0))
    }
    print("peak RSS: \(peakResident / 1024 / 1024) MiB; TCP connections used by 200 sequential RestManager requests: \(sequentialConnections)")
    print(quick ? "(--quick: \(rounds) rounds, small counts)" : "(\(rounds) rounds per scenario, clients rotated each round; medians)")
}
