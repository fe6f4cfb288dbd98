// Which handler answers a request: reqres paths, avatars, and the test endpoints under /_test/.

import Foundation

enum Routes {
    static func reply(to request: ReceivedRequest, server: MockServer) -> Reply {
        if request.path == "/api" || request.path.hasPrefix("/api/") {
            return ReqresAPI.reply(to: request, server: server)
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

/// Endpoints that make the server answer (or misbehave) on demand. See README "Mock server".
enum TestEndpoints {
    static func reply(to request: ReceivedRequest, server: MockServer) -> Reply {
        let segments = request.path.split(separator: "/").dropFirst().map(String.init)
        let name = segments.first ?? ""
        let argument = segments.count > 1 ? segments[1] : nil
        switch name {
        case "echo":
            var response = echo(request)
            if let status = request.query("status").flatMap(Int.init), (200...599).contains(status) { response.status = status }
            return .response(response)
        case "status":
            guard let code = argument.flatMap(Int.init), (200...599).contains(code) else { return badArgument("status code") }
            let hasBody = code != 204 && code != 304
            var response = ReqresAPI.json(code, JSONText.object([("status", "\(code)")]))
            if !hasBody { response.body = [] }
            return .response(response)
        case "redirect":
            guard let code = argument.flatMap(Int.init), (300...399).contains(code) else { return badArgument("redirect status") }
            let target = request.query("to") ?? "/_test/echo"
            return .response(HTTPResponse(status: code, headers: [("Location", target), ("Content-Type", "text/plain")],
                                          body: Array("Redirecting to \(target)\n".utf8)))
        case "redirect-chain":
            guard let remaining = argument.flatMap(Int.init), remaining >= 0 else { return badArgument("hop count") }
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
            var response = echo(request)
            response.delayBeforeHeaders = min(request.query("seconds").flatMap(Double.init) ?? 1, 120)
            return .response(response)
        case "stall":
            let size = min(request.query("bytes").flatMap(Int.init) ?? 100, 1 << 20)
            var response = HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: pattern(size))
            response.stallAfterBodyBytes = size / 2
            response.stallSeconds = min(request.query("seconds").flatMap(Double.init) ?? 1, 120)
            return .response(response)
        case "bytes":
            guard let size = argument.flatMap(Int.init), (0...(64 << 20)).contains(size) else { return badArgument("byte count") }
            return .response(HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: pattern(size)))
        case "close-before-response":
            return .close
        case "close-mid-body":
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789".utf8))
        case "close-in-headers":
            // Kills clients on Swift 6.3 / Linux (swift-corelibs-foundation #5285): only for child-process tests.
            return .raw(Array("HTTP/1.1 200 OK\r\nContent-Ty".utf8))
        case "wrong-length":
            var response = HTTPResponse(status: 200, headers: [("Content-Type", "text/plain"), ("Content-Length", "100")],
                                        body: Array("only ten!\n".utf8))
            response.closeAfter = false
            return .response(response)
        case "garbage":
            return .raw(Array("SSH-2.0-OpenSSH_9.2 this is not HTTP\r\n\r\n".utf8))
        case "hang":
            return .hang
        case "stats":
            return .response(ReqresAPI.json(200, JSONText.object([
                ("acceptedConnections", "\(server.acceptedConnectionCount)"),
                ("handledRequests", "\(server.handledRequestCount)"),
            ])))
        case "gzip":
            let text = Array(JSONText.object([("compressed", "true"), ("message", JSONText.string(String(repeating: "hello ", count: 20)))]).utf8)
            return .response(HTTPResponse(status: 200, headers: [("Content-Type", "application/json; charset=utf-8"),
                                                                 ("Content-Encoding", "gzip")], body: Gzip.stored(text)))
        case "set-cookie":
            return .response(HTTPResponse(status: 200, headers: [("Set-Cookie", "session=abc123; Path=/; HttpOnly"),
                                                                 ("Set-Cookie", "theme=dark; Path=/"),
                                                                 ("Content-Type", "text/plain")], body: Array("cookies set\n".utf8)))
        case "response-headers":
            // Every query pair becomes a response header, e.g. ?ETag=%22v1%22
            let headers = request.queryItems.filter { !$0.name.isEmpty && !$0.value.contains(where: { $0 == "\r" || $0 == "\n" }) }
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
        return ReqresAPI.json(200, JSONText.object([
            ("method", JSONText.string(request.method)),
            ("path", JSONText.string(request.path)),
            ("rawQuery", request.rawQuery.map(JSONText.string) ?? "null"),
            ("query", pairs(request.queryItems)),
            ("headers", pairs(request.headers)),
            ("body", JSONText.string(request.body.base64EncodedString())),
        ]))
    }

    /// Deterministic bytes: byte i is i mod 251.
    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8($0 % 251) } }

    private static func badArgument(_ what: String) -> Reply {
        .response(HTTPResponse(status: 400, text: "Bad \(what)\n"))
    }
}
