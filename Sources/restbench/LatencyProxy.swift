// A TCP proxy on 127.0.0.1 that delays every byte by half a round trip in each direction, for the transfer rows at
// 50 and 100 ms RTT (`--latency`). It runs in the server's child process, so its buffers never count as the client's
// memory. Bandwidth is not limited. With a window (`--window MIB`) at most that many bytes are unacknowledged in each
// direction, an acknowledgement taking the other half of the round trip, as TCP's receive window bounds a real long
// link (throughput ≤ window / RTT); without one the proxy reads ahead without bound, so only CPU limits the clients.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

final class LatencyProxy: @unchecked Sendable {
    private let upstreamPort: UInt16
    private let oneWayDelay: TimeInterval
    private let window: Int
    private var listener: Int32 = -1

    /// `window`: the most bytes unacknowledged in one direction (0: no limit).
    init(upstreamPort: UInt16, roundTrip milliseconds: Int, window: Int) {
        self.upstreamPort = upstreamPort
        oneWayDelay = Double(milliseconds) / 2000
        self.window = window
    }

    /// Listens on an ephemeral loopback port and returns it; connections are proxied on threads of their own.
    func start() -> UInt16? {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, 128) == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        Thread.detachNewThread { [self] in acceptLoop() }
        return UInt16(bigEndian: address.sin_port)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(client)
                close(upstream)
                continue
            }
            let finished = DispatchGroup()
            for (from, to) in [(client, upstream), (upstream, client)] {
                finished.enter()
                let pipe = DelayedPipe(delay: oneWayDelay, window: window)
                Thread.detachNewThread { pipe.read(from) }
                Thread.detachNewThread {
                    pipe.write(to)
                    finished.leave()
                }
            }
            finished.notify(queue: .global()) {
                close(client)
                close(upstream)
            }
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

/// One direction of a proxied connection: chunks read now are written `delay` seconds later, in order; the end of the
/// input becomes a half-close of the output. With a window, a byte stays unacknowledged from its read until `delay`
/// after its write (the acknowledgement's way back), and reading waits while `window` bytes are.
private final class DelayedPipe: @unchecked Sendable {
    private let delay: TimeInterval
    private let window: Int
    private let condition = NSCondition()
    private var chunks: [(due: Date, bytes: [UInt8])] = []
    private var ended = false
    /// Bytes read and not yet acknowledged.
    private var unacknowledged = 0
    /// Bytes written, acknowledged at `due`.
    private var acknowledgements: [(due: Date, count: Int)] = []

    init(delay: TimeInterval, window: Int) {
        self.delay = delay
        self.window = window
    }

    func read(_ socket: Int32) {
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        while true {
            let room = window > 0 ? waitForRoom() : buffer.count
            let count = recv(socket, &buffer, min(buffer.count, room), 0)
            condition.lock()
            if count > 0 {
                unacknowledged += count
                chunks.append((Date() + delay, Array(buffer[..<count])))
            } else {
                ended = true
            }
            condition.signal()
            condition.unlock()
            if count <= 0 { return }
        }
    }

    func write(_ socket: Int32) {
        while true {
            condition.lock()
            while chunks.isEmpty && !ended { condition.wait() }
            guard let next = chunks.first else {
                condition.unlock()
                shutdown(socket, Int32(SHUT_WR))
                return
            }
            chunks.removeFirst()
            condition.unlock()
            let wait = next.due.timeIntervalSinceNow
            if wait > 0 { Thread.sleep(forTimeInterval: wait) }
            var sent = 0
            while sent < next.bytes.count {
                let written = next.bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard written > 0 else { return }
                sent += written
            }
            condition.lock()
            acknowledgements.append((Date() + delay, sent))
            condition.signal()
            condition.unlock()
        }
    }

    /// Waits until some of the window is free (the acknowledgements due have come back) and returns how much.
    private func waitForRoom() -> Int {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let now = Date()
            while let first = acknowledgements.first, first.due <= now {
                unacknowledged -= first.count
                acknowledgements.removeFirst()
            }
            if unacknowledged < window { return window - unacknowledged }
            _ = condition.wait(until: acknowledgements.first?.due ?? now + delay)
        }
    }
}
