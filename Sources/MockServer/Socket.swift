// Thin wrappers over the POSIX socket calls the server needs, identical on Linux and Darwin.

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

enum Socket {
    enum PollResult: Equatable {
        case ready, timedOut, stopping
    }

    #if os(Linux)
    private static let streamType = Int32(SOCK_STREAM.rawValue)
    private static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    private static let streamType = SOCK_STREAM
    private static let sendFlags: Int32 = 0
    #endif

    static func makePipe() throws -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else { throw failure("pipe") }
        return (descriptors[0], descriptors[1])
    }

    /// Makes the pipe readable for every poller at once (`send` does not work on pipes).
    static func signal(_ pipeWriter: Int32) {
        var byte: UInt8 = 1
        _ = write(pipeWriter, &byte, 1)
    }

    /// Listens on `host` (an IPv4 or IPv6 literal); returns the socket and the bound port.
    static func listen(host: String, port: UInt16) throws -> (Int32, UInt16) {
        let isIPv6 = host.contains(":")
        let descriptor = socket(isIPv6 ? AF_INET6 : AF_INET, streamType, 0)
        guard descriptor >= 0 else { throw failure("socket") }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var bound: Int32
        if isIPv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else {
                close(descriptor)
                throw MockServer.Failure(description: "'\(host)' is not an IPv6 address")
            }
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
                close(descriptor)
                throw MockServer.Failure(description: "'\(host)' is not an IPv4 address")
            }
            bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard bound == 0, systemListen(descriptor, 512) == 0 else {
            let error = failure("bind/listen on \(host):\(port)")
            close(descriptor)
            throw error
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        let actualPort: UInt16 = withUnsafePointer(to: &storage) { pointer in
            if isIPv6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        return (descriptor, actualPort)
    }

    static func accept(_ listener: Int32) -> Int32? {
        let client = systemAccept(listener, nil, nil)
        guard client >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if !os(Linux)
        setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return client
    }

    /// Waits until one of `descriptors` is readable, the timeout passes, or `wake` is readable.
    static func poll(_ descriptors: [Int32], wake: Int32, timeout: TimeInterval?) -> PollResult {
        var entries = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        entries.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0))
        let milliseconds = timeout.map { Int32(max(0, min($0 * 1000, Double(Int32.max)))) } ?? -1
        while true {
            let result = systemPoll(&entries, nfds_t(entries.count), milliseconds)
            if result < 0 && errno == EINTR { continue }
            if result < 0 { return .stopping }
            if entries.last.map({ $0.revents != 0 }) ?? false { return .stopping }
            return result == 0 ? .timedOut : .ready
        }
    }

    /// Reads what is available and appends it to `buffer`; returns the count, 0 at end of stream, -1 on error.
    static func read(_ descriptor: Int32, into buffer: inout [UInt8], scratch: inout [UInt8]) -> Int {
        let count = scratch.withUnsafeMutableBytes { raw in recv(descriptor, raw.baseAddress, raw.count, 0) }
        if count > 0 { buffer.append(contentsOf: scratch[..<count]) }
        return count
    }

    /// Writes every byte without blocking the thread for good: waits for the socket to take more,
    /// and gives up when `wake` becomes readable (the server stops), when the peer is gone, or when
    /// it takes nothing for `stallTimeout` seconds (a client that does not read).
    static func writeAll(_ descriptor: Int32, _ bytes: ArraySlice<UInt8>, wake: Int32, stallTimeout: TimeInterval) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let written = bytes.withUnsafeBytes { raw in
                send(descriptor, raw.baseAddress! + (offset - bytes.startIndex), bytes.endIndex - offset, sendFlags | Int32(MSG_DONTWAIT))
            }
            if written > 0 {
                offset += written
                continue
            }
            if written < 0 && errno == EINTR { continue }
            guard written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) else { return false }
            var entries = [pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let milliseconds = Int32(max(0, min(stallTimeout * 1000, Double(Int32.max))))
            let ready = systemPoll(&entries, nfds_t(entries.count), milliseconds)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0, entries[1].revents == 0 else { return false }
        }
        return true
    }

    /// Writes every byte (or gives up when the peer is gone); returns whether all were written.
    /// Blocking: only for small answers to a fresh socket (the connection-limit 503).
    @discardableResult
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                send(descriptor, raw.baseAddress! + offset, bytes.count - offset, sendFlags)  // non-empty here
            }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    static func close(_ descriptor: Int32) {
        if descriptor >= 0 { _ = systemClose(descriptor) }
    }

    /// Makes the coming close send a TCP RST instead of a FIN.
    static func resetOnClose(_ descriptor: Int32) {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Ends both directions: the connection's own thread sees the end and closes it.
    static func shutdownBoth(_ descriptor: Int32) {
        _ = shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Half-closes for writing, so the peer sees the end of the response before the close.
    static func shutdownWrite(_ descriptor: Int32) {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    private static func failure(_ what: String) -> MockServer.Failure {
        MockServer.Failure(description: "\(what) failed: \(String(cString: strerror(errno)))")
    }
}

// The C functions share names with members above; these forward to the system's.
private func systemListen(_ descriptor: Int32, _ backlog: Int32) -> Int32 { listen(descriptor, backlog) }
private func systemAccept(_ descriptor: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?) -> Int32 {
    accept(descriptor, address, length)
}
private func systemPoll(_ entries: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeout: Int32) -> Int32 { poll(entries, count, timeout) }
private func systemClose(_ descriptor: Int32) -> Int32 { close(descriptor) }
