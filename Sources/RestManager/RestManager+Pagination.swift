//  RestManager+Pagination.swift — an add-on to RestManager.swift: every page of a paginated resource as an
//  `AsyncSequence`, by RFC 8288 `Link: <…>; rel="next"` headers or a `next` closure of the app's. Copy it beside the
//  core when you need it; it uses the core's request path, so each page goes through interceptors, authenticator,
//  retries and cache.

public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

nonisolated extension RestManager {
    // MARK: - Public API

    /// Every page of a paginated resource, one request each, in order. The next page is the response's
    /// `Link: <…>; rel="next"` (RFC 8288, resolved against the answer's URL) unless `next` is given.
    /// ```swift
    /// for try await page in rest.pages(RestManager.Request(url: URL(string: "repos/swiftlang/swift/issues")!)) {
    ///     issues += try page.decode([Issue].self)
    /// }
    /// ```
    /// A next page on another origin is asked for without the credential, as a redirect there is: no manager
    /// headers, no interceptors, and of the request's headers only those that never hold a secret.
    /// - Parameters:
    ///   - request: the first page.
    ///   - maximumPages: the most pages the sequence gives (default 100; a negative number is 0).
    ///   - next: the request for the page after `page` (which `request` asked for), or nil after the last; by default
    ///     `request` with the `Link` header's `next` URL (and no query parameters of its own), nil without one.
    public func pages(
        _ request: Request,
        maximumPages: Int = 100,
        next: (@Sendable (_ request: Request, _ page: Results) throws -> Request?)? = nil
    ) -> Pages {
        Pages(manager: self, first: request, maximumPages: max(0, maximumPages), next: next)
    }

    /// An `AsyncSequence` of `Results`, one per page; it throws `.unacceptableStatusCode` for a non-2xx page and
    /// any transport error, and ends after the last page or `maximumPages`.
    ///
    /// Cancelling the task that reads it cancels the page under way and throws `.cancelled`; a next page that was
    /// already given (a loop) throws ``RestManager/PaginationLoop``. It may be read more than once: each iterator
    /// starts again from the first page.
    public struct Pages: AsyncSequence, Sendable {
        /// A page: the results of its request (2xx).
        public typealias Element = Results
        let manager: RestManager
        let first: Request
        let maximumPages: Int
        let next: (@Sendable (Request, Results) throws -> Request?)?

        /// Asks for the first page when first asked for a page.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pages: self, upcoming: first) }

        /// Gives the pages in order; nil after the last page or `maximumPages`.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let pages: Pages
            var upcoming: Request?
            var given = 0
            /// The URLs of the pages asked for (with their queries): a next page among them is a loop.
            var visited: Set<String> = []
            /// The first page's origin: a next page elsewhere goes without the credential.
            var origin: URL?

            /// The next page.
            /// - Throws: `.unacceptableStatusCode` (with up to 64 KiB of the body) for a non-2xx page, a transport
            ///   error, `.cancelled`, ``RestManager/PaginationLoop``, or what the `next` closure threw.
            @concurrent
            public mutating func next() async throws -> Results? {
                guard let request = upcoming, given < pages.maximumPages else { return nil }
                upcoming = nil
                let url = try pages.manager.resolvedURL(of: request)
                guard visited.insert(url.absoluteString).inserted else { throw PaginationLoop(url: url) }
                let home = origin ?? url
                origin = home
                if Task.isCancelled { throw CustomError.cancelled }
                let page = await pages.manager.page(request, sameOrigin: RestManager.isSameOrigin(home, url))
                try page.validate()
                given += 1
                if let next = pages.next {
                    upcoming = try next(request, page)
                } else if let link = page.response?.link("next") {
                    var following = request
                    following.url = link
                    following.queryParameters = RestEntity()
                    upcoming = following
                }
                return page
            }
        }
    }

    /// Thrown by ``RestManager/Pages`` when the next page is one it already gave: the server's links make a loop.
    public struct PaginationLoop: Error, LocalizedError, CustomStringConvertible, Sendable {
        /// The page asked for twice.
        public var url: URL
        /// A sentence saying which page came again (secrets redacted).
        public var description: String {
            "The next page, \(Redaction.url(url.absoluteString)), was given already: the pagination loops."
        }
        /// What `localizedDescription` says: `description`.
        public var errorDescription: String? { description }
    }

    // MARK: - Pages

    /// The absolute URL `request` asks for, with its query, checked as any request's is.
    func resolvedURL(of request: Request) throws -> URL {
        let resolved = try RequestBuilder.resolve(request.url, against: baseURL)
        return try RequestBuilder.urlWithQuery(resolved, query: request.queryParameters)
    }

    /// A page through the manager's request path; on another origin than the first page's, without the manager's
    /// headers and interceptors, and with only the request's headers that follow a redirect to another origin.
    func page(_ request: Request, sameOrigin: Bool) async -> Results {
        guard !sameOrigin else { return await makeRequest(request) }
        var stripped = request
        stripped.interceptors = []
        stripped.headers = RestEntity(ignoringKeyCase: true)
        for (name, value) in request.headers.orderedPairs
        where RequestBuilder.crossOriginHeaderNames.contains(name.lowercased()) {
            stripped.headers.append(value: value, forKey: name)
        }
        var snapshot = withState { $0 }
        snapshot.headers = RestEntity(ignoringKeyCase: true)
        snapshot.interceptors = []
        let cancelled = Results(withError: CustomError.cancelled)
        return await withCancellableHandle(cancelled: cancelled) { [stripped, snapshot] in
            self.perform(stripped, snapshot: snapshot, completion: $0)
        }
    }
}
