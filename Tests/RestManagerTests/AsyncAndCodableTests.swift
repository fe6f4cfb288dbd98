import Foundation
import XCTest
import RestManager

private struct UserPage: Decodable {
    struct User: Decodable { let id: Int; let email: String; let firstName: String; let avatar: String }
    let page: Int
    let perPage: Int
    let total: Int
    let totalPages: Int
    let data: [User]
}

private struct Created: Decodable { let name: String; let job: String; let id: String; let createdAt: String }

final class AsyncAndCodableTests: MockServerTestCase {
    private var snakeCase: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }

    /// Many `await` calls at once on one manager (shared answers on): answers, timeouts (delivered by
    /// the deadline timer) and cancellations each resolve their own call exactly once.
    func testManyConcurrentAwaitsEachGetTheirOwnOutcome() async throws {
        let manager = try XCTUnwrap(rest)
        manager.deduplicatesRequests = true
        let echo = url("/_test/echo")
        let hang = url("/_test/hang")
        let slow = url("/_test/delay?seconds=5")
        let outcomes = await withTaskGroup(of: (Int, String).self) { group -> [Int: String] in
            for index in 0..<120 {
                group.addTask {
                    switch index % 3 {
                    case 0:
                        let results = await manager.makeRequest(toURL: echo, withHttpMethod: .get)
                        return (index, results.statusCode == 200 ? "answered" : "\(String(describing: results.error))")
                    case 1:
                        let results = await manager.makeRequest(toURL: hang, withHttpMethod: .get, timeoutInterval: 0.3)
                        guard case .timedOut = results.error as? RestManager.CustomError else {
                            return (index, "\(String(describing: results.error))")
                        }
                        return (index, "timed out")
                    default:
                        let request = Task { await manager.makeRequest(toURL: slow, withHttpMethod: .get) }
                        request.cancel()
                        let results = await request.value
                        return (
                            index,
                            (results.error as? RestManager.CustomError)?.isCancellation == true ? "cancelled" : "\(String(describing: results.error))"
                        )
                    }
                }
            }
            var outcomes: [Int: String] = [:]
            for await (index, outcome) in group {
                XCTAssertNil(outcomes[index], "resolved twice")
                outcomes[index] = outcome
            }
            return outcomes
        }
        XCTAssertEqual(outcomes.count, 120)
        for (index, outcome) in outcomes {
            XCTAssertEqual(outcome, ["answered", "timed out", "cancelled"][index % 3], "request \(index)")
        }
    }

    func testDecodableRequestWithSnakeCaseDecoder() async throws {
        rest.urlQueryParameters.add(value: "2", forKey: "page")
        let page = try await rest.request(UserPage.self, fromURL: url("/api/users"), decoder: snakeCase)
        XCTAssertEqual(page.page, 2)
        XCTAssertEqual(page.perPage, 6)
        XCTAssertEqual(page.totalPages, 2)
        XCTAssertEqual(page.data.map(\.id), [7, 8, 9, 10, 11, 12])
        XCTAssertEqual(page.data.first?.firstName, "Michael")
    }

    func testThrowingAPICarriesStatusAndBody() async throws {
        do {
            _ = try await rest.request(UserPage.self, fromURL: url("/api/users/100"))
            XCTFail("expected an error")
        } catch RestManager.CustomError.unacceptableStatusCode(let code, let body) {
            XCTAssertEqual(code, 404)
            XCTAssertEqual(String(decoding: body, as: UTF8.self), "{}")
        }
    }

    func testAsyncMakeRequestPostsJSON() async throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "morpheus", forKey: "name")
        rest.httpBodyParameters.add(value: "leader", forKey: "job")
        let results = await rest.makeRequest(toURL: url("/api/users"), withHttpMethod: .post)
        XCTAssertEqual(results.statusCode, 201)
        let created = try results.decode(Created.self)
        XCTAssertEqual(created.name, "morpheus")
        XCTAssertEqual(created.job, "leader")
        XCTAssertNotNil(Int(created.id))
        XCTAssertTrue(created.createdAt.hasSuffix("Z"))
    }

    func testEmptyBodyIsAClearDecodingError() async throws {
        let results = await rest.makeRequest(toURL: url("/api/users/2"), withHttpMethod: .delete)
        XCTAssertEqual(results.statusCode, 204)
        XCTAssertThrowsError(try results.decode(UserPage.self)) { error in
            guard case .emptyBody(204) = error as? RestManager.CustomError else { return XCTFail("\(error)") }
        }
        // For an Optional type an empty body is nil, through `request(_:for:)` too.
        XCTAssertNil(try results.decode(UserPage?.self))
        let none = try await rest.request(UserPage?.self, for: RestManager.Request(.delete, url: url("/api/users/2")))
        XCTAssertNil(none)
    }

    /// A call that failed decodes to its error, never to nil: an Optional type too (its empty body is not a 204's).
    func testDecodingAFailedCallThrowsItsError() async throws {
        rest.timeoutInterval = 0.2
        let results = await rest.makeRequest(toURL: url("/_test/delay?seconds=3"), withHttpMethod: .get)
        for decode in [{ _ = try results.decode(UserPage.self) }, { _ = try results.decode(UserPage?.self) }] {
            XCTAssertThrowsError(try decode()) { error in
                guard case .timedOut(_, 0.2, .wholeCall) = error as? RestManager.CustomError else { return XCTFail("\(error)") }
            }
        }
    }

    func testMalformedBodyKeepsTheDecoderError() async throws {
        let results = await rest.makeRequest(toURL: url("/api/users/2"), withHttpMethod: .get)
        XCTAssertThrowsError(try results.decode([Int].self)) { error in
            guard case .decodingFailed(let underlying) = error as? RestManager.CustomError else { return XCTFail("\(error)") }
            XCTAssertTrue(underlying is DecodingError)
        }
    }

    func testGetDataReturnsBytesOnlyFor2xx() async throws {
        let avatar = await rest.getData(fromURL: url("/img/faces/1-image.jpg"))
        XCTAssertEqual(avatar?.prefix(2), Data([0xFF, 0xD8]))
        let missing = await rest.getData(fromURL: url("/img/faces/99-image.jpg"))
        XCTAssertNil(missing)
        do {
            _ = try await rest.data(fromURL: url("/img/faces/99-image.jpg"))
            XCTFail("expected an error")
        } catch RestManager.CustomError.unacceptableStatusCode(let code, _) {
            XCTAssertEqual(code, 404)
        }
    }

    func testGetDataCompletionHandlerAndPlainRequest() {
        rest.requestHttpHeaders.add(value: "secret", forKey: "x-api-key")
        rest.urlQueryParameters.add(value: "1", forKey: "page")
        let done = expectation(description: "data")
        let box = ResultBox<Data?>()
        rest.getData(fromURL: url("/_test/bytes/1000")) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(box.value??.count, 1000)
        let received = server.lastRequest(path: "/_test/bytes/1000")
        XCTAssertNil(received?.header("x-api-key"), "getData sends none of the manager's headers")
        XCTAssertNil(received?.rawQuery)
    }

    func testGetDataOfAnErrorPageIsNil() {
        let done = expectation(description: "data")
        let box = ResultBox<Data?>()
        rest.getData(fromURL: url("/_test/status/500")) {
            box.set($0); done.fulfill()
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(box.count, 1)
        XCTAssertNil(box.value ?? Data())
    }

    func testGzipIsDecompressedOrPassedThrough() async throws {
        let results = await rest.makeRequest(toURL: url("/_test/gzip"), withHttpMethod: .get)
        struct Message: Decodable { let compressed: Bool }
        XCTAssertEqual(try results.decode(Message.self).compressed, true)
    }

    func testLargeBodyArrivesWhole() async throws {
        rest.timeoutInterval = 120  // 20 MiB through a debug build (or a sanitizer) takes a while
        let data = try await rest.data(fromURL: url("/_test/bytes/\(20 << 20)"))
        XCTAssertEqual(data.count, 20 << 20)
        XCTAssertEqual(data[1000], UInt8(1000 % 251))
    }
}
