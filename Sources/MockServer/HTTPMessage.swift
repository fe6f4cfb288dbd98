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
    /// For a body streamed past the parser (the upload sink): its length; `body` is then empty.
    var streamedBodyLength: Int?

    var keepAlive: Bool {
        let connection = header("connection")?.lowercased() ?? ""
        return version == "HTTP/1.1" ? !connection.contains("close") : connection.contains("keep-alive")
    }

    /// The first header named `name` (give it lower-cased).
    func header(_ name: String) -> String? {
        lowercasedNames.firstIndex(of: name).map { headers[$0].value }
    }

    /// Every value of the header named `name` (give it lower-cased), in order.
    func values(of name: String) -> [String] {
        lowercasedNames.indices.filter { lowercasedNames[$0] == name }.map { headers[$0].value }
    }
}

enum ParseResult {
    /// More bytes are needed; `expectsContinue` when the client waits for `100 Continue`.
    case incomplete(expectsContinue: Bool)
    case complete(ParsedRequest, consumed: Int)
    /// The request is unacceptable: answer with this status and close.
    case failure(status: Int, reason: String)
}

/// An incremental HTTP/1.1 request parser (RFC 9112). Feed it the connection's unread bytes each
/// time more arrive (always the same bytes plus new ones at the end); it resumes where it stopped,
/// so every byte of a head or chunked body is examined once: cost is linear in the request size.
/// After `.complete` the parser is ready for the next request (pass the bytes after `consumed`).
struct RequestParser {
    private static let token = HeaderText.tokenBytes
    private static let cr: UInt8 = 13
    private static let lf: UInt8 = 10

    let maximumHeaderBytes: Int
    let maximumBodyBytes: Int

    private enum Phase {
        /// Looking for the end of the head; bytes before `scanned` were checked.
        case head(scanned: Int)
        /// A body of known length starting at `bodyStart`.
        case fixed(ParsedRequest, bodyStart: Int, length: Int, expectsContinue: Bool)
        /// A chunked body starting at `bodyStart`: `progress` says where parsing resumes.
        case chunked(ParsedRequest, bodyStart: Int, progress: ChunkProgress, expectsContinue: Bool)
    }

    private struct ChunkProgress {
        /// Offset from the body's start of the next byte to look at.
        var position = 0
        var state = ChunkState.sizeLine
    }

    private enum ChunkState {
        case sizeLine
        case data(remaining: Int)
        case dataEnd
        case trailers(lineStart: Int)
    }

    private var phase = Phase.head(scanned: 0)
    /// The de-chunked body so far; kept outside `phase` so that appending never copies it.
    private var dechunkedBytes: [UInt8] = []

    init(maximumHeaderBytes: Int, maximumBodyBytes: Int) {
        self.maximumHeaderBytes = maximumHeaderBytes
        self.maximumBodyBytes = maximumBodyBytes
    }

    /// Whether part of a request has been read (its head is done, or bytes of it arrived).
    var hasReadHead: Bool {
        if case .head = phase { return false }
        return true
    }

    /// How many body bytes of the current request have arrived so far.
    func bodyBytesReceived(in buffer: ArraySlice<UInt8>) -> Int {
        switch phase {
        case .head: return 0
        case let .fixed(_, bodyStart, _, _): return max(0, buffer.count - bodyStart)
        case let .chunked(_, _, progress, _): return progress.position
        }
    }

    /// Parses one request from a fresh parser (for tests and one-shot use).
    static func parse(_ buffer: ArraySlice<UInt8>, maximumHeaderBytes: Int, maximumBodyBytes: Int) -> ParseResult {
        var parser = RequestParser(maximumHeaderBytes: maximumHeaderBytes, maximumBodyBytes: maximumBodyBytes)
        return parser.parse(buffer)
    }

    /// Continues parsing `buffer` (offsets are relative to its start).
    mutating func parse(_ buffer: ArraySlice<UInt8>) -> ParseResult {
        let result = step(buffer)
        switch result {
        case .complete, .failure: phase = .head(scanned: 0)
        case .incomplete: break
        }
        return result
    }

    private mutating func step(_ buffer: ArraySlice<UInt8>) -> ParseResult {
        switch phase {
        case .head(let scanned):
            return parseHead(buffer, scanned: scanned)
        case let .fixed(request, bodyStart, length, expectsContinue):
            return fixedBody(buffer, request: request, bodyStart: bodyStart, length: length, expectsContinue: expectsContinue)
        case let .chunked(request, bodyStart, progress, expectsContinue):
            return chunkedBody(buffer, request: request, bodyStart: bodyStart, progress: progress, expectsContinue: expectsContinue)
        }
    }

    // MARK: Head

    private mutating func parseHead(_ buffer: ArraySlice<UInt8>, scanned: Int) -> ParseResult {
        let base = buffer.startIndex
        var index = scanned
        var headEnd: Int?
        while index < buffer.count {
            let byte = buffer[base + index]
            if byte == Self.lf {
                // Lines end in CRLF only; a bare LF is answered at once instead of waiting for a CRLFCRLF that never comes.
                guard index > 0, buffer[base + index - 1] == Self.cr else { return .failure(status: 400, reason: "bare LF in request head") }
                if index >= 3, buffer[base + index - 2] == Self.lf, buffer[base + index - 3] == Self.cr {
                    headEnd = index + 1
                    break
                }
            } else if byte == Self.cr {
                guard index + 1 < buffer.count else { break }  // decide when the next byte is here
                guard buffer[base + index + 1] == Self.lf else { return .failure(status: 400, reason: "bare CR in request head") }
            } else if byte == 0 || byte == 127 || (byte < 32 && byte != 9) {
                return .failure(status: 400, reason: "control character in request head")
            }
            index += 1
            if index > maximumHeaderBytes { return .failure(status: 431, reason: "request head too large") }
        }
        guard let headEnd else {
            phase = .head(scanned: index)
            return .incomplete(expectsContinue: false)
        }
        var request: ParsedRequest
        switch Self.parseHeadLines(buffer[base..<(base + headEnd - 4)]) {
        case .success(let parsed): request = parsed
        case .failure(let failure): return .failure(status: failure.status, reason: failure.reason)
        }
        let expectsContinue = request.header("expect")?.lowercased() == "100-continue"
        let contentLengths = request.values(of: "content-length")
        let transferEncodings = request.values(of: "transfer-encoding")
        if !transferEncodings.isEmpty {
            guard contentLengths.isEmpty else { return .failure(status: 400, reason: "both Content-Length and Transfer-Encoding") }
            guard transferEncodings.count == 1 else { return .failure(status: 400, reason: "more than one Transfer-Encoding") }
            let codings = transferEncodings[0].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard codings == ["chunked"] else { return .failure(status: 501, reason: "unsupported Transfer-Encoding (only chunked is)") }
            return chunkedBody(buffer, request: request, bodyStart: headEnd, progress: ChunkProgress(), expectsContinue: expectsContinue)
        }
        var length = 0
        if let first = contentLengths.first {
            guard contentLengths.allSatisfy({ $0 == first }) else { return .failure(status: 400, reason: "different Content-Length values") }
            // Digits only, at most 15 of them: a length that cannot overflow.
            guard let value = Numbers.integer(first, in: 0...999_999_999_999_999) else {
                return .failure(status: 400, reason: "invalid Content-Length")
            }
            length = value
        }
        if !contentLengths.isEmpty, TransferEndpoints.streamsBody(target: request.target) {
            request.streamedBodyLength = length
            return .complete(request, consumed: headEnd)
        }
        if length > maximumBodyBytes { return .failure(status: 413, reason: "body too large") }
        phase = .fixed(request, bodyStart: headEnd, length: length, expectsContinue: expectsContinue)
        return fixedBody(buffer, request: request, bodyStart: headEnd, length: length, expectsContinue: expectsContinue)
    }

    private struct HeadFailure: Error {
        let status: Int
        let reason: String
    }

    /// The request line and header lines of a head already checked for bare CR, LF and control bytes.
    private static func parseHeadLines(_ head: ArraySlice<UInt8>) -> Result<ParsedRequest, HeadFailure> {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == cr {
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        let requestLine = lines[0]
        let parts = requestLine.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ token.contains($0) }),
            let first = parts[1].first, first == UInt8(ascii: "/") || first == UInt8(ascii: "*") || parts[1].starts(with: Array("http".utf8)),
            !parts[1].contains(where: { $0 <= 32 || $0 >= 127 })
        else {
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
                line[line.startIndex..<colon].allSatisfy({ token.contains($0) })
            else {
                return .failure(HeadFailure(status: 400, reason: "malformed header line"))
            }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            headers.append((name, value))
        }
        let request = ParsedRequest(
            method: String(decoding: parts[0], as: UTF8.self),
            target: String(decoding: parts[1], as: UTF8.self),
            version: version, headers: headers, body: [],
            lowercasedNames: headers.map { $0.name.lowercased() })
        let hosts = request.values(of: "host").count
        if hosts > 1 { return .failure(HeadFailure(status: 400, reason: "more than one Host header")) }
        if version == "HTTP/1.1" && hosts == 0 {
            return .failure(HeadFailure(status: 400, reason: "missing Host header"))
        }
        return .success(request)
    }

    // MARK: Bodies

    private func fixedBody(
        _ buffer: ArraySlice<UInt8>, request: ParsedRequest, bodyStart: Int, length: Int,
        expectsContinue: Bool
    ) -> ParseResult {
        guard buffer.count - bodyStart >= length else { return .incomplete(expectsContinue: expectsContinue) }
        var request = request
        let start = buffer.startIndex + bodyStart
        request.body = Array(buffer[start..<(start + length)])
        return .complete(request, consumed: bodyStart + length)
    }

    /// Resumes a chunked body where `progress` says it stopped.
    private mutating func chunkedBody(
        _ buffer: ArraySlice<UInt8>, request: ParsedRequest, bodyStart: Int,
        progress: ChunkProgress, expectsContinue: Bool
    ) -> ParseResult {
        let base = buffer.startIndex + bodyStart
        let available = buffer.count - bodyStart
        var position = progress.position
        var state = progress.state
        if position == 0 { dechunkedBytes = [] }
        func suspend() -> ParseResult {
            phase = .chunked(
                request, bodyStart: bodyStart, progress: ChunkProgress(position: position, state: state),
                expectsContinue: expectsContinue)
            return .incomplete(expectsContinue: expectsContinue)
        }
        /// The end of the CRLF-terminated line starting at `from`, nil when not all here, or a failure.
        func lineEnd(from: Int, limit: Int) -> Result<Int?, HeadFailure> {
            var index = from
            while index < available {
                let byte = buffer[base + index]
                if byte == Self.lf {
                    guard index > from, buffer[base + index - 1] == Self.cr else {
                        return .failure(HeadFailure(status: 400, reason: "bare LF in chunked body"))
                    }
                    return .success(index - 1)
                }
                if byte == Self.cr, index + 1 < available, buffer[base + index + 1] != Self.lf {
                    return .failure(HeadFailure(status: 400, reason: "bare CR in chunked body"))
                }
                index += 1
                if index - from > limit { return .failure(HeadFailure(status: 400, reason: "chunk line too long")) }
            }
            return .success(nil)
        }
        while true {
            switch state {
            case .sizeLine:
                switch lineEnd(from: position, limit: 1024) {
                case .failure(let failure): return .failure(status: failure.status, reason: failure.reason)
                case .success(nil): return suspend()
                case .success(let end?):
                    let line = buffer[(base + position)..<(base + end)]
                    let digits = line.prefix { $0 != UInt8(ascii: ";") }
                    guard let size = Self.chunkSize(digits, limit: maximumBodyBytes - dechunkedBytes.count) else {
                        return .failure(status: 400, reason: "malformed chunk size (hex digits only)")
                    }
                    if size < 0 { return .failure(status: 413, reason: "body too large") }
                    position = end + 2
                    state = size == 0 ? .trailers(lineStart: position) : .data(remaining: size)
                }
            case .data(let remaining):
                let here = min(remaining, available - position)
                if here > 0 {
                    dechunkedBytes.append(contentsOf: buffer[(base + position)..<(base + position + here)])
                    position += here
                }
                if here < remaining {
                    state = .data(remaining: remaining - here)
                    return suspend()
                }
                state = .dataEnd
            case .dataEnd:
                guard available - position >= 2 else { return suspend() }
                guard buffer[base + position] == Self.cr, buffer[base + position + 1] == Self.lf else {
                    return .failure(status: 400, reason: "chunk not followed by CRLF")
                }
                position += 2
                state = .sizeLine
            case .trailers(let lineStart):
                switch lineEnd(from: position, limit: 8192) {
                case .failure(let failure): return .failure(status: failure.status, reason: failure.reason)
                case .success(nil):
                    if available - lineStart > 8192 { return .failure(status: 431, reason: "trailers too large") }
                    return suspend()
                case .success(let end?):
                    position = end + 2
                    if end == lineStart {
                        var request = request
                        request.body = dechunkedBytes
                        dechunkedBytes = []
                        return .complete(request, consumed: bodyStart + position)
                    }
                    state = .trailers(lineStart: position)
                }
            }
        }
    }

    /// A chunk size: hex digits only (no sign, no space), at least one. Returns -1 when it is
    /// larger than `limit`, nil when malformed; never overflows.
    static func chunkSize(_ digits: ArraySlice<UInt8>, limit: Int) -> Int? {
        guard !digits.isEmpty else { return nil }
        var value = 0
        var tooLarge = false
        for byte in digits {
            let digit: Int
            switch byte {
            case 48...57: digit = Int(byte) - 48
            case 65...70: digit = Int(byte) - 55
            case 97...102: digit = Int(byte) - 87
            default: return nil
            }
            if !tooLarge {
                value = value * 16 + digit
                if value > limit { tooLarge = true }
            }
        }
        return tooLarge ? -1 : value
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
    /// When set, the body is `TestEndpoints.pattern` of this many bytes, generated while it is
    /// written (`body` is ignored): memory stays at one block whatever the size.
    var generatedBodyLength: Int?
    /// Where in the pattern a generated body starts (for byte ranges).
    var generatedBodyOffset = 0
    /// Close the connection after this many body bytes (for interrupted transfers).
    var dropAfterBodyBytes: Int?

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

    /// Whether this status may carry a body (not 1xx, 204 or 304).
    var allowsBody: Bool { !(status == 204 || status == 304 || (100..<200).contains(status)) }

    /// Head (and body unless `includeBody` is false) as bytes. `Content-Length` is added unless
    /// given, or the headers say `Transfer-Encoding` (the body is then framed by the caller).
    func serialized(keepAlive: Bool, includeBody: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        // Date is one field: a stub's own (a server whose clock is off) replaces the mock's.
        if !headers.contains(where: { $0.name.lowercased() == "date" }) { head += "Date: \(Self.httpDate())\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let hasBody = allowsBody
        if hasBody && !headers.contains(where: { ["content-length", "transfer-encoding"].contains($0.name.lowercased()) }) {
            head += "Content-Length: \(generatedBodyLength ?? body.count)\r\n"
        }
        head += "Connection: \(keepAlive ? "keep-alive" : "close")\r\n\r\n"
        var bytes = Array(head.utf8)
        if includeBody && hasBody && generatedBodyLength == nil { bytes += body }
        return bytes
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 206: return "Partial Content"
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
        case 408: return "Request Timeout"
        case 413: return "Content Too Large"
        case 416: return "Range Not Satisfiable"
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
