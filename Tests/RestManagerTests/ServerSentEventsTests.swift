import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import MockServer
import XCTest
@testable import RestManager

/// `events(for:)`: WHATWG HTML §9.2.6 parsing and §9.2.4 reconnection, against the mock's event streams.
final class ServerSentEventsTests: MockServerTestCase {
    typealias Event = RestManager.ServerSentEvent

    /// Every parsing rule at once: BOM, comments, one optional space, multi-line data, CR/LF/CRLF, a type for one event
    /// only, IDs that persist (one with NUL ignored), retry, unknown fields, events without data, an unterminated end.
    static let stream =
        "\u{FEFF}: comment\nretry: 10\nid: 1\nevent: greeting\ndata: hello\ndata:  world\n\ndata:no space\r\n\r\n"
        + "id: 2\r\ndata: é\rdata\r\r: only a comment\n\nid: bad\u{0}id\nevent: no-data\n\nfield: unknown\nretry: 1x\n"
        + "data: last\n\ndata: unterminated"
    static let expected = [
        Event(id: "1", event: "greeting", data: "hello\n world", retry: 10),
        Event(id: "1", data: "no space"),
        Event(id: "2", data: "é\n"),
        Event(id: "2", data: "last")
    ]

    private func request(_ path: String) -> RestManager.Request { RestManager.Request(url: url(path)) }

    private func parse(_ lines: [String]) -> [Event] {
        var parser = RestManager.EventStreamParser()
        parser.startStream()
        return lines.compactMap { try? parser.take($0) }
    }

    func testTheParserFollowsEachRule() {
        XCTAssertEqual(parse(["data: a", "data: b", ""]), [Event(data: "a\nb")])
        XCTAssertEqual(parse(["\u{FEFF}data: bom", ""]), [Event(data: "bom")])
        XCTAssertEqual(parse(["data: a", "", "\u{FEFF}data: b", ""]), [Event(data: "a")], "a BOM only opens the stream")
        XCTAssertEqual(parse(["data:  two", ""]), [Event(data: " two")])
        XCTAssertEqual(parse(["data", ""]), [Event(data: "")])
        XCTAssertEqual(parse(["data", "data: x", ""]), [Event(data: "\nx")], "an empty data line before is a leading LF")
        XCTAssertEqual(parse(["data:", "data:", ""]), [Event(data: "\n")])
        XCTAssertEqual(parse([": comment", ""]), [])
        XCTAssertEqual(parse(["event: add", "data: 1", "", "data: 2", ""]), [Event(event: "add", data: "1"), Event(data: "2")])
        XCTAssertEqual(parse(["id: 7", "data: a", "", "data: b", ""]), [Event(id: "7", data: "a"), Event(id: "7", data: "b")])
        XCTAssertEqual(parse(["id: 7", "data: a", "", "id", "data: b", ""]), [Event(id: "7", data: "a"), Event(data: "b")])
        XCTAssertEqual(parse(["id: 1\u{0}", "data: a", ""]), [Event(data: "a")])
        XCTAssertEqual(parse(["retry: 250", "data: a", "", "data: b", ""]), [Event(data: "a", retry: 250), Event(data: "b")])
        XCTAssertEqual(parse(["retry: -1", "retry: 1.5", "retry:", "data: a", ""]), [Event(data: "a")])
        XCTAssertEqual(parse(["retry: 99999999999999999", "data: a", ""]), [Event(data: "a", retry: 99_999_999_999_999_999)])
        XCTAssertEqual(parse(["retry: 99999999999999999999", "data: a", ""]), [Event(data: "a", retry: Int.max)], "past Int")
        XCTAssertEqual(parse(["Data: a", "", "data : b", ""]), [])
        XCTAssertEqual(parse(["event: x", "", "data: a", ""]), [Event(data: "a")])
    }

    func testAnIDTakesEffectWhenItsBlockEndsAndAnUnterminatedBlockIsDropped() throws {
        var parser = RestManager.EventStreamParser()
        parser.startStream()
        XCTAssertNil(try parser.take("id: 5"))
        XCTAssertNil(parser.lastEventID)
        XCTAssertNil(try parser.take(""))
        XCTAssertEqual(parser.lastEventID, "5")
        XCTAssertNil(try parser.take("id: 6"))
        XCTAssertNil(try parser.take("data: cut off"))
        parser.endStream()
        XCTAssertEqual(parser.lastEventID, "5")
        XCTAssertEqual(try parser.take(""), nil)
        XCTAssertEqual(parser.lastEventID, "5")
    }

    /// The limit is on the data as delivered, line ends between data lines included: exactly `maximumUnreadBytes`
    /// bytes is an event, one more is the error (before, a single line of exactly the limit failed, and the line ends
    /// were not counted).
    func testAnEventOfExactlyTheLimitIsDelivered() throws {
        let limit = RestManager.ResponseBody.maximumUnreadBytes
        for (lines, delivered) in [([limit], true), ([limit + 1], false), ([limit - 2, 1], true), ([limit - 2, 2], false)] {
            var parser = RestManager.EventStreamParser()
            parser.startStream()
            var event: Event?
            do {
                for count in lines {
                    let dispatched = try parser.take("data: " + String(repeating: "x", count: count))
                    XCTAssertNil(dispatched)
                }
                event = try parser.take("")
            } catch {
                XCTAssertFalse(delivered, "\(lines): \(error)")
            }
            XCTAssertEqual(event?.data.utf8.count, delivered ? limit : nil, "\(lines)")
        }
    }

    /// An event whose data never ends cannot take the process's memory: past `maximumUnreadBytes` (16 MiB) the
    /// parser throws.
    func testAnEventLargerThanTheLimitIsAnError() throws {
        var parser = RestManager.EventStreamParser()
        parser.startStream()
        let line = "data: " + String(repeating: "x", count: 1 << 20)
        for _ in 0..<15 { XCTAssertNil(try parser.take(line)) }
        XCTAssertThrowsError(try parser.take(line)) { error in
            XCTAssertEqual(error.localizedDescription, "Network error -1103: An event's data is longer than 16777216 bytes")
        }
    }

    /// An event too long to hold ends the sequence with the error when it comes before any event of its connection: it
    /// would come first again after every reconnection (before, the sequence fetched its 16 MiB again every `retry`,
    /// for ever). After an event, the connection is tried again (a reader that fell behind resumes by its ID).
    func testAnEventTooLongToHoldEndsTheSequenceUnlessTheConnectionMadeProgress() async throws {
        let huge = "data: " + String(repeating: "x", count: RestManager.ResponseBody.maximumUnreadBytes) + "\n\n"
        for (path, first) in [("/huge", "retry: 10\n"), ("/then-huge", "retry: 10\nid: 1\ndata: small\n\n")] {
            server.stub("GET", path: path) { request in
                let resumed = request.header("Last-Event-ID") == "1"
                return MockServer.Response.streamed(
                    [.init(Data(((resumed ? "retry: 10\n" : first) + huge).utf8))], contentType: "text/event-stream")
            }
        }
        for (path, expected, connections) in [("/huge", [Event](), 1), ("/then-huge", [Event(id: "1", data: "small", retry: 10)], 2)] {
            server.clearReceivedRequests()
            let events = rest.events(for: request(path))
            let reader = Task {
                var received: [Event] = []
                do {
                    for try await event in events { received.append(event) }
                    return (received, "ended without an error")
                } catch {
                    return (received, "\((error as? RestManager.CustomError).map { "\($0)" } ?? "other")")
                }
            }
            // With the bug the sequence reconnects for ever (every 10 ms): one connection too many ends the wait.
            let server = self.server!
            let watchdog = Task {
                while !Task.isCancelled, server.receivedRequests.count <= connections { try await Task.sleep(nanoseconds: 10_000_000) }
                reader.cancel()
            }
            let (received, outcome) = await reader.value
            watchdog.cancel()
            XCTAssertEqual(outcome, "Network error -1103: A line of the stream is longer than 16777216 bytes", path)
            XCTAssertEqual(received, expected, path)
            XCTAssertEqual(server.receivedRequests.count, connections, path)
        }
    }

    func testAnEventStreamSplitAtEveryByteParsesTheSame() async throws {
        let bytes = Array(Self.stream.utf8)
        for split in 1..<bytes.count {
            server.removeAllStubs()
            let pieces = [MockServer.Response.Piece(Data(bytes[..<split])), .init(after: 0.005, Data(bytes[split...]))]
            var answer = MockServer.Response.streamed(pieces, contentType: "text/event-stream; charset=utf-8")
            answer.headers.append(("Cache-Control", "no-cache"))
            server.stub("GET", path: "/events", response: answer)
            var events: [Event] = []
            for try await event in rest.events(for: request("/events")) {
                events.append(event)
                if events.count == Self.expected.count { break }
            }
            XCTAssertEqual(events, Self.expected, "split at \(split)")
        }
    }

    /// A stream redirected to another origin: each reconnection carries `Last-Event-ID` there too (the caller got
    /// events 1, 2, 1, 2, … as new ones when it was stripped with the secrets).
    func testLastEventIDReachesAStreamRedirectedToAnotherOrigin() async throws {
        let other = "http://localhost:\(server.port)/moved-feed"
        server.stub("GET", path: "/feed") { _ in MockServer.Response(status: 302, headers: [("Location", other)]) }
        server.stub("GET", path: "/moved-feed") { request in
            switch request.header("Last-Event-ID") {
            case nil: .events([.init(id: "1", data: "one", retry: 0), .init(id: "2", data: "two")])
            case "2": .events([.init(id: "3", data: "three")])
            default: MockServer.Response(status: 204)
            }
        }
        var events: [String] = []
        for try await event in rest.events(for: request("/feed")) {
            events.append(event.data)
            if events.count > 3 { break }
        }
        XCTAssertEqual(events, ["one", "two", "three"])
        let moved = server.receivedRequests.filter { $0.path == "/moved-feed" }
        XCTAssertEqual(moved.map { $0.header("Last-Event-ID") }, [nil, "2", "3"])
        XCTAssertEqual(moved.map { $0.header("Host") }, Array(repeating: "localhost:\(server.port)", count: 3))
    }

    func testItReconnectsWithLastEventIDAndEndsAtA204() async throws {
        let retries = ResultBox<String>()
        rest.eventHandler = { event in
            if case .retrying = event { retries.set(event.description) }
        }
        server.stub("GET", path: "/feed") { request in
            switch request.header("Last-Event-ID") {
            case nil: .events([.init(id: "1", data: "one", retry: 20), .init(id: "2", data: "two")])
            case "2": .events([.init(id: "3", data: "three")])
            default: MockServer.Response(status: 204)
            }
        }
        var events: [Event] = []
        for try await event in rest.events(for: request("/feed")) {
            events.append(event)
            if events.count > 3 { break }  // a client that loses the ID would loop on the first answer
        }
        XCTAssertEqual(
            events, [Event(id: "1", data: "one", retry: 20), Event(id: "2", data: "two"), Event(id: "3", data: "three")])
        let sent = server.receivedRequests
        XCTAssertEqual(sent.map { $0.header("Last-Event-ID") }, [nil, "2", "3"])
        XCTAssertEqual(sent.map { $0.header("Accept") }, Array(repeating: "text/event-stream", count: 3))
        XCTAssertEqual(sent.map(\.method), ["GET", "GET", "GET"])
        XCTAssertEqual(retries.count, 2)
        XCTAssertTrue(retries.value?.contains("the event stream ended, resuming after event ID 2") == true, retries.value ?? "")
        XCTAssertTrue(retries.value?.contains("in 0.10 s") == true, retries.value ?? "")  // retry: 20 is 0.1 s
    }

    /// The bytes sse-starlette 3.7.0 (on uvicorn) wrote, captured with curl on 2026-11-28: CRLF line ends, `retry` on
    /// every event, two-line data, keep-alive comments with a timestamp; then, in the same body here, what an endpoint
    /// of it with `sep="\n"` wrote (LF only, UTF-8, an empty `data:`, a comment). Each event comes in a piece of its
    /// own, as the server flushed it; the reconnection carries the last ID.
    func testAStreamAsSseStarletteWritesItParsesAsItDid() async throws {
        let token = { @Sendable (id: Int) in "id: \(id)\r\nevent: delta\r\ndata: token \(id)\r\ndata: second line\r\nretry: 200\r\n\r\n" }
        let ping = ": ping - 2026-11-28 03:22:52.337919+00:00\r\n\r\n"
        let lfOnly = "data: h\u{E9}llo \u{2713} \u{1F389}\n\ndata: \n\n: just a comment\n\ndata: [DONE]\n\n"
        server.stub("GET", path: "/tokens") { request in
            guard request.header("Last-Event-ID") == nil else { return MockServer.Response(status: 204) }
            let pieces = [ping, token(0), token(1), ping, token(2), lfOnly].map { MockServer.Response.Piece(after: 0.01, $0) }
            var answer = MockServer.Response.streamed(pieces, contentType: "text/event-stream; charset=utf-8")
            answer.headers += [("Cache-Control", "no-store"), ("X-Accel-Buffering", "no")]
            return answer
        }
        var events: [Event] = []
        for try await event in rest.events(for: request("/tokens")) { events.append(event) }
        let delta = { (id: Int) in Event(id: "\(id)", event: "delta", data: "token \(id)\nsecond line", retry: 200) }
        XCTAssertEqual(
            events,
            [
                delta(0), delta(1), delta(2), Event(id: "2", data: "h\u{E9}llo \u{2713} \u{1F389}"), Event(id: "2", data: ""),
                Event(id: "2", data: "[DONE]")
            ])
        XCTAssertEqual(server.receivedRequests.map { $0.header("Last-Event-ID") }, [nil, "2"])
    }

    /// An `id` field with no value resets the last event ID to empty: the reconnection then sends no `Last-Event-ID`
    /// (WHATWG §9.2.4 sends it only when it is not empty).
    func testAnEmptyIDSendsNoLastEventIDOnReconnection() async throws {
        let calls = ResultBox<Int>()
        server.stub("GET", path: "/reset") { _ in
            calls.set(0)
            guard calls.count == 1 else { return MockServer.Response(status: 204) }
            return .streamed([.init("retry: 10\nid: 1\ndata: one\n\nid\ndata: two\n\n")], contentType: "text/event-stream")
        }
        var events: [Event] = []
        for try await event in rest.events(for: request("/reset")) { events.append(event) }
        XCTAssertEqual(events, [Event(id: "1", data: "one", retry: 10), Event(data: "two")])
        XCTAssertEqual(server.receivedRequests.count, 2)
        XCTAssertEqual(server.receivedRequests.last?.headers.filter { $0.name.lowercased() == "last-event-id" }.count, 0)
    }

    /// An `id` longer than 64 KiB is ignored as one with NUL is: it could not go back in `Last-Event-ID` (FoundationNetworking
    /// fails a request head over 1 MiB before sending it, and the sequence reconnected every `retry` for ever).
    func testAnIDTooLongToSendBackIsIgnored() async throws {
        let longest = String(repeating: "a", count: 65_536)
        let kept = parse(["id: " + longest, "data: one", "", "id: " + longest + "b", "data: two", ""])
        XCTAssertEqual(kept, [Event(id: longest, data: "one"), Event(id: longest, data: "two")])
        let long = String(repeating: "a", count: 10_000)  // the mock takes request heads up to 16 KiB
        let huge = String(repeating: "b", count: 2 << 20)
        server.stub("GET", path: "/long-ids") { request in
            switch request.header("Last-Event-ID") {
            case nil: .events([.init(id: long, data: "one", retry: 10), .init(id: huge, data: "two")])
            default: MockServer.Response(status: 204)
            }
        }
        let retries = ResultBox<Int>()
        rest.eventHandler = { event in
            if case .retrying = event { retries.set(0) }
        }
        let sequence = rest.events(for: request("/long-ids"))
        let reader = Task {
            var events: [Event] = []
            for try await event in sequence { events.append(event) }
            return events
        }
        // Reconnections that fail before sending come one after another: the third ends the test.
        let watchdog = Task {
            while !Task.isCancelled, retries.count < 3 { try await Task.sleep(nanoseconds: 10_000_000) }
            reader.cancel()
        }
        let events = try await reader.value
        watchdog.cancel()
        XCTAssertEqual(events, [Event(id: long, data: "one", retry: 10), Event(id: long, data: "two")])
        XCTAssertEqual(retries.count, 1)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Last-Event-ID")?.count }, [nil, 10_000])
    }

    /// The test kit writes an event's data as one `data:` line per line, whatever ends it (LF, CR or CRLF, which Swift
    /// counts as one Character): the client reads the lines back joined with LF.
    func testTheMockWritesEachLineOfAnEventsDataAsADataLine() async throws {
        XCTAssertEqual(MockServer.Response.Event(data: "a\r\nb\rc\nd").text, "data: a\ndata: b\ndata: c\ndata: d\n\n")
        let calls = ResultBox<Int>()
        server.stub("GET", path: "/lines") { _ in
            calls.set(0)
            return calls.count == 1 ? .events([.init(data: "a\r\nb\rc\n\nd", retry: 10)]) : MockServer.Response(status: 204)
        }
        var events: [Event] = []
        for try await event in rest.events(for: request("/lines")) { events.append(event) }
        XCTAssertEqual(events, [Event(data: "a\nb\nc\n\nd", retry: 10)])
    }

    /// WHATWG §9.2.6: once the stream ends, pending data is discarded, and a line without its line end is pending: a
    /// `retry` cut off at the end does not change the reconnection time (10 ms here, not 7 s).
    func testALineTheStreamEndsInTheMiddleOfIsDiscarded() async throws {
        let retries = ResultBox<String>()
        rest.eventHandler = { event in
            if case .retrying = event { retries.set(event.description) }
        }
        let text = "retry: 10\ndata: one\n\nretry: 7000"
        server.enqueue(MockServer.Response.streamed([.init(Data(text.utf8))], contentType: "text/event-stream"))
        server.enqueue(MockServer.Response(status: 204))
        var events: [Event] = []
        for try await event in rest.events(for: request("/cut")) { events.append(event) }
        XCTAssertEqual(events, [Event(data: "one", retry: 10)])
        XCTAssertEqual(retries.count, 1)
        XCTAssertTrue(retries.value?.contains("in 0.10 s: the event stream ended") == true, retries.value ?? "")
        XCTAssertEqual(server.receivedRequests.count, 2)
    }

    /// A hostile `retry` (10^30 ms, past an Int) makes a long wait, not a crash: the wait is capped at 10^9 s and
    /// cancelling the task ends it. Before, digits past an Int were ignored and the stream reconnected after 3 s.
    func testAHugeRetryIsAWaitThatCancellingEnds() async throws {
        let waiting = expectation(description: "the reconnection wait began")
        rest.eventHandler = { event in
            if case .retrying(_, _, let delay, _) = event {
                XCTAssertEqual(delay, 1e9)
                waiting.fulfill()
            }
        }
        let text = "retry: 999999999999999999999999999999\ndata: one\n\n"
        server.enqueue(MockServer.Response.streamed([.init(Data(text.utf8))], contentType: "text/event-stream"))
        let events = rest.events(for: request("/hostile"))
        let reader = Task {
            var received: [Event] = []
            for try await event in events { received.append(event) }
            return received
        }
        await fulfillment(of: [waiting], timeout: 20)
        reader.cancel()
        let received = try await reader.value
        XCTAssertEqual(received, [Event(data: "one", retry: Int.max)])
    }

    /// A request with a body (an LLM's POST stream, say) fails at once, saying why: `events(for:)` sends GET, which
    /// carries no body. Before, the body was dropped without a word and a GET went out.
    func testARequestWithABodyFailsInsteadOfLosingIt() async throws {
        var withBody = RestManager.Request(.post, url: url("/events"))
        try withBody.setBody(["prompt": "hello"])
        var withFields = RestManager.Request(.post, url: url("/events"))
        withFields.bodyParameters.add(value: "hello", forKey: "prompt")
        var withFile = RestManager.Request(.post, url: url("/events"))
        withFile.addFile(Data("x".utf8), fieldName: "f", fileName: "f.txt", mimeType: "text/plain")
        for request in [withBody, withFields, withFile] {
            do {
                for try await _ in rest.events(for: request) {}
                XCTFail("no error")
            } catch {
                XCTAssertEqual(
                    "\(error)",
                    "The request body could not be encoded: events(for:) sends GET, as EventSource does, which carries no "
                        + "body; read a POST stream with stream(_:) and events(in:).")
            }
        }
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// `events(in:)` reads a POST stream (an LLM's) with the same parser, split at every byte, and never sends it again:
    /// the end of the body ends the sequence (an unterminated last event dropped) although the stream set `retry`.
    func testEventsInAPostStreamAreParsedOnceWithoutReconnecting() async throws {
        let bytes = Array(Self.stream.utf8)
        for split in 1..<bytes.count {
            server.removeAllStubs()
            server.clearReceivedRequests()
            let pieces = [MockServer.Response.Piece(Data(bytes[..<split])), .init(after: 0.005, Data(bytes[split...]))]
            server.stub("POST", path: "/chat", response: .streamed(pieces, contentType: "text/event-stream"))
            var chat = RestManager.Request(.post, url: url("/chat"))
            try chat.setBody(["prompt": "hi"])
            let (body, response) = try await rest.stream(chat)
            XCTAssertEqual(response.httpStatusCode, 200)
            var events: [Event] = []
            for try await event in rest.events(in: body) { events.append(event) }
            XCTAssertEqual(events, Self.expected, "split at \(split)")
            XCTAssertEqual(server.receivedRequests.map(\.method), ["POST"], "split at \(split)")
            XCTAssertEqual(server.receivedRequests.first?.body, Data(#"{"prompt":"hi"}"#.utf8))
        }
    }

    /// `events(in:)` drops a byte order mark that opens the body, as `events(for:)` does at each connection: the first
    /// field is `data`, not an unknown `\u{FEFF}data`.
    func testEventsInABodyThatOpensWithAByteOrderMark() async throws {
        let body = Data("\u{FEFF}data: first\n\n".utf8)
        server.stub("POST", path: "/chat", response: .streamed([.init(body)], contentType: "text/event-stream"))
        let (stream, _) = try await rest.stream(RestManager.Request(.post, url: url("/chat")))
        var events: [Event] = []
        for try await event in rest.events(in: stream) { events.append(event) }
        XCTAssertEqual(events, [Event(data: "first")])
    }

    /// A network error in the middle of a POST stream ends `events(in:)` with that error after the events before it;
    /// nothing is sent again (`events(for:)` would reconnect).
    func testEventsInABodyCutShortEndWithTheNetworkError() async throws {
        var broken = MockServer.Response(
            status: 200, headers: [("Content-Type", "text/event-stream")], body: Data("data: one\n\nretry: 10\ndata: lost\n".utf8))
        broken.fault = .closeMidBody
        server.stub("POST", path: "/chat", response: broken)
        let (body, _) = try await rest.stream(RestManager.Request(.post, url: url("/chat")))
        var events: [Event] = []
        do {
            for try await event in rest.events(in: body) { events.append(event) }
            XCTFail("a body cut short must end with an error")
        } catch RestManager.CustomError.transport(let error) {
            // FoundationNetworking: -1, "transfer closed with 16 bytes remaining to read".
            XCTAssertTrue([.networkConnectionLost, .unknown].contains(error.code), "\(error.code)")
        }
        XCTAssertEqual(events, [Event(data: "one")])
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testAFirstAnswerOf204IsAnEmptySequence() async throws {
        server.stub("GET", path: "/nothing", response: MockServer.Response(status: 204))
        var count = 0
        for try await _ in rest.events(for: request("/nothing")) { count += 1 }
        XCTAssertEqual(count, 0)
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testANon2xxStatusEndsTheSequenceWithItsError() async throws {
        server.stub("GET", path: "/down", response: .text("maintenance", status: 503))
        do {
            for try await _ in rest.events(for: request("/down")) {}
            XCTFail("a 503 must end the sequence with an error")
        } catch RestManager.CustomError.unacceptableStatusCode(let status, let body) {
            XCTAssertEqual(status, 503)
            XCTAssertEqual(body, Data("maintenance".utf8))
        }
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    /// A sequence that threw is over: asking its iterator again gives nil and sends nothing (before, the iterator
    /// connected again and threw again, for as long as it was asked).
    func testAnIteratorAskedAgainAfterItsErrorGivesNilAndSendsNothing() async throws {
        server.stub("GET", path: "/down", response: .text("maintenance", status: 503))
        var iterator = rest.events(for: request("/down")).makeAsyncIterator()
        do {
            _ = try await iterator.next()
            XCTFail("a 503 must end the sequence with an error")
        } catch RestManager.CustomError.unacceptableStatusCode(let status, _) {
            XCTAssertEqual(status, 503)
        }
        let again = try await iterator.next()
        XCTAssertNil(again)
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    func testAnotherContentTypeEndsTheSequenceWithAnError() async throws {
        server.stub("GET", path: "/html", response: .text("data: looks like an event\n\n"))
        do {
            for try await event in rest.events(for: request("/html")) {
                XCTFail("an event parsed from text/plain: \(event)")
                break
            }
            XCTFail("text/plain must end the sequence with an error")
        } catch RestManager.CustomError.transport(let error) {
            XCTAssertEqual(error.code, .cannotParseResponse)
            XCTAssertTrue(error.localizedDescription.contains("'text/plain; charset=utf-8'"), error.localizedDescription)
        }
        XCTAssertEqual(server.receivedRequests.count, 1)
    }

    /// A media type's name ignores case and may carry parameters and spaces (RFC 9110 §8.3.1): `Text/Event-Stream ;
    /// charset=UTF-8` is an event stream.
    func testTheEventStreamMediaTypeIgnoresCaseAndParameters() async throws {
        let headers = [("Content-Type", "Text/Event-Stream ; charset=UTF-8")]
        server.stub("GET", path: "/mixed", response: MockServer.Response(status: 200, headers: headers, body: Data("data: a\n\n".utf8)))
        var events: [Event] = []
        for try await event in rest.events(for: request("/mixed")) {
            events.append(event)
            break
        }
        XCTAssertEqual(events, [Event(data: "a")])
    }

    func testANetworkErrorIsFollowedByAReconnection() async throws {
        // A body cut short: the connection closes halfway through an event.
        var broken = MockServer.Response(status: 200, headers: [("Content-Type", "text/event-stream")], body: Data("id: 9\ndata: lost\n\n".utf8))
        broken.fault = .closeMidBody
        server.enqueue(MockServer.Response.events([.init(id: "1", data: "before", retry: 10)]))
        server.enqueue(broken)
        server.enqueue(MockServer.Response.events([.init(id: "2", data: "after")]))
        server.enqueue(MockServer.Response(status: 204))
        var events: [Event] = []
        for try await event in rest.events(for: request("/flaky")) {
            events.append(event)
            if events.count > 2 { break }
        }
        XCTAssertEqual(events.map(\.data), ["before", "after"])
        XCTAssertEqual(server.receivedRequests.map { $0.header("Last-Event-ID") }, [nil, "1", "1", "2"])
    }

    /// A server that sets `retry: 0` and closes every connection before an event: the waits double from 0.1 s (it
    /// reconnected in a tight loop, thousands of times a second); a connection with an event starts them over.
    func testConnectionsWithoutAnEventBackOff() async throws {
        let retries = ResultBox<String>()
        rest.eventHandler = { event in
            if case .retrying(_, _, let delay, _) = event { retries.set(String(format: "%.2f", delay)) }
        }
        let empty = MockServer.Response.streamed([.init("retry: 0\n\n")], contentType: "text/event-stream")
        for _ in 0..<3 { server.enqueue(empty) }
        server.enqueue(MockServer.Response.events([.init(id: "1", data: "one")]))
        for _ in 0..<2 { server.enqueue(empty) }
        server.enqueue(MockServer.Response(status: 204))
        var events: [Event] = []
        for try await event in rest.events(for: request("/empty")) { events.append(event) }
        XCTAssertEqual(events, [Event(id: "1", data: "one")])
        XCTAssertEqual(retries.all, ["0.10", "0.20", "0.40", "0.10", "0.10", "0.20"])
        XCTAssertEqual(server.receivedRequests.count, 7)
    }

    /// `retry: 0` from a server that closes after each event: at most 10 connections a second (it made 510-820).
    func testNoServerMakesItReconnectMoreThanTenTimesASecond() async throws {
        let retries = ResultBox<String>()
        rest.eventHandler = { event in
            if case .retrying(_, _, let delay, _) = event { retries.set(String(format: "%.2f", delay)) }
        }
        for number in 1...5 { server.enqueue(MockServer.Response.events([.init(id: "\(number)", data: "x", retry: 0)])) }
        server.enqueue(MockServer.Response(status: 204))
        let started = Date()
        var count = 0
        for try await _ in rest.events(for: request("/fast")) { count += 1 }
        XCTAssertEqual(count, 5)
        XCTAssertEqual(retries.all, ["0.10", "0.10", "0.10", "0.10", "0.10"])
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.5)
    }

    /// A 204 ends the sequence after its call's `finished` event, which says HTTP 204 (it said "cancelled" in 13 of
    /// 32 runs, and came after the loop ended in 3 of 16).
    func testA204EndsTheSequenceAfterAFinishedEventSayingSo() async throws {
        for round in 1...20 {
            let finished = ResultBox<String>()
            rest.eventHandler = { event in
                if case .finished = event { finished.set(event.description) }
            }
            server.enqueue(MockServer.Response(status: 204))
            for try await event in rest.events(for: request("/gone")) { XCTFail("\(event)") }
            XCTAssertEqual(finished.count, 1, "round \(round)")
            XCTAssertTrue(finished.value?.contains("/gone HTTP 204 in ") == true, finished.value ?? "none")
        }
    }

    func testCancellingTheTaskEndsTheSequenceAndClosesTheConnection() async throws {
        server.stub("GET", path: "/live", response: .events([.init(data: "first"), .init(data: "never", after: 60)]))
        let rest = self.rest!
        let live = request("/live")
        let first = ResultBox<Event>()
        let reader = Task { () -> Int in
            var count = 0
            for try await event in rest.events(for: live) {
                first.set(event)
                count += 1
            }
            return count
        }
        let deadline = Date(timeIntervalSinceNow: 10)
        while first.count == 0, Date() < deadline { usleep(5_000) }
        XCTAssertEqual(first.value?.data, "first")
        reader.cancel()
        let count = try await reader.value
        XCTAssertEqual(count, 1)
        while server.openConnectionCount > 0, Date() < deadline.addingTimeInterval(10) { usleep(5_000) }
        XCTAssertEqual(server.openConnectionCount, 0)
    }

    func testParsingIsLinearInTheSizeOfAnEvent() throws {
        func parseTime(megabytes: Int) throws -> TimeInterval {
            let text = "data: " + String(repeating: "x", count: megabytes << 20) + "\n\n"
            let bytes = Data(text.utf8)
            var best = TimeInterval.infinity
            for _ in 0..<5 {
                let started = Date()
                var splitter = RestManager.LineSplitter()
                var parser = RestManager.EventStreamParser()
                var lines: [String] = []
                var events = 0
                for start in stride(from: 0, to: bytes.count, by: 16_384) {
                    try splitter.split(bytes[start..<min(bytes.count, start + 16_384)], into: &lines)
                    for line in lines where try parser.take(line) != nil { events += 1 }
                    lines.removeAll(keepingCapacity: true)
                }
                XCTAssertEqual(events, 1)
                best = min(best, Date().timeIntervalSince(started))
            }
            return best
        }
        let small = try parseTime(megabytes: 1)
        let large = try parseTime(megabytes: 10)
        // Linear is 10 times; quadratic 100. The best of five, and room for a busy machine's preemptions (a bound of
        // 12 times plus 50 ms failed under load): 40 times plus 0.25 s still fails a quadratic parser.
        XCTAssertLessThanOrEqual(large, 40 * small + 0.25, "1 MiB: \(small) s, 10 MiB: \(large) s")
    }
}

/// The DocC article's example, as it is written there, against the mock's token stream.
final class StreamingArticleExampleTests: MockServerTestCase {
    func testTheArticlesTokenStreamExample() async throws {
        let rest = RestManager()
        rest.baseURL = server.baseURL
        var answers: [String] = []
        var answer = ""
        for try await event in rest.events(for: RestManager.Request(url: URL(string: "_test/events?count=8")!)) {
            if event.event == "done" { break }
            answer += (answer.isEmpty ? "" : " ") + event.data
            answers.append(answer)
        }
        XCTAssertEqual(answers.first, "The")
        XCTAssertEqual(answers.last, "The quick brown fox jumps over the lazy")
        XCTAssertEqual(answers.count, 8)
        let (body, response) = try await rest.stream(RestManager.Request(url: URL(string: "_test/stream?count=3")!))
        XCTAssertEqual(response.httpStatusCode, 200)
        var lines: [String] = []
        for try await line in body.lines { lines.append(line) }
        XCTAssertEqual(lines, ["The", "quick", "brown"])
    }

    func testTheTokenStreamResumesAfterLastEventID() async throws {
        var request = RestManager.Request(url: url("/_test/events?count=5&interval=0"))
        request.headers.add(value: "3", forKey: "Last-Event-ID")
        let (body, _) = try await rest.stream(request)
        var lines: [String] = []
        for try await line in body.lines { lines.append(line) }
        XCTAssertEqual(lines, ["id: 4", "data: fox", "", "id: 5", "data: jumps", "", "retry: 100", "id: 5", "event: done", "data: [DONE]", ""])
    }
}
