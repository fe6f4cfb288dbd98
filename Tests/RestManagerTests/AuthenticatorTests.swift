import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
@testable import RestManager

/// The OAuth2 refresh dance against the mock: only `Bearer <valid>` gets a 200 from `/secure`.
final class AuthenticatorTests: MockServerTestCase {
    typealias Credential = RestManager.Authenticator.Credential

    /// Counts refresh calls and hands out `new-1`, `new-2`, …
    final class Refresher: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var calls = 0
        var failure: Error?
        var rejected: [String?] = []
        /// Awaited before answering (a test holds the refresh open with it).
        var gate: (@Sendable () async -> Void)?
        /// How long the credentials it hands out live (nil: no expiry).
        var lifetime: TimeInterval?
        /// The token it hands out (default `new-<call>`).
        var token: (@Sendable (Int) -> String)?

        func refresh(_ rejected: Credential?) async throws -> Credential {
            let call = lock.withLock { () -> Int in
                calls += 1
                self.rejected.append(rejected?.accessToken)
                return calls
            }
            let (gate, failure, lifetime, token) = lock.withLock { (self.gate, self.failure, self.lifetime, self.token) }
            if let gate { await gate() } else { try await Task.sleep(nanoseconds: 50_000_000) }
            if let failure { throw failure }
            return Credential(accessToken: token?(call) ?? "new-\(call)", expiresAt: lifetime.map { Date(timeIntervalSinceNow: $0) })
        }

        func configure(_ body: (Refresher) -> Void) { lock.withLock { body(self) } }

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
        // A bearer token of the caller's own is not the authenticator's either: its 401 is delivered, not resent.
        rest.requestHttpHeaders.add(value: "Bearer mine", forKey: "Authorization")
        XCTAssertEqual(send(.get, "/secure").statusCode, 401)
        XCTAssertEqual(server.takeRequest(timeout: 1)?.header("Authorization"), "Bearer mine")
        XCTAssertNil(server.takeRequest(timeout: 0.5), "sent once")
        XCTAssertEqual(refresher.count, 0)
    }

    /// An `Authenticator` is an `Interceptor`: given to one request (the manager has none), it adds its token to that
    /// request alone, and a 401 to it refreshes and resends as `rest.authenticator` does.
    func testAnAuthenticatorAsOneRequestsInterceptorAuthorizesThatRequestAlone() {
        let refresher = self.refresher
        let authenticator = RestManager.Authenticator(credential: Credential(accessToken: "old")) {
            try await refresher.refresh($0)
        }
        protect { $0 == "new-1" }
        let events = ResultBox<String>()
        rest.eventHandler = { event in if case .refreshingCredential = event { events.set("\(event)") } }
        var request = RestManager.Request(url: url("/secure"))
        request.interceptors = [authenticator]
        XCTAssertEqual(send(request).statusCode, 200)
        XCTAssertEqual(events.all, [], "it knows no manager to report its refresh to")
        XCTAssertEqual(send(.get, "/secure").statusCode, 401, "the manager's own calls carry no token")
        let sent = server.receivedRequests.map { $0.header("Authorization") ?? "-" }
        XCTAssertEqual(sent, ["Bearer old", "Bearer new-1", "-"])
        XCTAssertEqual(refresher.rejected, ["old"])
        XCTAssertEqual(authenticator.credential?.accessToken, "new-1")
    }

    func testAnExpiredCredentialIsRefreshedBeforeSending() {
        _ = install(Credential(accessToken: "old", expiresAt: Date(timeIntervalSinceNow: -1)))
        protect { $0 == "new-1" }
        let events = ResultBox<String>()
        rest.eventHandler = { event in if case .refreshingCredential = event { events.set("\(event)") } }
        XCTAssertEqual(send(.get, "/secure").statusCode, 200)
        XCTAssertEqual(events.all, ["refreshing the credential"], "a refresh before sending is reported too")
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
        // Another call goes out with the new token first: the old one is still known as this authenticator's.
        XCTAssertEqual(send(.get, "/secure").statusCode, 200)
        XCTAssertEqual(server.takeRequest(timeout: 5)?.header("Authorization"), "Bearer fresh")
        loggedIn.signal()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(box.value?.statusCode, 200)
        XCTAssertEqual(refresher.count, 0)
        XCTAssertEqual(server.takeRequest(timeout: 1)?.header("Authorization"), "Bearer fresh")
    }

    /// A server that revokes each token once it was used (rotation): every call gets a 401, a refresh and a 200. A new
    /// token that worked once is proven, so its later 401 is not a rejection in a row: no call ever gives up.
    func testTokensThatEachWorkOnceAreNeverCountedAsRejected() {
        _ = install(Credential(accessToken: "first"))
        let used = ResultBox<String>()
        server.stub(path: "/secure") { request in
            let token = request.header("Authorization") ?? ""
            guard !used.all.contains(token) else { return MockServer.Response(status: 401) }
            used.set(token)
            return .text("ok")
        }
        XCTAssertEqual(send(.get, "/secure").statusCode, 200, "the first token, once")
        for call in 2...6 {
            let results = send(.get, "/secure")
            XCTAssertEqual(results.statusCode, 200, "call \(call): \(String(describing: results.error))")
        }
        XCTAssertEqual(refresher.count, 5)
    }

    /// A call is resent with a new token until three new tokens were rejected within the window: then
    /// `.authenticationFailed`, and the calls after it fail at once, unsent, without a refresh.
    func testAServerThatRejectsEveryNewTokenEndsWithAuthenticationFailed() {
        _ = install(Credential(accessToken: "old"))
        protect { _ in false }
        for call in 1...3 {
            guard case .authenticationFailed(let reason)? = send(.get, "/secure").error as? RestManager.CustomError else {
                return XCTFail("call \(call)")
            }
            XCTAssertEqual(
                reason,
                "the server rejected 3 new credentials within the rejection window; set credential (log in again) or wait")
        }
        XCTAssertEqual(refresher.count, 3)
        let tokens = server.receivedRequests.map { $0.header("Authorization") ?? "" }
        XCTAssertEqual(tokens, ["Bearer old", "Bearer new-1", "Bearer new-2", "Bearer new-3"])
    }

    /// An app polling a server that rejects every new token: 3 refreshes in the window, not 21 in 30 s.
    func testPollingAServerThatRejectsEveryTokenRefreshesThreeTimesPerWindow() {
        let authenticator = install(Credential(accessToken: "old"))
        authenticator.rejectionWindow = 1.5
        protect { _ in false }
        let started = Date()
        var failures = 0
        while Date().timeIntervalSince(started) < 1 {
            if send(.get, "/secure").error != nil { failures += 1 }
            Thread.sleep(forTimeInterval: 0.02)
        }
        XCTAssertGreaterThan(failures, 5)
        XCTAssertEqual(refresher.count, 3, "within the window")
        XCTAssertEqual(server.receivedRequests.count, 4)
        // Once the window has passed, the next call tries again: new-3 is rejected once more (1 in the new window),
        // then two new tokens (3), and it stops again.
        Thread.sleep(forTimeInterval: 1.6)
        XCTAssertNotNil(send(.get, "/secure").error)
        XCTAssertEqual(refresher.count, 5)
        XCTAssertNotNil(send(.get, "/secure").error)
        XCTAssertEqual(server.receivedRequests.count, 7)
        // A credential the app sets starts over at once (its own 401 is not counted: three new tokens follow).
        authenticator.credential = Credential(accessToken: "logged-in")
        XCTAssertNotNil(send(.get, "/secure").error)
        XCTAssertEqual(refresher.count, 8)
    }

    /// Short-lived tokens used all the time are refreshed about once per lifetime, and no call fails: a refresh
    /// before expiry is not a rejection.
    func testShortLivedTokensUsedContinuouslyKeepWorking() {
        refresher.configure { $0.lifetime = 0.4 }
        _ = install(Credential(accessToken: "first", expiresAt: Date(timeIntervalSinceNow: 0.4)))
        protect { _ in true }
        let started = Date()
        var calls = 0
        while Date().timeIntervalSince(started) < 3 {
            XCTAssertEqual(send(.get, "/secure").statusCode, 200)
            calls += 1
        }
        XCTAssertGreaterThan(calls, 20)
        XCTAssertGreaterThanOrEqual(refresher.count, 5)
        XCTAssertLessThanOrEqual(refresher.count, 12)
    }

    /// Only a new token from `refresh` counts as rejected by its 401: a credential the caller set, or a token that
    /// worked once, may expire on the server, and three new tokens are tried after it.
    func testACallersCredentialAndAProvenTokenAreNotCountedAsRejected() {
        let authenticator = install(nil)
        authenticator.credential = Credential(accessToken: "logged-in")
        protect { _ in false }
        XCTAssertNotNil(send(.get, "/secure").error)
        XCTAssertEqual(refresher.count, 3, "after the caller's credential")
        authenticator.credential = Credential(accessToken: "again")
        server.removeAllStubs()
        let used = ResultBox<String>()
        server.stub(path: "/secure") { request in
            let token = request.header("Authorization") ?? ""
            guard token == "Bearer new-4", used.count == 0 else { return MockServer.Response(status: 401) }
            used.set(token)
            return .text("ok")
        }
        XCTAssertEqual(send(.get, "/secure").statusCode, 200, "new-4, once")
        XCTAssertNotNil(send(.get, "/secure").error)
        XCTAssertEqual(refresher.count, 7, "three more after the token that worked")
        let tokens = server.receivedRequests.map { $0.header("Authorization") ?? "" }
        let expected = ["logged-in", "new-1", "new-2", "new-3", "again", "new-4", "new-4", "new-5", "new-6", "new-7"]
        XCTAssertEqual(tokens, expected.map { "Bearer " + $0 })
    }

    /// The authenticator remembers the last 8 tokens it sent: a 401 to one of them is resent with the current token; a
    /// 401 to a token older than that is delivered as is (it may be the caller's own). The call holding `t1` waits in
    /// an interceptor while the caller logs in again 7 times (`t1` is still remembered), then 8 times (it is not).
    func testA401ToOneOfTheLastEightTokensSentIsResentAndToAnOlderOneDelivered() {
        server.stub(path: "/secure") { request in
            request.header("Authorization") == "Bearer t1" ? MockServer.Response(status: 401) : .text("ok")
        }
        for (logins, expected) in [(7, 200), (8, 401)] {
            let authenticator = install(Credential(accessToken: "t1"))
            let gate = Gate()
            let (answered, box) = startHeld("/secure", until: gate)
            for login in 2...(1 + logins) {
                authenticator.credential = Credential(accessToken: "t\(login)")
                XCTAssertEqual(send(.get, "/secure").statusCode, 200)
            }
            gate.open()
            wait(for: [answered], timeout: 15)
            XCTAssertEqual(box.value?.statusCode, expected, "after \(logins) logins")
        }
        XCTAssertEqual(refresher.count, 0)
    }

    /// A token is replaced before it is sent in the last quarter of its life (at most its last 30 s), so that it does
    /// not expire on the way: a token that lives 4 s is refreshed for a call made after 3.3 s. (A machine too slow to
    /// call before it expires refreshes it too.)
    func testATokenIsRefreshedInTheLastQuarterOfItsLife() {
        _ = install(Credential(accessToken: "short", expiresAt: Date(timeIntervalSinceNow: 4)))
        protect { _ in true }
        Thread.sleep(forTimeInterval: 3.3)
        XCTAssertEqual(send(.get, "/secure").statusCode, 200)
        XCTAssertEqual(server.receivedRequests.map { $0.header("Authorization") ?? "" }, ["Bearer new-1"])
    }

    /// A 401 decided just before a refresh ended must not start a second refresh for the credential that refresh
    /// replaced (the second token would then be rejected: seen under AddressSanitizer as 4 refreshes and a failed call).
    func testARefreshForACredentialAlreadyReplacedReturnsTheNewOne() async throws {
        let authenticator = install(Credential(accessToken: "old"))
        let first = try await authenticator.refreshed(rejecting: Credential(accessToken: "old"), onRefresh: {})
        XCTAssertEqual(first.accessToken, "new-1")
        let late = try await authenticator.refreshed(rejecting: Credential(accessToken: "old"), onRefresh: {})
        XCTAssertEqual(late.accessToken, "new-1", "the refresh that already ended answers it")
        XCTAssertEqual(refresher.count, 1)
    }

    /// A logout between a 401's decision (or an expiring token's check) and the refresh it starts wins too: no refresh
    /// runs, the call fails saying why, and the manager stays logged out (it used to refresh and store the new token).
    func testALogoutJustBeforeARefreshStartsStartsNone() async throws {
        let authenticator = install(Credential(accessToken: "old"))
        authenticator.credential = nil
        do {
            let credential = try await authenticator.refreshed(rejecting: Credential(accessToken: "old"), onRefresh: {})
            XCTFail("refreshed to \(credential.accessToken)")
        } catch RestManager.CustomError.authenticationFailed(let reason) {
            XCTAssertEqual(reason, "the credential was removed while it was being refreshed")
        }
        XCTAssertNil(authenticator.credential)
        XCTAssertEqual(refresher.count, 0)
    }

    /// No lockout past the window: once it has passed, the next call refreshes and succeeds, and the calls after it.
    func testAfterRejectedTokensTheNextCallsWorkOnceTheWindowHasPassed() {
        let authenticator = install(Credential(accessToken: "old"))
        authenticator.rejectionWindow = 0.5
        protect { $0 == "new-4" }
        XCTAssertNotNil(send(.get, "/secure").error)
        XCTAssertNotNil(send(.get, "/secure").error, "within the window: at once")
        XCTAssertEqual(server.receivedRequests.count, 4)
        Thread.sleep(forTimeInterval: 0.6)
        for _ in 0..<6 { XCTAssertEqual(send(.get, "/secure").statusCode, 200) }
        XCTAssertEqual(refresher.count, 4)
        XCTAssertEqual(authenticator.credential?.accessToken, "new-4")
    }

    /// A refresh request that carries the expired token (some endpoints want it) and gets a 401 (the usual "log out"
    /// answer) ends the refresh at once: its 401 does not wait for the refresh it is part of (it did until the
    /// deadline, and ended `.timedOut`).
    func testARefreshWhoseOwnRequestGets401EndsAtOnce() {
        protect { _ in false }
        let rest = self.rest!
        let refreshURL = url("/secure/refresh")
        let authenticator = RestManager.Authenticator(credential: Credential(accessToken: "old")) { rejected in
            var request = RestManager.Request(.post, url: refreshURL)
            request.headers.add(value: "Bearer " + (rejected?.accessToken ?? ""), forKey: "Authorization")
            let results = await rest.makeRequest(request)
            guard results.statusCode == 200 else { throw RestManager.CustomError.unacceptableStatusCode(401, body: Data()) }
            return Credential(accessToken: "never")
        }
        rest.authenticator = authenticator
        rest.timeoutInterval = 30
        let started = Date()
        guard case .authenticationFailed(let reason)? = send(.get, "/secure", timeout: 60).error as? RestManager.CustomError
        else { return XCTFail("not authenticationFailed") }
        XCTAssertTrue(reason.hasPrefix("the credential refresh failed: The server answered with HTTP status 401"), reason)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        XCTAssertEqual(server.receivedRequests.map(\.path), ["/secure", "/secure/refresh"])
    }

    /// Logging out while a refresh hangs ends every waiting call at once; logging in lets them go on with the new
    /// credential. The refresh's late result changes nothing.
    func testSettingTheCredentialDuringARefreshAnswersTheWaitingCallsAtOnce() {
        protect { $0 == "logged-in" }
        let gate = Gate()
        refresher.configure { $0.gate = { await gate.wait() } }
        for (credential, expected) in [(nil, "removed"), (Credential(accessToken: "logged-in"), "200")] {
            let authenticator = install(Credential(accessToken: "old"))
            let outcomes = ResultBox<String>()
            let done = expectation(description: "five calls")
            done.expectedFulfillmentCount = 5
            for _ in 0..<5 {
                rest.makeRequest(toURL: url("/secure"), withHttpMethod: .get) { results in
                    if case .authenticationFailed(let reason)? = results.error as? RestManager.CustomError {
                        outcomes.set(reason.contains("removed") ? "removed" : reason)
                    } else {
                        outcomes.set("\(results.statusCode ?? 0)")
                    }
                    done.fulfill()
                }
            }
            let waiting = expectation(for: NSPredicate { _, _ in authenticator.waitingCallers == 5 }, evaluatedWith: nil)
            wait(for: [waiting], timeout: 15)
            authenticator.credential = credential
            wait(for: [done], timeout: 15)
            XCTAssertEqual(outcomes.all, Array(repeating: expected, count: 5))
        }
        gate.open()
        let released = expectation(for: NSPredicate { _, _ in self.refresher.count == 2 }, evaluatedWith: nil)
        wait(for: [released], timeout: 15)
        Thread.sleep(forTimeInterval: 0.2)
        XCTAssertEqual(rest.authenticator?.credential?.accessToken, "logged-in", "the late refresh did not overwrite it")
    }

    /// A refresh that returns after the app logged out and in again, while a second refresh runs for the new login,
    /// changes nothing: the second refresh's callers get the second refresh's token.
    func testALateRefreshDoesNotAnswerTheNextRefreshsCallers() {
        protect { $0 == "new-2" }
        let first = Gate()
        let second = Gate()
        let calls = ResultBox<Int>()
        refresher.configure { refresher in
            refresher.gate = {
                calls.set(calls.count + 1)
                await (calls.count == 1 ? first : second).wait()
            }
        }
        let authenticator = install(Credential(accessToken: "old"))
        let removed = expectation(description: "the first call fails at the logout")
        rest.makeRequest(toURL: url("/secure"), withHttpMethod: .get) { results in
            if case .authenticationFailed? = results.error as? RestManager.CustomError { removed.fulfill() }
        }
        wait(for: [expectation(for: NSPredicate { _, _ in authenticator.waitingCallers == 1 }, evaluatedWith: nil)], timeout: 15)
        authenticator.credential = nil
        wait(for: [removed], timeout: 15)
        authenticator.credential = Credential(accessToken: "logged-in")
        let answered = expectation(description: "the second call")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: url("/secure"), withHttpMethod: .get) { results in
            box.set(results)
            answered.fulfill()
        }
        wait(for: [expectation(for: NSPredicate { _, _ in calls.count == 2 }, evaluatedWith: nil)], timeout: 15)
        first.open()
        Thread.sleep(forTimeInterval: 0.3)  // the first refresh returns meanwhile (and must change nothing)
        second.open()
        wait(for: [answered], timeout: 15)
        XCTAssertEqual(box.value?.statusCode, 200)
        let tokens = server.receivedRequests.map { $0.header("Authorization") ?? "" }
        XCTAssertEqual(tokens, ["Bearer old", "Bearer logged-in", "Bearer new-2"])
        XCTAssertEqual(authenticator.credential?.accessToken, "new-2")
    }

    /// A call whose deadline passes while it waits for a hanging refresh ends then, and stops waiting for it.
    func testACallWaitingForAHangingRefreshLeavesAtItsDeadline() {
        protect { _ in false }
        let gate = Gate()
        refresher.configure { $0.gate = { await gate.wait() } }
        defer { gate.open() }
        let authenticator = install(Credential(accessToken: "old"))
        rest.timeoutInterval = 0.5
        guard case .timedOut? = send(.get, "/secure").error as? RestManager.CustomError else { return XCTFail("no timeout") }
        let left = expectation(for: NSPredicate { _, _ in authenticator.waitingCallers == 0 }, evaluatedWith: nil)
        wait(for: [left], timeout: 15)
    }

    func testAFailingRefreshFailsEveryWaitingRequestWithItsReason() {
        struct Expired: LocalizedError { var errorDescription: String? { "the refresh token expired" } }
        let authenticator = install(Credential(accessToken: "old"))
        // The refresh fails only once all ten calls wait for it.
        refresher.configure {
            $0.failure = Expired()
            $0.gate = {
                while authenticator.waitingCallers < 10 { try? await Task.sleep(nanoseconds: 5_000_000) }
            }
        }
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

    /// The refresh's own request goes without the authenticator on every attempt, not only the first: retried after a
    /// 503 while the credential it replaces has expired, it would otherwise wait for the refresh that waits for it.
    func testARefreshWhoseOwnRequestIsRetriedDoesNotWaitOnItself() {
        let rest = self.rest!
        let login = url("/token")
        let attempts = VersionBox()
        server.stub("POST", path: "/token") { _ in
            attempts.increment() == 2 ? MockServer.Response(status: 503) : .json(#"{"token":"fresh"}"#)
        }
        rest.authenticator = RestManager.Authenticator(credential: Credential(accessToken: "old", expiresAt: Date(timeIntervalSinceNow: -1))) { _ in
            var request = RestManager.Request(.post, url: login)
            request.interceptors = [InterceptorTests.RetryOnce503()]
            struct Token: Decodable { let token: String }
            return Credential(accessToken: try await rest.request(Token.self, for: request).token)
        }
        protect { $0 == "fresh" }
        let results = send(.get, "/secure")
        XCTAssertNil(results.error)
        XCTAssertEqual(results.statusCode, 200)
        XCTAssertEqual(server.receivedRequests.filter { $0.path == "/token" }.map { $0.header("Authorization") ?? "none" }, ["none", "none"])
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

/// Where the token goes, which 401s are the authenticator's, short-lived tokens, logging out, and bad tokens.
final class AuthenticatorScopeTests: MockServerTestCase {
    typealias Credential = RestManager.Authenticator.Credential
    private let refresher = AuthenticatorTests.Refresher()

    private func install(_ credential: Credential?) -> RestManager.Authenticator {
        let refresher = self.refresher
        let authenticator = RestManager.Authenticator(credential: credential) { try await refresher.refresh($0) }
        rest.authenticator = authenticator
        return authenticator
    }

    private func authorization(_ server: MockServer) -> [String] { server.receivedRequests.map { $0.header("Authorization") ?? "none" } }

    /// With a `baseURL`, only its origin gets the token: a CDN or presigned URL on the same manager gets none.
    func testWithABaseURLTheTokenGoesOnlyToItsOrigin() throws {
        let cdn = MockServer()
        try cdn.start()
        defer { cdn.stop() }
        _ = install(Credential(accessToken: "t0"))
        rest.baseURL = server.baseURL
        XCTAssertEqual(send(.get, "/_test/status/204").statusCode, 204)
        XCTAssertEqual(send(.get, "/_test/status/204", base: cdn.baseURL.absoluteString).statusCode, 204)
        XCTAssertEqual(authorization(server), ["Bearer t0"])
        XCTAssertEqual(authorization(cdn), ["none"])
        rest.baseURL = nil
        XCTAssertEqual(send(.get, "/_test/status/204", base: cdn.baseURL.absoluteString).statusCode, 204)
        XCTAssertEqual(authorization(cdn), ["none", "Bearer t0"], "without a baseURL every origin gets it")
    }

    /// An interceptor that moves requests to another origin: inserted before the authenticator, the moved request gets
    /// no token (the authenticator sees where it goes); after it, the token goes along (as documented).
    func testAnInterceptorMovingRequestsGetsNoTokenWhenItRunsFirst() throws {
        struct Mover: RestManager.Interceptor {
            let target: URL
            func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
                var moved = request
                moved.url = target
                return moved
            }
        }
        let mirror = MockServer()
        try mirror.start()
        defer { mirror.stop() }
        _ = install(Credential(accessToken: "t0"))
        rest.baseURL = server.baseURL
        let mover = Mover(target: mirror.baseURL.appendingPathComponent("_test/status/204"))
        rest.interceptors.insert(mover, at: 0)
        XCTAssertEqual(send(.get, "/_test/status/204").statusCode, 204)
        XCTAssertEqual(authorization(mirror), ["none"])
        rest.interceptors = [rest.interceptors[1], mover]
        XCTAssertNotNil(rest.authenticator, "still installed, now first")
        XCTAssertEqual(send(.get, "/_test/status/204").statusCode, 204)
        XCTAssertEqual(authorization(mirror), ["none", "Bearer t0"], "an interceptor after the authenticator takes it along")
        XCTAssertEqual(authorization(server), [])
    }

    func testGetDataNeverCarriesTheToken() {
        _ = install(Credential(accessToken: "t0"))
        let done = expectation(description: "getData")
        rest.getData(fromURL: url("/_test/echo")) { _ in done.fulfill() }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(authorization(server), ["none"])
    }

    /// A 401 from an origin that was not sent the token (a cross-origin redirect leaves it behind) is delivered as is,
    /// and never counts toward the guard: the tenth such call still gets its 401.
    func testA401FromAnOriginThatWasNotSentTheTokenIsDeliveredAsIs() throws {
        let other = MockServer()
        try other.start()
        defer { other.stop() }
        other.stub(path: "/private", response: MockServer.Response(status: 401))
        _ = install(Credential(accessToken: "t0"))
        let target = other.baseURL.absoluteString + "/private"
        let path = "/_test/redirect/302?to=" + (target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        for call in 1...10 { XCTAssertEqual(send(.get, path).statusCode, 401, "call \(call)") }
        XCTAssertEqual(refresher.count, 0)
        XCTAssertEqual(Set(authorization(other)), ["none"])
        XCTAssertEqual(Set(authorization(server)), ["Bearer t0"])
    }

    /// Tokens living one second, used without pause for five: no failure, about one refresh per life.
    func testShortLivedTokensWork() {
        refresher.configure {
            $0.lifetime = 1
            $0.token = { call in "tok-\(call)-\(Int64((Date().timeIntervalSince1970 + 1) * 1000))" }
        }
        _ = install(Credential(accessToken: "tok-0-\(Int64((Date().timeIntervalSince1970 + 1) * 1000))", expiresAt: Date() + 1))
        // Accepts a token until the time (ms) written in it.
        server.stub(path: "/secure") { request in
            let expiry = request.header("Authorization")?.split(separator: "-").last.flatMap { Double($0) } ?? 0
            return Date().timeIntervalSince1970 * 1000 < expiry ? .text("ok") : MockServer.Response(status: 401)
        }
        let end = Date() + 5
        var calls = 0
        while Date() < end {
            let results = send(.get, "/secure")
            XCTAssertEqual(results.statusCode, 200, "\(String(describing: results.error))")
            calls += 1
        }
        XCTAssertGreaterThan(calls, 5)
        XCTAssertGreaterThanOrEqual(refresher.count, 4, "one refresh per second of use")
        XCTAssertLessThanOrEqual(refresher.count, 12, "not one per call")
    }

    /// `credential = nil` while a refresh runs stays nil; the calls waiting for that refresh fail saying why.
    func testLoggingOutDuringARefreshWins() {
        let authenticator = install(Credential(accessToken: "old", expiresAt: Date() - 1))
        refresher.configure {
            $0.gate = {
                while authenticator.credential != nil { try? await Task.sleep(nanoseconds: 5_000_000) }
            }
        }
        let done = expectation(description: "answered")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: url("/secure"), withHttpMethod: .get) {
            box.set($0)
            done.fulfill()
        }
        let refreshing = expectation(for: NSPredicate { _, _ in authenticator.waitingCallers == 1 }, evaluatedWith: nil)
        wait(for: [refreshing], timeout: 10)
        authenticator.credential = nil
        wait(for: [done], timeout: 10)
        guard case .authenticationFailed(let reason)? = box.value?.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: box.value?.error))")
        }
        XCTAssertEqual(reason, "the credential was removed while it was being refreshed")
        XCTAssertNil(authenticator.credential, "the refresh's token did not come back")
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// A token with CR, LF or NUL would be dropped from the request (sent unauthenticated): the call fails instead.
    func testATokenThatIsNotAValidHeaderValueFailsTheCall() {
        for token in ["abc\r\nX-Evil: 1", "abc\nX-Evil: 1", "abc\rX-Evil: 1", "abc\u{0}"] {
            refresher.configure { $0.token = { _ in token } }
            _ = install(Credential(accessToken: "old", expiresAt: Date() - 1))
            let results = send(.get, "/secure")
            guard case .authenticationFailed(let reason)? = results.error as? RestManager.CustomError else {
                return XCTFail("\(token.debugDescription): \(String(describing: results.error))")
            }
            XCTAssertEqual(reason, "the access token is not a valid header value (it contains CR, LF or NUL)")
        }
        XCTAssertEqual(server.receivedRequests.count, 0)
    }

    /// A failed refresh leaves nobody waiting: the next call starts a new one.
    func testAfterAFailedRefreshTheNextCallStartsANewOne() {
        struct Down: Error {}
        refresher.configure { $0.failure = Down() }
        _ = install(Credential(accessToken: "old", expiresAt: Date() - 1))
        XCTAssertNotNil(send(.get, "/_test/status/204").error)
        refresher.configure { $0.failure = nil }
        XCTAssertEqual(send(.get, "/_test/status/204").statusCode, 204)
        XCTAssertEqual(refresher.count, 2)
        XCTAssertEqual(authorization(server), ["Bearer new-2"])
    }
}
