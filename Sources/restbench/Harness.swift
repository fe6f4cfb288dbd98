// Measurement: a closed loop with N requests in flight, latencies, CPU time, medians over rounds.

import Foundation
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts one request and calls `done` (with success) when it completes.
typealias Sender = @Sendable (_ done: @escaping @Sendable (Bool) -> Void) -> Void

/// One measured run.
struct Sample {
    var requestsPerSecond: Double
    var p50Microseconds: Double
    var p99Microseconds: Double
    var cpuMicrosecondsPerRequest: Double
    var failures: Int
}

/// One row of the report.
struct Row: Encodable {
    let scenario: String
    let client: String
    let inFlight: Int
    let requestsPerSecond: Double
    let p50Microseconds: Double
    let p99Microseconds: Double
    let cpuMicrosecondsPerRequest: Double?
    let ratioToRaw: Double?
    let failures: Int
    /// Scenario-specific measurements (memory rows: heap growth, objects alive).
    var extra: [String: Double]? = nil
}

enum Clock {
    #if os(Linux)
    private static let selfUsage = RUSAGE_SELF.rawValue
    #else
    private static let selfUsage = RUSAGE_SELF
    #endif

    static func nanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// User plus system CPU time of this process, in microseconds.
    static func cpuMicroseconds() -> Double {
        var usage = rusage()
        getrusage(selfUsage, &usage)
        func micro(_ time: timeval) -> Double { Double(time.tv_sec) * 1_000_000 + Double(time.tv_usec) }
        return micro(usage.ru_utime) + micro(usage.ru_stime)
    }

    /// Resident set size now, in bytes (Linux; 0 elsewhere).
    static func residentBytes() -> Int {
        statusField("VmRSS:").map { $0 * 1024 } ?? 0
    }

    /// Threads of this process now (Linux; 0 elsewhere).
    static func threadCount() -> Int {
        statusField("Threads:") ?? 0
    }

    private static func statusField(_ name: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) })
        else { return nil }
        return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Int($0) }
    }

    /// Peak resident set size in bytes.
    static func peakResidentBytes() -> Int {
        var usage = rusage()
        getrusage(selfUsage, &usage)
        #if os(Linux)
        return usage.ru_maxrss * 1024
        #else
        return usage.ru_maxrss
        #endif
    }
}

/// Runs `count` requests with `inFlight` outstanding at any time.
final class ClosedLoop: @unchecked Sendable {
    private let lock = NSLock()
    private let sender: Sender
    private let count: Int
    private var issued = 0
    private var completed = 0
    private var failures = 0
    private var latencies: [UInt64]
    private let finished = DispatchSemaphore(value: 0)

    init(sender: @escaping Sender, count: Int) {
        self.sender = sender
        self.count = count
        latencies = [UInt64](repeating: 0, count: count)
    }

    /// `spinningMainRunLoop`: called on the main thread, which keeps running the main run loop
    /// (and so the main queue) while it waits, as an app's main thread does.
    static func measure(_ sender: @escaping Sender, inFlight: Int, count: Int, spinningMainRunLoop: Bool = false) -> Sample {
        ClosedLoop(sender: sender, count: count).run(inFlight: inFlight, spinning: spinningMainRunLoop)
    }

    private func run(inFlight: Int, spinning: Bool) -> Sample {
        let cpuStart = Clock.cpuMicroseconds()
        let start = Clock.nanoseconds()
        for _ in 0..<min(inFlight, count) { launch() }
        if spinning {
            while finished.wait(timeout: .now()) == .timedOut { _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.001)) }
        } else {
            finished.wait()
        }
        let elapsed = Double(Clock.nanoseconds() - start) / 1e9
        let cpu = Clock.cpuMicroseconds() - cpuStart
        let sorted = latencies.sorted()
        return Sample(
            requestsPerSecond: Double(count) / elapsed, p50Microseconds: Statistics.percentileMicroseconds(sorted, 0.5),
            p99Microseconds: Statistics.percentileMicroseconds(sorted, 0.99), cpuMicrosecondsPerRequest: cpu / Double(count), failures: failures)
    }

    private func launch() {
        lock.lock()
        guard issued < count else { lock.unlock(); return }
        let index = issued
        issued += 1
        lock.unlock()
        let started = Clock.nanoseconds()
        sender { [self] success in
            let latency = Clock.nanoseconds() - started
            lock.lock()
            latencies[index] = latency
            completed += 1
            if !success { failures += 1 }
            let done = completed == count
            lock.unlock()
            if done { finished.signal() } else { launch() }
        }
    }
}

enum Statistics {
    /// The `fraction` percentile of sorted nanosecond latencies, in microseconds (0 when empty).
    static func percentileMicroseconds(_ sorted: [UInt64], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]) / 1000
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}

/// Several rounds, clients in rotated order each round; medians of rates, latencies and ratios.
func compare(
    scenario: String, inFlight: Int, count: Int, rounds: Int,
    clients: [(name: String, sender: Sender)], baseline: String
) -> [Row] {
    for client in clients { _ = ClosedLoop.measure(client.sender, inFlight: inFlight, count: max(20, count / 10)) }  // warm up
    var samples: [String: [Sample]] = [:]
    var ratios: [String: [Double]] = [:]
    for round in 0..<rounds {
        var thisRound: [String: Sample] = [:]
        for offset in 0..<clients.count {
            let client = clients[(round + offset) % clients.count]
            thisRound[client.name] = ClosedLoop.measure(client.sender, inFlight: inFlight, count: count)
        }
        for (name, sample) in thisRound {
            samples[name, default: []].append(sample)
            if let raw = thisRound[baseline] { ratios[name, default: []].append(sample.requestsPerSecond / raw.requestsPerSecond) }
        }
    }
    return clients.map { client in
        let runs = samples[client.name] ?? []
        return Row(
            scenario: scenario, client: client.name, inFlight: inFlight,
            requestsPerSecond: Statistics.median(runs.map(\.requestsPerSecond)),
            p50Microseconds: Statistics.median(runs.map(\.p50Microseconds)),
            p99Microseconds: Statistics.median(runs.map(\.p99Microseconds)),
            cpuMicrosecondsPerRequest: Statistics.median(runs.map(\.cpuMicrosecondsPerRequest)),
            ratioToRaw: ratios[client.name].map(Statistics.median),
            failures: runs.map(\.failures).reduce(0, +),
            extra: ratios[client.name].map { ["ratioMin": $0.min() ?? 0, "ratioMax": $0.max() ?? 0] })
    }
}

/// The largest value `sample` returns while it runs (threads, resident memory), sampled every millisecond.
final class PeakSample: @unchecked Sendable {
    private let lock = NSLock()
    private var peak: Int
    private var running = true
    private let stopped = DispatchSemaphore(value: 0)

    init(_ sample: @escaping @Sendable () -> Int) {
        peak = sample()
        Thread { [self] in
            while lock.withLock({ running }) {
                let now = sample()
                lock.withLock { peak = max(peak, now) }
                usleep(1000)
            }
            stopped.signal()
        }.start()
    }

    func stop() -> Int {
        lock.withLock { running = false }
        stopped.wait()
        return lock.withLock { peak }
    }
}

/// A bar chart of each row's ratio to raw URLSession (median bar, min–max whisker, a line at 1.0×),
/// as plain SVG written by hand.
enum Chart {
    static func svg(_ rows: [Row]) -> String {
        let bars = rows.filter { $0.ratioToRaw != nil && $0.client != "raw URLSession" }
        let rowHeight = 22.0
        let left = 430.0
        let width = 360.0
        let top = 40.0
        let maximum = max(1.6, (bars.compactMap { $0.extra?["ratioMax"] ?? $0.ratioToRaw }.max() ?? 1) * 1.05)
        func x(_ ratio: Double) -> Double { left + width * ratio / maximum }
        func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        }
        let height = top + rowHeight * Double(bars.count) + 40
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(left + width + 60))" height="\(Int(height))" font-family="sans-serif" font-size="12">
            <text x="10" y="20" font-size="14" font-weight="bold">Requests per second relative to raw URLSession (same run; bar: median, whisker: min–max of the rounds)</text>

            """
        for (index, row) in bars.enumerated() {
            let y = top + rowHeight * Double(index)
            let ratio = row.ratioToRaw ?? 0
            let label = "\(row.scenario) · \(row.client)" + (row.inFlight > 1 ? " · \(row.inFlight) in flight" : "")
            let colour = row.client.hasPrefix("RestManager") ? "#2b6cb0" : row.client.hasPrefix("tutorial") ? "#c05621" : "#718096"
            svg += "<text x=\"10\" y=\"\(y + 15)\">\(escape(label))</text>\n"
            svg += "<rect x=\"\(left)\" y=\"\(y + 4)\" width=\"\(x(ratio) - left)\" height=\"14\" fill=\"\(colour)\"/>\n"
            if let low = row.extra?["ratioMin"], let high = row.extra?["ratioMax"] {
                svg += "<line x1=\"\(x(low))\" x2=\"\(x(high))\" y1=\"\(y + 11)\" y2=\"\(y + 11)\" stroke=\"black\"/>\n"
            }
            svg += "<text x=\"\(x(max(ratio, row.extra?["ratioMax"] ?? 0)) + 4)\" y=\"\(y + 15)\">\(String(format: "%.2f×", ratio))</text>\n"
        }
        let one = x(1)
        svg += "<line x1=\"\(one)\" x2=\"\(one)\" y1=\"\(top - 4)\" y2=\"\(height - 30)\" stroke=\"#e53e3e\" stroke-dasharray=\"4 3\"/>\n"
        svg += "<text x=\"\(one - 12)\" y=\"\(height - 16)\">1.0×</text>\n</svg>\n"
        return svg
    }
}
