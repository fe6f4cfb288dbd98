import Foundation
import XCTest
import HeapStatistics
import MockServer
import RestManager

/// Many requests from many callers, with random faults and cancellations: every completion exactly once.
final class StressTests: MockServerTestCase {
    /// 10,000 by default; sanitizer runs in CI set RESTMANAGER_STRESS_REQUESTS lower (they are 5–20× slower).
    private var total: Int {
        ProcessInfo.processInfo.environment["RESTMANAGER_STRESS_REQUESTS"].flatMap(Int.init) ?? (TestScale.quick ? 2_000 : 10_000)
    }

    private final class Ledger: @unchecked Sendable {
        private let lock = NSLock()
        private var completions: [Int]
        private var handles: [() -> AnyObject?] = []
        init(count: Int) { completions = Array(repeating: 0, count: count) }
        func complete(_ index: Int) { lock.lock(); completions[index] += 1; lock.unlock() }
        func track(_ handle: AnyObject) { lock.lock(); handles.append { [weak handle] in handle }; lock.unlock() }
        var counts: [Int] { lock.lock(); defer { lock.unlock() }; return completions }
        var aliveHandles: Int { lock.lock(); defer { lock.unlock() }; return handles.filter { $0() != nil }.count }
        /// Drops the test's own per-request bookkeeping before the heap is measured.
        func forgetHandles() { lock.lock(); handles = []; lock.unlock() }
    }

    func testRandomFaultsAndCancellationsFromSixtyFourCallers() throws {
        let total = self.total
        let descriptorsBefore = openDescriptorCount()
        let heapBefore = heap_statistics_live_bytes()
        let ledger = Ledger(count: total)
        let group = DispatchGroup()
        let paths = [
            "/_test/echo", "/api/users", "/api/users/2", "/_test/status/500", "/_test/close-before-response",
            "/_test/close-mid-body", "/_test/garbage", "/_test/redirect/302?to=/api/users/3",
            "/_test/delay?seconds=0.02", "/_test/bytes/20000", "/api/users?page=2"
        ]
        let base = server.baseURL.absoluteString
        do {
            let plain = RestManager()
            let shared = RestManager()
            shared.deduplicatesRequests = true
            for manager in [plain, shared] { manager.timeoutInterval = 20 }
            let callers = 64
            for caller in 0..<callers {
                group.enter()
                DispatchQueue.global().async {
                    var generator = SeededGenerator(seed: UInt64(caller + 1))
                    for index in stride(from: caller, to: total, by: callers) {
                        let path = paths[Int.random(in: 0..<paths.count, using: &generator)]
                        let manager = Bool.random(using: &generator) ? plain : shared
                        group.enter()
                        let handle = manager.makeRequest(toURL: URL(string: base + path)!, withHttpMethod: .get) { _ in
                            ledger.complete(index)
                            group.leave()
                        }
                        ledger.track(handle)
                        if Int.random(in: 0..<10, using: &generator) == 0 {
                            let delay = Double.random(in: 0...0.01, using: &generator)
                            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { handle.cancel() }
                        }
                    }
                    group.leave()
                }
            }
            XCTAssertEqual(group.wait(timeout: .now() + 600), .success, "every completion arrived")
        }
        let counts = ledger.counts
        XCTAssertEqual(counts.filter { $0 == 0 }.count, 0, "lost completions")
        XCTAssertEqual(counts.filter { $0 > 1 }.count, 0, "duplicated completions")
        // Managers released: request objects and connections go away (asynchronously, as the sessions wind down).
        let released = expectation(for: NSPredicate { _, _ in ledger.aliveHandles == 0 }, evaluatedWith: nil)
        wait(for: [released], timeout: 10)
        server.stop()
        let closed = expectation(for: NSPredicate { _, _ in openDescriptorCount() <= descriptorsBefore }, evaluatedWith: nil)
        wait(for: [closed], timeout: 30)
        // Memory is flat: what stays allocated is bounded by what the toolchain keeps per request
        // (libcurl's ~48 bytes, allocator slack), far below any request's own data. The test's own
        // records (the server's log of requests, the handle watch list) are dropped first.
        server.clearReceivedRequests()
        ledger.forgetHandles()
        let heapAfter = heap_statistics_live_bytes()
        if heapBefore > 0 {
            let growthPerRequest = (Double(heapAfter) - Double(heapBefore)) / Double(total)
            XCTAssertLessThan(growthPerRequest, 1024, "live heap grew \(Int(growthPerRequest)) bytes per request")
        }
    }
}
