import Foundation
import XCTest
import RestManager

final class ThreadSafetyTests: MockServerTestCase {
    func testEachRequestSendsTheStateItWasMadeWith() throws {
        let count = 40
        let box = ResultBox<(Int, Echo?)>()
        let group = DispatchGroup()
        let manager = try XCTUnwrap(rest)
        let target = url("/_test/echo")
        DispatchQueue.concurrentPerform(iterations: count) { index in
            group.enter()
            // Mutations from many threads at once while earlier requests are in flight.
            manager.urlQueryParameters.add(value: "\(index)", forKey: "i\(index)")
            manager.requestHttpHeaders.add(value: "\(index)", forKey: "X-Index")
            manager.makeRequest(toURL: target, withHttpMethod: .get) { results in
                box.set((index, try? results.decode(Echo.self)))
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(box.count, count)
        XCTAssertTrue(box.all.allSatisfy { $0.1 != nil })
    }

    func testCompletionsRunOnTheChosenQueue() {
        let queue = DispatchQueue(label: "chosen")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        rest.callbackQueue = queue
        let done = expectation(description: "completed")
        rest.makeRequest(toURL: url("/_test/echo"), withHttpMethod: .get) { _ in
            XCTAssertEqual(DispatchQueue.getSpecific(key: key), true)
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
    }

    func testRequestsInFlightFinishWhenTheManagerIsReleased() {
        let done = expectation(description: "completed")
        let box = ResultBox<RestManager.Results>()
        weak var weakManager: RestManager?
        do {
            let manager = RestManager()
            weakManager = manager
            manager.makeRequest(toURL: url("/_test/delay?seconds=0.3"), withHttpMethod: .get) { box.set($0); done.fulfill() }
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(box.value?.statusCode, 200)
        XCTAssertNil(weakManager)
    }
}
