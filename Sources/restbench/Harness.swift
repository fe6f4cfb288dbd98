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
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return nil }
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
        return Sample(requestsPerSecond: Double(count) / elapsed, p50Microseconds: Statistics.percentileMicroseconds(sorted, 0.5),
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
func compare(scenario: String, inFlight: Int, count: Int, rounds: Int,
             clients: [(name: String, sender: Sender)], baseline: String) -> [Row] {
    for client in clients { _ = ClosedLoop.measure(client.sender, inFlight: inFlight, count: max(20, count / 10)) } // warm up
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
        return Row(scenario: scenario, client: client.name, inFlight: inFlight,
                   requestsPerSecond: Statistics.median(runs.map(\.requestsPerSecond)),
                   p50Microseconds: Statistics.median(runs.map(\.p50Microseconds)),
                   p99Microseconds: Statistics.median(runs.map(\.p99Microseconds)),
                   cpuMicrosecondsPerRequest: Statistics.median(runs.map(\.cpuMicrosecondsPerRequest)),
                   ratioToRaw: ratios[client.name].map(Statistics.median),
                   failures: runs.map(\.failures).reduce(0, +))
    }
}

/// Samples the process's thread count every millisecond until stopped; returns the peak.
final class PeakThreads: @unchecked Sendable {
    private let lock = NSLock()
    private var peak = Clock.threadCount()
    private var running = true
    private let stopped = DispatchSemaphore(value: 0)

    init() {
        Thread { [self] in
            while lock.withLock({ running }) {
                let now = Clock.threadCount()
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
