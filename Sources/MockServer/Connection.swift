// One client connection: read, parse, route, write, until close, idle timeout or stop.

import Foundation
import Dispatch

/// What the router asks the connection to do.
enum Reply {
    /// Write a response (possibly delayed or stalled).
    case response(HTTPResponse)
    /// Write these bytes, then close (for broken-server cases).
    case raw([UInt8])
    /// Close without writing anything.
    case close
    /// Never answer: keep the connection until the client goes away or the server stops.
    case hang
    /// A test's own answer (stub or queued), with its delay, throttle or fault.
    case stub(MockServer.Response)
}

struct Connection {
    let descriptor: Int32
    let id: Int
    let server: MockServer
    let wake: Int32

    func run() {
        var buffer: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        var start = 0
        var continueSent = false
        let limits = server.configuration
        var parser = RequestParser(maximumHeaderBytes: limits.maximumHeaderBytes, maximumBodyBytes: limits.maximumBodyBytes)
        // When the current request's first byte arrived, and when its head was complete.
        var requestStarted: DispatchTime?
        var headDone: DispatchTime?
        var answered = 0
        while true {
            switch parser.parse(buffer[start...]) {
            case .failure(let status, let reason):
                return finish(with: HTTPResponse(status: status, text: "\(HTTPResponse.reason(status)): \(reason)\n"))
            case .incomplete(let expectsContinue):
                if expectsContinue && !continueSent {
                    continueSent = true
                    guard write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)[...]) else { return }
                }
                if start > 0 {
                    buffer.removeFirst(start)
                    start = 0
                }
                if !buffer.isEmpty && requestStarted == nil { requestStarted = .now() }
                if parser.hasReadHead && headDone == nil { headDone = .now() }
                // Idle between requests: the idle timeout. Inside a request: its head must be complete within
                // `requestHeadTimeout` of its first byte, and its body must keep up `minimumBodyBytesPerSecond`
                // after that much grace, so that slow clients cannot hold connections for ever.
                let waitLimit: TimeInterval
                if let headDone {
                    let received = Double(parser.bodyBytesReceived(in: buffer[...]))
                    let allowed = limits.requestHeadTimeout + received / Double(max(1, limits.minimumBodyBytesPerSecond))
                    waitLimit = allowed - Self.seconds(since: headDone)
                } else if let requestStarted {
                    waitLimit = limits.requestHeadTimeout - Self.seconds(since: requestStarted)
                } else {
                    waitLimit = limits.idleTimeout
                }
                switch waitForInput(timeout: max(0, waitLimit), inBody: headDone != nil) {
                case .ready:
                    guard Socket.read(descriptor, into: &buffer, scratch: &scratch) > 0 else { return }
                case .timedOut:
                    guard requestStarted != nil else { return }
                    return finish(with: HTTPResponse(status: 408, text: "Request Timeout: the request did not arrive in time\n"))
                case .stopping:
                    return
                }
            case .complete(let parsed, let consumed):
                start += consumed
                var streamed: (count: Int, checksum: UInt64)?
                if let length = parsed.streamedBodyLength {
                    guard let checksum = receiveStreamedBody(length, buffer: &buffer, start: &start, scratch: &scratch) else { return }
                    streamed = (length, checksum)
                }
                continueSent = false
                requestStarted = start < buffer.count ? .now() : nil
                headDone = nil
                let request = ReceivedRequest(parsed, connectionID: id)
                server.setAnswering(id, true)
                server.record(request)
                let keepOpen =
                    streamed.map {
                        write(
                            TransferEndpoints.receipt(request, byteCount: $0.count, checksum: $0.checksum),
                            keepAlive: parsed.keepAlive, includeBody: true) && parsed.keepAlive
                    }
                    ?? answer(parsed, request, reused: answered > 0)
                answered += 1
                server.setAnswering(id, false)
                guard keepOpen else { return }
            }
        }
    }

    /// Reads `length` body bytes as they come (some may be in `buffer` already), keeping only their
    /// checksum; nil when the client stops sending for the idle timeout, leaves, or the server stops.
    private func receiveStreamedBody(_ length: Int, buffer: inout [UInt8], start: inout Int, scratch: inout [UInt8]) -> UInt64? {
        var left = length
        var checksum: UInt64 = 0xcbf2_9ce4_8422_2325
        while true {
            let count = min(left, buffer.count - start)
            checksum = buffer[start..<(start + count)].withUnsafeBytes { TransferEndpoints.fnv1a64($0, continuing: checksum) }
            start += count
            left -= count
            if left == 0 { return checksum }
            buffer.removeAll(keepingCapacity: true)
            start = 0
            guard waitForInput(timeout: server.configuration.idleTimeout, inBody: true) == .ready,
                Socket.read(descriptor, into: &buffer, scratch: &scratch) > 0
            else { return nil }
        }
    }

    /// Waits for input, or for the server to stop. A body under way may go on arriving for the server's stop grace
    /// period: closing the connection under a FoundationNetworking file upload crashes the client's process.
    private func waitForInput(timeout: TimeInterval, inBody: Bool) -> Socket.PollResult {
        let result = Socket.poll([descriptor], wake: wake, timeout: timeout)
        guard result == .stopping, inBody, let left = server.stopGraceLeft() else { return result }
        return Socket.poll([descriptor], wake: -1, timeout: min(timeout, left)) == .ready ? .ready : .stopping
    }

    private static func seconds(since time: DispatchTime) -> TimeInterval {
        Double(DispatchTime.now().uptimeNanoseconds &- time.uptimeNanoseconds) / 1e9
    }

    /// Answers one request; returns whether the connection stays open.
    private func answer(_ parsed: ParsedRequest, _ request: ReceivedRequest, reused: Bool) -> Bool {
        switch Routes.reply(to: request, server: server) {
        case .close:
            return false
        case .raw(let bytes):
            _ = write(bytes[...])
            return false
        case .hang:
            holdUntilTheClientLeaves()
            return false
        case .stub(let stub):
            // A client (libcurl) resends a request at once, unseen by the app, when a reused connection closes before
            // any byte: that resend gets the same fault, so that the fault reaches the app instead of the next answer.
            if stub.fault == .closeWithoutResponse, reused { server.testKit.repeatFault(stub, for: request) }
            return write(stub, keepAlive: parsed.keepAlive && stub.fault == nil, includeBody: parsed.method != "HEAD")
        case .response(let response):
            let keepAlive = parsed.keepAlive && !response.closeAfter
            guard write(response, keepAlive: keepAlive, includeBody: parsed.method != "HEAD") else { return false }
            return keepAlive
        }
    }

    /// Reads and drops whatever the client sends until it goes away or the server stops.
    private func holdUntilTheClientLeaves() {
        var sink: [UInt8] = []
        var scratch = [UInt8](repeating: 0, count: 4096)
        while Socket.poll([descriptor], wake: wake, timeout: nil) == .ready {
            sink.removeAll(keepingCapacity: true)
            if Socket.read(descriptor, into: &sink, scratch: &scratch) <= 0 { break }
        }
    }

    /// A test's answer: after its delay, misbehaving as its fault says, the body throttled or chunked
    /// as asked. Returns whether the connection stays open.
    private func write(_ stub: MockServer.Response, keepAlive: Bool, includeBody: Bool) -> Bool {
        if stub.delay > 0 && !server.pause(seconds: stub.delay) { return false }
        if let raw = stub.rawPieces {
            for piece in raw {
                if piece.delay > 0 && !clientStaysFor(seconds: piece.delay) { return false }
                guard write(Array(piece.data)[...]) else { return false }
            }
            return false
        }
        switch stub.fault {
        case .closeWithoutResponse?: return false
        case .resetConnection?:
            Socket.resetOnClose(descriptor)
            return false
        case .noResponse?:
            holdUntilTheClientLeaves()
            return false
        case .closeAfterHeaders?, .closeMidBody?, nil: break
        }
        let head = HTTPResponse(status: stub.status, headers: stub.headers, body: Array(stub.body))
        guard write(head.serialized(keepAlive: keepAlive, includeBody: false)[...]) else { return false }
        guard includeBody, head.allowsBody else { return keepAlive }
        if !stub.pieces.isEmpty { return writePieces(stub.pieces) && keepAlive }
        var body = Array(stub.body)
        if stub.isChunked {
            // Pieces of up to 4 KiB, so that a client sees several chunks.
            body =
                stride(from: 0, to: body.count, by: 4096).flatMap { start -> [UInt8] in
                    let piece = body[start..<min(body.count, start + 4096)]
                    return Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + [13, 10]
                } + Array("0\r\n\r\n".utf8)
        }
        switch stub.fault {
        case .closeAfterHeaders?: return false
        case .closeMidBody?:
            _ = write(body[..<(body.count / 2)])
            return false
        default: break
        }
        guard let rate = stub.bytesPerSecond, rate > 0 else { return write(body[...]) && keepAlive }
        // About ten pieces a second.
        let piece = max(1, rate / 10)
        var offset = 0
        while offset < body.count {
            let end = min(body.count, offset + piece)
            guard write(body[offset..<end]) else { return false }
            offset = end
            if offset < body.count, !server.pause(seconds: Double(piece) / Double(rate)) { return false }
        }
        return keepAlive
    }

    /// A streamed body: each piece as a chunk after its delay, watching the client meanwhile so that a client that
    /// leaves stops the stream at once.
    private func writePieces(_ pieces: [MockServer.Response.Piece]) -> Bool {
        for piece in pieces {
            if piece.delay > 0 && !clientStaysFor(seconds: piece.delay) { return false }
            guard !piece.data.isEmpty else { continue }
            let chunk = Array("\(String(piece.data.count, radix: 16))\r\n".utf8) + Array(piece.data) + [13, 10]
            guard write(chunk[...]) else { return false }
        }
        return write(Array("0\r\n\r\n".utf8)[...])
    }

    /// Waits `seconds`; false as soon as the client closes its side (or the server stops).
    private func clientStaysFor(seconds: TimeInterval) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while case let left = deadline.timeIntervalSinceNow, left > 0 {
            switch Socket.poll([descriptor], wake: wake, timeout: left) {
            case .stopping: return false
            case .timedOut: return true
            case .ready:
                // Readable while a response is being written: the client closed, or pipelined a request.
                var byte: UInt8 = 0
                let peeked = recv(descriptor, &byte, 1, Int32(MSG_PEEK))
                if peeked <= 0 { return false }
                // A pipelined request waits for this response to end.
                return server.pause(seconds: left)
            }
        }
        return true
    }

    private func write(_ response: HTTPResponse, keepAlive: Bool, includeBody: Bool) -> Bool {
        if response.delayBeforeHeaders > 0 && !server.pause(seconds: response.delayBeforeHeaders) { return false }
        let bytes = response.serialized(keepAlive: keepAlive, includeBody: includeBody)
        if let generated = response.generatedBodyLength, includeBody, response.allowsBody {
            // Generated bodies go out in pieces of one block: memory per response stays at one block.
            guard write(bytes[...]) else { return false }
            let chunked = response.headers.contains { $0.name.lowercased() == "transfer-encoding" }
            let block = TestEndpoints.patternBlock
            var left = generated
            var budget = response.dropAfterBodyBytes ?? Int.max
            var position = response.generatedBodyOffset % 251
            while left > 0 {
                guard budget > 0 else { return false }
                let count = min(left, block.count - position, budget)
                let piece = block[position..<(position + count)]
                guard chunked ? write((Array("\(String(count, radix: 16))\r\n".utf8) + piece + [13, 10])[...]) : write(piece) else {
                    return false
                }
                (left, budget, position) = (left - count, budget - count, (position + count) % block.count)
            }
            return !chunked || write(Array("0\r\n\r\n".utf8)[...])
        }
        if let stallAfter = response.stallAfterBodyBytes, includeBody {
            let split = bytes.count - response.body.count + min(stallAfter, response.body.count)
            guard write(bytes[..<split]), server.pause(seconds: response.stallSeconds) else { return false }
            return write(bytes[split...])
        }
        return write(bytes[...])
    }

    /// Writes every byte unless the server stops or the client reads nothing for the idle timeout.
    private func write(_ bytes: ArraySlice<UInt8>) -> Bool {
        Socket.writeAll(descriptor, bytes, wake: wake, stallTimeout: server.configuration.idleTimeout)
    }

    private func finish(with response: HTTPResponse) {
        var response = response
        response.closeAfter = true
        _ = write(response, keepAlive: false, includeBody: true)
        Socket.shutdownWrite(descriptor)
    }
}

extension ReceivedRequest {
    init(_ parsed: ParsedRequest, connectionID: Int) {
        let pieces = parsed.target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let rawQuery = pieces.count > 1 ? String(pieces[1]) : nil
        self.init(
            method: parsed.method, target: parsed.target, path: String(pieces.first ?? ""),
            rawQuery: rawQuery, queryItems: FormDecoding.decode(rawQuery ?? ""),
            headers: parsed.headers, body: Data(parsed.body), connectionID: connectionID)
    }
}

/// `application/x-www-form-urlencoded` decoding, used for queries and form bodies.
enum FormDecoding {
    static func decode(_ text: String) -> [(name: String, value: String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
        }
    }

    /// `+` as space and `%XX` as a byte; a malformed escape stays as written.
    static func unescape<S: StringProtocol>(_ text: S) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                output.append(32)
            } else if byte == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2])
            {
                output.append(high << 4 | low)
                index += 2
            } else {
                output.append(byte)
            }
            index += 1
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 48...57: return byte - 48
        case 65...70: return byte - 55
        case 97...102: return byte - 87
        default: return nil
        }
    }
}
