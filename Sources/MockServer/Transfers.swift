// Large transfers: generated files with validators and single byte ranges, and an upload sink
// that streams any size of body. Both in constant memory.

import Foundation

/// `/_test/files/N` and `/_test/upload`. See README "Mock server".
enum TransferEndpoints {
    /// `GET /_test/files/N`: N bytes of the pattern (byte i is i mod 251) with `ETag`, `Last-Modified`
    /// and `Accept-Ranges`; one `Range` (206 with `Content-Range`, 416 past the end) honoured when
    /// `If-Range` is absent or matches (a 304 to a matching `If-None-Match`). Query: `version=V` changes the validators, `dropAfter=K` closes
    /// the connection after K body bytes, `ignoreRange=1` always sends 200, `ignoreIfRange=1` serves
    /// ranges whatever `If-Range` says, `chunked=1` sends no length,
    /// `strictRanges=1` answers a range that ends past the end with 416 (as httpbin does), `validators=none` or
    /// `validators=date-only` sends
    /// neither validator or only `Last-Modified`, `maxAge=S` adds `Cache-Control: max-age=S`.
    static func file(_ request: ReceivedRequest, sizeText: String?) -> HTTPResponse {
        guard let size = Numbers.integer(sizeText, in: 0...TestEndpoints.maximumGeneratedBytes) else {
            return TestEndpoints.badArgumentResponse("byte count", sizeText, "0...\(TestEndpoints.maximumGeneratedBytes)")
        }
        guard let version = Numbers.integer(request.query("version") ?? "1", in: 1...1_000_000) else {
            return TestEndpoints.badArgumentResponse("version", request.query("version"), "1...1000000")
        }
        let dropText = request.query("dropAfter")
        let dropAfter = dropText.flatMap { Numbers.integer($0, in: 0...TestEndpoints.maximumGeneratedBytes) }
        if dropText != nil && dropAfter == nil {
            return TestEndpoints.badArgumentResponse("dropAfter", dropText, "0...\(TestEndpoints.maximumGeneratedBytes)")
        }
        let etag = "\"\(size)-v\(version)\""
        let lastModified = HTTPResponse.httpDate(time_t(1_700_000_000 + version * 86_400))
        var headers: [(name: String, value: String)] = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes")]
        switch request.query("validators") {
        case "none"?: break
        case "date-only"?: headers.append(("Last-Modified", lastModified))
        default: headers += [("ETag", etag), ("Last-Modified", lastModified)]
        }
        if let maxAge = request.query("maxAge").flatMap({ Numbers.integer($0, in: 0...31_536_000) }) {
            headers.append(("Cache-Control", "max-age=\(maxAge)"))
        }
        var first = 0
        var count = size
        var status = 200
        let ifRange = request.header("If-Range")
        if request.query("ignoreRange") != "1", let range = request.header("Range"),
            ifRange == nil || ifRange == etag || ifRange == lastModified || request.query("ignoreIfRange") == "1"
        {
            var asked = byteRange(range, size: size)
            if request.query("strictRanges") == "1", let last = range.split(separator: "-").last.flatMap({ Int($0) }), last >= size {
                asked = .unsatisfiable
            }
            switch asked {
            case .whole: break
            case .unsatisfiable:
                return HTTPResponse(status: 416, headers: headers + [("Content-Range", "bytes */\(size)"), ("Content-Length", "0")])
            case let .part(start, end):
                (first, count, status) = (start, end - start + 1, 206)
                headers.append(("Content-Range", "bytes \(start)-\(end)/\(size)"))
            }
        }
        var response = HTTPResponse(status: status, headers: headers)
        response.generatedBodyLength = count
        response.generatedBodyOffset = first
        response.dropAfterBodyBytes = dropAfter
        if request.query("chunked") == "1" { response.headers.append(("Transfer-Encoding", "chunked")) }
        return response
    }

    enum ByteRange: Equatable {
        /// No usable range (absent, malformed, or several): the whole representation.
        case whole
        /// First and last byte, inclusive.
        case part(Int, Int)
        case unsatisfiable
    }

    /// One `bytes=` range of RFC 9110 §14.1.2: `a-b`, `a-` or `-n`. Several ranges are served whole.
    static func byteRange(_ header: String, size: Int) -> ByteRange {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return .whole }
        let spec = text.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard spec.count == 2 else { return .whole }
        let limit = 0...999_999_999_999_999
        if spec[0].isEmpty {
            guard let suffix = Numbers.integer(spec[1], in: limit) else { return .whole }
            return suffix == 0 || size == 0 ? .unsatisfiable : .part(max(0, size - suffix), size - 1)
        }
        guard let start = Numbers.integer(spec[0], in: limit) else { return .whole }
        var end = size - 1
        if !spec[1].isEmpty {
            guard let last = Numbers.integer(spec[1], in: limit), last >= start else { return .whole }
            end = min(last, size - 1)
        }
        return start >= size ? .unsatisfiable : .part(start, end)
    }

    /// Whether a request's body is streamed past the parser (any size, never buffered).
    static func streamsBody(target: String) -> Bool {
        target == "/_test/upload" || target.hasPrefix("/_test/upload?")
    }

    /// `/_test/upload`'s answer: what was received, as JSON.
    static func receipt(_ request: ReceivedRequest, byteCount: Int, checksum: UInt64) -> HTTPResponse {
        ReqresAPI.json(
            200,
            JSONText.object([
                ("method", JSONText.string(request.method)),
                ("bytes", "\(byteCount)"),
                ("fnv1a64", JSONText.string(String(checksum, radix: 16))),
                ("contentType", request.header("Content-Type").map(JSONText.string) ?? "null")
            ]))
    }

    /// FNV-1a (64 bit), continued from `hash`: a checksum any client can compute in a few lines.
    static func fnv1a64(_ bytes: UnsafeRawBufferPointer, continuing hash: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var hash = hash
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }
}
