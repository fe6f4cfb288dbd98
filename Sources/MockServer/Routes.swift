// Which handler answers a request: reqres paths, avatars, and the test endpoints under /_test/.

import Foundation

enum Routes {
    static func reply(to request: ReceivedRequest, server: MockServer) -> Reply {
        if let answer = server.testKit.answer(for: request) { return .stub(answer) }
        guard server.configuration.servesReqres else {
            let message = "no stub matches \(request.method) \(request.path)"
            return .response(
                ReqresAPI.json(
                    404,
                    JSONText.object([
                        ("error", JSONText.string(message)),
                        ("method", JSONText.string(request.method)),
                        ("path", JSONText.string(request.path))
                    ])))
        }
        if request.path == "/api" || request.path.hasPrefix("/api/") {
            return notModifiedIfUnchanged(ReqresAPI.reply(to: request, server: server), request)
        }
        if request.path.hasPrefix("/img/faces/") {
            return .response(ReqresAPI.avatar(request))
        }
        if request.path.hasPrefix("/_test/") {
            return TestEndpoints.reply(to: request, server: server)
        }
        return .response(HTTPResponse(status: 404, text: "Not Found\n"))
    }
}

/// A 304 (with the ETag, no body) for a GET or HEAD whose `If-None-Match` names the answer's ETag (RFC 9110 §13.1.2:
/// a weak comparison, `*` matches any).
func notModifiedIfUnchanged(_ reply: Reply, _ request: ReceivedRequest) -> Reply {
    guard case .response(let response) = reply, response.status == 200, request.method == "GET" || request.method == "HEAD",
        let etag = response.headers.first(where: { $0.name.lowercased() == "etag" })?.value,
        let condition = request.header("If-None-Match")
    else { return reply }
    let weakless = { (tag: Substring) in tag.hasPrefix("W/") ? tag.dropFirst(2) : tag }
    let tags = condition.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    guard tags.contains(where: { $0 == "*" || weakless(Substring($0)) == weakless(Substring(etag)) }) else { return reply }
    return .response(HTTPResponse(status: 304, headers: [("ETag", etag)], body: []))
}

/// Endpoints that make the server answer (or misbehave) on demand. See README "Mock server".
enum TestEndpoints {
    static func reply(to request: ReceivedRequest, server: MockServer) -> Reply {
        let segments = request.path.split(separator: "/").dropFirst().map(String.init)
        let name = segments.first ?? ""
        let argument = segments.count > 1 ? segments[1] : nil
        switch name {
        case "echo":
            var response = echo(request)
            if let text = request.query("status") {
                guard let status = Numbers.integer(text, in: 200...599) else { return badArgument("status", text, "200...599") }
                response.status = status
            }
            return .response(response)
        case "status":
            guard let code = Numbers.integer(argument, in: 200...599) else { return badArgument("status code", argument, "200...599") }
            let hasBody = code != 204 && code != 304
            var response = ReqresAPI.json(code, JSONText.object([("status", "\(code)")]))
            if !hasBody { response.body = [] }
            return .response(response)
        case "pages":
            // `/_test/pages/<count>?page=<k>`: page k of count, JSON `{"page":k,"total_pages":count}`, with RFC 8288
            // `Link` headers to the first, previous and next pages.
            guard let count = Numbers.integer(argument, in: 1...1000) else { return badArgument("page count", argument, "1...1000") }
            let pageText = request.query("page") ?? "1"
            guard let page = Numbers.integer(pageText, in: 1...count) else { return badArgument("page", pageText, "1...\(count)") }
            let link = { (number: Int, relation: String) in "</_test/pages/\(count)?page=\(number)>; rel=\"\(relation)\"" }
            var links = [link(1, "first")]
            if page > 1 { links.append(link(page - 1, "prev")) }
            if page < count { links.append(link(page + 1, "next")) }
            var response = ReqresAPI.json(200, JSONText.object([("page", "\(page)"), ("total_pages", "\(count)")]))
            response.headers.append(("Link", links.joined(separator: ", ")))
            return .response(response)
        case "redirect":
            guard let code = Numbers.integer(argument, in: 300...399) else { return badArgument("redirect status", argument, "300...399") }
            let target = request.query("to") ?? "/_test/echo"
            guard HeaderText.isValidValue(target) else { return badHeader("the redirect target has CR, LF or NUL") }
            return .response(
                HTTPResponse(
                    status: code, headers: [("Location", target), ("Content-Type", "text/plain")],
                    body: Array("Redirecting to \(target)\n".utf8)))
        case "redirect-chain":
            guard let remaining = Numbers.integer(argument, in: 0...1000) else { return badArgument("hop count", argument, "0...1000") }
            let target = remaining == 0 ? "/_test/echo" : "/_test/redirect-chain/\(remaining - 1)"
            return .response(HTTPResponse(status: 302, headers: [("Location", target)]))
        case "redirect-loop":
            return .response(HTTPResponse(status: 302, headers: [("Location", request.path)]))
        case "basic-auth":
            // user "user", password "passwd", as httpbin does.
            if request.header("Authorization") == "Basic " + Data("user:passwd".utf8).base64EncodedString() {
                return .response(ReqresAPI.json(200, JSONText.object([("authenticated", "true"), ("user", JSONText.string("user"))])))
            }
            var response = ReqresAPI.json(401, JSONText.object([("error", JSONText.string("authentication required"))]))
            response.headers.append(("WWW-Authenticate", "Basic realm=\"mock\""))
            return .response(response)
        case "delay":
            let text = request.query("seconds") ?? "1"
            guard let seconds = Numbers.seconds(text, maximum: 120) else { return badArgument("seconds", text, "0...120") }
            var response = echo(request)
            response.delayBeforeHeaders = seconds
            return .response(response)
        case "stall":
            let bytesText = request.query("bytes") ?? "100"
            let secondsText = request.query("seconds") ?? "1"
            guard let size = Numbers.integer(bytesText, in: 0...(1 << 20)) else { return badArgument("bytes", bytesText, "0...1048576") }
            guard let seconds = Numbers.seconds(secondsText, maximum: 120) else { return badArgument("seconds", secondsText, "0...120") }
            var response = HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: pattern(size))
            response.stallAfterBodyBytes = size / 2
            response.stallSeconds = seconds
            return .response(response)
        case "stream", "events":
            return streamed(request, asEvents: name == "events")
        case "bytes":
            guard let size = Numbers.integer(argument, in: 0...maximumGeneratedBytes) else {
                return badArgument("byte count", argument, "0...\(maximumGeneratedBytes)")
            }
            var response = HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")])
            response.generatedBodyLength = size
            return .response(response)
        case "files":
            return notModifiedIfUnchanged(.response(TransferEndpoints.file(request, sizeText: argument)), request)
        case "upload":
            // A chunked body (a streamed one with Content-Length never gets here).
            let checksum = request.body.withUnsafeBytes { TransferEndpoints.fnv1a64($0) }
            return .response(TransferEndpoints.receipt(request, byteCount: request.body.count, checksum: checksum))
        case "close-before-response":
            return .close
        case "close-mid-body":
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789".utf8))
        case "close-in-headers":
            // Kills clients on Swift 6.3 / Linux (swift-corelibs-foundation #5285): only for child-process tests.
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Ty".utf8))
        case "wrong-length":
            var response = HTTPResponse(
                status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "100")],
                body: Array("only ten!\n".utf8))
            response.closeAfter = false
            return .response(response)
        case "garbage":
            return .raw(Array("SSH-2.0-OpenSSH_9.2 this is not HTTP\r\n\r\n".utf8))
        case "hang":
            return .hang
        case "html":
            // Any path below it: a 200 HTML page, as a captive portal or a misconfigured proxy answers.
            return .response(
                HTTPResponse(
                    status: 200, headers: [("Content-Type", "text/html; charset=utf-8")],
                    body: Array("<!doctype html><html><body><h1>Welcome</h1></body></html>\n".utf8)))
        case "stats":
            return .response(
                ReqresAPI.json(
                    200,
                    JSONText.object([
                        ("acceptedConnections", "\(server.acceptedConnectionCount)"),
                        ("handledRequests", "\(server.handledRequestCount)")
                    ])))
        case "gzip":
            let text = Array(JSONText.object([("compressed", "true"), ("message", JSONText.string(String(repeating: "hello ", count: 20)))]).utf8)
            return .response(
                HTTPResponse(
                    status: 200,
                    headers: [
                        ("Content-Type", "application/json; charset=utf-8"),
                        ("Content-Encoding", "gzip")
                    ], body: Gzip.stored(text)))
        case "gzip-bomb":
            // N zero bytes as a gzip stream about 1/160 of that size (N up to 1 GiB): for size limits.
            guard let size = Numbers.integer(argument, in: 1...(1 << 30)) else { return badArgument("expanded size", argument, "1...1073741824") }
            return .response(
                HTTPResponse(
                    status: 200,
                    headers: [
                        ("Content-Type", "application/octet-stream"),
                        ("Content-Encoding", "gzip")
                    ], body: Gzip.zeros(size)))
        case "proxy-auth":
            var response = ReqresAPI.json(407, JSONText.object([("error", JSONText.string("proxy authentication required"))]))
            response.headers.append(("Proxy-Authenticate", "Basic realm=\"proxy\""))
            return .response(response)
        case "set-cookie":
            return .response(
                HTTPResponse(
                    status: 200,
                    headers: [
                        ("Set-Cookie", "session=abc123; Path=/; HttpOnly"),
                        ("Set-Cookie", "theme=dark; Path=/"),
                        ("Content-Type", "text/plain")
                    ], body: Array("cookies set\n".utf8)))
        case "response-headers":
            // Every query pair becomes a response header, e.g. ?ETag=%22v1%22
            let headers = request.queryItems
            if let bad = headers.first(where: { !HeaderText.isToken($0.name) }) {
                return badHeader("'\(HeaderText.printable(bad.name))' is not a valid header name")
            }
            if let bad = headers.first(where: { !HeaderText.isValidValue($0.value) }) {
                return badHeader("the value of '\(bad.name)' has CR, LF or NUL")
            }
            return .response(HTTPResponse(status: 200, headers: headers + [("Content-Type", "text/plain")], body: Array("ok\n".utf8)))
        default:
            return .response(HTTPResponse(status: 404, text: "Unknown test endpoint\n"))
        }
    }

    /// Everything the server saw, as JSON: method, path, query (raw and decoded), headers, body (base64).
    static func echo(_ request: ReceivedRequest) -> HTTPResponse {
        let pairs = { (items: [(name: String, value: String)]) in
            JSONText.array(items.map { JSONText.array([JSONText.string($0.name), JSONText.string($0.value)]) })
        }
        return ReqresAPI.json(
            200,
            JSONText.object([
                ("method", JSONText.string(request.method)),
                ("path", JSONText.string(request.path)),
                ("rawQuery", request.rawQuery.map(JSONText.string) ?? "null"),
                ("query", pairs(request.queryItems)),
                ("headers", pairs(request.headers)),
                ("body", JSONText.string(request.body.base64EncodedString()))
            ]))
    }

    /// A token stream as an LLM API sends one: the words of a sentence, one every `interval` seconds (default 0.05),
    /// `count` of them (default 12); as lines (`/_test/stream`) or as Server-Sent Events with IDs and a final `done`
    /// event (`/_test/events`, which resumes after a `Last-Event-ID`).
    static func streamed(_ request: ReceivedRequest, asEvents: Bool) -> Reply {
        let countText = request.query("count") ?? "12"
        let intervalText = request.query("interval") ?? "0.05"
        guard let count = Numbers.integer(countText, in: 0...1_000_000) else { return badArgument("count", countText, "0...1000000") }
        guard let interval = Numbers.seconds(intervalText, maximum: 60) else { return badArgument("interval", intervalText, "0...60") }
        let words = "The quick brown fox jumps over the lazy dog while the model streams its answer".split(separator: " ")
        let first = asEvents ? (request.header("Last-Event-ID").flatMap { Int($0) } ?? 0) + 1 : 1
        guard first <= count else { return .stub(MockServer.Response(status: 204)) }
        let tokens = (first...count).map { ($0, String(words[($0 - 1) % words.count])) }
        guard asEvents else {
            return .stub(.streamed(tokens.map { .init(after: interval, "\($0.1)\n") }, contentType: "text/plain; charset=utf-8"))
        }
        let events = tokens.map { MockServer.Response.Event(id: String($0.0), data: $0.1, after: interval) }
        // The last event asks for a reconnection 0.1 s later (answered 204: the end), not after the default 3 s.
        let done = MockServer.Response.Event(id: String(count), event: "done", data: "[DONE]", retry: 100, after: interval)
        return .stub(.events(events + [done]))
    }

    /// The largest `/_test/bytes/N` (64 GiB): bodies are generated while written, never held.
    static let maximumGeneratedBytes = 1 << 36

    /// Deterministic bytes: byte i is i mod 251.
    static func pattern(_ count: Int) -> [UInt8] { (0..<max(0, count)).map { UInt8($0 % 251) } }

    /// 261 whole periods of the pattern (65,511 bytes): consecutive blocks continue it seamlessly.
    static let patternBlock = pattern(251 * 261)

    private static func badArgument(_ what: String, _ text: String?, _ range: String) -> Reply {
        .response(badArgumentResponse(what, text, range))
    }

    /// A JSON 400 saying which number was wrong and the range it must be in.
    static func badArgumentResponse(_ what: String, _ text: String?, _ range: String) -> HTTPResponse {
        let message = "\(what) must be a whole number in \(range), not '\(HeaderText.printable(text ?? ""))'"
        return ReqresAPI.json(400, JSONText.object([("error", JSONText.string(message))]))
    }

    private static func badHeader(_ message: String) -> Reply {
        .response(ReqresAPI.json(400, JSONText.object([("error", JSONText.string(message))])))
    }
}

/// Numbers from a request, parsed strictly: digits only (no sign, space or exponent) and range-checked,
/// so that no arithmetic on them can trap.
enum Numbers {
    /// A whole number in `range`, or nil for anything else.
    static func integer(_ text: String?, in range: ClosedRange<Int>) -> Int? {
        guard let text, !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let value = Int(text), range.contains(value)
        else { return nil }
        return value
    }

    /// Seconds as digits with an optional fraction (`1`, `0.25`), from 0 to `maximum`.
    static func seconds(_ text: String, maximum: Double) -> Double? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard text.utf8.count <= 12, let whole = parts.first, !whole.isEmpty,
            parts.allSatisfy({ $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }), parts.count == 1 || !parts[1].isEmpty,
            let value = Double(text), value.isFinite, value >= 0, value <= maximum
        else { return nil }
        return value
    }
}

/// Checks on bytes that the server writes into response headers: bytes, not `Character`s (CR LF is one grapheme).
enum HeaderText {
    /// The bytes of an RFC 9110 token (header names, methods).
    static let tokenBytes = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)

    /// An RFC 9110 token: a valid header name.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { tokenBytes.contains($0) }
    }

    /// A header value free of CR, LF and NUL.
    static func isValidValue(_ text: String) -> Bool {
        !text.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 }
    }

    /// `text` with control bytes shown as `\u{..}`, for error messages.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.prefix(200).map { $0.value < 32 || $0.value == 127 ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined())
    }
}
