// The subcommands. Each talks to reqres.in (or the mock) through RestManager's public API only.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Dispatch
import MockServer
import RestManager

enum Commands {
    static let all: [CommandSpec] = [
        CommandSpec(
            name: "users", summary: "List users, one page at a time (or every page)",
            usage: "restdemo users [--page N | --all] [--per-page N] [--headers] [--cache]", positionals: [],
            valueOptions: ["--page", "--per-page"], flags: ["--headers", "--cache", "--all"],
            details:
                "  --page N       page to show (default 1)\n  --all          every page, one request each\n  --per-page N   users per page (server default 6)\n  --headers      also print the response headers\n"
                + "  --cache        ask twice through an HTTP cache: the second request revalidates (see it with --verbose)"
        ),
        CommandSpec(
            name: "user", summary: "Show one user (an unknown id shows the HTTP status)",
            usage: "restdemo user ID", positionals: ["ID"], valueOptions: [], flags: [], details: ""),
        CommandSpec(
            name: "create", summary: "Create a user (POST JSON)",
            usage: "restdemo create --name NAME --job JOB", positionals: [],
            valueOptions: ["--name", "--job"], flags: [], details: ""),
        CommandSpec(
            name: "update", summary: "Update a user (PUT, or PATCH with --patch)",
            usage: "restdemo update ID [--name NAME] [--job JOB] [--patch]", positionals: ["ID"],
            valueOptions: ["--name", "--job"], flags: ["--patch"], details: ""),
        CommandSpec(
            name: "delete", summary: "Delete a user",
            usage: "restdemo delete ID", positionals: ["ID"], valueOptions: [], flags: [], details: ""),
        CommandSpec(
            name: "logout", summary: "Log out and forget the stored token",
            usage: "restdemo logout", positionals: [], valueOptions: [], flags: [], details: ""),
        CommandSpec(
            name: "login", summary: "Log in, print the token and store it for later commands",
            usage: "restdemo login --email EMAIL --password PASSWORD", positionals: [],
            valueOptions: ["--email", "--password"], flags: [], details: ""),
        CommandSpec(
            name: "register", summary: "Register and print the id and token",
            usage: "restdemo register --email EMAIL --password PASSWORD", positionals: [],
            valueOptions: ["--email", "--password"], flags: [], details: ""),
        CommandSpec(
            name: "avatar", summary: "Download a user's avatar with getData and save it",
            usage: "restdemo avatar ID [--output PATH]", positionals: ["ID"], valueOptions: ["--output"], flags: [],
            details:
                "  --output PATH  a file, or a folder to save avatar-ID.jpg in\n                 (default: a 'restdemo' folder in the user's caches directory)"
        ),
        CommandSpec(
            name: "download", summary: "Download a file to disk with progress; run it again to resume",
            usage: "restdemo download URL|/PATH -o FILE [--quiet]", positionals: ["URL"], valueOptions: ["--output"], flags: ["--quiet"],
            details:
                "  -o, --output FILE  where to save it (folders are created; FILE.part holds an unfinished download)\n  --quiet            no progress on stderr\n"
                + "  --timeout SECONDS  how long the transfer may go without a byte (default 60; no limit on the whole)"
        ),
        CommandSpec(
            name: "upload", summary: "Upload a file as the request body, streamed, with progress",
            usage: "restdemo upload FILE URL|/PATH [--method POST|PUT|PATCH] [--content-type TYPE] [--quiet]", positionals: ["FILE", "URL"],
            valueOptions: ["--method", "--content-type"], flags: ["--quiet"],
            details:
                "  --method M           POST (default), PUT or PATCH\n  --content-type TYPE  default application/octet-stream\n  --quiet              no progress on stderr\n"
                + "  --timeout SECONDS    how long the transfer may go without a byte (default 60; no limit on the whole)"
        ),
        CommandSpec(
            name: "stream", summary: "Print a response body line by line as it arrives, until it ends or Ctrl-C",
            usage: "restdemo stream URL|/PATH", positionals: ["URL"], valueOptions: [], flags: [],
            details: "  --timeout SECONDS  how long the stream may go quiet (default 60; no limit on the whole stream)"),
        CommandSpec(
            name: "events", summary: "Print Server-Sent Events, one per line (type, ID, data), reconnecting as needed",
            usage: "restdemo events URL|/PATH", positionals: ["URL"], valueOptions: [], flags: [],
            details: "  --timeout SECONDS  how long the stream may go quiet before reconnecting (default 60)"),
        CommandSpec(
            name: "completion", summary: "Print a shell completion script (bash, zsh or fish)",
            usage: "restdemo completion SHELL", positionals: ["SHELL"], valueOptions: [], flags: [], details: ""),
        CommandSpec(
            name: "tour", summary: "The tutorial's calls in order, with a heading for each",
            usage: "restdemo tour", positionals: [], valueOptions: [], flags: [], details: ""),
        CommandSpec(
            name: "serve", summary: "Run the mock reqres.in server on 127.0.0.1 until Ctrl-C",
            usage: "restdemo serve [--port N] [--page-size N] [--require-api-key] [--stubs FILE.json]", positionals: [],
            valueOptions: ["--port", "--page-size", "--stubs"], flags: ["--require-api-key"],
            details:
                "  --port N            port to listen on (default: a free one)\n  --page-size N       users per page (default 6; 3 as in the tutorial's time)\n  --require-api-key   answer 401 without an x-api-key header\n  --stubs FILE.json   also answer with the stubs in FILE: a JSON array of objects with\n                      path (exact, or a prefix ending in *), method, status, headers,\n                      body (text or JSON) or bodyFile, delay, bytesPerSecond, fault"
        )
    ]

    static func spec(named name: String) -> CommandSpec? { all.first { $0.name == name } }

    /// One example line per command, for its help.
    static let examples: [String: String] = [
        "users": "restdemo users --page 2 --per-page 3",
        "user": "restdemo --offline user 2",
        "create": "restdemo create --name neo --job chosen",
        "update": "restdemo update 2 --job zion --patch",
        "delete": "restdemo delete 2",
        "logout": "restdemo logout",
        "login": "restdemo login --email eve.holt@reqres.in --password cityslicka",
        "register": "restdemo register --email eve.holt@reqres.in --password pistol",
        "avatar": "restdemo avatar 2 --output ~/Pictures/",
        "tour": "restdemo --offline tour",
        "download": "restdemo --offline download /_test/files/104857600 -o ~/big.bin",
        "upload": "restdemo upload photo.jpg https://example.com/upload --method PUT --content-type image/jpeg",
        "stream": "restdemo --offline stream /_test/stream",
        "events": "restdemo --offline events /_test/events",
        "serve": "restdemo serve --port 8080 --stubs fixtures.json",
        "completion": "restdemo completion bash > ~/.local/share/bash-completion/completions/restdemo"
    ]

    static let globalHelp = """
        Global options:
          --base-url URL     the API to talk to (default https://reqres.in; also RESTDEMO_BASE_URL)
          --offline          start the built-in mock server and use it (no internet needed)
          --api-key KEY      sent as x-api-key (default reqres-free-v1)
          --timeout SECONDS  per request (default 30)
          --json             print the server's JSON as is
          --retries N        try failed requests again up to N times (0-10, default 0)
          --verbose          print the cURL command and every attempt, retry and result to stderr
          --timing           after each call, print to stderr a line per attempt (status, time to the
                             response head, total, bytes) and the call's total
          --help, --version
        """

    static var overview: String {
        let width = (all.map(\.name.count).max() ?? 0) + 2
        let lines = all.map { "  " + $0.name.padding(toLength: width, withPad: " ", startingAt: 0) + $0.summary }
        return "usage: restdemo [global options] COMMAND [options]\n\nCommands:\n" + lines.joined(separator: "\n")
            + "\n\n" + globalHelp + "\n\nTry it without internet: restdemo --offline tour"
    }

    /// A command's help: its options, an example, and the global options but those it gives a meaning of its own
    /// (a transfer's `--timeout` is how long it may go without a byte, not a limit per request).
    static func help(for spec: CommandSpec) -> String {
        let own = Set(spec.details.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
        let global = globalHelp.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { line in !own.contains(line.split(separator: " ").first.map(String.init) ?? "") }
        return "usage: \(spec.usage)\n\n\(spec.summary)." + (spec.details.isEmpty ? "" : "\n\nOptions:\n" + spec.details)
            + (examples[spec.name].map { "\n\nExample:\n  \($0)" } ?? "") + "\n\n" + global.joined(separator: "\n")
    }

    static func run(_ command: String, _ invocation: Invocation) async throws {
        if command == "serve" { return try await serve(invocation) }
        if command == "completion" { return Output.line(try Completion.script(for: invocation.positionals.first ?? "")) }
        var mock: MockServer?
        var base = invocation.global.baseURL ?? URL(string: "https://reqres.in")!  // a literal
        if invocation.global.offline {
            var configuration = MockServer.Configuration()
            configuration.recordsRequests = false  // nobody reads them here
            let server = MockServer(configuration: configuration)
            do { try server.start() } catch {
                throw Exit(code: Exit.unavailable, message: "cannot start the offline mock server: \(error)")
            }
            mock = server
            base = server.baseURL
        }
        defer { mock?.stop() }
        let client = Client(base: base, options: invocation.global)
        switch command {
        case "users": try await client.users(invocation)
        case "user": try await client.user(invocation)
        case "create": try await client.create(invocation)
        case "update": try await client.update(invocation)
        case "delete": try await client.delete(invocation)
        case "login", "register": try await client.authenticate(invocation, registering: command == "register")
        case "logout": try await client.logout()
        case "avatar": try await client.avatar(invocation)
        case "download": try await client.download(invocation)
        case "upload": try await client.upload(invocation)
        case "stream": try await client.stream(invocation)
        case "events": try await client.events(invocation)
        default: try await client.tour()
        }
    }

    private static func serve(_ invocation: Invocation) async throws {
        var configuration = MockServer.Configuration()
        if let port = invocation.options["--port"] {
            guard let number = UInt16(port) else {
                throw UsageError(message: "--port must be a number from 0 to 65535, not '\(port)'", command: "serve")
            }
            configuration.port = number
        }
        if let size = invocation.options["--page-size"] {
            configuration.pageSize = try ArgumentParser.positiveInteger(size, name: "--page-size", command: "serve")
        }
        configuration.requiresAPIKey = invocation.flags.contains("--require-api-key")
        configuration.recordsRequests = false  // a server left running must not grow
        let stubs = try invocation.options["--stubs"].map(StubFile.load) ?? []
        let server = MockServer(configuration: configuration)
        for stub in stubs { server.stub(stub.method, path: stub.path, response: stub.response) }
        do { try server.start() } catch {
            throw Exit(code: Exit.unavailable, message: "cannot start the mock server: \(error)")
        }
        let loaded = stubs.isEmpty ? "" : " with \(stubs.count) stub\(stubs.count == 1 ? "" : "s")"
        Output.line("Mock reqres.in listening on \(server.baseURL.absoluteString)\(loaded) (Ctrl-C to stop)")
        let once = OnceFlag()
        let sources = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            return DispatchSource.makeSignalSource(signal: number, queue: .global())
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            for source in sources {
                source.setEventHandler {
                    guard once.claim() else { return }
                    server.stop()
                    Output.diagnostic("stopped")
                    continuation.resume()
                }
                source.resume()
            }
        }
        sources.forEach { $0.cancel() }
    }
}

final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var claimed = false
    func claim() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if claimed { return false }
        claimed = true
        return true
    }
}
