// Hand-written argument parsing: global options anywhere, one subcommand, its own options.

import Foundation

/// A usage error: printed as one line with a hint, exit code 64.
struct UsageError: Error {
    let message: String
    let command: String?
}

/// Global options, valid before or after the subcommand.
struct GlobalOptions {
    var baseURL: URL?
    var offline = false
    var apiKey = "reqres-free-v1"
    var timeout: TimeInterval = 30
    /// Whether --timeout was given (transfers otherwise get a day: 30 s is for API calls).
    var timeoutGiven = false
    var json = false
    var verbose = false
    /// Whether --timing was given: each call's attempts and total go to stderr as it ends.
    var timing = false
    var retries = 0
    var help = false
    var version = false
}

/// The parsed command line.
struct Invocation {
    var global = GlobalOptions()
    var command: String?
    var positionals: [String] = []
    var options: [String: String] = [:]
    var flags: Set<String> = []
}

/// What a subcommand accepts.
struct CommandSpec {
    let name: String
    let summary: String
    let usage: String
    let positionals: [String]
    let valueOptions: [String]
    let flags: [String]
    let details: String
}

enum ArgumentParser {
    static let globalValueOptions: Set<String> = ["--base-url", "--api-key", "--timeout", "--retries"]
    static let globalFlags: Set<String> = ["--offline", "--json", "--verbose", "--timing", "--help", "-h", "--version"]

    static func parse(_ arguments: [String], environment: [String: String]) throws -> Invocation {
        var invocation = Invocation()
        var remaining: [String] = []
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            var argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("-") || argument == "-" || isNegativeNumber(argument) {
                remaining.append(argument)
                continue
            }
            if argument == "--" { onlyPositionals = true; continue }
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                inlineValue = String(argument[argument.index(after: equals)...])
                argument = String(argument[..<equals])
            }
            if globalFlags.contains(argument) {
                guard inlineValue == nil else { throw UsageError(message: "option '\(argument)' takes no value", command: nil) }
                switch argument {
                case "--offline": invocation.global.offline = true
                case "--json": invocation.global.json = true
                case "--verbose": invocation.global.verbose = true
                case "--timing": invocation.global.timing = true
                case "--version": invocation.global.version = true
                default: invocation.global.help = true
                }
            } else if globalValueOptions.contains(argument) {
                let value = try inlineValue ?? nextValue(for: argument, in: arguments, at: &index)
                try applyGlobal(argument, value, to: &invocation.global)
            } else {
                remaining.append(inlineValue.map { "\(argument)=\($0)" } ?? argument)
            }
        }
        if invocation.global.baseURL == nil, let fromEnvironment = environment["RESTDEMO_BASE_URL"], !fromEnvironment.isEmpty {
            invocation.global.baseURL = try parseBaseURL(fromEnvironment, source: "RESTDEMO_BASE_URL")
        }
        guard let command = remaining.first else { return invocation }
        if command.hasPrefix("-") { throw UsageError(message: "unknown option '\(command)'", command: nil) }
        guard let spec = Commands.spec(named: command) else {
            throw UsageError(message: "unknown command '\(command)'", command: nil)
        }
        invocation.command = command
        try parseCommandArguments(Array(remaining.dropFirst()), spec: spec, into: &invocation)
        return invocation
    }

    private static func parseCommandArguments(_ arguments: [String], spec: CommandSpec, into invocation: inout Invocation) throws {
        var index = 0
        while index < arguments.count {
            var argument = arguments[index] == "-o" ? "--output" : arguments[index]
            index += 1
            guard argument.hasPrefix("--"), !isNegativeNumber(argument) else {
                invocation.positionals.append(argument)
                continue
            }
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "=") {
                inlineValue = String(argument[argument.index(after: equals)...])
                argument = String(argument[..<equals])
            }
            if spec.flags.contains(argument) {
                guard inlineValue == nil else { throw UsageError(message: "option '\(argument)' takes no value", command: spec.name) }
                invocation.flags.insert(argument)
            } else if spec.valueOptions.contains(argument) {
                invocation.options[argument] = try inlineValue ?? nextValue(for: argument, in: arguments, at: &index, command: spec.name)
            } else {
                throw UsageError(message: "unknown option '\(argument)' for '\(spec.name)'", command: spec.name)
            }
        }
        if invocation.positionals.count > spec.positionals.count {
            throw UsageError(message: "unexpected argument '\(invocation.positionals[spec.positionals.count])'", command: spec.name)
        }
        if invocation.positionals.count < spec.positionals.count && !invocation.global.help {
            throw UsageError(message: "missing \(spec.positionals[invocation.positionals.count])", command: spec.name)
        }
    }

    private static func nextValue(for option: String, in arguments: [String], at index: inout Int, command: String? = nil) throws -> String {
        guard index < arguments.count, !arguments[index].hasPrefix("--") else {
            throw UsageError(message: "option '\(option)' needs a value", command: command)
        }
        defer { index += 1 }
        return arguments[index]
    }

    private static func applyGlobal(_ option: String, _ value: String, to options: inout GlobalOptions) throws {
        switch option {
        case "--base-url":
            options.baseURL = try parseBaseURL(value, source: "--base-url")
        case "--api-key":
            options.apiKey = value
        case "--retries":
            options.retries = try wholeNumber(value, name: "--retries", command: nil, range: 0...10)
        default:
            // Decimal notation only: Double also reads "0x10" (16), "1e3" and "inf".
            let decimal = value.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || $0 == 46 }
            guard decimal, let seconds = Double(value), seconds > 0, seconds <= maximumTimeout else {
                throw UsageError(
                    message: "--timeout needs a number of seconds above 0 and at most \(Int(maximumTimeout)), not '\(value)'",
                    command: nil)
            }
            options.timeout = seconds
            options.timeoutGiven = true
        }
    }

    static func parseBaseURL(_ text: String, source: String) throws -> URL {
        // A trailing "/" needs no trimming: paths are appended as path components.
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty, (1...65_535).contains(url.port ?? 80)
        else {
            throw UsageError(message: "\(source) needs an http(s) URL such as https://reqres.in, not '\(text)'", command: nil)
        }
        return url
    }

    private static func isNegativeNumber(_ text: String) -> Bool {
        text.count > 1 && text.hasPrefix("-") && Double(text.dropFirst()) != nil
    }

    /// The longest `--timeout`: one day.
    static let maximumTimeout: TimeInterval = 86_400

    /// The largest number any option takes (ids, pages, page sizes, ports are range-checked below it).
    static let maximumNumber = 1_000_000

    /// A whole number from 1 to `maximum` (digits only), or a usage error naming it and the range.
    static func positiveInteger(_ text: String?, name: String, command: String, maximum: Int = maximumNumber) throws -> Int {
        try wholeNumber(text, name: name, command: command, range: 1...maximum)
    }

    /// A whole number in `range` (digits only), or a usage error naming it and the range.
    static func wholeNumber(_ text: String?, name: String, command: String?, range: ClosedRange<Int>) throws -> Int {
        guard let text, !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let value = Int(text), range.contains(value)
        else {
            throw UsageError(
                message: "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text ?? "")'",
                command: command)
        }
        return value
    }

    static func requiredOption(_ invocation: Invocation, _ name: String) throws -> String {
        guard let value = invocation.options[name], !value.isEmpty else {
            throw UsageError(message: "missing \(name)", command: invocation.command)
        }
        return value
    }
}
