import Foundation
import XCTest
import MockServer
import RestManager

/// Cancelling an upload from a file, or its deadline firing, just after it starts: FoundationNetworking traps
/// (`EasyHandle.swift`, `try!` on libcurl's code 43) when its file reader resumes a transfer that a cancel already
/// took apart (12 of 60 at a 2 ms timeout). The library sends a file as a body stream of its own, which has no such
/// reader: 1,000 uploads cancelled at 0–5 ms each complete once with `.cancelled`, and the process lives. Files past
/// 10 MB (which once went through the reader while smaller ones went from memory) are tried too.
final class UploadCancellationTests: MockServerTestCase {
    /// Starts `count` uploads of `size` bytes to `path`, half with a progress handler, cancelling the nth `pause(n)`
    /// milliseconds after it starts; once every completion came, whether each error was one `accepted` allows.
    private func cancelUploads(
        _ count: Int, of size: Int, to path: String, pausingMilliseconds pause: (Int) -> Int,
        accepted: @escaping @Sendable (RestManager.CustomError?) -> Bool
    ) throws -> [Bool] {
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: size).write(to: file)
        let outcomes = ResultBox<Bool>()
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            var progress: (@Sendable (RestManager.TransferProgress) -> Void)?
            if index % 2 == 1 { progress = { _ in } }
            let handle = rest.upload(fileAt: file, toURL: url(path), progress: progress) { results in
                outcomes.set(accepted(results.error as? RestManager.CustomError))
                group.leave()
            }
            usleep(useconds_t(pause(index)) * 1000)
            handle.cancel()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        // Let every body that went out arrive before tearDown stops the server (as if a peer closed under an upload).
        waitUntilTheServerIsQuiet(for: 2)
        return outcomes.all
    }

    func testAThousandUploadsCancelledInTheirFirstMillisecondsEachCompleteOnce() throws {
        let outcomes = try cancelUploads(1000, of: 256 << 10, to: "/_test/upload", pausingMilliseconds: { $0 % 6 }) { error in
            error == nil || error?.isCancellation == true
        }
        XCTAssertEqual(outcomes.count, 1000)
        XCTAssertEqual(outcomes.filter { !$0 }, [])
    }

    /// Files just past the 10 MB that once went from memory (fewer of them: each is 10 MB to write).
    func testLargeFileUploadsCancelledInTheirFirstMillisecondsEachCompleteOnce() throws {
        let outcomes = try cancelUploads(60, of: 10_000_001, to: "/_test/upload", pausingMilliseconds: { $0 % 6 }) { error in
            error == nil || error?.isCancellation == true
        }
        XCTAssertEqual(outcomes.count, 60)
        XCTAssertEqual(outcomes.filter { !$0 }, [])
    }

    /// Cancelled while the answer is awaited (the server answers after 0.2 s), with and without progress.
    func testUploadsCancelledWhileTheirAnswerIsAwaitedEachCompleteOnce() throws {
        var slow = MockServer.Response.text("late")
        slow.delay = 0.2
        server.stub("POST", path: "/slow", response: slow)
        let outcomes = try cancelUploads(200, of: 64 << 10, to: "/slow", pausingMilliseconds: { $0 % 20 }) { error in
            error?.isCancellation == true
        }
        XCTAssertEqual(outcomes.count, 200)
        XCTAssertEqual(outcomes.filter { !$0 }, [])
    }

    /// The same for a deadline firing in the first milliseconds.
    func testUploadsWhoseDeadlineFiresInTheirFirstMillisecondsEachCompleteOnce() throws {
        let file = scratch.appendingPathComponent("body.bin")
        let large = scratch.appendingPathComponent("large.bin")
        try Data(count: 256 << 10).write(to: file)
        try Data(count: 10_000_001).write(to: large)
        let outcomes = ResultBox<String>()
        let group = DispatchGroup()
        for index in 0..<300 {
            group.enter()
            // Every fifth one past the 10 MB that once went from memory.
            let file = index % 5 == 0 ? large : file
            let timeout = Double(index % 5 + 1) / 1000
            rest.upload(fileAt: file, toURL: url("/_test/upload"), timeoutInterval: timeout) { results in
                switch results.error as? RestManager.CustomError {
                case .timedOut?, nil: outcomes.set("ok")
                case let other: outcomes.set("\(String(describing: other))")
                }
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(outcomes.all.count, 300)
        XCTAssertEqual(outcomes.all.filter { $0 != "ok" }, [])
        // Wait until the server has answered nothing new for two seconds before tearDown stops it (a connection closed
        // under a file upload from FoundationNetworking's reader trapped a CI run here).
        waitUntilTheServerIsQuiet(for: 2)
    }

    private func waitUntilTheServerIsQuiet(for seconds: TimeInterval) {
        let server = self.server!
        var count = server.handledRequestCount
        var quietSince = Date()
        let giveUp = Date(timeIntervalSinceNow: 120)
        while Date().timeIntervalSince(quietSince) < seconds, Date() < giveUp {
            usleep(50_000)
            let now = server.handledRequestCount
            if now != count {
                count = now
                quietSince = Date()
            }
        }
    }
}
