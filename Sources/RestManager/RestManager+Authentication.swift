//  RestManager+Authentication.swift — an add-on to RestManager.swift: OAuth2-style bearer tokens, refreshed before
//  they expire and after a 401. Copy it beside the core when you need it; it uses only the core's `Interceptor` seam.
//
//  Outline: Public API (the manager's `authenticator`) · Authenticator (credential, interceptor, refresh) · Helpers

public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

nonisolated extension RestManager {
    // MARK: - Public API

    /// Adds `Authorization: Bearer <token>` to requests that have none, refreshes the token before it expires and after
    /// a 401 (once for any number of concurrent 401s). Default nil. It is the first of the manager's `interceptors`.
    ///
    /// With a `baseURL`, the token goes only to requests for that origin (scheme, host and port): a CDN or a presigned
    /// storage URL called on the same manager gets none. Without a `baseURL` it goes to every origin. An interceptor
    /// after it that moves a request to another origin takes the token along: insert such an interceptor before it.
    public var authenticator: Authenticator? {
        get { interceptors.lazy.compactMap { ($0 as? BoundAuthenticator)?.authenticator }.first }
        set {
            // One step under the manager's lock: an append made meanwhile from another thread is neither lost nor undone.
            let bound = newValue.map { BoundAuthenticator(authenticator: $0, manager: self) }
            withState { state in
                state.interceptors.removeAll { $0 is BoundAuthenticator }
                if let bound { state.interceptors.insert(bound, at: 0) }
            }
        }
    }

    // MARK: - Authenticator

    /// OAuth2-style bearer tokens: added to every request that has no `Authorization` of its own, refreshed before they
    /// expire and after a 401, one refresh at a time for any number of callers.
    /// ```swift
    /// rest.authenticator = RestManager.Authenticator(credential: stored) { rejected in
    ///     try await tokenService.refresh(rejected)  // may call this same manager
    /// }
    /// ```
    ///
    /// Lifecycle of a refresh (one at a time; the lock guards every field):
    /// ```
    /// idle --(a token expires soon, or a 401 to the current token)--> refreshing(waiting callers)
    ///      (not after a logout since: that call fails; a credential set since is the answer instead; not while
    ///      `maximumRejectedRefreshes` new tokens were rejected within `rejectionWindow`: the call fails at once)
    /// refreshing --(refresh returns)--> idle, stored = new token (unproven until an answer other than 401 uses it)
    /// refreshing --(refresh throws)--> idle, every waiting caller fails with its error; the next call starts anew
    /// refreshing --(credential set, e.g. nil at logout)--> idle at once: the waiting callers go on with the new
    ///      credential, or fail; the refresh's own result is dropped when it returns
    /// refreshing --(a waiting caller's task is cancelled: its call ended)--> that caller leaves with `.cancelled`
    /// ```
    public final class Authenticator: Interceptor, @unchecked Sendable {
        /// An access token and when it stops being valid (nil: unknown).
        public struct Credential: Sendable, Equatable {
            /// Sent as `Authorization: Bearer <accessToken>`.
            public var accessToken: String
            /// When the token expires; it is refreshed before sending from shortly before then (see `Authenticator`).
            public var expiresAt: Date?

            /// A credential.
            public init(accessToken: String, expiresAt: Date? = nil) {
                self.accessToken = accessToken
                self.expiresAt = expiresAt
            }
        }

        /// New tokens that may be rejected (each with a 401 before any other answer) within `rejectionWindow`, across
        /// calls: past it, calls fail at once with `.authenticationFailed`, without a refresh, until the window has
        /// passed or the app sets `credential`. A server that rejects every token cannot make a refresh loop.
        public static let maximumRejectedRefreshes = 3

        /// The seconds in which `maximumRejectedRefreshes` rejected new tokens stop the refreshes (default 30).
        public var rejectionWindow: TimeInterval {
            get { withLock { window } }
            set { withLock { window = newValue } }
        }

        private typealias Waiter = (id: Int, continuation: CheckedContinuation<Credential, any Error>)
        private enum RefreshState {
            case idle
            case refreshing(waiting: [Waiter])
        }

        private let lock = NSLock()
        private let refresh: @Sendable (_ rejected: Credential?) async throws -> Credential
        private var stored: Credential?
        /// When `stored` was set: a token is refreshed ahead of its expiry by a quarter of its life, at most 30 s.
        private var storedAt = Date()
        /// Changes whenever the caller sets `credential`, so that a refresh under way does not overwrite the caller's
        /// value.
        private var generation = 0
        private var state = RefreshState.idle
        /// Whether `stored` came from `refresh` and no answer other than a 401 has used it yet.
        private var storedIsUnproven = false
        /// When new tokens were rejected, within the window.
        private var rejections: [Date] = []
        private var window: TimeInterval = 30
        private var lastWaiter = 0
        /// The tokens this authenticator sent lately: a 401 to any other `Authorization` is not its business.
        private var sentTokens: [String] = []
        /// Requests made by `refresh` itself (logging in again, say) go without this authenticator.
        @TaskLocal static var isRefreshing = false

        /// An authenticator starting from `credential` (nil: none yet); `refresh` gets the credential a server rejected
        /// (or that expired) and returns a new one, or throws.
        public init(
            credential: Credential?, refresh: @escaping @Sendable (_ rejected: Credential?) async throws -> Credential
        ) {
            self.stored = credential
            self.refresh = refresh
        }

        /// The credential sent now: set it after logging in, nil after logging out. The calls waiting for a refresh
        /// under way go on at once with the new one, or fail with `.authenticationFailed` after a logout.
        public var credential: Credential? {
            get { withLock { stored } }
            set {
                let waiting = withLock { () -> [Waiter] in
                    stored = newValue
                    storedAt = Date()
                    storedIsUnproven = false
                    rejections = []
                    generation += 1
                    guard case .refreshing(let waiting) = state else { return [] }
                    state = .idle
                    return waiting
                }
                let outcome: Result<Credential, any Error> = newValue.map { .success($0) } ?? .failure(Self.removed)
                for waiter in waiting { waiter.continuation.resume(with: outcome) }
            }
        }

        /// Adds the current token (refreshed first when it expires soon) unless the request has an `Authorization`.
        /// - Throws: `.authenticationFailed` when a refresh fails or the token is not a valid header value.
        public func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            try await adapt(request, onRefresh: {})
        }

        /// After a 401 to a token this authenticator sent to the server that answered: a resend with the current token
        /// when it is newer, else with a refreshed one.
        public func decide(after results: Results, for request: URLRequest, attempt: Int) async -> AttemptDecision {
            await decide(after: results, for: request, onRefresh: {})
        }

        /// How many calls wait for the refresh under way (0 when none runs).
        var waitingCallers: Int {
            withLock {
                guard case .refreshing(let waiting) = state else { return 0 }
                return waiting.count
            }
        }

        // MARK: - Refresh

        func decide(
            after results: Results, for request: URLRequest, onRefresh: @Sendable () -> Void
        ) async -> AttemptDecision {
            // The refresh's own requests are not this authenticator's: a 401 to one would wait for itself.
            guard !Self.isRefreshing, let token = sentToken(of: request) else { return .deliver }
            guard results.statusCode == 401 else {
                if results.response != nil { proven(token) }
                return .deliver
            }
            // Redirected to another origin, the token stayed behind: that server's 401 is not about it.
            let answered = results.response?.response?.url ?? request.url
            guard let answered, let sent = request.url, RestManager.isSameOrigin(answered, sent) else {
                return .deliver
            }
            enum Next { case resend, deliver, giveUp, refresh(Credential?) }
            let next = withLock { () -> Next in
                guard let current = stored else { return .deliver }
                if current.accessToken != token { return .resend }
                if storedIsUnproven { rejections.append(Date()) }
                return refreshesExhausted() ? .giveUp : .refresh(current)
            }
            switch next {
            case .resend: return .retry(after: 0)
            case .deliver: return .deliver
            case .giveUp: return .deliverInstead(Results(withError: Self.exhausted))
            case .refresh(let rejected):
                do {
                    _ = try await refreshed(rejecting: rejected, onRefresh: onRefresh)
                    return .retry(after: 0)
                } catch {
                    return .deliverInstead(Results(withError: CustomError.wrap(error)))
                }
            }
        }

        func adapt(_ request: URLRequest, onRefresh: @Sendable () -> Void) async throws -> URLRequest {
            guard !Self.isRefreshing, request.value(forHTTPHeaderField: "Authorization") == nil else { return request }
            guard var credential = withLock({ stored }) else { return request }
            if withLock({ storedIsUnproven && refreshesExhausted() }) { throw Self.exhausted }
            if expiresSoon(credential) { credential = try await refreshed(rejecting: credential, onRefresh: onRefresh) }
            return try authorized(request, with: credential)
        }

        /// A credential from the refresh under way, or from one this call starts. A caller whose task is cancelled
        /// (its call ended: deadline, cancel) stops waiting at once; the refresh goes on for the others.
        func refreshed(rejecting rejected: Credential?, onRefresh: @Sendable () -> Void) async throws -> Credential {
            let id = withLock {
                lastWaiter += 1
                return lastWaiter
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    enum Step { case waits, starts(generation: Int), answered(Result<Credential, any Error>) }
                    let step = withLock { () -> Step in
                        // Checked under the lock that the cancellation handler takes: one of the two answers.
                        if Task.isCancelled { return .answered(.failure(CustomError.cancelled)) }
                        if case .refreshing(let waiting) = state {
                            state = .refreshing(waiting: waiting + [(id, continuation)])
                            return .waits
                        }
                        // A refresh ended since `rejected` was read: its credential is the answer, not another refresh.
                        if let stored, stored.accessToken != rejected?.accessToken {
                            return .answered(.success(stored))
                        }
                        // Logged out since: a refresh would log the user back in.
                        guard stored != nil else { return .answered(.failure(Self.removed)) }
                        state = .refreshing(waiting: [(id, continuation)])
                        return .starts(generation: generation)
                    }
                    switch step {
                    case .waits: return
                    case .answered(let outcome): return continuation.resume(with: outcome)
                    case .starts(let generation):
                        onRefresh()
                        startRefresh(rejecting: rejected, generation: generation)
                    }
                }
            } onCancel: {
                let waiter = withLock { () -> Waiter? in
                    guard case .refreshing(var waiting) = state, let index = waiting.firstIndex(where: { $0.id == id })
                    else { return nil }
                    defer { state = .refreshing(waiting: waiting) }
                    return waiting.remove(at: index)
                }
                waiter?.continuation.resume(throwing: CustomError.cancelled)
            }
        }

        private func startRefresh(rejecting rejected: Credential?, generation: Int) {
            let refresh = self.refresh
            Task {
                let result: Result<Credential, any Error>
                do {
                    result = .success(try await Self.$isRefreshing.withValue(true) { try await refresh(rejected) })
                } catch {
                    let reason = "the credential refresh failed: \(error.localizedDescription)"
                    result = .failure(CustomError.authenticationFailed(reason: reason))
                }
                self.finishRefresh(result, startedGeneration: generation)
            }
        }

        /// Stores the new credential and resumes every waiting caller, unless the app set `credential` meanwhile:
        /// that answered them already (and a refresh started since is not this one's).
        private func finishRefresh(_ result: Result<Credential, any Error>, startedGeneration: Int) {
            let waiting = withLock { () -> [Waiter] in
                guard generation == startedGeneration, case .refreshing(let waiting) = state else { return [] }
                if case .success(let credential) = result {
                    stored = credential
                    storedAt = Date()
                    storedIsUnproven = true
                }
                state = .idle
                return waiting
            }
            for waiter in waiting { waiter.continuation.resume(with: result) }
        }

        // MARK: - Helpers

        private static let removed = CustomError.authenticationFailed(
            reason: "the credential was removed while it was being refreshed")
        private static let exhausted = CustomError.authenticationFailed(
            reason: "the server rejected \(maximumRejectedRefreshes) new credentials within the rejection window; set "
                + "credential (log in again) or wait")

        /// Whether `maximumRejectedRefreshes` new tokens were rejected within the window (under the lock).
        private func refreshesExhausted() -> Bool {
            rejections.removeAll { -$0.timeIntervalSinceNow > window }
            return rejections.count >= Self.maximumRejectedRefreshes
        }

        private func withLock<Value>(_ body: () throws -> Value) rethrows -> Value {
            lock.lock()
            defer { lock.unlock() }
            return try body()
        }

        private func expiresSoon(_ credential: Credential) -> Bool {
            guard let expiresAt = credential.expiresAt else { return false }
            let life = withLock { expiresAt.timeIntervalSince(storedAt) }
            return expiresAt.timeIntervalSinceNow < min(30, max(0, life) / 4)
        }

        private func authorized(_ request: URLRequest, with credential: Credential) throws -> URLRequest {
            let token = credential.accessToken
            guard !token.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw CustomError.authenticationFailed(
                    reason: "the access token is not a valid header value (it contains CR, LF or NUL)")
            }
            withLock {
                sentTokens.removeAll { $0 == token }
                sentTokens.append(token)
                if sentTokens.count > 8 { sentTokens.removeFirst() }
            }
            var authorized = request
            authorized.setValue("Bearer " + token, forHTTPHeaderField: "Authorization")
            return authorized
        }

        /// The token in the request's `Authorization`, when this authenticator sent it.
        private func sentToken(of request: URLRequest) -> String? {
            guard let header = request.value(forHTTPHeaderField: "Authorization"), header.hasPrefix("Bearer ") else {
                return nil
            }
            let token = String(header.dropFirst("Bearer ".count))
            return withLock { sentTokens.contains(token) ? token : nil }
        }

        /// An answer other than a 401 used `token`: it works, and the rejections in a row end.
        private func proven(_ token: String) {
            withLock {
                guard stored?.accessToken == token else { return }
                storedIsUnproven = false
                rejections = []
            }
        }
    }

    /// The manager's authenticator in its chain: scoped to the manager's `baseURL` origin, reporting refreshes as
    /// events.
    struct BoundAuthenticator: Interceptor {
        let authenticator: Authenticator
        weak var manager: RestManager?

        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            guard let manager, let url = request.url else { return request }
            if let base = manager.baseURL, !RestManager.isSameOrigin(base, url) { return request }
            let events = manager.eventHandler
            return try await authenticator.adapt(request, onRefresh: { events?(.refreshingCredential) })
        }

        func decide(after results: Results, for request: URLRequest, attempt: Int) async -> AttemptDecision {
            let events = manager?.eventHandler
            return await authenticator.decide(
                after: results, for: request, onRefresh: { events?(.refreshingCredential) })
        }
    }
}
