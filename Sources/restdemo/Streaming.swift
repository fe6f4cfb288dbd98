// `stream` and `events`: a body printed as it arrives, until it ends or Ctrl-C.

import Dispatch
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
    /// Prints each line of the body as it arrives.
    func stream(_ invocation: Invocation) async throws {
        let url = try absoluteURL(invocation.positionals.first, command: "stream")
        prepareForTransfer(to: url)
        let rest = rest
        try await untilInterrupted(url) {
            let (body, _) = try await rest.stream(RestManager.Request(url: url))
            for try await line in body.lines { Output.line(Output.visible(line)) }
        }
    }

    /// Prints one line per Server-Sent Event: its type, ID and data (line breaks shown as \n, control characters
    /// escaped). Each reconnection after a failure (refused, a network error, a quiet stream) is a line on stderr,
    /// --verbose or not: a server that is down is retried for ever, and the user should see why. A stream that ended
    /// is reconnected to quietly, as WHATWG's normal course (--verbose shows it).
    func events(_ invocation: Invocation) async throws {
        let url = try absoluteURL(invocation.positionals.first, command: "events")
        prepareForTransfer(to: url)
        let rest = rest
        if !options.verbose {
            rest.eventHandler = { event in
                guard case let .retrying(_, _, _, reason) = event, !reason.hasPrefix("the event stream ended") else {
                    return
                }
                // A quiet stream's reason names the library's property; here the setting is --timeout.
                let line = "\(event)".replacingOccurrences(
                    of: "raise the manager's idleTimeoutInterval to wait longer", with: "raise --timeout to wait longer")
                Output.diagnostic("restdemo: \(Output.visible(line))")
            }
        }
        try await untilInterrupted(url) {
            for try await event in rest.events(for: RestManager.Request(url: url)) {
                let data = event.data.replacingOccurrences(of: "\n", with: "\\n")
                Output.line(Output.visible("\(event.event)\t\(event.id ?? "-")\t\(data)"))
            }
        }
    }

    /// Runs `body` until it ends; Ctrl-C cancels it (the connection closes) and exits with 130, as shells expect.
    private func untilInterrupted(_ url: URL, _ body: @escaping @Sendable () async throws -> Void) async throws {
        let reading = Task { try await body() }
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        interrupt.setEventHandler { reading.cancel() }
        interrupt.resume()
        defer { interrupt.cancel() }
        do {
            try await reading.value
        } catch let error as RestManager.CustomError {
            guard !reading.isCancelled else { throw Exit(code: 130, message: nil) }
            throw Self.exit(for: error, what: url.absoluteString, fileCode: Exit.noInput)
        }
        if reading.isCancelled { throw Exit(code: 130, message: nil) }
    }
}
