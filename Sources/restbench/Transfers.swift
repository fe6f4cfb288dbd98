// Large transfers: downloads to disk and uploads from disk through RestManager, raw URLSession's
// download and upload tasks, and curl when installed: throughput and resident memory growth.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Dispatch
import RestManager

enum TransferBench {
    /// One transfer; calls `done` with whether the bytes all arrived.
    typealias Transfer = @Sendable (_ done: @escaping @Sendable (Bool) -> Void) -> Void

    static let curl: URL? = ["/usr/bin/curl", "/usr/local/bin/curl", "/opt/homebrew/bin/curl"]
        .map { URL(fileURLWithPath: $0) }.first { FileManager.default.isExecutableFile(atPath: $0.path) }

    /// Each client `rounds` times, rotated; median time, and the largest growth of resident memory
    /// over what it was when the transfer started.
    static func compare(
        _ scenario: String, bytes: Int, rounds: Int, clients: [(name: String, run: Transfer)],
        before: () -> Void
    ) -> [Row] {
        var seconds: [String: [Double]] = [:]
        var growth: [String: Double] = [:]
        var failures: [String: Int] = [:]
        for round in 0..<rounds {
            for index in clients.indices {
                let client = clients[(index + round) % clients.count]
                before()
                let residentBefore = Clock.residentBytes()
                let peak = PeakSample(Clock.residentBytes)
                let started = Clock.nanoseconds()
                let finished = DispatchSemaphore(value: 0)
                let outcome = Outcome()
                client.run { success in
                    outcome.set(success)
                    finished.signal()
                }
                finished.wait()
                seconds[client.name, default: []].append(Double(Clock.nanoseconds() - started) / 1e9)
                growth[client.name] = max(growth[client.name] ?? 0, Double(peak.stop() - residentBefore) / 1_048_576)
                if !outcome.succeeded { failures[client.name, default: 0] += 1 }
            }
        }
        let rawTimes = seconds[clients[0].name] ?? []
        return clients.map { client in
            let times = seconds[client.name] ?? []
            let ratios = zip(rawTimes, times).map { $0 / $1 }
            let median = Statistics.median(times)
            return Row(
                scenario: scenario, client: client.name, inFlight: 1, requestsPerSecond: 1 / median,
                p50Microseconds: median * 1e6, p99Microseconds: (times.max() ?? 0) * 1e6, cpuMicrosecondsPerRequest: nil,
                ratioToRaw: Statistics.median(rawTimes) / median, failures: failures[client.name] ?? 0,
                extra: [
                    "mebibytesPerSecond": Double(bytes) / median / 1_048_576, "residentGrowthMiB": growth[client.name] ?? 0,
                    "ratioMin": ratios.min() ?? 0, "ratioMax": ratios.max() ?? 0
                ])
        }
    }

    static func run(base: String, bytes: Int, rounds: Int) -> [Row] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("restbench-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let destination = folder.appendingPathComponent("download.bin")
        let source = folder.appendingPathComponent("upload.bin")
        let downloadURL = URL(string: "\(base)/_test/files/\(bytes)")!  // our own literals and port
        let uploadURL = URL(string: "\(base)/_test/upload")!
        let session = URLSession(configuration: .ephemeral)
        let rest = RestManager()
        rest.timeoutInterval = 3600
        let size = { @Sendable (url: URL) in ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.intValue ?? -1 }

        var downloads: [(name: String, run: Transfer)] = [
            (
                "raw URLSession downloadTask",
                { done in
                    session.downloadTask(with: downloadURL) { location, _, error in
                        guard let location, error == nil else { return done(false) }
                        done((try? FileManager.default.moveItem(at: location, to: destination)) != nil && size(destination) == bytes)
                    }.resume()
                }
            ),
            (
                "RestManager download",
                { done in
                    rest.download(fromURL: downloadURL, to: destination) { result in done((try? result.get()) != nil && size(destination) == bytes) }
                }
            )
        ]
        if let curl { downloads.append(("curl", { done in done(runCurl(curl, ["-sf", "-o", destination.path, downloadURL.absoluteString])) })) }
        var rows = compare("download \(bytes >> 20) MiB to a file", bytes: bytes, rounds: rounds, clients: downloads) {
            try? FileManager.default.removeItem(at: destination)
        }

        writePattern(to: source, bytes: bytes)
        let received = { @Sendable (data: Data?) in String(decoding: data ?? Data(), as: UTF8.self).contains("\"bytes\":\(bytes),") }
        var uploads: [(name: String, run: Transfer)] = [
            (
                "raw URLSession uploadTask",
                { done in
                    var request = URLRequest(url: uploadURL)
                    request.httpMethod = "POST"
                    session.uploadTask(with: request, fromFile: source) { data, _, error in done(error == nil && received(data)) }.resume()
                }
            ),
            (
                "RestManager upload",
                { done in
                    rest.upload(fileAt: source, toURL: uploadURL) { results in done(results.isSuccess && received(results.data)) }
                }
            ),
            (
                "RestManager upload with progress",
                { done in
                    rest.upload(fileAt: source, toURL: uploadURL, progress: { _ in }) { results in
                        done(results.isSuccess && received(results.data))
                    }
                }
            )
        ]
        if let curl {
            uploads.append(
                (
                    "curl",
                    { done in
                        done(runCurl(curl, ["-sf", "-o", "/dev/null", "-X", "POST", "-H", "Expect:", "-T", source.path, uploadURL.absoluteString]))
                    }
                ))
        }
        rows += compare("upload \(bytes >> 20) MiB from a file", bytes: bytes, rounds: rounds, clients: uploads) {}
        return rows
    }

    private static func runCurl(_ curl: URL, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = curl
        process.arguments = arguments
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// A file of `bytes` bytes of the mock's pattern, written in 1 MiB pieces.
    private static func writePattern(to file: URL, bytes: Int) {
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        guard let handle = try? FileHandle(forWritingTo: file) else { return }
        let block = Data((0..<(1 << 20)).map { UInt8($0 % 251) })
        var left = bytes
        while left > 0 {
            handle.write(block.prefix(left))
            left -= min(left, block.count)
        }
        try? handle.close()
    }
}

/// Whether a transfer succeeded, set from its callback.
final class Outcome: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set(_ succeeded: Bool) { lock.withLock { value = succeeded } }
    var succeeded: Bool { lock.withLock { value } }
}
