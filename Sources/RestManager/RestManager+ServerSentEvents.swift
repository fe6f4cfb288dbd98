//  RestManager+ServerSentEvents.swift — an add-on: Server-Sent Events (WHATWG HTML §9.2) on `stream(_:)`. Copy it
//  beside RestManager.swift when you need it; it uses only the core's public API.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

nonisolated extension RestManager {
    // MARK: - Public API

    /// Server-Sent Events from `request` (GET, `Accept: text/event-stream` added), reconnecting as the WHATWG
    /// EventSource rules say, until the task is cancelled or the server ends the stream. A request with a body fails
    /// with `.bodyEncodingFailed` (a GET carries none: read a POST stream with `events(in:)`).
    /// ```swift
    /// for try await event in rest.events(for: RestManager.Request(url: URL(string: "chat/stream")!)) {
    ///     print(event.event, event.data)
    /// }
    /// ```
    /// When the connection ends (end of body or a network error), the sequence waits the reconnection time (3 s, or the
    /// stream's `retry` but 0.1 s at least; after connections without an event, 0.1 s doubling to 30 s), reconnects,
    /// sending `Last-Event-ID` once an ID was seen, and reports a `.retrying` event to `eventHandler`. A 204 ends the
    /// sequence; a non-2xx status, a `Content-Type` other than `text/event-stream` (in any case), a TLS failure, or an
    /// event or line longer than `ResponseBody.maximumUnreadBytes` before any event of its connection ends it with an
    /// error. Cancelling the task ends it (returns nil), and so does asking again after an error.
    public func events(for request: Request) -> ServerSentEvents { ServerSentEvents(manager: self, request: request) }

    /// The events of a body that `stream(_:)` returned, parsed as `events(for:)` does but never sent again: for a POST
    /// stream (an LLM's), which a reconnection would start over. Ends with the body; throws the error that ends it.
    /// ```swift
    /// let (body, _) = try await rest.stream(chatRequest)  // a POST with a JSON body
    /// for try await event in rest.events(in: body) where event.data != "[DONE]" { print(event.data) }
    /// ```
    public func events(in body: ResponseBody) -> ServerSentEvents {
        ServerSentEvents(manager: self, request: nil, body: body)
    }

    /// One event, as dispatched by the stream.
    public struct ServerSentEvent: Sendable, Equatable {
        /// The last event ID in force when it was dispatched.
        public var id: String?
        /// "message" unless the stream named another type.
        public var event: String
        /// The data lines, joined with "\n".
        public var data: String
        /// A reconnection time (ms) the stream set with this event, if any.
        public var retry: Int?
        /// An event.
        public init(id: String? = nil, event: String = "message", data: String, retry: Int? = nil) {
            self.id = id
            self.event = event
            self.data = data
            self.retry = retry
        }
    }

    /// The events of one `events(for:)` or `events(in:)` call: an AsyncSequence of `ServerSentEvent`, one consumer.
    public struct ServerSentEvents: AsyncSequence, Sendable {
        /// An event.
        public typealias Element = ServerSentEvent
        let manager: RestManager
        /// What `events(for:)` sends and sends again; nil for `events(in:)`, which reads `body` only.
        let request: Request?
        var body: ResponseBody? = nil

        /// Connects when first asked for an event.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: self) }

        /// Gives the events in order, reconnecting as needed; nil once the stream ended or the task was cancelled.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let source: ServerSentEvents
            var parser = EventStreamParser()
            var lines: ResponseBody.Lines.AsyncIterator?
            var connections = 0
            var ended = false
            /// Connections in a row (up to 10), the current one included, that dispatched no event (refused, closed at
            /// once, or a reader that fell behind and made no progress): reconnecting after them backs off.
            var quietConnections = 0

            /// The next event.
            @concurrent
            public mutating func next() async throws -> ServerSentEvent? {
                while !ended {
                    do {
                        if lines == nil { try await connect() }
                        guard var current = lines else { continue }
                        let line = try await current.next()
                        lines = current
                        // A line the stream ended in the middle of is pending data, discarded (WHATWG §9.2.6).
                        guard let line, !current.endedMidLine else {
                            try await reconnect(because: "the event stream ended")
                            continue
                        }
                        if let event = try parser.take(line) {
                            quietConnections = 0
                            return event
                        }
                    } catch {
                        try await recover(from: error)
                    }
                }
                return nil
            }

            /// Opens a connection (after the first, with the last event ID) and checks its head.
            private mutating func connect() async throws {
                guard var request = source.request else {
                    lines = source.body?.lines.makeAsyncIterator()
                    return
                }
                guard request.body == nil, request.bodyParameters.totalItems() == 0, request.files.isEmpty else {
                    let reason = "events(for:) sends GET, as EventSource does, which carries no body; read a POST "
                    throw CustomError.bodyEncodingFailed(reason + "stream with stream(_:) and events(in:)")
                }
                request.method = .get
                request.headers.add(value: "text/event-stream", forKey: "Accept")
                if let id = parser.lastEventID, !id.isEmpty { request.headers.add(value: id, forKey: "Last-Event-ID") }
                connections += 1
                quietConnections = Swift.min(quietConnections + 1, 10)
                let (body, response) = try await source.manager.stream(request)
                if response.httpStatusCode == 204 {
                    ended = true
                    return
                }
                let contentType = response.headers.value(forKey: "Content-Type") ?? "none"
                let media = contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
                guard media == "text/event-stream" else {
                    let reason =
                        "The answer is not an event stream: its Content-Type is '\(contentType)', not text/event-stream"
                    throw CustomError.transport(
                        URLError(.cannotParseResponse, userInfo: [NSLocalizedDescriptionKey: reason]))
                }
                parser.startStream()
                lines = body.lines.makeAsyncIterator()
            }

            /// Ends quietly when cancelled; reconnects after a network error or a timeout; fails on anything else.
            private mutating func recover(from error: any Error) async throws {
                lines = nil
                if Task.isCancelled {
                    ended = true
                    return
                }
                // Every error ends `events(in:)`: its body has no second connection.
                let failure = source.request == nil ? nil : error as? CustomError
                // TLS failures and unreadable answers are final, and so is an event or a line too long to hold before
                // any event (it would come first again after a reconnection).
                var fatal = [URLError.Code.serverCertificateUntrusted, .secureConnectionFailed, .cannotParseResponse]
                if quietConnections > 0 { fatal.append(.dataLengthExceedsMaximum) }
                switch failure {
                case .transport(let urlError)? where !fatal.contains(urlError.code):
                    try await reconnect(because: "network error \(urlError.code.rawValue)")
                case .timedOut?:
                    try await reconnect(because: failure?.localizedDescription ?? "timed out")
                default:
                    ended = true
                    throw error
                }
            }

            /// Waits the reconnection time (a cancelled wait ends the sequence), reporting it as a `.retrying` event.
            private mutating func reconnect(because reason: String) async throws {
                lines = nil
                parser.endStream()
                ended = source.request == nil  // `events(in:)` has no second connection
                guard let request = source.request else { return }
                // Quiet connections back off (`retry: 0` and a server closing at once looped); finite: `retry: 999…`.
                let backoff = quietConnections == 0 ? 0 : Swift.min(0.05 * Double(1 << quietConnections), 30)
                let delay = Swift.max(RestManager.finite(Double(parser.reconnectionTime) / 1000), backoff, 0.1)
                let resumed = parser.lastEventID.map { ", resuming after event ID \($0)" } ?? ""
                let named = URLRequest(
                    url: URL(string: request.url.relativeString, relativeTo: source.manager.baseURL) ?? request.url)
                source.manager.eventHandler?(
                    .retrying(named, attempt: connections, delay: delay, reason: reason + resumed))
                do {
                    try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
                } catch {
                    ended = true
                }
            }
        }
    }

    // MARK: - Parsing

    /// Interprets an event stream's lines as WHATWG HTML §9.2.6 says; each line is looked at once (linear time).
    struct EventStreamParser: Sendable {
        /// The last event ID: set when an event is dispatched (even one without data), from the `id` fields before
        /// it; kept across events and connections.
        private(set) var lastEventID: String?
        private var idBuffer: String?
        /// Milliseconds to wait before reconnecting (`retry` changes it).
        private(set) var reconnectionTime = 3000
        private var data = ""
        private var hasData = false
        private var type = ""
        private var retry: Int?
        private var atStart = true

        /// A new connection: its first line may start with a byte order mark.
        mutating func startStream() { atStart = true }

        /// The connection ended: an event without its blank line is discarded.
        mutating func endStream() {
            idBuffer = lastEventID
            data = ""
            hasData = false
            type = ""
            retry = nil
        }

        /// Takes one line; returns the event it dispatches, if any. Throws when the event's data would pass
        /// `ResponseBody.maximumUnreadBytes` (a peer that never ends an event).
        mutating func take(_ line: String) throws -> ServerSentEvent? {
            var line = Substring(line)
            if atStart, line.first == "\u{FEFF}" { line = line.dropFirst() }
            atStart = false
            guard !line.isEmpty else { return dispatch() }
            if line.first == ":" { return nil }
            let colon = line.firstIndex(of: ":")
            let field = colon.map { line[..<$0] } ?? line
            var value = colon.map { line[line.index(after: $0)...] } ?? ""
            if value.first == " " { value = value.dropFirst() }
            switch field {
            case "event": type = String(value)
            case "data":
                let limit = ResponseBody.maximumUnreadBytes
                // What the data would be: the "\n" before this line counts too.
                guard data.utf8.count + (hasData ? 1 : 0) + value.utf8.count <= limit else {
                    let reason = "An event's data is longer than \(limit) bytes"
                    throw CustomError.transport(
                        URLError(.dataLengthExceedsMaximum, userInfo: [NSLocalizedDescriptionKey: reason]))
                }
                if hasData { data += "\n" }
                data += value
                hasData = true
            // An ID that could not go back in `Last-Event-ID` (NUL, or a head too long to send) is ignored.
            case "id" where !value.contains("\u{0}") && value.utf8.count <= 65_536: idBuffer = String(value)
            case "retry" where !value.isEmpty && value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }):
                // WHATWG: the integer the digits make; one past Int's range is as long a wait as there can be.
                let milliseconds = Int(value) ?? Int.max
                reconnectionTime = milliseconds
                retry = milliseconds
            default: break
            }
            return nil
        }

        /// A blank line: the event so far, unless it has no data (then it is dropped).
        private mutating func dispatch() -> ServerSentEvent? {
            lastEventID = idBuffer
            defer { endStream() }
            guard hasData else { return nil }
            let id = lastEventID.flatMap { $0.isEmpty ? nil : $0 }
            return ServerSentEvent(id: id, event: type.isEmpty ? "message" : type, data: data, retry: retry)
        }
    }
}
