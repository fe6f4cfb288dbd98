// Streaming: Server-Sent Events and streamed chunks through RestManager (`events(for:)`, `stream(_:)`) against the
// physical limit here, a raw URLSession data delegate feeding a minimal parser of its own; and the latency from the
// server's write to the reader, with a server in this process that stamps each line with the time it is written.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import RestManager

enum StreamingBench {
    static func run(base: String, events: Int, bytes: Int, rounds: Int) -> [Row] {
        var rows: [Row] = []
        let eventsURL = URL(string: base + "/_test/events?interval=0&count=\(events)")
        let bytesURL = URL(string: base + "/_test/bytes/\(bytes)")
        guard let eventsURL, let bytesURL else { return [] }
        let eventClients: [(String, () -> Int)] = [
            ("raw URLSession data delegate + minimal parser", { RawStream.run(eventsURL, countingEvents: true) }),
            ("RestManager events(for:)", { countEvents(eventsURL) })
        ]
        rows += compare("\(events) small Server-Sent Events", unit: events, rounds: rounds, eventClients)
        let byteClients: [(String, () -> Int)] = [
            ("raw URLSession data delegate", { RawStream.run(bytesURL, countingEvents: false) }),
            ("RestManager stream(_:)", { countBytes(bytesURL) })
        ]
        rows += compare("\(bytes >> 20) MiB of streamed chunks", unit: bytes, rounds: rounds, byteClients)
        rows += latency(lines: 2000)
        rows += stall(base: base, bytes: bytes, requests: 30)
        return rows
    }

    /// `requests` small GETs one at a time on one manager, alone, then while another manager streams `bytes` to a
    /// reader that sleeps 300 ms per chunk (so it falls behind at once): the GETs' median and worst latency each time,
    /// and how the stream ended. The goal: the worst within 250 ms of the worst alone.
    static func stall(base: String, bytes: Int, requests: Int) -> [Row] {
        guard let users = URL(string: base + "/api/users"), let stream = URL(string: base + "/_test/bytes/\(bytes)")
        else { return [] }
        let getter = RestManager()
        let latencies = {
            (0..<requests).map { _ -> Double in
                let started = Clock.nanoseconds()
                _ = wait { await getter.makeRequest(toURL: users, withHttpMethod: .get).isSuccess ? 1 : 0 }
                return Double(Clock.nanoseconds() - started) / 1000
            }.sorted()
        }
        let alone = latencies()
        let reading = Counter()
        // 1 once the stream ended because its reader fell behind, 2 once it ended otherwise (its end, another error).
        let ended = Counter()
        let streamer = Task.detached {
            guard let (body, _) = try? await RestManager().stream(RestManager.Request(url: stream)) else { return }
            do {
                for try await chunk in body {
                    reading.add(chunk.count)
                    try await Task.sleep(nanoseconds: 300_000_000)
                }
                ended.add(2)
            } catch RestManager.CustomError.transport(let error) where error.code == .dataLengthExceedsMaximum {
                ended.add(1)
            } catch { ended.add(2) }
        }
        // The reader is behind once its first chunk came and the next one waits for it.
        while reading.value == 0 { usleep(10_000) }
        usleep(500_000)
        let beside = latencies()
        // How the stream ended (its reader takes what is left, then meets the end): the row says which it was.
        for _ in 0..<500 where ended.value == 0 { usleep(10_000) }
        let standing: [String: Double] = ["streamReadBytes": Double(reading.value), "streamEnded": Double(ended.value)]
        streamer.cancel()
        return [("alone", alone), ("beside another manager's slow stream reader", beside)].map { client, values in
            let worst: [String: Double] = ["worstMicroseconds": values[values.count - 1]]
            return Row(
                scenario: "\(requests) small GETs", client: client, inFlight: 1, requestsPerSecond: 0,
                p50Microseconds: values[values.count / 2], p99Microseconds: values[values.count - 1],
                cpuMicrosecondsPerRequest: nil, ratioToRaw: nil, failures: 0,
                extra: client == "alone" ? worst : worst.merging(standing) { $1 })
        }
    }

    /// Each client `rounds` times, rotated; the median rate of units (events or bytes) per second.
    private static func compare(_ scenario: String, unit: Int, rounds: Int, _ clients: [(String, () -> Int)]) -> [Row] {
        var rates: [String: [Double]] = [:]
        var failures: [String: Int] = [:]
        for round in 0..<rounds {
            for index in clients.indices {
                let (name, run) = clients[(index + round) % clients.count]
                let started = Clock.nanoseconds()
                let received = run()
                let seconds = Double(Clock.nanoseconds() - started) / 1e9
                rates[name, default: []].append(Double(received) / seconds)
                if received != unit { failures[name, default: 0] += 1 }
            }
        }
        let median = { (name: String) -> Double in
            let sorted = (rates[name] ?? [0]).sorted()
            return sorted[sorted.count / 2]
        }
        let raw = median(clients[0].0)
        return clients.map { name, _ in
            Row(
                scenario: scenario, client: name, inFlight: 1, requestsPerSecond: median(name), p50Microseconds: 0,
                p99Microseconds: 0, cpuMicrosecondsPerRequest: nil, ratioToRaw: median(name) / raw,
                failures: failures[name] ?? 0)
        }
    }

    /// Runs `body` off the main thread and waits for it.
    private static func wait(_ body: @escaping @Sendable () async -> Int) -> Int {
        let done = DispatchSemaphore(value: 0)
        let result = Counter()
        Task.detached {
            result.add(await body())
            done.signal()
        }
        done.wait()
        return result.value
    }

    private static func countEvents(_ url: URL) -> Int {
        wait {
            var count = 0
            do {
                for try await event in RestManager().events(for: RestManager.Request(url: url)) {
                    if event.event == "done" { break }
                    count += 1
                }
            } catch { return -1 }
            return count
        }
    }

    private static func countBytes(_ url: URL) -> Int {
        wait {
            var count = 0
            do {
                let (body, _) = try await RestManager().stream(RestManager.Request(url: url))
                for try await chunk in body { count += chunk.count }
            } catch { return -1 }
            return count
        }
    }

    // MARK: - Latency

    /// A server here writes `lines` lines 1 ms apart, each the monotonic time it was written; each client reads
    /// them as they come and notes how late each arrived.
    private static func latency(lines: Int) -> [Row] {
        let clients: [(String, (URL) -> [Double])] = [
            ("raw URLSession data delegate", { RawStream.latencies($0) }),
            (
                "RestManager stream(_:).lines",
                { url in
                    let collected = Latencies()
                    _ = wait {
                        guard let (body, _) = try? await RestManager().stream(RestManager.Request(url: url)) else { return 0 }
                        do {
                            for try await line in body.lines { collected.note(line) }
                        } catch { return 0 }
                        return 0
                    }
                    return collected.values
                }
            )
        ]
        var rows: [Row] = []
        for (name, read) in clients {
            guard let server = StampingServer(lines: lines) else { return rows }
            let values = read(server.address).sorted()
            server.stop()
            let percentile = { (fraction: Double) in values.isEmpty ? 0 : values[min(values.count - 1, Int(Double(values.count) * fraction))] }
            rows.append(
                Row(
                    scenario: "latency from the server's write to the reader (\(lines) lines, 1 ms apart)", client: name,
                    inFlight: 1, requestsPerSecond: 0, p50Microseconds: percentile(0.5), p99Microseconds: percentile(0.99),
                    cpuMicrosecondsPerRequest: nil, ratioToRaw: nil, failures: lines - values.count))
        }
        return rows
    }

    /// Latencies in microseconds, from lines holding the write time in nanoseconds.
    final class Latencies: @unchecked Sendable {
        private let lock = NSLock()
        private var collected: [Double] = []

        func note(_ line: String) {
            guard let sent = UInt64(line) else { return }
            let now = DispatchTime.now().uptimeNanoseconds
            lock.withLock { collected.append(Double(now &- sent) / 1000) }
        }

        var values: [Double] { lock.withLock { collected } }
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var total = 0
        func add(_ count: Int) { lock.withLock { total += count } }
        var value: Int { lock.withLock { total } }
    }
}

/// The baseline: a data delegate on its own session, splitting lines at LF and counting SSE events at blank lines
/// (or counting bytes), or noting latencies.
final class RawStream: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let countingEvents: Bool
    private let latencies: StreamingBench.Latencies?
    private var partial: [UInt8] = []
    private var count = 0
    private var hasData = false
    private let done = DispatchSemaphore(value: 0)

    private init(countingEvents: Bool, latencies: StreamingBench.Latencies?) {
        self.countingEvents = countingEvents
        self.latencies = latencies
    }

    static func run(_ url: URL, countingEvents: Bool) -> Int {
        let reader = RawStream(countingEvents: countingEvents, latencies: nil)
        reader.start(url)
        return reader.count
    }

    static func latencies(_ url: URL) -> [Double] {
        let collected = StreamingBench.Latencies()
        RawStream(countingEvents: false, latencies: collected).start(url)
        return collected.values
    }

    private func start(_ url: URL) {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: .ephemeral, delegate: self, delegateQueue: queue)
        session.dataTask(with: url).resume()
        done.wait()
        session.invalidateAndCancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard countingEvents || latencies != nil else {
            count += data.count
            return
        }
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var start = 0
            for index in 0..<bytes.count where bytes[index] == 10 {
                partial.append(contentsOf: bytes[start..<index])
                line(String(decoding: partial, as: UTF8.self))
                partial.removeAll(keepingCapacity: true)
                start = index + 1
            }
            partial.append(contentsOf: bytes[start..<bytes.count])
        }
    }

    private func line(_ text: String) {
        if let latencies { return latencies.note(text) }
        if text.isEmpty {
            if hasData { count += 1 }
            hasData = false
        } else if text.hasPrefix("data:") && !text.hasPrefix("data: [DONE]") {
            hasData = true
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) { done.signal() }
}

/// A chunked HTTP server for one connection: writes `lines` lines, each the monotonic time in nanoseconds when it is
/// written, 1 ms apart.
final class StampingServer: @unchecked Sendable {
    private let listener: Int32
    private let port: UInt16
    private let finished = DispatchSemaphore(value: 0)

    init?(lines: Int) {
        #if os(Linux)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(descriptor, pointer, length) == 0 && listen(descriptor, 4) == 0
                    && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else {
            close(descriptor)
            return nil
        }
        listener = descriptor
        port = UInt16(bigEndian: address.sin_port)
        let finished = self.finished
        Thread.detachNewThread {
            Self.serve(descriptor, lines: lines)
            finished.signal()
        }
    }

    var address: URL { URL(string: "http://127.0.0.1:\(port)/stamps") ?? URL(fileURLWithPath: "/") }

    func stop() {
        finished.wait()
        close(listener)
    }

    private static func serve(_ listener: Int32, lines: Int) {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        defer { close(connection) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var head: [UInt8] = []
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            head += buffer[..<count]
        }
        var one: Int32 = 1
        setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        guard writeAll(connection, Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)) else { return }
        for _ in 0..<lines {
            usleep(1000)
            let line = "\(DispatchTime.now().uptimeNanoseconds)\n"
            guard writeAll(connection, Array("\(String(line.utf8.count, radix: 16))\r\n\(line)\r\n".utf8)) else { return }
        }
        _ = writeAll(connection, Array("0\r\n\r\n".utf8))
        usleep(100_000)
    }

    private static func writeAll(_ connection: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
