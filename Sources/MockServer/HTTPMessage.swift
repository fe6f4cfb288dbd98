// HTTP/1.1 request parsing (incremental, bounded) and response serialization.

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A parsed request head and body, before routing.
struct ParsedRequest {
    var method: String
    var target: String
    var version: String
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// Header names lower-cased once, for lookups.
    var lowercasedNames: [String] = []

    var keepAlive: Bool {
        let connection = header("connection")?.lowercased() ?? ""
        return version == "HTTP/1.1" ? !connection.contains("close") : connection.contains("keep-alive")
    }

    /// The first header named `name` (give it lower-cased).
    func header(_ name: String) -> String? {
        lowercasedNames.firstIndex(of: name).map { headers[$0].value }
    }
}

enum ParseResult {
    /// More bytes are needed; `expectsContinue` when the client waits for `100 Continue`.
    case incomplete(expectsContinue: Bool)
    case complete(ParsedRequest, consumed: Int)
    /// The request is unacceptable: answer with this status and close.
    case failure(status: Int, reason: String)
}

enum RequestParser {
    private static let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    private static let headEnd: [UInt8] = [13, 10, 13, 10]

    static func parse(_ buffer: ArraySlice<UInt8>, maximumHeaderBytes: Int, maximumBodyBytes: Int) -> ParseResult {
        guard let end = find(headEnd, in: buffer) else {
            if buffer.count > maximumHeaderBytes { return .failure(status: 431, reason: "request head too large") }
            return .incomplete(expectsContinue: false)
        }
        let headLength = end - buffer.startIndex
        if headLength > maximumHeaderBytes { return .failure(status: 431, reason: "request head too large") }
        var request: ParsedRequest
        switch parseHead(buffer[buffer.startIndex..<end]) {
        case .success(let parsed): request = parsed
        case .failure(let failure): return .failure(status: failure.status, reason: failure.reason)
        }
        let bodyStart = end + 4
        let contentLengths = request.lowercasedNames.indices.filter { request.lowercasedNames[$0] == "content-length" }
            .map { request.headers[$0].value }
        let transferEncoding = request.header("transfer-encoding")
        let expectsContinue = request.header("expect")?.lowercased() == "100-continue"
        if let transferEncoding {
            guard contentLengths.isEmpty else { return .failure(status: 400, reason: "both Content-Length and Transfer-Encoding") }
            guard transferEncoding.lowercased() == "chunked" else { return .failure(status: 501, reason: "unsupported Transfer-Encoding") }
            switch dechunk(buffer[bodyStart...], maximumBodyBytes: maximumBodyBytes) {
            case .incomplete: return .incomplete(expectsContinue: expectsContinue)
            case .failure(let status, let reason): return .failure(status: status, reason: reason)
            case .complete(let body, let consumed):
                request.body = body
                return .complete(request, consumed: bodyStart - buffer.startIndex + consumed)
            }
        }
        var length = 0
        if let first = contentLengths.first {
            guard contentLengths.allSatisfy({ $0 == first }), !first.isEmpty, first.count <= 15,
                  first.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = Int(first) else {
                return .failure(status: 400, reason: "invalid Content-Length")
            }
            length = value
        }
        if length > maximumBodyBytes { return .failure(status: 413, reason: "body too large") }
        guard buffer.endIndex - bodyStart >= length else { return .incomplete(expectsContinue: expectsContinue) }
        request.body = Array(buffer[bodyStart..<(bodyStart + length)])
        return .complete(request, consumed: bodyStart + length - buffer.startIndex)
    }

    private struct HeadFailure: Error {
        let status: Int
        let reason: String
    }

    private static func parseHead(_ head: ArraySlice<UInt8>) -> Result<ParsedRequest, HeadFailure> {
        // Bytes other than tab and printable ones (CR/LF only as line ends) make the head malformed.
        if head.contains(where: { $0 == 0 || ($0 < 32 && $0 != 9 && $0 != 13 && $0 != 10) || $0 == 127 }) {
            return .failure(HeadFailure(status: 400, reason: "control character in head"))
        }
        let lines = split(head)
        guard let requestLine = lines.first else { return .failure(HeadFailure(status: 400, reason: "empty request")) }
        let parts = requestLine.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ token.contains($0) }),
              let first = parts[1].first, first == UInt8(ascii: "/") || first == UInt8(ascii: "*") || parts[1].starts(with: Array("http".utf8)),
              !parts[1].contains(where: { $0 <= 32 || $0 >= 127 }) else {
            return .failure(HeadFailure(status: 400, reason: "malformed request line"))
        }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version.hasPrefix("HTTP/1.") || version.hasPrefix("HTTP/2") else {
            return .failure(HeadFailure(status: 400, reason: "malformed HTTP version"))
        }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .failure(HeadFailure(status: 505, reason: "HTTP version not supported"))
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy({ token.contains($0) }) else {
                return .failure(HeadFailure(status: 400, reason: "malformed header line"))
            }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            headers.append((name, value))
        }
        let request = ParsedRequest(method: String(decoding: parts[0], as: UTF8.self),
                                    target: String(decoding: parts[1], as: UTF8.self),
                                    version: version, headers: headers, body: [],
                                    lowercasedNames: headers.map { $0.name.lowercased() })
        if version == "HTTP/1.1" && request.header("host") == nil {
            return .failure(HeadFailure(status: 400, reason: "missing Host header"))
        }
        return .success(request)
    }

    /// Splits on CRLF; a bare CR or LF inside a line makes a line that fails the token checks.
    private static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == 13, index + 1 < head.endIndex, head[index + 1] == 10 {
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        // A bare LF or CR left anywhere is malformed: make the line invalid for every check.
        return lines.map { line in line.contains(where: { $0 == 10 || $0 == 13 }) ? ArraySlice([0x20]) : line }
    }

    private enum ChunkResult {
        case incomplete
        case failure(Int, String)
        case complete([UInt8], consumed: Int)
    }

    private static func dechunk(_ bytes: ArraySlice<UInt8>, maximumBodyBytes: Int) -> ChunkResult {
        var body: [UInt8] = []
        var index = bytes.startIndex
        while true {
            guard let lineEnd = find([13, 10], in: bytes[index...]) else {
                return bytes.endIndex - index > 1024 ? .failure(400, "chunk size line too long") : .incomplete
            }
            let sizeText = String(decoding: bytes[index..<lineEnd], as: UTF8.self)
                .split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            guard !sizeText.isEmpty, sizeText.count <= 8, let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                return .failure(400, "malformed chunk size")
            }
            index = lineEnd + 2
            if size == 0 {
                // Trailer lines until an empty line.
                while true {
                    guard let end = find([13, 10], in: bytes[index...]) else {
                        return bytes.endIndex - index > 8192 ? .failure(431, "trailers too large") : .incomplete
                    }
                    let empty = end == index
                    index = end + 2
                    if empty { return .complete(body, consumed: index - bytes.startIndex) }
                }
            }
            if body.count + size > maximumBodyBytes { return .failure(413, "body too large") }
            guard bytes.endIndex - index >= size + 2 else { return .incomplete }
            body += bytes[index..<(index + size)]
            guard bytes[index + size] == 13, bytes[index + size + 1] == 10 else { return .failure(400, "chunk not followed by CRLF") }
            index += size + 2
        }
    }

    static func find(_ pattern: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= pattern.count, let first = pattern.first else { return nil }
        var index = bytes.startIndex
        let last = bytes.endIndex - pattern.count
        while index <= last {
            if bytes[index] == first {
                var matches = true
                for offset in 1..<pattern.count where bytes[index + offset] != pattern[offset] {
                    matches = false
                    break
                }
                if matches { return index }
            }
            index += 1
        }
        return nil
    }
}

/// A response to write, and how to misbehave while writing it.
struct HTTPResponse {
    var status: Int
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    /// Seconds to wait before sending anything.
    var delayBeforeHeaders: TimeInterval = 0
    /// Send this many body bytes, then wait `stallSeconds` before the rest.
    var stallAfterBodyBytes: Int?
    var stallSeconds: TimeInterval = 0
    /// Close the connection after this response.
    var closeAfter = false

    init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    init(status: Int, text: String) {
        self.init(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array(text.utf8))
    }

    init(status: Int, json: String) {
        self.init(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: Array(json.utf8))
    }

    /// Head (and body unless `includeBody` is false) as bytes.
    func serialized(keepAlive: Bool, includeBody: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\nDate: \(Self.httpDate())\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let hasBody = !(status == 204 || status == 304 || (100..<200).contains(status))
        if hasBody && !headers.contains(where: { $0.name.lowercased() == "content-length" }) {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "Connection: \(keepAlive ? "keep-alive" : "close")\r\n\r\n"
        var bytes = Array(head.utf8)
        if includeBody && hasBody { bytes += body }
        return bytes
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 413: return "Content Too Large"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Status \(status)"
        }
    }

    private static let dateCache = DateCache()

    /// The current RFC 9110 date, formatted at most once a second.
    static func httpDate() -> String { dateCache.current() }

    /// RFC 9110 date, e.g. `Sun, 06 Nov 1994 08:49:37 GMT` (no DateFormatter: it is slow and locale-bound).
    static func httpDate(_ time: time_t) -> String {
        var seconds = time
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}

final class DateCache: @unchecked Sendable {
    private let lock = NSLock()
    private var second: time_t = 0
    private var text = ""

    func current() -> String {
        let now = time(nil)
        lock.lock()
        defer { lock.unlock() }
        if now != second {
            second = now
            text = HTTPResponse.httpDate(now)
        }
        return text
    }
}
