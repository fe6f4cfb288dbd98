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
    ///      (not after a logout since: that call fails; a credential set since is the answer instead)
    /// refreshing --(refresh returns)--> idle, stored = new token (unproven until an answer other than 401 uses it)
    /// refreshing --(refresh throws)--> idle, every waiting caller fails with its error; the next call starts anew
    /// refreshing --(credential set meanwhile, e.g. nil at logout)--> idle, the caller's value wins
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

        /// New tokens that may be rejected in a row (each with a 401 before any other answer) before calls fail with
        /// `.authenticationFailed`: a server that rejects every token cannot make a refresh loop.
        public static let maximumRejectedRefreshes = 3

        private enum RefreshState {
            case idle
            case refreshing(waiting: [CheckedContinuation<Credential, any Error>])
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
        private var rejectedInARow = 0
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

        /// The credential sent now: set it after logging in, nil after logging out (a refresh under way then ends its
        /// waiting calls with `.authenticationFailed`).
        public var credential: Credential? {
            get { withLock { stored } }
            set {
                withLock {
                    stored = newValue
                    storedAt = Date()
                    storedIsUnproven = false
                    rejectedInARow = 0
                    generation += 1
                }
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
            guard let token = sentToken(of: request) else { return .deliver }
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
                if storedIsUnproven { rejectedInARow += 1 }
                guard rejectedInARow < Self.maximumRejectedRefreshes else {
                    rejectedInARow = 0
                    return .giveUp
                }
                return .refresh(current)
            }
            switch next {
            case .resend: return .retry(after: 0)
            case .deliver: return .deliver
            case .giveUp:
                let reason = "the server rejected \(Self.maximumRejectedRefreshes) new credentials in a row"
                return .deliverInstead(Results(withError: CustomError.authenticationFailed(reason: reason)))
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
            if expiresSoon(credential) { credential = try await refreshed(rejecting: credential, onRefresh: onRefresh) }
            return try authorized(request, with: credential)
        }

        /// A credential from the refresh under way, or from one this call starts.
        func refreshed(rejecting rejected: Credential?, onRefresh: @Sendable () -> Void) async throws -> Credential {
            let startedGeneration = withLock { generation }
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Credential, Error>) in
                enum Step { case joined, starts, newer(Credential), removed }
                let step = withLock { () -> Step in
                    if case .refreshing(let waiting) = state {
                        state = .refreshing(waiting: waiting + [continuation])
                        return .joined
                    }
                    // A refresh ended since `rejected` was read: its credential is the answer, not another refresh.
                    if let stored, stored.accessToken != rejected?.accessToken { return .newer(stored) }
                    // Logged out since: a refresh would log the user back in.
                    guard stored != nil else { return .removed }
                    state = .refreshing(waiting: [continuation])
                    return .starts
                }
                switch step {
                case .joined: return
                case .newer(let credential): return continuation.resume(returning: credential)
                case .removed: return continuation.resume(throwing: Self.removed)
                case .starts: break
                }
                onRefresh()
                let refresh = self.refresh
                Task {
                    let result: Result<Credential, any Error>
                    do {
                        result = .success(try await Self.$isRefreshing.withValue(true) { try await refresh(rejected) })
                    } catch {
                        let reason = "the credential refresh failed: \(error.localizedDescription)"
                        result = .failure(CustomError.authenticationFailed(reason: reason))
                    }
                    self.finishRefresh(result, startedGeneration: startedGeneration)
                }
            }
        }

        /// Stores the new credential unless the caller set one meanwhile (which then wins), and resumes every waiting
        /// caller.
        private func finishRefresh(_ result: Result<Credential, any Error>, startedGeneration: Int) {
            let (waiting, outcome) = withLock {
                () -> ([CheckedContinuation<Credential, any Error>], Result<Credential, any Error>) in
                var outcome = result
                if generation != startedGeneration {
                    outcome = stored.map { .success($0) } ?? .failure(Self.removed)
                } else if case .success(let credential) = result {
                    stored = credential
                    storedAt = Date()
                    storedIsUnproven = true
                }
                guard case .refreshing(let waiting) = state else { return ([], outcome) }
                state = .idle
                return (waiting, outcome)
            }
            for continuation in waiting { continuation.resume(with: outcome) }
        }

        // MARK: - Helpers

        private static let removed = CustomError.authenticationFailed(
            reason: "the credential was removed while it was being refreshed")

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
                rejectedInARow = 0
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
