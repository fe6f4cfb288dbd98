import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// The OAuth2 refresh dance against the mock: only `Bearer <valid>` gets a 200 from `/secure`.
final class AuthenticatorTests: MockServerTestCase {
    typealias Credential = RestManager.Authenticator.Credential

    /// Counts refresh calls and hands out `new-1`, `new-2`, …
    final class Refresher: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var calls = 0
        var failure: Error?
        var rejected: [String?] = []

        func refresh(_ rejected: Credential?) async throws -> Credential {
            let call = lock.withLock { () -> Int in
                calls += 1
                self.rejected.append(rejected?.accessToken)
                return calls
            }
            try await Task.sleep(nanoseconds: 50_000_000)  // long enough for every 401 to arrive meanwhile
            if let failure { throw failure }
            return Credential(accessToken: "new-\(call)")
        }

        var count: Int { lock.withLock { calls } }
    }

    private let refresher = Refresher()

    /// `/secure` answers 200 to `Bearer <token>` when `accepts(token)`, else 401.
    private func protect(accepting accepts: @escaping @Sendable (String) -> Bool) {
        server.stub(path: "/secure*") { request in
            let token = request.header("Authorization").map { String($0.dropFirst("Bearer ".count)) } ?? ""
            return accepts(token) ? .json(#"{"token":"\#(token)"}"#) : MockServer.Response(status: 401)
        }
    }

    private func install(_ credential: Credential?) -> RestManager.Authenticator {
        let refresher = self.refresher
        let authenticator = RestManager.Authenticator(credential: credential) { try await refresher.refresh($0) }
        rest.authenticator = authenticator
        return authenticator
    }

    func testTheTokenIsSentAsBearerUnlessTheRequestHasItsOwnAuthorization() throws {
        _ = install(Credential(accessToken: "t0"))
        protect { $0 == "t0" }
        XCTAssertEqual(send(.get, "/secure").statusCode, 200)
        XCTAssertEqual(server.takeRequest(timeout: 1)?.header("Authorization"), "Bearer t0")
        rest.requestHttpHeaders.add(value: "Basic abc", forKey: "Authorization")
        XCTAssertEqual(send(.get, "/secure").statusCode, 401, "the caller's own header is kept, and its 401 is not the authenticator's")
        XCTAssertEqual(server.takeRequest(timeout: 1)?.header("Authorization"), "Basic abc")
        XCTAssertEqual(refresher.count, 0)
    }

    func testACredentialThatExpiresWithinThirtySecondsIsRefreshedBeforeSending() {
        _ = install(Credential(accessToken: "old", expiresAt: Date(timeIntervalSinceNow: 20)))
        protect { $0 == "new-1" }
        XCTAssertEqual(send(.get, "/secure").statusCode, 200)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Authorization") }, ["Bearer new-1"], "the old token never went out")
        XCTAssertEqual(refresher.count, 1)
        XCTAssertEqual(refresher.rejected, ["old"])
    }

    func testACredentialValidForMoreThanThirtySecondsIsSentAsIs() {
        _ = install(Credential(accessToken: "still-good", expiresAt: Date(timeIntervalSinceNow: 45)))
        protect { $0 == "still-good" }
        XCTAssertEqual(send(.get, "/secure").statusCode, 200)
        XCTAssertEqual(refresher.count, 0)
    }

    func testFiftyConcurrent401sShareOneRefreshAndAllSucceed() {
        let authenticator = install(Credential(accessToken: "old"))
        protect { $0 == "new-1" }
        let group = DispatchGroup()
        let statuses = ResultBox<Int>()
        let events = ResultBox<String>()
        rest.eventHandler = { event in if case .refreshingCredential = event { events.set("\(event)") } }
        let target = url("/secure")
        for _ in 0..<50 {
            group.enter()
            rest.makeRequest(toURL: target, withHttpMethod: .get) {
                statuses.set($0.statusCode ?? 0); group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(statuses.all, Array(repeating: 200, count: 50))
        XCTAssertEqual(refresher.count, 1)
        XCTAssertEqual(events.all, ["refreshing the credential"])
        XCTAssertEqual(authenticator.credential, Credential(accessToken: "new-1"))
        // Every request ends with the new token: sent with it, or sent with the old one and resent once.
        let tokens = server.receivedRequests.map { $0.header("Authorization") ?? "" }
        XCTAssertEqual(tokens.filter { $0 == "Bearer new-1" }.count, 50)
        XCTAssertEqual(tokens.filter { $0 == "Bearer old" }.count, tokens.count - 50)
        XCTAssertGreaterThan(tokens.filter { $0 == "Bearer old" }.count, 1, "several 401s shared the one refresh")
    }

    func testA401ToAnOlderTokenIsResentWithTheCurrentOneWithoutRefreshing() throws {
        let authenticator = install(Credential(accessToken: "old"))
        // The 401 to the old token arrives only after the app has logged in again (set a new credential).
        let loggedIn = DispatchSemaphore(value: 0)
        server.stub(path: "/secure") { request in
            if request.header("Authorization") == "Bearer old" {
                _ = loggedIn.wait(timeout: .now() + 5)
                return MockServer.Response(status: 401)
            }
            return request.header("Authorization") == "Bearer fresh" ? .text("ok") : MockServer.Response(status: 401)
        }
        let done = expectation(description: "answered")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: url("/secure"), withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        XCTAssertEqual(server.takeRequest(timeout: 5)?.header("Authorization"), "Bearer old")
        authenticator.credential = Credential(accessToken: "fresh")
        loggedIn.signal()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(box.value?.statusCode, 200)
        XCTAssertEqual(refresher.count, 0)
        XCTAssertEqual(server.takeRequest(timeout: 1)?.header("Authorization"), "Bearer fresh")
    }

    func testASecond401AfterTheResendIsDeliveredAsIs() {
        _ = install(Credential(accessToken: "old"))
        protect { _ in false }
        XCTAssertEqual(send(.get, "/secure").statusCode, 401)
        XCTAssertEqual(refresher.count, 1)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Authorization") ?? "" }, ["Bearer old", "Bearer new-1"])
    }

    func testAFailingRefreshFailsEveryWaitingRequestWithItsReason() {
        struct Expired: LocalizedError { var errorDescription: String? { "the refresh token expired" } }
        refresher.failure = Expired()
        _ = install(Credential(accessToken: "old"))
        protect { _ in false }
        let group = DispatchGroup()
        let errors = ResultBox<String>()
        for _ in 0..<10 {
            group.enter()
            rest.makeRequest(toURL: url("/secure"), withHttpMethod: .get) { results in
                errors.set(results.error?.localizedDescription ?? "no error")
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(Set(errors.all), ["Authentication failed: the credential refresh failed: the refresh token expired."])
        XCTAssertEqual(errors.count, 10)
        XCTAssertEqual(refresher.count, 1)
    }

    func testMoreThanFiveRefreshesWithinThirtySecondsFailWithoutCallingRefresh() {
        _ = install(Credential(accessToken: "old"))
        protect { _ in false }
        for _ in 0..<5 { XCTAssertEqual(send(.get, "/secure").statusCode, 401) }
        let sixth = send(.get, "/secure")
        guard case .authenticationFailed(let reason)? = sixth.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: sixth.error))")
        }
        XCTAssertEqual(reason, "more than 5 credential refreshes within 30 s")
        XCTAssertEqual(refresher.count, 5)
    }

    func testTheTokenNeverFollowsARedirectToAnotherOrigin() throws {
        _ = install(Credential(accessToken: "t0"))
        let target = "http://localhost:\(server.port)/_test/echo"
        let crossHost = try echo(send(.get, "/_test/redirect/302?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!))
        XCTAssertEqual(crossHost.header("Host"), "localhost:\(server.port)")
        XCTAssertNil(crossHost.header("Authorization"))
        XCTAssertEqual(try echo(send(.get, "/_test/redirect/302?to=/_test/echo")).header("Authorization"), "Bearer t0")
    }

    func testARefreshThatCallsTheSameManagerDoesNotWaitOnItself() {
        let rest = self.rest!
        let login = url("/api/login")
        rest.authenticator = RestManager.Authenticator(credential: Credential(accessToken: "old")) { _ in
            var request = RestManager.Request(.post, url: login)
            try request.setBody(["email": "eve.holt@reqres.in", "password": "cityslicka"])
            struct Token: Decodable { let token: String }
            return Credential(accessToken: try await rest.request(Token.self, for: request).token)
        }
        protect { $0 == "QpwL5tke4Pnpja7X4" }
        XCTAssertEqual(send(.get, "/secure").statusCode, 200)
        XCTAssertNil(server.lastRequest(path: "/api/login")?.header("Authorization"), "the refresh's own request goes without the authenticator")
    }

    func testCancellingWhileWaitingForARefreshCompletesAtOnce() {
        _ = install(Credential(accessToken: "old"))
        refresher.failure = nil
        server.stub(path: "/secure") { _ in MockServer.Response(status: 401) }
        let done = expectation(description: "cancelled")
        let box = ResultBox<RestManager.Results>()
        let handle = rest.makeRequest(toURL: url("/secure"), withHttpMethod: .get) {
            box.set($0); done.fulfill()
        }
        // Cancel while the refresh (50 ms) runs: the request is waiting for it then.
        let refresher = self.refresher
        let refreshing = expectation(for: NSPredicate { _, _ in refresher.count == 1 }, evaluatedWith: nil)
        wait(for: [refreshing], timeout: 5)
        handle.cancel()
        wait(for: [done], timeout: 1)
        guard case .cancelled? = box.value?.error as? RestManager.CustomError else { return XCTFail("\(String(describing: box.value?.error))") }
        // Once the refresh is over, the cancelled request is not sent again.
        let authenticator = try? XCTUnwrap(rest.authenticator)
        let refreshed = expectation(for: NSPredicate { _, _ in authenticator?.credential?.accessToken == "new-1" }, evaluatedWith: nil)
        wait(for: [refreshed], timeout: 5)
        XCTAssertEqual(send(.get, "/api/users/2").statusCode, 200)
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/secure", "/api/users/2"])
    }
}
