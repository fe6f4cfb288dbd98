import Foundation
import XCTest
import MockServer
@testable import RestManager

/// A disk slower than the network: FoundationNetworking reads on whatever its delegate does, so the library makes the
/// thread that queues the chunks wait (`Transport.Backlog`), and what waits in memory stays bounded.
final class TransferBackPressureTests: MockServerTestCase {
    /// 128 MiB arrive over loopback while the delegate queue (where the file is written) is held for a second as a
    /// stalled disk would: without back-pressure most of them wait in memory (+130 MiB measured); with it, at most
    /// about 32 MiB of chunks do. The file is right, from one request for the whole file.
    func testADownloadWhoseDiskStallsKeepsMemoryBounded() throws {
        let size = 134_217_728
        let target = scratch.appendingPathComponent("stalled.bin")
        let done = expectation(description: "downloaded")
        let outcome = ResultBox<Result<URL, RestManager.CustomError>>()
        #if os(Linux)
        let peakBefore = try resetPeakResidentBytes()
        #endif
        rest.download(fromURL: url("/_test/files/\(size)"), to: target) { result in
            outcome.set(result)
            done.fulfill()
        }
        RestManager.Transport.delegateThread.async { Thread.sleep(forTimeInterval: 1) }
        wait(for: [done], timeout: 120)
        XCTAssertNoThrow(try XCTUnwrap(outcome.value).get())
        #if os(Linux)
        // Read before the file is: its mapped pages count as resident.
        let growth = try peakResidentBytes() - peakBefore
        // The sanitizers' allocators keep freed chunks (quarantine) or add shadow memory for each: the plain run holds
        // the bound (ThreadSanitizer measured +120 MiB with the brake working).
        let sanitized = ["ASAN_OPTIONS", "TSAN_OPTIONS"].contains { ProcessInfo.processInfo.environment[$0] != nil }
        if !sanitized {
            XCTAssertLessThan(growth, 64 << 20, "peak memory grew by \(growth >> 20) MiB")
        }
        #endif
        let file = try Data(contentsOf: target, options: .alwaysMapped)
        XCTAssertEqual(file.count, size)
        // The mock's byte i is i mod 251: every 4,099th byte (prime to 251), and the last.
        for index in Array(stride(from: 0, to: size, by: 4_099)) + [size - 1] where file[index] != UInt8(index % 251) {
            return XCTFail("byte \(index) is \(file[index])")
        }
        XCTAssertEqual(server.receivedRequests.map { $0.header("Range") }, [nil])
    }
}
