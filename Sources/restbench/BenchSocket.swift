// A blocking keep-alive HTTP client on a raw socket, to measure the mock server alone.

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class BenchSocket {
    private let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 65536)

    init?(port: UInt16) {
        #if os(Linux)
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if connected != 0 { close(descriptor); return nil }
    }

    deinit { close(descriptor) }

    /// Sends the request and reads one whole response (by Content-Length); false on any failure.
    func roundTrip(_ request: [UInt8]) -> Bool {
        let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, request.count, 0) }
        guard sent == request.count else { return false }
        var received: [UInt8] = []
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, 65536, 0) }
            guard count > 0 else { return false }
            received += buffer[..<count]
            if let expected = Self.responseLength(received), received.count >= expected { return true }
        }
    }

    /// The whole response's length once its head has arrived: head plus Content-Length.
    private static func responseLength(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        let marker = Array("content-length:".utf8)
        for index in 3..<bytes.count where bytes[index - 3] == 13 && bytes[index - 2] == 10 && bytes[index - 1] == 13 && bytes[index] == 10 {
            var length = 0
            var lineStart = 0
            for position in 0..<index where position == 0 || bytes[position - 1] == 10 {
                lineStart = position
                guard lineStart + marker.count < index,
                    zip(marker, bytes[lineStart...]).allSatisfy({ $0 == ($1 | 0x20) || ($0 == 58 && $1 == 58) || ($0 == 45 && $1 == 45) })
                else { continue }
                var cursor = lineStart + marker.count
                while bytes[cursor] == 32 { cursor += 1 }
                while bytes[cursor] >= 48 && bytes[cursor] <= 57 { length = length * 10 + Int(bytes[cursor] - 48); cursor += 1 }
            }
            return index + 1 + length
        }
        return nil
    }
}
