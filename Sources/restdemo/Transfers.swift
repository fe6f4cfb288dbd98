// `download` and `upload`: streamed transfers with a progress bar on stderr.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import RestManager

extension Client {
    func download(_ invocation: Invocation) async throws {
        let url = try absoluteURL(invocation.positionals.first, command: "download")
        guard let output = invocation.options["--output"], !output.isEmpty else {
            throw UsageError(message: "missing -o FILE (where to save the download)", command: "download")
        }
        let destination = URL(fileURLWithPath: (output as NSString).expandingTildeInPath)
        Output.line(try await download(url, to: destination, quiet: invocation.flags.contains("--quiet")).path)
    }

    /// Downloads through the library's resumable path; errors become exit codes.
    func download(_ url: URL, to destination: URL, quiet: Bool) async throws -> URL {
        prepareForTransfer(to: url)
        if options.verbose { Output.diagnostic("> download \(url.absoluteString) to \(destination.path)") }
        let onDisk = (try? FileManager.default.attributesOfItem(atPath: destination.path + ".part")[.size] as? Int64) ?? 0
        let bar = ProgressBar(quiet: quiet, alreadyDone: onDisk)
        // Ctrl-C keeps the partial file: say where, and how to go on.
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        interrupt.setEventHandler {
            bar.clear()
            Output.error("interrupted; what arrived is kept in \(destination.path).part: run the same command again to resume")
            fflush(nil)
            _exit(130)
        }
        interrupt.resume()
        defer { interrupt.cancel() }
        do {
            let saved = try await rest.download(fromURL: url, to: destination, progress: { bar.show($0) })
            bar.finish()
            return saved
        } catch let error as RestManager.CustomError {
            bar.clear()
            throw Self.exit(for: error, what: url.absoluteString, fileCode: Exit.cannotWrite)
        }
    }

    func upload(_ invocation: Invocation) async throws {
        let file = URL(fileURLWithPath: ((invocation.positionals.first ?? "") as NSString).expandingTildeInPath)
        let url = try absoluteURL(invocation.positionals.dropFirst().first, command: "upload")
        let methodName = invocation.options["--method"] ?? "POST"
        guard let method = RestManager.HttpMethod(rawValue: methodName.lowercased()), [.post, .put, .patch].contains(method) else {
            throw UsageError(message: "--method must be POST, PUT or PATCH, not '\(methodName)'", command: "upload")
        }
        prepareForTransfer(to: url)
        if let type = invocation.options["--content-type"] { rest.requestHttpHeaders.add(value: type, forKey: "Content-Type") }
        let bar = ProgressBar(quiet: invocation.flags.contains("--quiet"))
        let results = await rest.upload(fileAt: file, toURL: url, withHttpMethod: method, progress: { bar.show($0) })
        if results.error == nil { bar.finish() } else { bar.clear() }
        if let error = results.error as? RestManager.CustomError { throw Self.exit(for: error, what: url.absoluteString, fileCode: Exit.noInput) }
        Output.line("HTTP \(results.statusCode ?? 0)")
        if let body = results.data, !body.isEmpty { Output.raw(body) }
        if !results.isSuccess {
            let code = results.statusCode ?? 0
            throw Exit(code: Exit.httpError, message: "the upload got HTTP \(code) \(HTTPURLResponse.localizedString(forStatusCode: code))")
        }
    }

    /// A transfer or stream sends nothing left over from an earlier call, and the API key only to the API's origin (a
    /// download from elsewhere gets none). It may take any time while bytes move: --timeout is how long it may go
    /// without one.
    func prepareForTransfer(to url: URL) {
        rest.clearParameters()
        rest.requestHttpHeaders = RestManager.RestEntity()
        if RestManager.isSameOrigin(url, base) { rest.requestHttpHeaders.add(value: options.apiKey, forKey: "x-api-key") }
        if options.timeoutGiven { rest.idleTimeoutInterval = options.timeout }
    }

    /// An absolute http(s) URL, or a path starting with "/" on the API's base URL (the mock's with --offline).
    func absoluteURL(_ text: String?, command: String) throws -> URL {
        if let text, text.hasPrefix("/"), let url = URL(string: base.absoluteString.trimmingCharacters(in: ["/"]) + text) { return url }
        guard let text, let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
            throw UsageError(message: "URL must be an absolute http(s) URL or a /path, not '\(text ?? "")'", command: command)
        }
        return url
    }

    /// The exit code and one line for a failed transfer; `fileCode` for a file that cannot be used (74 to write, 66 to read).
    static func exit(for error: RestManager.CustomError, what: String, fileCode: Int32) -> Exit {
        switch error {
        case .unacceptableStatusCode(let code, _): return Exit(code: Exit.httpError, message: "\(what): HTTP \(code)")
        case let .fileAccessFailed(file, reason):
            return Exit(code: fileCode, message: "cannot \(fileCode == Exit.cannotWrite ? "write" : "read") \(file.path): \(reason)")
        case .invalidURL, .invalidHeader, .invalidTimeout, .bodyEncodingFailed:
            return Exit(code: Exit.usage, message: error.localizedDescription)
        // The server answered, with something the command cannot read (not an event stream, broken ranges).
        case .transport(let urlError) where urlError.code == .cannotParseResponse:
            return Exit(code: Exit.badData, message: "\(what): \(error.localizedDescription)")
        default: return Exit(code: Exit.unavailable, message: "\(what): \(Exit.sentence(for: error))")
        }
    }
}

/// Progress on stderr: one line redrawn on a terminal (percent, bytes, rate, time left), a plain
/// line every few seconds otherwise, nothing with --quiet.
final class ProgressBar: @unchecked Sendable {
    private let lock = NSLock()
    private let quiet: Bool
    private let terminal = isatty(2) == 1
    /// The bytes already on disk (a resumed download's) when this run began: the rate and the time left count only
    /// what moved since.
    private let first: (bytes: Int64, at: Date)
    private var lastLine = Date.distantPast
    private var printed: String?
    private var shown: RestManager.TransferProgress?

    init(quiet: Bool, alreadyDone: Int64 = 0) {
        self.quiet = quiet
        first = (alreadyDone, Date())
    }

    func show(_ progress: RestManager.TransferProgress) {
        lock.lock()
        defer { lock.unlock() }
        shown = progress
        guard !quiet, terminal || Date().timeIntervalSince(lastLine) >= 2 else { return }
        lastLine = Date()
        print(Self.line(progress, since: first), final: false)
    }

    /// A line, unless it is the one printed last (a plain line is never printed twice).
    private func print(_ line: String, final: Bool) {
        guard terminal || line != printed else { return }
        printed = line
        Output.diagnostic((terminal ? "\r\u{1B}[K" : "") + line, lineEnd: terminal && !final ? "" : "\n")
    }

    func finish() {
        lock.lock()
        defer { lock.unlock() }
        guard !quiet, let shown else { return }
        print(Self.line(shown, since: first), final: true)
        self.shown = nil
    }

    /// After a failure: the terminal's progress line is erased (the error line follows), nothing more is printed.
    func clear() {
        lock.lock()
        defer { lock.unlock() }
        if !quiet, terminal, shown != nil { Output.diagnostic("\r\u{1B}[K", lineEnd: "") }
        shown = nil
    }

    /// `42%  420.0 MiB of 1.0 GiB  85.3 MiB/s  8 s left`; without a size, bytes and rate only. The rate counts the
    /// bytes moved since `first`, so a resumed download's bytes on disk do not inflate it.
    static func line(_ progress: RestManager.TransferProgress, since first: (bytes: Int64, at: Date)) -> String {
        let seconds = Date().timeIntervalSince(first.at)
        let moved = Double(progress.completedBytes - first.bytes)
        let rate = seconds > 0 && moved > 0 ? moved / seconds : 0
        var parts = [bytes(Double(progress.completedBytes))]
        if let total = progress.totalBytes, let fraction = progress.fractionCompleted {
            parts = ["\(Int(fraction * 100))%", parts[0] + " of " + bytes(Double(total))]
            if rate > 0, total > progress.completedBytes {
                parts.append("\(Int((Double(total - progress.completedBytes) / rate).rounded(.up))) s left")
            }
        }
        parts.insert(bytes(rate) + "/s", at: min(2, parts.count))
        return parts.joined(separator: "  ")
    }

    static func bytes(_ count: Double) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = count
        var unit = 0
        while value >= 1024, unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(Int(value)) B" : String(format: "%.1f %@", value, units[unit])
    }
}
