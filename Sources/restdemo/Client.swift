// One RestManager, used the way the tutorial uses it: set headers and parameters, then call.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RestManager

struct Client {
    let base: URL
    let options: GlobalOptions
    let rest = RestManager()

    init(base: URL, options: GlobalOptions) {
        self.base = base
        self.options = options
        rest.timeoutInterval = options.timeout
        // Scopes the stored token to the API's origin: a download or stream from another server gets none.
        rest.baseURL = base
        if options.retries > 0 { rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: options.retries) }
        if options.verbose || options.timing {
            rest.eventHandler = { [verbose = options.verbose, timing = options.timing] event in
                if verbose { Output.diagnostic("· \(event)") }
                if timing, case .finished(_, let results, _) = event, let metrics = results.metrics {
                    Output.diagnostic(Timing.lines(metrics))
                }
            }
        }
        // A stored login token goes as Bearer; reqres has no refresh endpoint, so a rejected one means logging in again.
        if let token = TokenStore.read() {
            rest.authenticator = RestManager.Authenticator(credential: .init(accessToken: token)) { _ in throw TokenRejected() }
        }
        ProcessLifetime.keep(rest)
    }

    // MARK: - Commands

    func users(_ invocation: Invocation) async throws {
        if invocation.flags.contains("--all") { return try await allUsers(invocation) }
        var query: [(String, String)] = []
        if let page = invocation.options["--page"] {
            query.append(("page", String(try ArgumentParser.positiveInteger(page, name: "--page", command: "users"))))
        }
        if let perPage = invocation.options["--per-page"] {
            query.append(("per_page", String(try ArgumentParser.positiveInteger(perPage, name: "--per-page", command: "users"))))
        }
        let cached = invocation.flags.contains("--cache")
        // With --cache the first answer is stored with its ETag; the second request asks If-None-Match and gets a 304.
        if cached { rest.interceptors.append(RestManager.ResponseCache()) }
        var results = try await call(.get, "/api/users", query: query)
        if cached { results = try await call(.get, "/api/users", query: query) }
        if invocation.flags.contains("--headers"), let headers = results.response?.headers {
            let lines = headers.orderedPairs.sorted { $0.key.lowercased() < $1.key.lowercased() }.map { "\($0.key): \($0.value)" }
            Output.line(lines.joined(separator: "\n") + "\n")
        }
        guard try printJSONIfAsked(results) else { return }
        let page: UserPage = try decode(results)
        printTable(page.data)
        Output.line("page \(page.page) of \(page.totalPages), \(page.total) users")
    }

    /// Every page of users, one request each (`rest.pages` with a `next` built from the body's `total_pages`).
    private func allUsers(_ invocation: Invocation) async throws {
        guard invocation.options["--page"] == nil, !invocation.flags.contains("--cache") else {
            throw Exit(code: Exit.usage, message: "users: --all shows every page; leave out --page and --cache")
        }
        var first = RestManager.Request(url: base.appendingPathComponent("api/users"))
        first.headers.add(value: options.apiKey, forKey: "x-api-key")
        first.headers.add(value: "application/json", forKey: "Accept")
        if let perPage = invocation.options["--per-page"] {
            let count = try ArgumentParser.positiveInteger(perPage, name: "--per-page", command: "users")
            first.queryParameters.add(value: String(count), forKey: "per_page")
        }
        var users: [User] = []
        var pages = 0
        let next: @Sendable (RestManager.Request, RestManager.Results) throws -> RestManager.Request? = { request, page in
            let decoded = try page.decode(UserPage.self, using: .snakeCase)
            guard decoded.page < decoded.totalPages else { return nil }
            var following = request
            following.queryParameters.add(value: String(decoded.page + 1), forKey: "page")
            return following
        }
        do {
            for try await page in rest.pages(first, next: next) {
                try requireJSON(page)
                let decoded: UserPage = try decode(page)
                users += decoded.data
                pages += 1
            }
        } catch let error as RestManager.CustomError {
            if case .unacceptableStatusCode(let code, _) = error {
                throw Exit(code: Exit.httpError, message: "users: HTTP \(code) \(HTTPURLResponse.localizedString(forStatusCode: code))")
            }
            throw Exit(code: Exit.unavailable, message: "cannot reach \(first.url.absoluteString): \(Exit.sentence(for: error))")
        } catch is DecodingError {
            throw Exit(code: Exit.badData, message: "the answer does not decode as UserPage")
        }
        if options.json {
            let encoder = JSONEncoder()
            encoder.keyEncodingStrategy = .convertToSnakeCase
            return Output.raw(try encoder.encode(users))
        }
        printTable(users)
        Output.line("\(users.count) users on \(pages) pages")
    }

    func user(_ invocation: Invocation) async throws {
        let id = try ArgumentParser.positiveInteger(invocation.positionals.first, name: "ID", command: "user")
        let results = try await call(.get, "/api/users/\(id)")
        guard try printJSONIfAsked(results, what: "user \(id)") else { return }
        let user: SingleUser = try decode(results)
        Output.line("#\(user.data.id) \(user.data.firstName) \(user.data.lastName) <\(user.data.email)>\navatar: \(user.data.avatar)")
    }

    func create(_ invocation: Invocation) async throws {
        let name = try ArgumentParser.requiredOption(invocation, "--name")
        let job = try ArgumentParser.requiredOption(invocation, "--job")
        let results = try await call(.post, "/api/users", body: [("name", name), ("job", job)])
        guard try printJSONIfAsked(results) else { return }
        let created: CreatedUser = try decode(results)
        Output.line("created user \(created.id) at \(created.createdAt) (HTTP \(results.statusCode ?? 0))")
    }

    func update(_ invocation: Invocation) async throws {
        let id = try ArgumentParser.positiveInteger(invocation.positionals.first, name: "ID", command: "update")
        let fields = [("name", invocation.options["--name"]), ("job", invocation.options["--job"])]
            .compactMap { name, value in value.map { (name, $0) } }
        guard !fields.isEmpty else { throw UsageError(message: "give --name, --job or both", command: "update") }
        let method: RestManager.HttpMethod = invocation.flags.contains("--patch") ? .patch : .put
        let results = try await call(method, "/api/users/\(id)", body: fields)
        guard try printJSONIfAsked(results, what: "user \(id)") else { return }
        let updated: UpdatedUser = try decode(results)
        Output.line("updated user \(id) at \(updated.updatedAt) (\(method.name))")
    }

    func delete(_ invocation: Invocation) async throws {
        let id = try ArgumentParser.positiveInteger(invocation.positionals.first, name: "ID", command: "delete")
        let results = try await call(.delete, "/api/users/\(id)")
        guard try printJSONIfAsked(results, what: "user \(id)") else { return }
        Output.line("deleted user \(id) (HTTP \(results.statusCode ?? 0))")
    }

    func authenticate(_ invocation: Invocation, registering: Bool) async throws {
        let email = try ArgumentParser.requiredOption(invocation, "--email")
        let password = try ArgumentParser.requiredOption(invocation, "--password")
        let results = try await call(
            .post, registering ? "/api/register" : "/api/login",
            body: [("email", email), ("password", password)])
        guard try printJSONIfAsked(results) else { return }
        let token: Token = try decode(results)
        if !registering { try TokenStore.write(token.token) }
        Output.line(registering ? "registered user \(token.id.map(String.init) ?? "?") with token \(token.token)" : "token: \(token.token)")
    }

    func logout() async throws {
        let results = try await call(.post, "/api/logout")
        try requireSuccess(results)
        try TokenStore.remove()
        Output.line("logged out")
    }

    func avatar(_ invocation: Invocation) async throws {
        let id = try ArgumentParser.positiveInteger(invocation.positionals.first, name: "ID", command: "avatar")
        let destination = try AvatarFile.destination(for: id, output: invocation.options["--output"])
        let results = try await call(.get, "/api/users/\(id)")
        try requireSuccess(results, what: "user \(id)")
        let user: SingleUser = try decode(results)
        let path = try await saveAvatar(of: user.data, to: destination)
        Output.line(path)
    }

    func tour() async throws {
        func heading(_ text: String) { Output.line("\n== \(text) ==") }
        heading("1. List users")
        let list = try await call(.get, "/api/users")
        try requireSuccess(list)
        let firstPage: UserPage = try decode(list)
        printTable(firstPage.data)
        Output.line("page \(firstPage.page) of \(firstPage.totalPages), \(firstPage.total) users")

        heading("2. Response headers of the list")
        for (name, value) in (list.response?.headers.orderedPairs ?? []).sorted(by: { $0.key.lowercased() < $1.key.lowercased() }) {
            Output.line("\(name): \(value)")
        }

        heading("3. Page 2")
        let second = try await call(.get, "/api/users", query: [("page", "2")])
        try requireSuccess(second)
        let secondPage: UserPage = try decode(second)
        printTable(secondPage.data)

        heading("4. Status of a user that does not exist")
        let missing = try await call(.get, "/api/users/100")
        Output.line("GET /api/users/100 -> HTTP \(missing.statusCode ?? 0)")

        heading("5. Create a user")
        let created = try await call(.post, "/api/users", body: [("name", "John"), ("job", "Developer")])
        try requireSuccess(created)
        let newUser: CreatedUser = try decode(created)
        Output.line("HTTP \(created.statusCode ?? 0): created user \(newUser.id) at \(newUser.createdAt)")

        heading("6. One user and their avatar")
        let single = try await call(.get, "/api/users/1")
        try requireSuccess(single)
        let user: SingleUser = try decode(single)
        Output.line("#\(user.data.id) \(user.data.firstName) \(user.data.lastName) <\(user.data.email)>")
        let path = try await saveAvatar(of: user.data, to: try AvatarFile.destination(for: user.data.id, output: nil))
        Output.line("avatar saved to \(path)")
    }

    // MARK: - Calls

    /// One request through the manager, as the tutorial does it; transport failures exit 69.
    private func call(
        _ method: RestManager.HttpMethod, _ path: String, query: [(String, String)] = [],
        body: [(String, String)] = []
    ) async throws -> RestManager.Results {
        rest.clearParameters()
        rest.requestHttpHeaders = RestManager.RestEntity()
        rest.requestHttpHeaders.add(value: options.apiKey, forKey: "x-api-key")
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Accept")
        for (name, value) in query { rest.urlQueryParameters.add(value: value, forKey: name) }
        if !body.isEmpty {
            rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
            for (name, value) in body { rest.httpBodyParameters.add(value: value, forKey: name) }
        }
        let url = base.appendingPathComponent(String(path.dropFirst()))
        if options.verbose, let curl = try? rest.curlCommand(forURL: url, withHttpMethod: method) { Output.diagnostic("> " + curl) }
        let started = Date()
        let results = await rest.makeRequest(toURL: url, withHttpMethod: method)
        if case .authenticationFailed? = results.error as? RestManager.CustomError {
            throw Exit(code: Exit.httpError, message: results.error?.localizedDescription)
        }
        if let error = results.error as? RestManager.CustomError, case .timedOut = error {
            throw Exit(code: Exit.unavailable, message: "\(url.absoluteString): \(Exit.sentence(for: error))")
        }
        if let error = results.error {
            throw Exit(
                code: Exit.unavailable,
                message: "cannot reach \(url.absoluteString): \(error.localizedDescription) (try --offline to use the built-in mock server)")
        }
        if options.verbose {
            let milliseconds = Date().timeIntervalSince(started) * 1000
            switch results.response?.headers.value(forKey: RestManager.ResponseCache.statusHeader) {
            case "revalidated": Output.diagnostic(String(format: "< HTTP 304 Not Modified: the cached answer, in %.1f ms", milliseconds))
            case "fresh": Output.diagnostic(String(format: "< the cached answer, fresh (no request), in %.1f ms", milliseconds))
            default: Output.diagnostic(String(format: "< HTTP %d in %.1f ms", results.statusCode ?? 0, milliseconds))
            }
        }
        return results
    }

    private func saveAvatar(of user: User, to destination: URL) async throws -> String {
        guard let url = URL(string: user.avatar), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            throw Exit(code: Exit.badData, message: "user \(user.id) has no usable avatar URL")
        }
        return try await download(url, to: destination, quiet: true).path
    }

    /// With --json, prints the body as is; returns whether the caller should print its own view.
    /// Either way a successful answer must be JSON (or empty): the same exit code and error line in both modes.
    private func printJSONIfAsked(_ results: RestManager.Results, what: String? = nil) throws -> Bool {
        if options.json {
            if results.isSuccess { try requireJSON(results) }
            Output.raw(results.data ?? Data())
            if !results.isSuccess { try requireSuccess(results, what: what) }
            return false
        }
        try requireSuccess(results, what: what)
        try requireJSON(results)
        return true
    }

    /// Exit 65 unless the body is empty or JSON.
    private func requireJSON(_ results: RestManager.Results) throws {
        guard let data = results.data, !data.isEmpty else { return }
        if (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) == nil {
            let type = results.response?.headers.value(forKey: "Content-Type") ?? "no Content-Type"
            throw Exit(code: Exit.badData, message: "the answer is not JSON (\(type), \(data.count) bytes)")
        }
    }

    private func requireSuccess(_ results: RestManager.Results, what: String? = nil) throws {
        guard !results.isSuccess else { return }
        let code = results.statusCode ?? 0
        let apiMessage = (try? results.decode(APIError.self))?.error
        let subject = what.map { "\($0): " } ?? ""
        throw Exit(
            code: Exit.httpError,
            message: "\(subject)HTTP \(code) \(HTTPURLResponse.localizedString(forStatusCode: code))" + (apiMessage.map { ": \($0)" } ?? ""))
    }

    private func decode<Value: Decodable>(_ results: RestManager.Results) throws -> Value {
        do { return try results.decode(Value.self, using: .snakeCase) } catch {
            throw Exit(code: Exit.badData, message: "the answer does not decode as \(Value.self): \(error.localizedDescription)")
        }
    }

    private func printTable(_ users: [User]) {
        Output.line(
            Output.table(
                ["ID", "NAME", "EMAIL"], users.map { [String($0.id), "\($0.firstName) \($0.lastName)", $0.email] },
                rightAligned: [0]))
    }
}

/// The authenticator's refresh for a stored token: reqres cannot refresh one.
struct TokenRejected: LocalizedError {
    var errorDescription: String? { "the stored token was rejected; log in again (restdemo login)" }
}

/// The login token, in a file only the user can read: `$XDG_CONFIG_HOME/restdemo/token`
/// (`~/.config/restdemo/token` without it).
enum TokenStore {
    static var file: URL {
        let environment = ProcessInfo.processInfo.environment
        let base =
            environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config")
        return base.appendingPathComponent("restdemo", isDirectory: true).appendingPathComponent("token")
    }

    static func read() -> String? {
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return token.isEmpty ? nil : token
    }

    /// Created with mode 0600 (never readable by others, not even for a moment), in a 0700 folder.
    static func write(_ token: String) throws {
        let folder = file.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try? FileManager.default.removeItem(at: file)
            let descriptor = open(file.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard descriptor >= 0 else { throw CocoaError(.fileWriteNoPermission) }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            try handle.write(contentsOf: Data((token + "\n").utf8))
            try handle.close()
        } catch {
            throw Exit(code: Exit.cannotWrite, message: "cannot store the token in \(file.path): \(error.localizedDescription)")
        }
    }

    static func remove() throws {
        guard FileManager.default.fileExists(atPath: file.path) else { return }
        do { try FileManager.default.removeItem(at: file) } catch {
            throw Exit(code: Exit.cannotWrite, message: "cannot remove \(file.path): \(error.localizedDescription)")
        }
    }
}

/// Where avatars are saved: names come from the validated user id, never from the server.
enum AvatarFile {
    static func destination(for id: Int, output: String?) throws -> URL {
        let fileName = "avatar-\(id).jpg"
        guard let output else {
            let caches =
                FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
                ?? FileManager.default.temporaryDirectory
            return caches.appendingPathComponent("restdemo", isDirectory: true).appendingPathComponent(fileName)
        }
        guard !output.isEmpty else { throw UsageError(message: "--output needs a path", command: "avatar") }
        var isDirectory: ObjCBool = false
        let url = URL(fileURLWithPath: output)
        if output.hasSuffix("/") || (FileManager.default.fileExists(atPath: output, isDirectory: &isDirectory) && isDirectory.boolValue) {
            return url.appendingPathComponent(fileName)
        }
        return url
    }
}

/// Objects kept until the process exits: tearing a URLSession down in the last moments of a
/// command-line program can crash on Linux with Swift 6.3 (swift-corelibs-foundation #5469).
final class ProcessLifetime: @unchecked Sendable {
    private static let shared = ProcessLifetime()
    private let lock = NSLock()
    private var objects: [AnyObject] = []

    static func keep(_ object: AnyObject) {
        shared.lock.lock()
        shared.objects.append(object)
        shared.lock.unlock()
    }
}

/// `--timing`: what a call took, from `Results.metrics`, in the spirit of `curl -w`.
enum Timing {
    /// One line per attempt (number, method, path, status, time to head, total, bytes sent and received), then the
    /// call's total with its redirects, retries and where the answer came from. The path only: a query may hold a key.
    static func lines(_ metrics: RestManager.Metrics) -> String {
        let attempts = metrics.attempts.enumerated().map { index, attempt in
            let status = attempt.statusCode.map { "HTTP \($0)" } ?? "no answer"
            let head = attempt.timeToHead.map(milliseconds) ?? "-"
            // The path as URL decodes it: a server's redirect may put escape sequences there.
            return "timing  #\(index + 1) \(attempt.method) \(Output.visible(attempt.url.path))  \(status)  head \(head)  "
                + "total \(milliseconds(attempt.duration))  sent \(attempt.bytesSent) B  received \(attempt.bytesReceived) B"
        }
        let counts = [
            count(metrics.attempts.count, "attempt", "attempts"), count(metrics.redirectCount, "redirect", "redirects"),
            count(metrics.retryCount, "retry", "retries")
        ]
        let total = "timing  total \(milliseconds(metrics.duration))  \(counts.joined(separator: "  "))  from \(metrics.source)"
        return (attempts + [total]).joined(separator: "\n")
    }

    private static func count(_ number: Int, _ one: String, _ many: String) -> String {
        "\(number) \(number == 1 ? one : many)"
    }

    private static func milliseconds(_ seconds: TimeInterval) -> String { String(format: "%.1f ms", seconds * 1000) }
}
