// The test kit: answers an app's own tests define (stubs, queued answers, faults) and the requests
// they can take back one by one.

import Foundation

extension MockServer {
    /// An answer a test defines: status, headers, body, and how to deliver (or not deliver) it.
    ///
    /// ```swift
    /// server.stub("GET", path: "/v1/users/*", response: .json(#"{"id":1}"#))
    /// server.enqueue(MockServer.Response(status: 503))
    /// ```
    public struct Response: Sendable {
        /// The status code.
        public var status: Int
        /// Header lines, sent as given (`Content-Length` is added unless `Transfer-Encoding: chunked` is set,
        /// in which case the body goes in chunks).
        public var headers: [(name: String, value: String)]
        /// The body bytes.
        public var body: Data
        /// Seconds to wait before sending anything (default 0).
        public var delay: TimeInterval = 0
        /// Sends the body at about this many bytes a second (default nil: full speed).
        public var bytesPerSecond: Int?
        /// Misbehave instead of answering normally.
        public var fault: Fault?
        /// A streamed body: when set, `body` is ignored and these pieces go out as HTTP chunks, each after its delay
        /// (see `streamed(_:status:contentType:)`).
        public var pieces: [Piece] = []
        /// Bytes written as they are instead of an answer (see `raw(_:)`).
        var rawPieces: [Piece]?

        /// One piece of a streamed body, written `delay` seconds after the one before.
        public struct Piece: Sendable {
            /// Seconds to wait before writing it.
            public var delay: TimeInterval
            /// Its bytes.
            public var data: Data
            /// A piece of bytes.
            public init(after delay: TimeInterval = 0, _ data: Data) {
                self.delay = delay
                self.data = data
            }
            /// A piece of UTF-8 text.
            public init(after delay: TimeInterval = 0, _ text: String) { self.init(after: delay, Data(text.utf8)) }
        }

        /// One Server-Sent Event, as `events(_:)` writes it.
        public struct Event: Sendable {
            /// The event's `id` field, if any.
            public var id: String?
            /// The event's `event` field (its type), if any.
            public var event: String?
            /// The data; one `data:` line per line of it (ended by LF, CR or CRLF: the client joins them with LF).
            public var data: String
            /// A `retry:` field (milliseconds), if any.
            public var retry: Int?
            /// Seconds to wait before writing it.
            public var delay: TimeInterval
            /// An event.
            public init(id: String? = nil, event: String? = nil, data: String, retry: Int? = nil, after delay: TimeInterval = 0) {
                self.id = id
                self.event = event
                self.data = data
                self.retry = retry
                self.delay = delay
            }

            /// The event in the `text/event-stream` format, ending with its blank line.
            public var text: String {
                var lines: [String] = []
                if let retry { lines.append("retry: \(retry)") }
                if let id { lines.append("id: \(id)") }
                if let event { lines.append("event: \(event)") }
                // "\r\n" is one Character: split at it as at "\n" and "\r", and nowhere else (not at U+2028).
                let lineEnds: Set<Character> = ["\n", "\r", "\r\n"]
                for line in data.split(omittingEmptySubsequences: false, whereSeparator: lineEnds.contains) {
                    lines.append("data: \(line)")
                }
                return lines.joined(separator: "\n") + "\n\n"
            }
        }

        /// An answer; a header name that is not an RFC 9110 token, or CR, LF or NUL in a value, is a
        /// mistake in the test and stops it here with a message naming the header.
        public init(status: Int = 200, headers: [(name: String, value: String)] = [], body: Data = Data()) {
            self.status = status
            self.headers = headers
            self.body = body
            Self.checkHeaders(headers)
        }

        /// `value` encoded with `JSONEncoder` (keys sorted), with `Content-Type: application/json`.
        public static func json<Value: Encodable>(_ value: Value, status: Int = 200) -> Response {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            guard let body = try? encoder.encode(value) else {
                preconditionFailure("MockServer.Response.json: \(Value.self) did not encode as JSON")
            }
            return Response(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: body)
        }

        /// JSON text as is, with `Content-Type: application/json`.
        public static func json(_ text: String, status: Int = 200) -> Response {
            Response(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: Data(text.utf8))
        }

        /// Plain text, with `Content-Type: text/plain; charset=utf-8`.
        public static func text(_ text: String, status: Int = 200) -> Response {
            Response(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Data(text.utf8))
        }

        /// A body written in timed pieces (`Transfer-Encoding: chunked`), for code that reads a stream as it arrives:
        /// ```swift
        /// server.stub("GET", path: "/tokens", response: .streamed([.init("Hel"), .init(after: 0.1, "lo\n")]))
        /// ```
        /// A client that closes the connection stops the pieces at once (`openConnectionCount` shows it).
        public static func streamed(_ pieces: [Piece], status: Int = 200, contentType: String = "application/octet-stream") -> Response {
            var response = Response(status: status, headers: [("Content-Type", contentType), ("Transfer-Encoding", "chunked")])
            response.pieces = pieces
            return response
        }

        /// Bytes written exactly as given instead of an answer, each piece after its delay, then the connection closes:
        /// a broken or hostile server for a client's tests (`status`, `headers` and `fault` are not used).
        /// ```swift
        /// server.stub(path: "/liar", response: .raw([.init("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"), .init(after: 0.1, "short")]))
        /// ```
        public static func raw(_ pieces: [Piece]) -> Response {
            var response = Response()
            response.rawPieces = pieces
            return response
        }

        /// Server-Sent Events (`text/event-stream`), each written after its delay; the stream then ends. An `id` or
        /// `event` with CR or LF in it would write a field of its own: a mistake in the test, stopped here (see
        /// `eventProblem`).
        /// ```swift
        /// server.stub("GET", path: "/events", response: .events([.init(id: "1", data: "hello"), .init(data: "bye", after: 0.5)]))
        /// ```
        public static func events(_ events: [Event]) -> Response {
            if let problem = eventProblem(events) { preconditionFailure("MockServer.Response.events: \(problem)") }
            let pieces = events.map { Piece(after: $0.delay, $0.text) }
            var response = streamed(pieces, contentType: "text/event-stream")
            response.headers.append(("Cache-Control", "no-cache"))
            return response
        }

        /// Whether the body goes out chunked (the test set `Transfer-Encoding: chunked`).
        var isChunked: Bool {
            headers.contains { $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased().contains("chunked") }
        }

        /// What is wrong with `headers` (a name that is not a token, CR/LF/NUL in a value), or nil:
        /// for tools that build answers from data and must refuse bad input without stopping.
        public static func headerProblem(_ headers: [(name: String, value: String)]) -> String? {
            if let bad = headers.first(where: { !HeaderText.isToken($0.name) }) {
                return "header name '\(HeaderText.printable(bad.name))' is not a valid token"
            }
            if let bad = headers.first(where: { !HeaderText.isValidValue($0.value) }) {
                return "the value of header '\(bad.name)' contains CR, LF or NUL"
            }
            return nil
        }

        /// What is wrong with `events` (CR or LF in an `id` or `event`, which would start a field of its own), or nil.
        public static func eventProblem(_ events: [Event]) -> String? {
            for (index, event) in events.enumerated() {
                for (field, value) in [("id", event.id), ("event", event.event)] {
                    if let value, value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) {
                        return "the \(field) of event \(index) ('\(HeaderText.printable(value))') contains CR or LF"
                    }
                }
            }
            return nil
        }

        static func checkHeaders(_ headers: [(name: String, value: String)]) {
            if let problem = headerProblem(headers) { preconditionFailure("MockServer.Response: \(problem)") }
        }
    }

    /// Ways to misbehave, as real socket behaviour.
    public enum Fault: String, Sendable, CaseIterable {
        /// Close the connection before sending a byte. On a reused keep-alive connection, URLSession (libcurl) sends the
        /// same request again at once, unseen by the app; that resend gets this fault too, so that the app sees it.
        case closeWithoutResponse
        /// Send the status line and headers (announcing the whole body), then close.
        case closeAfterHeaders
        /// Send the head and half the body, then close.
        case closeMidBody
        /// Reset the connection (TCP RST) without answering.
        case resetConnection
        /// Never answer: hold the connection until the client gives up or the server stops.
        case noResponse
    }

    /// Answers requests to `path` with `response`. `path` is exact, or a prefix when it ends in `*`; a missing
    /// leading slash is added (`users` is `/users`). `method` nil matches any method. The latest matching stub wins.
    public func stub(_ method: String? = nil, path: String, response: Response) {
        Response.checkHeaders(response.headers)
        testKit.add(Stub(method: method?.uppercased(), path: path) { _ in response })
    }

    /// Answers requests to `path` with what `handler` returns for each; it runs on the request's own
    /// connection thread, so a slow handler holds up no other request.
    public func stub(_ method: String? = nil, path: String, handler: @escaping @Sendable (ReceivedRequest) -> Response) {
        testKit.add(Stub(method: method?.uppercased(), path: path, answer: handler))
    }

    /// Queues an answer for the next request, whatever its path (first queued, first sent), before any stub.
    public func enqueue(_ response: Response) {
        Response.checkHeaders(response.headers)
        testKit.enqueue(response)
    }

    /// The next received request not taken yet, in arrival order, waiting up to `timeout` seconds
    /// for one; nil when none came. (Needs `recordsRequests`, on by default.)
    public func takeRequest(timeout: TimeInterval = 10) -> ReceivedRequest? {
        testKit.take(timeout: timeout)
    }

    /// Removes every stub and queued answer.
    public func removeAllStubs() {
        testKit.removeAll()
    }
}

/// One stub: which requests it matches and how it answers.
struct Stub: Sendable {
    let method: String?
    let path: String
    let answer: @Sendable (ReceivedRequest) -> MockServer.Response

    init(method: String?, path: String, answer: @escaping @Sendable (ReceivedRequest) -> MockServer.Response) {
        self.method = method
        // `users` is read as `/users`: request paths start with a slash, so it would never match.
        self.path = path.hasPrefix("/") || path.hasPrefix("*") ? path : "/" + path
        self.answer = answer
    }

    func matches(_ request: ReceivedRequest) -> Bool {
        if let method, method != request.method.uppercased() { return false }
        if path.hasSuffix("*") { return request.path.hasPrefix(String(path.dropLast())) }
        return request.path == path
    }
}

/// The test kit's state, behind its own lock: changed from tests while connections read it.
final class TestKit: @unchecked Sendable {
    private let condition = NSCondition()
    private var stubs: [Stub] = []
    private var queued: [MockServer.Response] = []
    /// A fault that also answers the next request if that is the same one sent again (method and target).
    private var repeated: (fault: MockServer.Response, method: String, target: String)?
    private var untaken: [ReceivedRequest] = []
    private let maximumUntaken: Int

    init(maximumUntaken: Int) { self.maximumUntaken = max(1, maximumUntaken) }

    func add(_ stub: Stub) { condition.withLock { stubs.append(stub) } }

    func enqueue(_ response: MockServer.Response) { condition.withLock { queued.append(response) } }

    func removeAll() {
        condition.withLock {
            stubs = []
            queued = []
            repeated = nil
        }
    }

    func repeatFault(_ fault: MockServer.Response, for request: ReceivedRequest) {
        condition.withLock { repeated = (fault, request.method, request.target) }
    }

    /// The queued answer, or the latest matching stub's handler; nil when the test defined none.
    func answer(for request: ReceivedRequest) -> MockServer.Response? {
        let found = condition.withLock { () -> (queued: MockServer.Response?, stub: Stub?) in
            defer { repeated = nil }
            if let repeated, repeated.method == request.method, repeated.target == request.target { return (repeated.fault, nil) }
            if !queued.isEmpty { return (queued.removeFirst(), nil) }
            return (nil, stubs.last { $0.matches(request) })
        }
        if let queued = found.queued { return queued }
        guard let stub = found.stub else { return nil }
        let response = stub.answer(request)
        MockServer.Response.checkHeaders(response.headers)
        return response
    }

    func received(_ request: ReceivedRequest) {
        condition.withLock {
            untaken.append(request)
            if untaken.count > maximumUntaken { untaken.removeFirst(untaken.count - maximumUntaken) }
            condition.broadcast()
        }
    }

    func take(timeout: TimeInterval) -> ReceivedRequest? {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout))
        condition.lock()
        defer { condition.unlock() }
        while untaken.isEmpty {
            if !condition.wait(until: deadline) { break }
        }
        return untaken.isEmpty ? nil : untaken.removeFirst()
    }

    func reset() { condition.withLock { untaken = [] } }
}
