// restdemo: the tutorial's tour of reqres.in as a command-line tool, online or offline.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MockServer
import RestManager

/// Ends the program with an exit code and (for failures) one line on stderr.
struct Exit: Error {
    let code: Int32
    let message: String?

    static let httpError: Int32 = 1
    static let usage: Int32 = 64
    static let badData: Int32 = 65
    static let noInput: Int32 = 66
    static let unavailable: Int32 = 69
    static let cannotWrite: Int32 = 74

    /// What the library said, in the command's terms: a timeout says to raise `--timeout`, not a property.
    static func sentence(for error: Error) -> String {
        guard case let .timedOut(_, seconds, limit)? = error as? RestManager.CustomError else {
            return error.localizedDescription
        }
        let idle = limit == .idle ? ": no byte was sent or received for that long" : ""
        return "timed out after \(seconds) s\(idle) (raise --timeout to wait longer)"
    }
}

@main
enum RestDemo {
    static let version = "restdemo \(RestManager.version) (RestManager \(RestManager.version))"

    static func main() async {
        let code = await run(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
        // _exit, not exit: exit() runs OpenSSL's atexit cleanup, which on Linux with Swift 6.3
        // races libcurl still tidying a cancelled or timed-out transfer on another thread
        // (swift-corelibs-foundation #5469) and can crash or change the exit status. Everything
        // was written with unbuffered FileHandle writes; stdio is flushed in case.
        fflush(nil)
        _exit(code)
    }

    static func run(_ arguments: [String], environment: [String: String]) async -> Int32 {
        do {
            let invocation = try ArgumentParser.parse(arguments, environment: environment)
            if invocation.global.version {
                Output.line(version)
                return 0
            }
            guard let command = invocation.command else {
                if invocation.global.help {
                    Output.line(Commands.overview)
                    return 0
                }
                if arguments.isEmpty {
                    // A usage error: the overview goes where diagnostics go, so that a script's stdout stays empty.
                    Output.diagnostic(Commands.overview)
                    Output.error("no command given")
                    return Exit.usage
                }
                throw UsageError(message: "no command given", command: nil)
            }
            if invocation.global.help, let spec = Commands.spec(named: command) {
                Output.line(Commands.help(for: spec))
                return 0
            }
            try await Commands.run(command, invocation)
            return 0
        } catch let error as UsageError {
            let hint = error.command.map { "see 'restdemo \($0) --help'" } ?? "see 'restdemo --help'"
            Output.error("\(error.message) (\(hint))")
            return Exit.usage
        } catch let exit as Exit {
            if let message = exit.message { Output.error(message) }
            return exit.code
        } catch {
            Output.error(error.localizedDescription)
            return Exit.unavailable
        }
    }
}

/// stdout for results, stderr for diagnostics.
enum Output {
    static func line(_ text: String) {
        write(Data((text + "\n").utf8))
    }

    /// Server text made safe for a terminal, as `cat -v` shows it: control characters (C0 but tab, DEL, C1) become
    /// `^X` and `M-^X`, so that a server cannot set the terminal's title, clear it or write the clipboard (OSC 0,
    /// CSI 2J, OSC 52).
    static func visible(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09: shown.unicodeScalars.append(scalar)
            case 0x00..<0x20: shown += "^" + String(UnicodeScalar(UInt8(scalar.value + 0x40)))
            case 0x7F: shown += "^?"
            case 0x80..<0xA0: shown += "M-^" + String(UnicodeScalar(UInt8(scalar.value - 0x80 + 0x40)))
            default: shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    static func raw(_ data: Data) {
        write(data)
        if data.last != UInt8(ascii: "\n") { write(Data("\n".utf8)) }
    }

    static func error(_ text: String) {
        diagnostic("restdemo: \(text)")
    }

    /// A line on stderr; a stderr that cannot be written to is ignored (`FileHandle.write(_:)` would trap).
    static func diagnostic(_ text: String, lineEnd: String = "\n") {
        try? FileHandle.standardError.write(contentsOf: Data((text + lineEnd).utf8))
    }

    /// Writes to stdout. One that cannot be written to (a full disk: `FileHandle.write(_:)` would trap) ends the
    /// program with one line on stderr and exit code 74; a closed pipe ends it by SIGPIPE, as for any tool.
    private static func write(_ data: Data) {
        do {
            try FileHandle.standardOutput.write(contentsOf: data)
        } catch {
            Self.error("cannot write the output: \(error.localizedDescription)")
            _exit(Exit.cannotWrite)
        }
    }

    /// Left-aligned columns, two spaces apart; numeric columns right-aligned.
    static func table(_ header: [String], _ rows: [[String]], rightAligned: Set<Int> = []) -> String {
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func render(_ row: [String]) -> String {
            row.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return rightAligned.contains(column) ? padding + cell : cell + padding
            }.joined(separator: "  ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        return ([render(header)] + rows.map(render)).joined(separator: "\n")
    }
}
