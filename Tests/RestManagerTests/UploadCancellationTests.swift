import Foundation
import XCTest
import MockServer
import RestManager

/// Cancelling an upload from a file, or its deadline firing, just after it starts: FoundationNetworking traps
/// (`EasyHandle.swift`, `try!` on libcurl's code 43) when its file reader resumes a transfer that a cancel already
/// took apart. The library keeps its cancels out of that window: 1,000 uploads cancelled at 0–5 ms each complete once
/// with `.cancelled`, and the process lives.
final class UploadCancellationTests: MockServerTestCase {
    func testAThousandUploadsCancelledInTheirFirstMillisecondsEachCompleteOnce() throws {
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 256 << 10).write(to: file)
        let completions = ResultBox<Bool>()
        let group = DispatchGroup()
        for index in 0..<1000 {
            group.enter()
            // Half with progress (a delegate task), half without (a completion-handler task).
            var progress: (@Sendable (RestManager.TransferProgress) -> Void)?
            if index % 2 == 1 { progress = { _ in } }
            let handle = rest.upload(fileAt: file, toURL: url("/_test/upload"), progress: progress) { results in
                let error = results.error as? RestManager.CustomError
                completions.set(error == nil || error?.isCancellation == true)
                group.leave()
            }
            usleep(useconds_t(index % 6) * 1000)
            handle.cancel()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(completions.all.count, 1000)
        XCTAssertEqual(completions.all.filter { !$0 }, [])
    }

    /// Cancelled while the answer is awaited (the server answers after 0.2 s), with and without progress.
    func testUploadsCancelledWhileTheirAnswerIsAwaitedEachCompleteOnce() throws {
        var slow = MockServer.Response.text("late")
        slow.delay = 0.2
        server.stub("POST", path: "/slow", response: slow)
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 64 << 10).write(to: file)
        let outcomes = ResultBox<Bool>()
        let group = DispatchGroup()
        for index in 0..<200 {
            group.enter()
            var progress: (@Sendable (RestManager.TransferProgress) -> Void)?
            if index % 2 == 1 { progress = { _ in } }
            let handle = rest.upload(fileAt: file, toURL: url("/slow"), progress: progress) { results in
                outcomes.set((results.error as? RestManager.CustomError)?.isCancellation == true)
                group.leave()
            }
            usleep(useconds_t(index % 20) * 1000)
            handle.cancel()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(outcomes.all.count, 200)
        XCTAssertEqual(outcomes.all.filter { !$0 }, [])
    }

    /// The same for a deadline firing in the first milliseconds.
    func testUploadsWhoseDeadlineFiresInTheirFirstMillisecondsEachCompleteOnce() throws {
        let file = scratch.appendingPathComponent("body.bin")
        try Data(count: 256 << 10).write(to: file)
        let outcomes = ResultBox<String>()
        let group = DispatchGroup()
        for index in 0..<300 {
            group.enter()
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
    }
}
