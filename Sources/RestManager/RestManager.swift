//  RestManager.swift — a dependency-free REST client on URLSession, one code path on Linux and Apple platforms, off
//  the main actor in any app target. Outline: public API, nested types, request building, transport, helpers.

public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Dispatch

/// A small REST client: set headers, query and body parameters, then call `makeRequest`.
/// ```swift
/// let rest = RestManager()
/// rest.urlQueryParameters.add(value: "2", forKey: "page")
/// rest.makeRequest(toURL: URL(string: "https://reqres.in/api/users")!, withHttpMethod: .get) { results in
///     print(results.response?.httpStatusCode ?? 0)
/// }
/// ```
///
/// The properties persist between requests, as in the tutorial: each call sends what they hold when it is made, and
/// each statement such as `rest.requestHttpHeaders.add(…)` is atomic. Callers that configure and send from many
/// threads at once build `Request` values instead.
nonisolated public final class RestManager: @unchecked Sendable {

    // MARK: - Public API: request state

    /// This library's version (semantic versioning); requests say `User-Agent: RestManager/<version>` unless set.
    public static let version = "3.0.0"

    /// Headers sent with every `makeRequest`. Lookups ignore the case of the name. Headers that frame the message
    /// (`Content-Length`, `Transfer-Encoding`, `Host`, `Connection`, …) are refused with `.invalidHeader`.
    public var requestHttpHeaders: RestEntity {
        get { withState { $0.headers } }
        set { withState { $0.headers = newValue.ignoringKeyCase() } }
        _modify {
            stateLock.lock()
            defer { stateLock.unlock() }
            yield &state.headers
        }
    }

    /// Query parameters appended (percent-encoded, in insertion order) to the request URL.
    public var urlQueryParameters: RestEntity {
        get { withState { $0.query } }
        _modify {
            stateLock.lock()
            defer { stateLock.unlock() }
            yield &state.query
        }
    }

    /// Body fields, encoded according to the `Content-Type` header: JSON (the default),
    /// `application/x-www-form-urlencoded`, or `multipart/form-data` (also used when files were added).
    public var httpBodyParameters: RestEntity {
        get { withState { $0.bodyParameters } }
        _modify {
            stateLock.lock()
            defer { stateLock.unlock() }
            yield &state.bodyParameters
        }
    }

    /// A raw body, sent as is when `httpBodyParameters` is empty and no file was added. Never sent with GET or HEAD.
    public var httpBody: Data? {
        get { withState { $0.body } }
        set { withState { $0.body = newValue } }
    }

    /// The longest a whole request may take, redirects included, in seconds (default 60). Enforced by the library
    /// itself, so 0.5 means half a second on Linux too. Streams and transfers use `idleTimeoutInterval` instead.
    public var timeoutInterval: TimeInterval {
        get { withState { $0.timeout } }
        set { withState { $0.timeout = newValue } }
    }

    /// How long a stream, download or upload may go without a byte moving before it ends with `.timedOut` (default
    /// 60 s; `.infinity`: never). They have no whole-call deadline unless the call or request sets `timeoutInterval`.
    public var idleTimeoutInterval: TimeInterval {
        get { withState { $0.idleTimeout } }
        set { withState { $0.idleTimeout = newValue } }
    }

    /// The queue completion handlers are called on (default `.global(qos: .userInitiated)`). As with URLSession, a
    /// completion that blocks holds a thread of this queue: one that waits for another request should use a queue of
    /// its own (a serial queue always gets a thread), or `await`. Deadlines never depend on it.
    public var callbackQueue: DispatchQueue {
        get { withState { $0.callbackQueue } }
        set { withState { $0.callbackQueue = newValue } }
    }

    /// Whether redirects are followed (default `true`). When `false`, the 3xx answer is delivered.
    public var followsRedirects: Bool {
        get { withState { $0.followsRedirects } }
        set { withState { $0.followsRedirects = newValue } }
    }

    /// How many redirects one request may follow (default 10; a negative number is 0) before it fails with
    /// `.tooManyRedirects`; a redirect loop ends the same way once it has used them up.
    public var maximumRedirects: Int {
        get { withState { $0.maximumRedirects } }
        set { withState { $0.maximumRedirects = max(0, newValue) } }
    }

    /// The largest response body kept in memory, in bytes (default 100 MiB; `nil` for no limit). Counted as the body
    /// arrives, after decompression: past the limit the transfer stops and the call fails with
    /// `CustomError.responseTooLarge`. Applies to every in-memory call (not to `download`). A negative limit is 0.
    public var maximumResponseSize: Int? {
        get { withState { $0.maximumResponseSize } }
        set { withState { $0.maximumResponseSize = newValue.map { max(0, $0) } } }
    }

    /// Opt-in: identical concurrent GET/HEAD requests (same URL, headers as interceptors made them, settings, timeout)
    /// share one network call; every caller still gets its own completion. Never applies to other methods.
    public var deduplicatesRequests: Bool {
        get { withState { $0.deduplicates } }
        set { withState { $0.deduplicates = newValue } }
    }

    /// What relative request URLs are resolved against, joined with exactly one "/": base `https://h/api` or
    /// `https://h/api/` and URL `users?page=2` or `/users?page=2` give `https://h/api/users?page=2`. A base's query
    /// goes first (`https://h/api?key=S`: `https://h/api/users?key=S&page=2`); its fragment is dropped.
    public var baseURL: URL? {
        get { withState { $0.baseURL } }
        set { withState { $0.baseURL = newValue } }
    }

    /// Interceptors that see every attempt of every call, in order, before a request's own (default none):
    /// `rest.interceptors.append(Signer(key: key))`, atomic as one statement. The retry policy runs after them all.
    public var interceptors: [any Interceptor] {
        get { withState { $0.interceptors } }
        _modify {
            stateLock.lock()
            defer { stateLock.unlock() }
            yield &state.interceptors
        }
    }

    /// Told of every attempt, retry, credential refresh and finished call, on any queue (keep it quick: it must not
    /// wait for this manager's requests). `rest.eventHandler = { print($0) }` logs one line each, secrets redacted.
    public var eventHandler: (@Sendable (Event) -> Void)? {
        get { withState { $0.eventHandler } }
        set { withState { $0.eventHandler = newValue } }
    }

    /// Creates a manager with its own long-lived URLSession (no cookies, no cache, nothing on disk).
    /// - Parameter maximumConnectionsPerHost: how many connections to one host may be open at once.
    public convenience init(maximumConnectionsPerHost: Int = 6) {
        self.init(configuration: Transport.leanConfiguration(maximumConnectionsPerHost: maximumConnectionsPerHost))
    }

    /// Creates a manager on a session with `configuration`: for `URLProtocol` stubs
    /// (`configuration.protocolClasses = [MyStubProtocol.self]`), proxies or a cookie store of your own. Its
    /// `httpAdditionalHeaders` become `requestHttpHeaders`, kept from other origins (framing ones stay the session's).
    public init(configuration: URLSessionConfiguration) {
        // The session would add them to every request, a redirect's to another origin too.
        let configuration = configuration.copy() as? URLSessionConfiguration ?? configuration
        let headers = configuration.httpAdditionalHeaders ?? [:]
        let frames = { (name: AnyHashable) in RequestBuilder.framingHeaderNames.contains("\(name.base)".lowercased()) }
        for (name, value) in headers where !frames(name) {
            state.headers.add(value: "\(value)", forKey: "\(name.base)")
        }
        configuration.httpAdditionalHeaders = headers.filter { frames($0.key) }
        transport = Transport(configuration: configuration)
    }

    /// Empties `urlQueryParameters`, `httpBodyParameters`, `httpBody` and the added files; keeps the headers.
    public func clearParameters() {
        withState { state in
            state.query = RestEntity()
            state.bodyParameters = RestEntity()
            state.body = nil
            state.files = []
            state.assembleBody = nil
        }
    }

    /// Adds a file to send as `multipart/form-data` with the next requests, with `httpBodyParameters` as text fields:
    /// `rest.addFile(jpegData, fieldName: "avatar", fileName: "me.jpg", mimeType: "image/jpeg")`.
    public func addFile(_ data: Data, fieldName: String, fileName: String, mimeType: String) {
        withState {
            $0.files.append(MultipartBody.Part(name: fieldName, fileName: fileName, contentType: mimeType, data: data))
        }
    }

    /// Sets `httpBody` to `value` as JSON, and `Content-Type` to `application/json` unless a JSON type is set.
    /// - Throws: `CustomError.bodyEncodingFailed` when the value cannot be encoded.
    public func setHttpBody<Value: Encodable>(_ value: Value, encoder: JSONEncoder = JSONEncoder()) throws {
        let data = try Encoding.json(value, encoder: encoder)
        withState { state in
            state.body = data
            Encoding.setJSONContentType(&state.headers)
        }
    }

    // MARK: - Public API: the tutorial's calls

    /// Sends a request built from the manager's headers, query and body, and calls `completion` exactly once with the
    /// outcome, on `callbackQueue`.
    /// - Parameters:
    ///   - url: an absolute `http` or `https` URL; a query already in it is kept.
    ///   - httpMethod: the method; sent upper-case.
    ///   - timeoutInterval: overrides the manager's `timeoutInterval` for this call.
    ///   - completion: receives data, response and error; an HTTP error status is not an `error`.
    /// - Returns: a handle whose `cancel()` ends the request with `CustomError.cancelled`.
    @discardableResult
    public func makeRequest(
        toURL url: URL, withHttpMethod httpMethod: HttpMethod, timeoutInterval: TimeInterval? = nil,
        completion: @escaping @Sendable (_ result: Results) -> Void
    ) -> RequestHandle {
        let snapshot = withState { $0 }
        var request = snapshot.tutorialRequest(httpMethod, url: url)
        request.timeoutInterval = timeoutInterval
        return perform(request, snapshot: snapshot, completion: completion)
    }

    /// Downloads the bytes at `url` (a plain GET: the manager's headers and parameters are not sent) and calls
    /// `completion` with them, or with nil on any error or non-2xx status.
    @discardableResult
    public func getData(fromURL url: URL, completion: @escaping @Sendable (_ data: Data?) -> Void) -> RequestHandle {
        loadData(fromURL: url) { result in completion(try? result.get()) }
    }

    /// Like `getData(fromURL:completion:)`, but says why it failed: a transport error, or
    /// `CustomError.unacceptableStatusCode` for a non-2xx answer.
    @discardableResult
    public func loadData(
        fromURL url: URL, completion: @escaping @Sendable (Result<Data, CustomError>) -> Void
    ) -> RequestHandle {
        var snapshot = withState { $0 }
        // No headers or interceptors, which add credentials: a plain download often goes to another host.
        snapshot.headers = RestEntity(ignoringKeyCase: true)
        snapshot.interceptors = []
        return perform(Request(.get, url: url), snapshot: snapshot) { completion($0.validated($0.data ?? Data())) }
    }

    // MARK: - Public API: async calls

    /// The `await` form of `makeRequest`: never throws; the outcome is in `Results`. Cancelling the surrounding `Task`
    /// cancels the request (`Results.error` is `.cancelled`).
    @concurrent
    public func makeRequest(
        toURL url: URL, withHttpMethod httpMethod: HttpMethod, timeoutInterval: TimeInterval? = nil
    ) async -> Results {
        await withCancellableHandle(cancelled: Results(withError: CustomError.cancelled)) {
            self.makeRequest(toURL: url, withHttpMethod: httpMethod, timeoutInterval: timeoutInterval, completion: $0)
        }
    }

    /// The `await` form of `getData`: the bytes, or nil on any error or non-2xx status.
    @concurrent
    public func getData(fromURL url: URL) async -> Data? { try? await data(fromURL: url) }
    /// Downloads the bytes at `url` with a plain GET.
    /// - Throws: `CustomError` (`.unacceptableStatusCode` for non-2xx, `.cancelled`, `.timedOut`, …).
    @concurrent
    public func data(fromURL url: URL) async throws -> Data {
        try await withCancellableHandle(cancelled: .failure(CustomError.cancelled)) {
            self.loadData(fromURL: url, completion: $0)
        }.get()
    }

    /// Sends a request, checks for a 2xx status and decodes the body.
    /// ```swift
    /// let decoder = JSONDecoder()
    /// decoder.keyDecodingStrategy = .convertFromSnakeCase
    /// let page = try await rest.request(UserPage.self, fromURL: usersURL, decoder: decoder)
    /// ```
    /// - Throws: `.unacceptableStatusCode(code, body)`, `.emptyBody`, `.decodingFailed`, or the transport error.
    @concurrent
    public func request<Value: Decodable>(
        _ type: Value.Type = Value.self, fromURL url: URL, withHttpMethod httpMethod: HttpMethod = .get,
        decoder: JSONDecoder = JSONDecoder(), timeoutInterval: TimeInterval? = nil
    ) async throws -> Value {
        let results = await makeRequest(toURL: url, withHttpMethod: httpMethod, timeoutInterval: timeoutInterval)
        try results.validate()
        return try results.decode(type, using: decoder)
    }

    // MARK: - Public API: utilities

    /// The `URLRequest` that `makeRequest` would send now (URL with query, headers, body), without sending it; files
    /// added by URL are read into its body.
    /// - Throws: the same `CustomError` that `makeRequest` would report for invalid input.
    public func makeURLRequest(toURL url: URL, withHttpMethod httpMethod: HttpMethod) throws -> URLRequest {
        let snapshot = withState { $0 }
        var value = snapshot.tutorialRequest(httpMethod, url: url)
        // Files added by URL are assembled as for a call (a FIFO or a device is refused), then read into the body.
        if let assemble = value.assembleBody {
            value = try assemble(value, {})
            guard let file = value.bodyFile, let body = FileManager.default.contents(atPath: file.path) else {
                throw CustomError.bodyEncodingFailed("the assembled multipart body could not be read back")
            }
            value.body = body
            value.bodyFile = nil
        }
        return try RequestBuilder.build(value, snapshot: snapshot)
    }

    /// Whether two URLs have the same origin: scheme, host and port (the scheme's default when none), any case. Secrets
    /// stay within one (a redirect to another origin drops them), and the authenticator sends its token only to its
    /// `baseURL`'s. `RestManager.isSameOrigin(URL(string: "https://h/a")!, URL(string: "HTTPS://H:443/b")!)` is true.
    public static func isSameOrigin(_ first: URL, _ second: URL) -> Bool { origin(first) == origin(second) }

    /// Scheme, host and port (the scheme's default when there is none), lower-cased.
    private static func origin(_ url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    // MARK: - Public API: requests as values

    /// Sends `request`: the manager's headers, then the request's own (which win), the authenticator's token, the retry
    /// policy and events all apply; the manager's query, body and files do not. Calls `completion` exactly once, on
    /// `callbackQueue`.
    /// ```swift
    /// var request = RestManager.Request(.post, url: URL(string: "users")!)  // relative to baseURL
    /// try request.setBody(NewUser(name: "neo", job: "chosen"))
    /// rest.makeRequest(request) { results in print(results.statusCode ?? 0) }
    /// ```
    @discardableResult
    public func makeRequest(_ request: Request, completion: @escaping @Sendable (Results) -> Void) -> RequestHandle {
        perform(request, snapshot: withState { $0 }, completion: completion)
    }

    /// The `await` form of `makeRequest(_:completion:)`: never throws; the outcome is in `Results`.
    @concurrent
    public func makeRequest(_ request: Request) async -> Results {
        await withCancellableHandle(cancelled: Results(withError: CustomError.cancelled)) {
            self.makeRequest(request, completion: $0)
        }
    }

    /// Sends `request`, checks for a 2xx status and decodes the body (an empty body is nil for an Optional type).
    /// - Throws: `.unacceptableStatusCode(code, body)`, `.emptyBody`, `.decodingFailed`, or the transport error.
    @concurrent
    public func request<Value: Decodable>(
        _ type: Value.Type = Value.self, for request: Request, decoder: JSONDecoder = JSONDecoder()
    ) async throws -> Value {
        let results = await makeRequest(request)
        try results.validate()
        return try results.decode(type, using: decoder)
    }

    // MARK: - Public API: streaming

    /// Sends `request` (interceptors, authenticator and events apply as for any call) and returns as soon as the
    /// response head arrives; the body follows as it arrives.
    /// ```swift
    /// let (body, _) = try await rest.stream(RestManager.Request(url: URL(string: "logs/tail")!))
    /// for try await line in body.lines { print(line) }
    /// ```
    /// A stream has no whole-call deadline unless the request sets `timeoutInterval`; `idleTimeoutInterval` ends it
    /// when no byte arrives. Once the head is handed over, the call is not retried. A reader that falls
    /// `ResponseBody.maximumUnreadBytes` behind ends the stream with an error, after the bytes it had not read: the
    /// network never waits for it (FoundationNetworking cannot pause one connection; holding it holds every call).
    /// - Throws: a transport error or `.timedOut` before the head; `.unacceptableStatusCode(code, body:)` for a non-2xx
    ///   head (with up to its first 64 KiB of body).
    @concurrent
    public func stream(_ request: Request) async throws -> (ResponseBody, Response) {
        if Task.isCancelled { throw CustomError.cancelled }
        let buffer = StreamBuffer()
        var request = request
        request.stream = buffer
        var snapshot = withState { $0 }
        snapshot.timeout = request.timeoutInterval ?? Self.never
        let handle = perform(request, snapshot: snapshot) { buffer.end(with: $0) }
        buffer.attach(handle)
        return try await withTaskCancellationHandler {
            try await buffer.head()
        } onCancel: {
            buffer.cancel()
        }
    }

    // MARK: - Nested types: HttpMethod

    /// HTTP methods. The raw values are the tutorial's; `name` is what goes on the wire.
    public enum HttpMethod: String, Sendable, CaseIterable {
        /// GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS (RFC 9110 §9.3, RFC 5789), sent upper-case.
        case get, post, put, patch, delete, head, options
        /// The method as sent: upper-case (Foundation on Linux sends others verbatim).
        public var name: String { rawValue.uppercased() }
    }

    // MARK: - Nested types: RestEntity

    /// An ordered collection of string keys and values: headers, query or body parameters.
    ///
    /// `add` replaces the value of an existing key in place; `append` keeps earlier values, for repeated keys
    /// (`tag=a&tag=b`). Entities for headers ignore the case of keys (`value(forKey: "content-type")` finds one).
    public struct RestEntity: Sendable, Equatable {
        private var entries: [Entry] = []
        private var keysIgnoreCase = false

        private struct Entry: Sendable, Equatable {
            var key: String
            var value: String
            /// The key as compared: lower-cased when keys ignore case.
            var normalized: String
        }

        /// An empty entity whose keys are compared exactly.
        public init() {}
        /// An empty entity; `ignoringKeyCase` makes lookups case-insensitive (for headers).
        public init(ignoringKeyCase: Bool) { keysIgnoreCase = ignoringKeyCase }
        /// Sets `value` for `key`, replacing (in place) the values already stored for it.
        public mutating func add(value: String, forKey key: String) {
            let normalized = normalize(key)
            guard let first = entries.firstIndex(where: { $0.normalized == normalized }) else {
                return append(value: value, forKey: key)
            }
            entries[first].value = value
            entries = entries.prefix(first + 1) + entries.dropFirst(first + 1).filter { $0.normalized != normalized }
        }

        /// Adds `value` for `key`, keeping the values already stored for it: query and form bodies send every pair in
        /// order (`tag=a&tag=b`); a header sends the values joined with ", "; a JSON body refuses a repeated key.
        public mutating func append(value: String, forKey key: String) {
            entries.append(Entry(key: key, value: value, normalized: normalize(key)))
        }
        /// The first value stored for `key`, or nil.
        public func value(forKey key: String) -> String? { entries.first(where: matching(key))?.value }
        /// Every value stored for `key`, in order (Foundation joins response headers: two `X-Multi` are one value).
        public func values(forKey key: String) -> [String] { entries.filter(matching(key)).map(\.value) }
        /// Removes every value stored for `key`.
        public mutating func removeValue(forKey key: String) { entries.removeAll(where: matching(key)) }
        /// Removes every value.
        public mutating func removeAll() { entries = [] }
        /// All keys and values as a dictionary (unordered; see `orderedPairs` for insertion order); the values of a
        /// repeated key are joined with ", ", as for a header.
        public func allValues() -> [String: String] {
            var values: [String: String] = [:]
            var spellings: [String: String] = [:]
            for entry in entries {
                let key = spellings[entry.normalized] ?? entry.key
                spellings[entry.normalized] = key
                values[key] = values[key].map { $0 + ", " + entry.value } ?? entry.value
            }
            return values
        }

        /// All keys and values in insertion order.
        public var orderedPairs: [(key: String, value: String)] { entries.map { ($0.key, $0.value) } }
        /// How many values are stored (a key added with `append` counts once per value).
        public func totalItems() -> Int { entries.count }
        /// The pairs as a URL query: RFC 3986 unreserved characters kept, others `%XX` (`a+b c` is `a%2Bb%20c`).
        public var percentEncodedQuery: String { joined(encoding: Encoding.queryAllowed, spaceAsPlus: false) }
        /// The pairs as a form body (WHATWG urlencoded): `A-Z a-z 0-9 * - . _` kept, space as `+`, others `%XX`.
        public var formURLEncoded: String { joined(encoding: Encoding.formAllowed, spaceAsPlus: true) }
        /// The pairs as a compact JSON object of strings, in insertion order.
        public var jsonObject: Data {
            var bytes: [UInt8] = [UInt8(ascii: "{")]
            for (index, entry) in entries.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Encoding.appendJSONString(entry.key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                Encoding.appendJSONString(entry.value, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
            return Data(bytes)
        }

        func ignoringKeyCase() -> RestEntity {
            guard !keysIgnoreCase else { return self }
            var copy = RestEntity(ignoringKeyCase: true)
            for entry in entries { copy.append(value: entry.value, forKey: entry.key) }
            return copy
        }

        private func normalize(_ key: String) -> String { keysIgnoreCase ? key.lowercased() : key }
        private func matching(_ key: String) -> (Entry) -> Bool {
            { [normalized = normalize(key)] in $0.normalized == normalized }
        }

        private func joined(encoding allowed: [Bool], spaceAsPlus: Bool) -> String {
            let encode = { Encoding.percentEncode($0, allowed: allowed, spaceAsPlus: spaceAsPlus) }
            return entries.map { encode($0.key) + "=" + encode($0.value) }.joined(separator: "&")
        }
    }

    // MARK: - Nested types: Response and Results

    /// The HTTP part of an answer: status code and headers (readable under any spelling).
    public struct Response: Sendable {
        /// The response as Foundation delivered it.
        public var response: URLResponse?
        /// The HTTP status code, or 0 when there was no HTTP response.
        public var httpStatusCode: Int = 0
        /// Response headers; `headers.value(forKey: "etag")` finds `ETag` on every platform. Read when first asked for.
        public var headers: RestEntity {
            get { replacedHeaders ?? responseHeaders.entity }
            set { replacedHeaders = newValue }
        }

        private var replacedHeaders: RestEntity?
        private let responseHeaders: ResponseHeaders
        /// Reads the status from `response`; its headers are read when first asked for.
        public init(fromURLResponse response: URLResponse?) {
            self.response = response
            let http = response as? HTTPURLResponse
            httpStatusCode = http?.statusCode ?? 0
            responseHeaders = ResponseHeaders(http)
        }

        /// The target of the `Link` header's link whose `rel` has `relation` (RFC 8288: in any case, among several
        /// space-separated ones, in any of several links or repeated headers), resolved against the answer's URL.
        /// `response.link("next")` gives the next page of a paginated API; nil when there is none.
        public func link(_ relation: String) -> URL? {
            // A link-value (§3) and its first `rel`: quoted strings may hold "," and ";", a URI "," too.
            let pattern = "<([^>]*)>(?:[^,<\"]|\"[^\"]*\")*?;\\s*rel\\s*=\\s*(?:\"([^\"]*)\"|([^;,\\s]*))"
            let expression = try? NSRegularExpression(pattern: pattern, options: .caseInsensitive)
            let text = headers.values(forKey: "Link").joined(separator: ", ")
            for match in expression?.matches(in: text, range: NSRange(text.startIndex..., in: text)) ?? [] {
                let groups = (1...3).map { Range(match.range(at: $0), in: text).map { text[$0] } }
                let relations = (groups[1] ?? groups[2] ?? "").lowercased().split(whereSeparator: \.isWhitespace)
                guard let uri = groups[0], relations.contains(Substring(relation.lowercased())) else { continue }
                return URL(string: String(uri), relativeTo: response?.url)?.absoluteURL
            }
            return nil
        }
    }

    /// The headers of one response as a `RestEntity`, built once on first use.
    final class ResponseHeaders: Sendable {
        private let response: HTTPURLResponse?
        private let built = Locked<RestEntity?>(nil)
        init(_ response: HTTPURLResponse?) { self.response = response }

        var entity: RestEntity {
            built.withLock { built in
                if let built { return built }
                var headers = RestEntity(ignoringKeyCase: true)
                // Values are strings; interpolating them would go through `print` machinery.
                for case let (name as String, value) in response?.allHeaderFields ?? [:] {
                    headers.append(value: value as? String ?? "\(value)", forKey: name)
                }
                built = headers
                return headers
            }
        }
    }

    /// The outcome of a request: the body, the response, or the error that prevented one.
    public struct Results: Sendable {
        /// The body; empty for an answer without one, nil when it went to a file or a stream. Of a non-2xx answer, the
        /// first 64 KiB: the call ends there (an error page that never ends would hold it).
        public var data: Data?
        /// Status and headers, when an HTTP answer arrived.
        public var response: Response?
        /// Why there is no answer: a `CustomError`, or what an interceptor's `adapt` threw. An HTTP error status is not
        /// an error here.
        public var error: (any Error)?
        /// What the call took, measured by the library (nil for results made by hand).
        public var metrics: Metrics?
        /// Creates results from an answer.
        public init(withData data: Data?, response: Response?, error: (any Error)?) {
            self.data = data
            self.response = response
            self.error = error
        }
        /// Creates results for a request that produced no answer.
        public init(withError error: any Error) { self.error = error }
        /// The HTTP status code, if an answer arrived.
        public var statusCode: Int? { response.map(\.httpStatusCode) }
        /// True when an answer arrived with a 2xx status.
        public var isSuccess: Bool { error == nil && (200..<300).contains(statusCode ?? 0) }
        /// Throws the request's error, or `CustomError.unacceptableStatusCode` for a non-2xx answer.
        public func validate() throws {
            if let error { throw error }
            guard isSuccess else { throw CustomError.unacceptableStatusCode(statusCode ?? 0, body: data ?? Data()) }
        }

        /// `value` after a 2xx answer, else what `validate()` throws.
        func validated<Value>(_ value: Value) -> Result<Value, CustomError> {
            Result { try validate() }.map { value }.mapError(CustomError.wrap)
        }

        /// Decodes the body as `type` (whatever the status: error bodies decode too).
        /// - Throws: the request's error, `.emptyBody` for an empty body, or `.decodingFailed` with the decoder's.
        public func decode<Value: Decodable>(
            _ type: Value.Type = Value.self, using decoder: JSONDecoder = JSONDecoder()
        ) throws -> Value {
            if let error { throw error }
            guard let data, !data.isEmpty else {
                // An empty body (a 204, say) is nil for an Optional type.
                let none = (type as? any ExpressibleByNilLiteral.Type)?.init(nilLiteral: ())
                if let none = none as? Value { return none }
                throw CustomError.emptyBody(statusCode: statusCode ?? 0)
            }
            do { return try decoder.decode(type, from: data) } catch { throw CustomError.decodingFailed(error) }
        }
    }

    // MARK: - Nested types: Metrics

    /// What one call took, measured by the library itself (the same on Linux and Apple platforms).
    public struct Metrics: Sendable {
        /// Where the answer came from: the network, the cache (fresh, or `revalidated` by a 304), an identical call.
        public enum Source: Sendable, Equatable { case network, cache, revalidated, shared }
        /// One request that went out: each redirect's hop and each retry is one.
        public struct Attempt: Sendable {
            /// The request's method.
            public var method: String
            /// The request's URL.
            public var url: URL
            /// The answer's status; nil when the attempt failed before a head arrived.
            public var statusCode: Int? = nil
            /// Seconds from the call's start to this attempt's start.
            public var startOffset: TimeInterval
            /// Seconds from this attempt's start to its response head.
            public var timeToHead: TimeInterval? = nil
            /// Seconds from this attempt's start to its end.
            public var duration: TimeInterval = 0
            /// Body bytes sent.
            public var bytesSent: Int64 = 0
            /// Body bytes received, as delivered (after decompression).
            public var bytesReceived: Int64 = 0
            /// Why the attempt ended without an answer, or the error that ended the call during it.
            public var error: CustomError? = nil
        }
        /// Seconds the whole call took, until its outcome was handed over.
        public var duration: TimeInterval = 0
        /// Every request that went out, redirects and retries included, in order (none for a `shared` answer).
        public var attempts: [Attempt] = []
        /// The redirects followed.
        public var redirectCount = 0
        /// The attempts that an interceptor's `.retry` asked for.
        public var retryCount = 0
        /// Where the answer came from.
        public var source = Source.network
    }

    // MARK: - Nested types: CustomError

    /// Everything that can go wrong, each case saying what and where.
    public enum CustomError: Error, LocalizedError, Sendable, CustomStringConvertible {
        /// The tutorial's catch-all; kept for source compatibility.
        case failedToCreateRequest
        /// The URL is not an absolute http(s) URL, contains control characters, or is longer than 1,000,000 bytes.
        case invalidURL(String, reason: String)
        /// A request header name or value is not allowed (CR/LF, non-token name, or a header that frames the message
        /// such as `Content-Length`, which only URLSession sets); the value is not repeated.
        case invalidHeader(name: String, reason: String)
        /// A timeout (`timeoutInterval`, or `idleTimeoutInterval` for a stream or transfer) is not a positive number.
        case invalidTimeout(TimeInterval)
        /// The body could not be encoded.
        case bodyEncodingFailed(String)
        /// No answer within `timeoutInterval` (`.wholeCall`) or no byte moved for `idleTimeoutInterval` (`.idle`).
        case timedOut(URL, after: TimeInterval, limit: TimeoutLimit = .wholeCall)
        /// Which limit ended a call with `.timedOut`.
        public enum TimeoutLimit: Sendable, Equatable {
            /// `timeoutInterval`: the whole call took longer, redirects and retries included.
            case wholeCall
            /// `idleTimeoutInterval`: a stream or transfer sent and received no byte for that long.
            case idle
        }
        /// More redirects than `maximumRedirects` (a redirect loop ends this way too).
        case tooManyRedirects(URL, limit: Int)
        /// The request was cancelled by the caller.
        case cancelled
        /// A network-level failure; the original `URLError` is kept.
        case transport(URLError)
        /// An answer arrived, but it was not HTTP.
        case invalidResponse
        /// A validating call got a non-2xx status; `body` is what the server sent.
        case unacceptableStatusCode(Int, body: Data)
        /// There was no body to decode (for example a 204).
        case emptyBody(statusCode: Int)
        /// The body did not decode; the decoder's error is kept.
        case decodingFailed(any Error)
        /// The response body grew past `maximumResponseSize`; the transfer was stopped there.
        case responseTooLarge(limit: Int)
        /// URLSession followed a redirect without asking the library (its redirect hook was not called), so secrets may
        /// have gone to another origin unchecked. Please report it.
        case unexpectedRedirect(URL)
        /// The authenticator has no credential: its refresh failed, or the server rejected its new ones (see reason).
        case authenticationFailed(reason: String)
        /// A file to upload or download to could not be used (missing, a folder, unreadable, unwritable).
        case fileAccessFailed(URL, reason: String)
        /// What `localizedDescription` says: `description`.
        public var errorDescription: String? { description }
        /// A sentence saying what went wrong, secrets redacted: `print(error)` never shows the underlying error's URL.
        public var description: String {
            switch self {
            case .failedToCreateRequest: "Unable to create the URLRequest object."
            case let .invalidURL(url, reason): "Invalid URL '\(Redaction.url(url))': \(reason)."
            case let .invalidHeader(name, reason): "Invalid request header '\(Encoding.printable(name))': \(reason)."
            case let .invalidTimeout(seconds): "Invalid timeout \(seconds): it must be a positive number of seconds."
            case let .bodyEncodingFailed(reason): "The request body could not be encoded: \(reason)."
            case let .timedOut(url, seconds, .wholeCall):
                "The request to \(Redaction.url(url.absoluteString)) timed out after \(seconds) s: it did not "
                    + "complete within timeoutInterval (the manager's, request's or call's: raise it to wait longer)."
            case let .timedOut(url, seconds, .idle):
                "The request to \(Redaction.url(url.absoluteString)) timed out after \(seconds) s: no byte was sent or "
                    + "received for that long (raise the manager's idleTimeoutInterval to wait longer)."
            case let .tooManyRedirects(url, limit):
                "Too many redirects (more than \(limit)) starting from \(Redaction.url(url.absoluteString))."
            case .cancelled: "The request was cancelled."
            case let .transport(error): "Network error \(error.code.rawValue): \(error.localizedDescription)"
            case .invalidResponse: "The server's answer was not an HTTP response."
            case let .unacceptableStatusCode(code, body):
                "The server answered with HTTP status \(code) (\(body.count) bytes of body)."
            case let .emptyBody(code): "The answer (HTTP \(code)) has no body to decode."
            case let .decodingFailed(error): "The body could not be decoded (\(error))."
            case let .responseTooLarge(limit):
                "The response body is larger than \(limit) bytes; raise RestManager.maximumResponseSize (nil for no "
                    + "limit) to accept it."
            case let .authenticationFailed(reason): "Authentication failed: \(reason)."
            case let .fileAccessFailed(url, reason): "The file '\(url.path)' cannot be used: \(reason)."
            case let .unexpectedRedirect(url):
                "URLSession followed a redirect to \(Redaction.url(url.absoluteString)) without asking RestManager; "
                    + "please report this."
            }
        }

        /// True for `.cancelled`.
        public var isCancellation: Bool { if case .cancelled = self { true } else { false } }

        /// Every error the library passes here is a `CustomError` already (the transport makes its own of `URLError`s).
        static func wrap(_ error: any Error) -> CustomError {
            error as? CustomError ?? .transport(URLError(.unknown, userInfo: [NSUnderlyingErrorKey: error]))
        }
    }

    // MARK: - Nested types: RequestHandle

    /// A request in flight; `cancel()` ends it at once with `CustomError.cancelled`. Its completion runs exactly once.
    public final class RequestHandle: @unchecked Sendable {
        private let lock = Lock()
        private var completion: (@Sendable (Results) -> Void)?
        private let queue: DispatchQueue
        private weak var exchange: Exchange?
        private var wasCancelled = false
        /// Whether this caller joined an identical call (de-duplication): its metrics are `.shared`, without attempts.
        private var joined = false
        /// Told the call's `finished` event once, before the completion (a program may exit in its completion).
        private let eventHandler: (@Sendable (Event) -> Void)?
        /// When the call started: the event's duration and its deadline count from there.
        let started: DispatchTime
        /// The request the event names: the call's own until it is built, then the one on the wire.
        private var eventRequest: URLRequest

        init(
            for value: Request, settings: Snapshot, started: DispatchTime,
            completion: @escaping @Sendable (Results) -> Void
        ) {
            queue = settings.callbackQueue
            eventHandler = settings.eventHandler
            self.started = started
            self.completion = completion
            eventRequest = URLRequest(url: value.url)
            eventRequest.httpMethod = value.method.name
        }
        /// Whether `cancel()` ended this request: its completion got `.cancelled` (not an answer that won the race).
        public var isCancelled: Bool { lock.withLock { wasCancelled } }
        /// Cancels the request. Does nothing after completion. Safe from any thread.
        public func cancel() {
            let exchange: Exchange? = lock.withLock { completion == nil ? nil : self.exchange }
            // The network call (and a download's destination) is freed before the completion runs.
            exchange?.remove(self)
            deliver(Results(withError: CustomError.cancelled), cancelling: true)
        }

        /// Reports `finished` and calls the completion on its queue if it has not been called yet.
        func deliver(_ results: Results, request: URLRequest? = nil, cancelling: Bool = false) {
            var taken: (@Sendable (Results) -> Void)?
            let (named, joined, exchange) = lock.withLock { () -> (URLRequest, Bool, Exchange?) in
                swap(&taken, &completion)
                if taken != nil { wasCancelled = cancelling }
                return (request ?? eventRequest, self.joined, self.exchange)
            }
            guard let taken else { return }
            var results = results
            let none = Metrics(source: joined ? .shared : .network)
            // An outcome the exchange did not make (a cancel, a deadline of its own) reports the exchange's until then.
            results.metrics = joined ? none : results.metrics ?? exchange?.measured(endingWith: results.error) ?? none
            results.metrics?.duration = RestManager.seconds(since: started)
            eventHandler?(.finished(named, results, duration: results.metrics?.duration ?? 0))
            queue.async { [results] in taken(results) }
        }

        /// Names the request as built in the `finished` event.
        func describe(_ request: URLRequest) { lock.withLock { eventRequest = request } }

        /// Records the exchange serving this handle; false when the handle already completed.
        func attach(to exchange: Exchange) -> Bool {
            lock.withLock {
                guard completion != nil else { return false }
                joined = self.exchange != nil
                self.exchange = exchange
                return true
            }
        }
    }

    // MARK: - Nested types: MultipartBody

    /// A `multipart/form-data` body: text fields and files, with a random boundary and CRLF framing.
    /// ```swift
    /// var body = RestManager.MultipartBody()
    /// body.addField(name: "title", value: "Holiday")
    /// body.addFile(fieldName: "photo", fileName: "beach.jpg", mimeType: "image/jpeg", data: jpeg)
    /// request.setValue(body.contentType, forHTTPHeaderField: "Content-Type")
    /// request.httpBody = body.encoded()
    /// ```
    public struct MultipartBody: Sendable {
        /// One part: a text field (no file name) or a file.
        public struct Part: Sendable, Equatable {
            /// The form field name.
            public var name: String
            /// The file name, for a file part.
            public var fileName: String?
            /// The part's `Content-Type`, for a file part.
            public var contentType: String?
            /// The part's bytes.
            public var data: Data
            /// A file whose bytes are streamed instead of `data` (`addFile(at:)`).
            var fileURL: URL?
            /// Creates a part.
            public init(name: String, fileName: String? = nil, contentType: String? = nil, data: Data) {
                self.name = name
                self.fileName = fileName
                self.contentType = contentType
                self.data = data
            }
        }

        /// The boundary between parts.
        public let boundary: String
        /// The parts, in order.
        public var parts: [Part] = []
        /// Creates an empty body with a random boundary (or the one given).
        public init(boundary: String = "RestManager-" + UUID().uuidString) { self.boundary = boundary }
        /// Appends a text field.
        public mutating func addField(name: String, value: String) {
            parts.append(Part(name: name, data: Data(value.utf8)))
        }
        /// Appends a file.
        public mutating func addFile(fieldName: String, fileName: String, mimeType: String, data: Data) {
            parts.append(Part(name: fieldName, fileName: fileName, contentType: mimeType, data: data))
        }

        /// The value for the `Content-Type` header.
        public var contentType: String { "multipart/form-data; boundary=\(boundary)" }
        /// The encoded body.
        public func encoded() -> Data {
            var body = Data()
            for part in parts { body += head(of: part) + part.data + Data("\r\n".utf8) }
            return body + Data("--\(boundary)--\r\n".utf8)
        }

        func head(of part: Part) -> Data {
            var head =
                "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Encoding.quotedParameter(part.name))\""
            if let fileName = part.fileName { head += "; filename=\"\(Encoding.quotedParameter(fileName))\"" }
            head += "\r\n"
            if let contentType = part.contentType { head += "Content-Type: \(Encoding.singleLine(contentType))\r\n" }
            return Data((head + "\r\n").utf8)
        }
    }

    // MARK: - Nested types: Request

    /// One request as a value: what a service builds and a manager sends, so that callers sharing one manager (one
    /// connection pool) never see each other's parameters.
    /// ```swift
    /// var request = RestManager.Request(url: URL(string: "users")!)  // relative to the manager's baseURL
    /// request.queryParameters.add(value: "2", forKey: "page")
    /// let page = try await rest.request(UserPage.self, for: request)
    /// ```
    public struct Request: Sendable {
        /// The method; sent upper-case.
        public var method: HttpMethod
        /// An absolute http(s) URL, or one relative to the manager's `baseURL`.
        public var url: URL
        /// Headers sent after the manager's; one of the same name wins. Lookups ignore case.
        public var headers = RestEntity(ignoringKeyCase: true) { didSet { headers = headers.ignoringKeyCase() } }
        /// Query parameters, percent-encoded and appended to `url`.
        public var queryParameters = RestEntity()
        /// Body fields, encoded by `Content-Type` as the manager's `httpBodyParameters` are.
        public var bodyParameters = RestEntity()
        /// A raw body, sent as is when there are no body parameters or files. Never sent with GET or HEAD.
        public var body: Data?
        /// The longest the whole call may take, retries included (nil: the manager's `timeoutInterval`).
        public var timeoutInterval: TimeInterval?
        /// Interceptors for this request alone, run after the manager's.
        public var interceptors: [any Interceptor] = []
        var files: [MultipartBody.Part] = []
        /// A body streamed from this file (`upload(fileAt:)`, or an assembled multipart body).
        var bodyFile: URL?
        /// Where the answer's body goes instead of memory, and the progress it reports (the transfers add-on).
        var transfer: (any Transfer)?
        /// Makes file parts a body streamed from disk, off the caller's thread (the transfers add-on; never GET/HEAD).
        var assembleBody: BodyAssembler?
        /// Where a streamed body goes (`stream(_:)`).
        var stream: StreamBuffer?
        /// A request with no headers, parameters or body.
        public init(_ method: HttpMethod = .get, url: URL) {
            self.method = method
            self.url = url
        }

        /// Sets `body` to `value` as JSON, and `Content-Type` to `application/json` unless a JSON type is set.
        /// - Throws: `CustomError.bodyEncodingFailed` when the value cannot be encoded.
        public mutating func setBody<Value: Encodable>(_ value: Value, encoder: JSONEncoder = JSONEncoder()) throws {
            body = try Encoding.json(value, encoder: encoder)
            Encoding.setJSONContentType(&headers)
        }

        /// Adds a file, sent as `multipart/form-data` with `bodyParameters` as text fields.
        public mutating func addFile(_ data: Data, fieldName: String, fileName: String, mimeType: String) {
            files.append(MultipartBody.Part(name: fieldName, fileName: fileName, contentType: mimeType, data: data))
        }
    }

    // MARK: - Nested types: Interceptor

    /// Sees every attempt of every call: the manager's interceptors in order, then the request's, then the retry
    /// policy. Both methods are optional. A call makes at most `maximumAttempts` attempts, whatever interceptors ask.
    /// They run one at a time in a task made where the call was made: they see its task-local values on every attempt.
    /// ```swift
    /// struct RetryOnce503: RestManager.Interceptor {
    ///     func decide(
    ///         after results: RestManager.Results, for request: URLRequest, attempt: Int
    ///     ) async -> RestManager.AttemptDecision {
    ///         results.statusCode == 503 && attempt == 1 ? .retry(after: 0.2) : .deliver
    ///     }
    /// }
    /// ```
    public protocol Interceptor: Sendable {
        /// The request to send for attempt `attempt` (1 for the first; retries and resends count on). Throwing ends the
        /// call with that very error (the caller can catch it); throwing `Answer` answers the attempt unsent.
        func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest
        /// What to do with the outcome of attempt `attempt`; `request` is what `adapt` made for it (before redirects).
        func decide(after results: Results, for request: URLRequest, attempt: Int) async -> AttemptDecision
    }

    /// What an interceptor makes of an attempt's outcome.
    public enum AttemptDecision: Sendable {
        /// Pass the results on (to the next interceptor, then the caller).
        case deliver
        /// Send again after the delay in seconds; `adapt` runs again. A delay that would end after the call's deadline,
        /// or a retry beyond `maximumAttempts`, delivers the current results instead. Later interceptors are not asked.
        case retry(after: TimeInterval)
        /// The next interceptors and the caller get these results.
        case deliverInstead(Results)
    }

    /// The most attempts one call makes, so that an interceptor that always asks for a retry cannot loop forever.
    public static let maximumAttempts = 100

    /// While an interceptor decides: how many retries it asked for earlier in this call (others' not counted).
    @TaskLocal static var ownRetries = 0

    /// Thrown by `adapt` to answer an attempt without sending it (a cache's fresh answer): the interceptors after the
    /// one that threw decide on `results`, as on any answer.
    public struct Answer: Error {
        /// The attempt's outcome.
        public var results: Results
        /// An answer to deliver instead of sending.
        public init(_ results: Results) { self.results = results }
    }

    // MARK: - Nested types: Event

    /// What happened to a call, for logs and metrics (`eventHandler`).
    public enum Event: Sendable, CustomStringConvertible {
        /// An attempt went on the wire (attempts count from 1).
        case started(URLRequest, attempt: Int)
        /// An attempt failed and another follows after `delay` seconds.
        case retrying(URLRequest, attempt: Int, delay: TimeInterval, reason: String)
        /// The authenticator began refreshing its credential.
        case refreshingCredential
        /// The call ended (once per call) after `duration` seconds.
        case finished(URLRequest, Results, duration: TimeInterval)
        /// One line: method and URL (secrets redacted), and what happened.
        public var description: String {
            let line = { (request: URLRequest) in
                "\(request.httpMethod ?? "GET") \(Redaction.url(request.url?.absoluteString ?? ""))"
            }
            switch self {
            case let .started(request, attempt): return "started \(line(request)) (attempt \(attempt))"
            case let .retrying(request, attempt, delay, reason):
                let seconds = String(format: "%.2f", delay)
                return "retrying \(line(request)) after attempt \(attempt) in \(seconds) s: \(reason)"
            case .refreshingCredential: return "refreshing the credential"
            case let .finished(request, results, duration):
                let outcome =
                    results.error.map { "failed: \($0.localizedDescription)" } ?? "HTTP \(results.statusCode ?? 0)"
                return "finished \(line(request)) \(outcome) in \(String(format: "%.1f", duration * 1000)) ms"
            }
        }
    }

    // MARK: - Nested types: ResponseBody

    /// The body of a streamed response (`stream(_:)`): chunks in arrival order, to one reader (a second task reading at
    /// once gets an error). Leaving the loop (break, throw, a cancelled task) or dropping an unread body ends the call.
    /// ```swift
    /// for try await chunk in body { file.write(chunk) }
    /// ```
    public struct ResponseBody: AsyncSequence, Sendable {
        /// A chunk of the body, as it arrived.
        public typealias Element = Data
        /// The most bytes that may wait for the reader: past it the stream ends with an error
        /// (`URLError.dataLengthExceedsMaximum`) after the bytes already received. The network never waits for a reader.
        public static let maximumUnreadBytes = 16 << 20

        private let owner: Owner

        init(_ buffer: StreamBuffer) { owner = Owner(buffer) }

        /// The body as lines split at LF, CRLF or CR; each line decoded as UTF-8 once whole (invalid bytes replaced);
        /// empty lines kept; a last line without a line end is delivered at the end. A line longer than
        /// `maximumUnreadBytes` ends the stream with `URLError.dataLengthExceedsMaximum`.
        public var lines: Lines { Lines(body: self) }

        /// The error that ends a stream that would hold more than `maximumUnreadBytes` for its reader.
        static func overflow(_ reason: String) -> CustomError {
            .transport(URLError(.dataLengthExceedsMaximum, userInfo: [NSLocalizedDescriptionKey: reason]))
        }

        /// Reads the chunks.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(owner: owner) }

        /// Gives the chunks in order; nil at the end of the body, or throws the error that ended it.
        public struct AsyncIterator: AsyncIteratorProtocol {
            private let owner: Owner
            private let reader: Owner

            init(owner: Owner) {
                self.owner = owner
                reader = Owner(owner.buffer)
            }

            /// The next chunk.
            @concurrent
            public mutating func next() async throws -> Data? {
                let buffer = owner.buffer
                return try await withTaskCancellationHandler {
                    try await buffer.next()
                } onCancel: {
                    buffer.cancel()
                }
            }
        }

        /// The body's lines (see `lines`).
        public struct Lines: AsyncSequence, Sendable {
            /// A line, without its line end.
            public typealias Element = String
            let body: ResponseBody

            /// Reads the lines.
            public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunks: body.makeAsyncIterator()) }

            /// Gives the lines in order; nil at the end of the body.
            public struct AsyncIterator: AsyncIteratorProtocol {
                var chunks: ResponseBody.AsyncIterator
                var splitter = LineSplitter()
                var ready: [String] = []
                var index = 0
                /// Whether the body ended in the middle of a line: the last line given had no line end.
                public private(set) var endedMidLine = false

                /// The next line.
                @concurrent
                public mutating func next() async throws -> String? {
                    while index == ready.count {
                        ready.removeAll(keepingCapacity: true)
                        index = 0
                        guard let chunk = try await chunks.next() else {
                            let last = splitter.finish()
                            if last != nil { endedMidLine = true }
                            return last
                        }
                        try splitter.split(chunk, into: &ready)
                    }
                    index += 1
                    return ready[index - 1]
                }
            }
        }

        /// Cancels the call when the last body value or iterator holding it goes away (a reader that left the loop).
        final class Owner: Sendable {
            let buffer: StreamBuffer
            init(_ buffer: StreamBuffer) { self.buffer = buffer }
            deinit { buffer.cancel() }
        }
    }

    /// Splits bytes into lines at LF, CRLF or CR, across chunks (a CR ending one chunk and an LF starting the next are
    /// one line end); decodes each whole line once. Linear: each byte is looked at once.
    struct LineSplitter: Sendable {
        private var partial: [UInt8] = []
        /// A CR ended the last line: an LF right after it belongs to that line end.
        private var afterCR = false

        /// Throws when the line in progress grows past `ResponseBody.maximumUnreadBytes` (a peer that never ends one).
        mutating func split(_ chunk: Data, into lines: inout [String]) throws {
            try chunk.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
                var start = 0
                for index in 0..<bytes.count {
                    let byte = bytes[index]
                    if afterCR, byte == 10, index == start {
                        afterCR = false
                        start = index + 1
                        continue
                    }
                    afterCR = false
                    guard byte == 10 || byte == 13 else { continue }
                    try keep(bytes[start..<index])
                    lines.append(String(decoding: partial, as: UTF8.self))
                    partial.removeAll(keepingCapacity: true)
                    afterCR = byte == 13
                    start = index + 1
                }
                try keep(bytes[start..<bytes.count])
            }
        }

        private mutating func keep(_ bytes: Slice<UnsafeRawBufferPointer>) throws {
            partial.append(contentsOf: bytes)
            let limit = ResponseBody.maximumUnreadBytes
            if partial.count > limit {
                throw ResponseBody.overflow("A line of the stream is longer than \(limit) bytes")
            }
        }

        /// The last line, when the body did not end with a line end (once).
        mutating func finish() -> String? {
            guard !partial.isEmpty else { return nil }
            defer { partial = [] }
            return String(decoding: partial, as: UTF8.self)
        }
    }

    // MARK: - Request building and encoding

    /// What one call sends: the manager's state when the call was made.
    struct Snapshot: Sendable {
        var headers = RestEntity(ignoringKeyCase: true)
        var query = RestEntity()
        var bodyParameters = RestEntity()
        var body: Data?
        var files: [MultipartBody.Part] = []
        var timeout: TimeInterval = 60
        var callbackQueue = DispatchQueue.global(qos: .userInitiated)
        var followsRedirects = true
        var maximumRedirects = 10
        var maximumResponseSize: Int? = 100 * 1024 * 1024
        var deduplicates = false
        var baseURL: URL?
        var interceptors: [any Interceptor] = []
        /// Runs after every other interceptor, the request's own too: the retry policy (RestManager+RetryPolicy.swift).
        var lastInterceptor: (any Interceptor)?
        var eventHandler: (@Sendable (Event) -> Void)?
        var idleTimeout: TimeInterval = 60
        var assembleBody: BodyAssembler?

        /// The tutorial's call as a value request: the manager's query, body and files.
        func tutorialRequest(_ method: HttpMethod, url: URL) -> Request {
            var request = Request(method, url: url)
            request.queryParameters = query
            request.bodyParameters = bodyParameters
            request.body = body
            request.files = files
            request.assembleBody = method == .get || method == .head ? nil : assembleBody
            return request
        }
    }

    /// A `Content-Type`'s media type, lower-cased without parameters; a JSON type (`+json`) is `application/json`.
    static func mediaType(_ contentType: String?) -> String {
        let media = contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        return media.hasSuffix("+json") ? "application/json" : media
    }

    enum RequestBuilder {
        static let userAgent = "RestManager/" + RestManager.version

        static func build(_ value: Request, snapshot: Snapshot) throws -> URLRequest {
            let timeout = value.timeoutInterval ?? snapshot.timeout
            guard timeout > 0, timeout.isFinite else { throw CustomError.invalidTimeout(timeout) }
            // Infinite is "never"; NaN would trap in the timer.
            if value.stream != nil || value.transfer != nil, !(snapshot.idleTimeout > 0) {
                throw CustomError.invalidTimeout(snapshot.idleTimeout)
            }
            let method = value.method
            var request = URLRequest(
                url: try urlWithQuery(try resolve(value.url, against: snapshot.baseURL), query: value.queryParameters))
            if method != .get { request.httpMethod = method.name }
            // The library enforces the deadline: Linux's timer is whole seconds and traps past Int ms (10^8 s: never).
            request.timeoutInterval = min(timeout, 1e8).rounded(.up) + 1
            var headers = snapshot.headers.ignoringKeyCase()
            // The request's own headers win over the manager's of the same name.
            for (name, _) in value.headers.orderedPairs { headers.removeValue(forKey: name) }
            for (name, headerValue) in value.headers.orderedPairs { headers.append(value: headerValue, forKey: name) }
            for (name, value) in headers.orderedPairs { try validateHeader(name: name, value: value) }
            if value.bodyFile != nil {
                guard method != .get && method != .head else {
                    throw CustomError.bodyEncodingFailed("a \(method.name) request cannot carry a body")
                }
            } else if method != .get && method != .head, let body = try body(for: value, headers: &headers) {
                request.httpBody = body
            } else {
                // Headers that describe a body go only with one (a GET after a POST on the same manager).
                for name in bodyHeaderNames { headers.removeValue(forKey: name) }
            }
            if value.bodyFile != nil || request.httpBody != nil, headers.value(forKey: "Content-Type") == nil {
                headers.add(value: "application/octet-stream", forKey: "Content-Type")
            }
            if headers.value(forKey: "Accept") == nil { headers.add(value: "*/*", forKey: "Accept") }
            if headers.value(forKey: "User-Agent") == nil { headers.add(value: userAgent, forKey: "User-Agent") }
            // All at once: each `setValue(_:forHTTPHeaderField:)` searches the fields again on Linux.
            request.allHTTPHeaderFields = headers.allValues()
            return request
        }

        /// Headers that frame the message or the connection: set by URLSession alone, refused from callers.
        static let framingHeaderNames: Set<String> = [
            "content-length", "transfer-encoding", "host", "connection", "keep-alive", "proxy-connection", "upgrade",
            "expect", "te", "trailer"
        ]
        /// The only headers that follow a redirect to another origin (with the body's own on a 307 or 308); an event
        /// stream's `Last-Event-ID` is its own position, not a secret.
        static let crossOriginHeaderNames: Set<String> = [
            "accept", "accept-language", "accept-encoding", "user-agent", "cache-control", "last-event-id"
        ]
        /// Request headers that describe a body (Fetch's list): dropped when there is no body.
        static let bodyHeaderNames = ["Content-Type", "Content-Encoding", "Content-Language", "Content-Location"]
        /// The body for the request, chosen by `Content-Type` (and setting it when missing).
        static func body(for snapshot: Request, headers: inout RestEntity) throws -> Data? {
            let media = RestManager.mediaType(headers.value(forKey: "Content-Type"))
            // Multipart only for files or fields to encode: a raw multipart `httpBody` goes as is.
            if !snapshot.files.isEmpty || (media == "multipart/form-data" && snapshot.bodyParameters.totalItems() > 0) {
                var multipart = MultipartBody()
                for (name, value) in snapshot.bodyParameters.orderedPairs {
                    multipart.addField(name: name, value: value)
                }
                multipart.parts += snapshot.files
                headers.add(value: multipart.contentType, forKey: "Content-Type")
                return multipart.encoded()
            }
            if snapshot.bodyParameters.totalItems() > 0 {
                if media == "application/x-www-form-urlencoded" {
                    return Data(snapshot.bodyParameters.formURLEncoded.utf8)
                }
                if media != "application/json" {
                    if let type = headers.value(forKey: "Content-Type") {
                        let reason = "httpBodyParameters cannot be sent as '\(type)'; use httpBody"
                        throw CustomError.bodyEncodingFailed(reason)
                    }
                    headers.add(value: "application/json", forKey: "Content-Type")
                }
                // A JSON object's names are unique (RFC 8259 §4 "SHOULD"): servers keep the first, the last or fail.
                var seen = Set<String>()
                if let repeated = snapshot.bodyParameters.orderedPairs.first(where: { !seen.insert($0.key).inserted }) {
                    let reason = "the JSON body would name '\(repeated.key)' twice; use a form body for repeated keys"
                    throw CustomError.bodyEncodingFailed(reason)
                }
                return snapshot.bodyParameters.jsonObject
            }
            return snapshot.body
        }

        /// `url` itself when absolute; else `base` and `url` joined with exactly one "/", then their queries with "&"
        /// (the `baseURL` documentation has an example). Fragments are never sent: the base's is dropped.
        static func resolve(_ url: URL, against base: URL?) throws -> URL {
            guard url.scheme == nil else { return url }
            guard let base else {
                throw CustomError.invalidURL(
                    url.absoluteString, reason: "it is relative and the manager has no baseURL")
            }
            let baseParts = splitQuery(base.absoluteString)
            let relativeParts = splitQuery(url.absoluteString)
            var prefix = baseParts.path
            while prefix.hasSuffix("/") { prefix.removeLast() }
            let path = relativeParts.path.drop { $0 == "/" }
            let queries = [baseParts.query, relativeParts.query].compactMap { $0 }
            let joined = String(prefix + "/" + path) + (queries.isEmpty ? "" : "?" + queries.joined(separator: "&"))
            guard let resolved = URL(string: joined) else {
                throw CustomError.invalidURL(joined, reason: "baseURL and the relative URL do not make a URL")
            }
            return resolved
        }

        /// The text after the host's ":" in an absolute URL's authority, or nil when there is none.
        private static func portText(of text: String) -> Substring? {
            guard let schemeEnd = text.range(of: "://") else { return nil }
            let rest = text[schemeEnd.upperBound...]
            let authority = rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]
            let hostAndPort = authority[
                (authority.lastIndex(of: "@").map(authority.index(after:)) ?? authority.startIndex)...]
            guard let colon = hostAndPort.lastIndex(of: ":"), !hostAndPort[colon...].contains("]") else { return nil }
            return hostAndPort[hostAndPort.index(after: colon)...]
        }

        /// A URL's text before its query, and its query (nil without "?"); the fragment is dropped.
        private static func splitQuery(_ text: String) -> (path: Substring, query: Substring?) {
            let beforeFragment = text[..<(text.firstIndex(of: "#") ?? text.endIndex)]
            guard let question = beforeFragment.firstIndex(of: "?") else { return (beforeFragment, nil) }
            return (beforeFragment[..<question], beforeFragment[beforeFragment.index(after: question)...])
        }

        /// `url` with `query` appended, checked as every URL sent is (http(s), host, port, control characters, length).
        static func urlWithQuery(_ url: URL, query: RestEntity) throws -> URL {
            let text = url.absoluteString
            // libcurl fails heads over 1 MiB ("Out of memory"). Redacted, then cut: a cut password would read as host.
            if text.utf8.count > 1_000_000 {
                throw CustomError.invalidURL(
                    Redaction.url(text).prefix(60) + "…", reason: "it is longer than 1,000,000 bytes")
            }
            if let control = text.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw CustomError.invalidURL(
                    Encoding.printable(text),
                    reason: "it contains the control character U+\(String(control.value, radix: 16, uppercase: true))")
            }
            guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw CustomError.invalidURL(text, reason: "only absolute http and https URLs are supported")
            }
            // Schemes ignore case (RFC 3986 §3.1), FoundationNetworking does not: `HTTP://h` goes as `http://h`.
            if url.scheme != scheme, let lowered = URL(string: scheme + text.dropFirst(scheme.count)) {
                return try urlWithQuery(lowered, query: query)
            }
            if let port = portText(of: text), !port.isEmpty, !(Int(port).map { (1...65535).contains($0) } ?? false) {
                throw CustomError.invalidURL(text, reason: "the port \(port) is outside 1-65535")
            }
            #if canImport(FoundationNetworking)
            if url.host?.contains(":") == true {
                throw CustomError.invalidURL(
                    text,
                    reason: "FoundationNetworking cannot connect to IPv6 literal hosts "
                        + "(swift-corelibs-foundation #5496, error -1000); use a host name such as localhost")
            }
            #endif
            if query.totalItems() == 0, url.fragment == nil, let host = url.host, !host.isEmpty {
                return url.absoluteURL  // nothing to add: skip rebuilding (the common, hot case)
            }
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
                let host = components.host, !host.isEmpty
            else { throw CustomError.invalidURL(text, reason: "it has no host") }
            components.fragment = nil
            if query.totalItems() > 0 {
                // Only our own encoder's output is assigned: an invalid string here would trap.
                let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
                components.percentEncodedQuery = existing + query.percentEncodedQuery
            }
            guard let result = components.url else {
                throw CustomError.invalidURL(text, reason: "it cannot be rebuilt")
            }
            return query.totalItems() > 0 ? try urlWithQuery(result, query: RestEntity()) : result
        }

        static func validateHeader(name: String, value: String) throws {
            guard !name.isEmpty, name.utf8.allSatisfy({ Encoding.tokenCharacters[Int($0)] }) else {
                throw CustomError.invalidHeader(
                    name: name, reason: "a header name may contain only letters, digits and !#$%&'*+-.^_`|~")
            }
            if value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                throw CustomError.invalidHeader(name: name, reason: "the value contains CR, LF or NUL")
            }
            if framingHeaderNames.contains(name.lowercased()) {
                throw CustomError.invalidHeader(
                    name: name,
                    reason:
                        "it frames the message, which only URLSession may set (a wrong value would smuggle a request)")
            }
        }

        /// An interceptor's request, checked as the library's own are: the method a token, headers as `validateHeader`.
        static func validateAdapted(_ request: URLRequest) throws {
            let method = request.httpMethod ?? "GET"
            guard !method.isEmpty, method.utf8.allSatisfy({ Encoding.tokenCharacters[Int($0)] }) else {
                let reason = "the method '\(Encoding.printable(method))' an interceptor set is not an RFC 9110 token"
                throw CustomError.invalidHeader(name: "Method", reason: reason)
            }
            if ["GET", "HEAD"].contains(method), request.httpBody != nil || request.httpBodyStream != nil {
                throw CustomError.bodyEncodingFailed("a \(method) request cannot carry the body an interceptor gave it")
            }
            for (name, value) in request.allHTTPHeaderFields ?? [:] { try validateHeader(name: name, value: value) }
        }

    }

    /// The one rule of what is secret, wherever the library prints a request (cURL, events, errors): URL user names and
    /// passwords, secret headers, and query, form and JSON fields with secret names become `<redacted>`.
    enum Redaction {
        /// Query, form and JSON field names that hold secrets (any case): names containing one of `secretParts`, or one
        /// of `secretNames` whole (`key` and `code` are secrets, `keyboard` and `zipcode` are not).
        static func isSecretName(_ name: String) -> Bool {
            let lowercased = name.lowercased()
            return secretParts.contains { lowercased.contains($0) } || secretNames.contains(lowercased)
        }

        static let secretParts = [
            "token", "secret", "password", "passwd", "api-key", "apikey", "api_key", "access_key", "accesskey",
            "private_key",
            "signature", "session", "credential"
        ]
        static let secretNames: Set<String> = [
            "key", "auth", "authorization", "sig", "jwt", "pwd", "pass", "code", "otp", "pin", "ticket", "samlresponse"
        ]

        /// Header names whose values are secrets (any case): credentials, cookies, and every name with `key`, `auth`,
        /// `token`, `secret`, `passw`, `signature`, `session`, `credential` or `csrf` in it (`X-Auth-Key`).
        static func isSecretHeader(_ name: String) -> Bool {
            let lowercased = name.lowercased()
            return ["cookie", "key", "auth", "token", "secret", "passw", "signature", "session", "credential", "csrf"]
                .contains { lowercased.contains($0) }
        }

        /// `name=value` pairs joined by "&" with the values of secret names `<redacted>`, and a value holding a URL or
        /// pairs with a secret in them (`to=https%3A…%3Fsig%3D…`). A form's "+" (a space) is kept: no name has one.
        static func redactingPairs(_ pairs: Substring) -> String {
            pairs.split(separator: "&", omittingEmptySubsequences: false).map { pair in
                guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
                let name = String(pair[..<equals])
                let value = String(pair[pair.index(after: equals)...])
                var decoded = value
                while let next = decoded.removingPercentEncoding, next != decoded { decoded = next }
                // Each level of nesting is shorter than the one holding it: the recursion ends.
                let nested =
                    (decoded != value || decoded.contains("?"))
                    && (url(decoded) != decoded || redactingPairs(Substring(decoded)) != decoded)
                return isSecretName(name.removingPercentEncoding ?? name) || nested
                    ? pair[..<equals] + "=<redacted>" : String(pair)
            }.joined(separator: "&")
        }

        /// `url` with its password and secret query values `<redacted>` (as text: URLComponents traps on such values).
        static func url(_ text: String) -> String {
            var rest = Substring(text)
            var output = ""
            if let schemeEnd = rest.range(of: "://") {
                output += rest[..<schemeEnd.upperBound]
                rest = rest[schemeEnd.upperBound...]
                let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
                let authority = rest[..<authorityEnd]
                // `user:password@` keeps the user; a lone `token@` (a token as the user name) is all secret.
                if let at = authority.lastIndex(of: "@") {
                    let user = authority[..<at].firstIndex(of: ":").map { authority[...$0] } ?? ""
                    output += user + "<redacted>" + authority[at...]
                } else {
                    output += authority
                }
                rest = rest[authorityEnd...]
            }
            // A fragment holds pairs too (`#access_token=…` from an OAuth2 implicit grant).
            let fragment = rest.firstIndex(of: "#").map { rest[$0...] } ?? ""
            rest = rest.dropLast(fragment.count)
            if let question = rest.firstIndex(of: "?") {
                output += rest[...question] + redactingPairs(rest[rest.index(after: question)...])
            } else {
                output += rest
            }
            return output + fragment.prefix(1) + redactingPairs(fragment.dropFirst())
        }
    }

    /// Percent-encoding, JSON strings and quoting from explicit ASCII sets (`CharacterSet`'s are Unicode or keep `+`).
    enum Encoding {
        static let queryAllowed = asciiTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        static let formAllowed = asciiTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-._")
        static let tokenCharacters = asciiTable(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~")
        private static let hexDigits = Array("0123456789ABCDEF".utf8)
        private static let lowerHexDigits = Array("0123456789abcdef".utf8)

        static func json<Value: Encodable>(_ value: Value, encoder: JSONEncoder) throws -> Data {
            do { return try encoder.encode(value) } catch {
                throw CustomError.bodyEncodingFailed(String(describing: error))
            }
        }

        /// `Content-Type: application/json` unless a JSON type is set.
        static func setJSONContentType(_ headers: inout RestEntity) {
            if RestManager.mediaType(headers.value(forKey: "Content-Type")) != "application/json" {
                headers.add(value: "application/json", forKey: "Content-Type")
            }
        }

        static func asciiTable(_ characters: String) -> [Bool] {
            var table = [Bool](repeating: false, count: 256)
            for byte in characters.utf8 { table[Int(byte)] = true }
            return table
        }

        static func percentEncode(_ text: String, allowed: [Bool], spaceAsPlus: Bool) -> String {
            var output = [UInt8]()
            output.reserveCapacity(text.utf8.count)
            for byte in text.utf8 {
                switch byte {
                case _ where allowed[Int(byte)]: output.append(byte)
                case 0x20 where spaceAsPlus: output.append(UInt8(ascii: "+"))
                default: output += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
                }
            }
            return String(decoding: output, as: UTF8.self)
        }

        /// Appends `text` as a JSON string literal, as UTF-8 (bytes from U+0080 up pass through).
        static func appendJSONString(_ text: String, to bytes: inout [UInt8]) {
            bytes.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), byte]
                case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                case ..<0x20:
                    bytes += Array("\\u00".utf8) + [lowerHexDigits[Int(byte >> 4)], lowerHexDigits[Int(byte & 0x0F)]]
                default: bytes.append(byte)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }

        /// A multipart parameter value: quotes and line breaks escaped as browsers do.
        static func quotedParameter(_ text: String) -> String {
            text.replacingOccurrences(of: "\"", with: "%22").replacingOccurrences(of: "\r", with: "%0D")
                .replacingOccurrences(of: "\n", with: "%0A")
        }

        static func singleLine(_ text: String) -> String {
            text.replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ")
        }
        /// Text for an error message, control characters made visible.
        static func printable(_ text: String) -> String {
            text.unicodeScalars.map {
                $0.value < 0x20 || $0.value == 0x7F ? "\\u{\(String($0.value, radix: 16))}" : String($0)
            }.joined()
        }
    }

    // MARK: - Transport

    private let stateLock = NSLock()
    private var state = Snapshot()
    private let transport: Transport
    private let inFlight = Locked([String: Exchange]())
    /// Runs `body` on the manager's state under its lock (`withState { $0 }`: what a call made now sends).
    func withState<Result>(_ body: (inout Snapshot) throws -> Result) rethrows -> Result {
        stateLock.lock()
        defer { stateLock.unlock() }
        return try body(&state)
    }

    /// Adds a multipart part to the manager's files, and what streams file parts from disk.
    func addPart(_ part: MultipartBody.Part, assembler: @escaping BodyAssembler) {
        withState { state in
            state.files.append(part)
            state.assembleBody = assembler
        }
    }

    /// Turns a request's file parts into a body streamed from disk; `check`, called often, throws once the call ends.
    typealias BodyAssembler = @Sendable (_ value: Request, _ check: () throws -> Void) throws -> Request

    /// The one core request path: every public call ends here, started on the caller's thread as raw URLSession's.
    func perform(
        _ value: Request, snapshot: Snapshot, completion: @escaping @Sendable (Results) -> Void
    ) -> RequestHandle {
        var snapshot = snapshot
        snapshot.timeout = value.timeoutInterval ?? snapshot.timeout
        let started = DispatchTime.now()
        let handle = RequestHandle(for: value, settings: snapshot, started: started, completion: completion)
        guard let assemble = value.assembleBody else {
            start(value, snapshot: snapshot, handle: handle, started: started)
            return handle
        }
        // Files are copied off the caller's thread, within the deadline; then the call goes on in a task made here.
        let check = { @Sendable [timeout = snapshot.timeout] () throws in
            if handle.isCancelled { throw CustomError.cancelled }
            if Self.seconds(since: started) >= timeout { throw CustomError.timedOut(value.url, after: timeout) }
        }
        // Under a lock: ThreadSanitizer missed the order a resume from Dispatch gives the assembler's writes (a race).
        let assembled = Locked<Result<Request, any Error>>(.failure(CustomError.cancelled))
        Task { [snapshot] in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global(qos: .userInitiated).async {
                    assembled.withLock { $0 = Result { try assemble(value, check) } }
                    continuation.resume()
                }
            }
            do {
                self.start(try assembled.withLock { $0 }.get(), snapshot: snapshot, handle: handle, started: started)
            } catch { handle.deliver(Results(withError: CustomError.wrap(error))) }
        }
        return handle
    }

    private func start(_ value: Request, snapshot: Snapshot, handle: RequestHandle, started: DispatchTime) {
        let request: URLRequest
        do {
            request = try RequestBuilder.build(value, snapshot: snapshot)
            try value.transfer?.open()
        } catch {
            value.transfer?.release()
            handle.deliver(Results(withError: CustomError.wrap(error)))
            return
        }
        handle.describe(request)
        // A request with interceptors of its own is its own call: they may decide differently on a shared answer.
        let shared = snapshot.deduplicates && [.get, .head].contains(value.method) && value.transfer == nil
        let exchange = Exchange(
            request: request, value: value, snapshot: snapshot, transport: transport, started: started,
            sharing: shared && value.stream == nil && value.interceptors.isEmpty ? inFlight : nil)
        if exchange.add(handle) { exchange.start() }
    }

    /// What two requests sharing one network call have in common: the request and each setting changing its outcome.
    static func sharingKey(_ request: URLRequest, _ snapshot: Snapshot) -> String {
        let headers = (request.allHTTPHeaderFields ?? [:]).map { "\($0.key.lowercased()):\($0.value)" }.sorted()
        let limits = [snapshot.maximumRedirects, snapshot.maximumResponseSize ?? -1]
        let settings = "\(snapshot.followsRedirects) \(limits) \(snapshot.timeout)"
        return "\(request.httpMethod ?? "GET") \(request.url?.absoluteString ?? "")\n\(headers)\n\(settings)"
    }

    /// Owns the manager's one URLSession; in-flight exchanges keep it alive after the manager is gone.
    final class Transport: Sendable {
        let session: URLSession
        let delegate: SessionDelegate
        /// Where deadlines fire: a serial queue gets a thread when it has work, even with every global one blocked.
        let timerQueue = DispatchQueue(label: "RestManager.deadlines", qos: .userInitiated)

        init(configuration: URLSessionConfiguration) {
            delegate = SessionDelegate()
            session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: DelegateQueue())
        }

        /// Serial (FoundationNetworking completes a task with a check-then-act atomic only on a serial queue); each
        /// delegate call goes straight to `delegateThread` as a block, without OperationQueue's bookkeeping.
        final class DelegateQueue: OperationQueue, @unchecked Sendable {
            override init() {
                super.init()
                maxConcurrentOperationCount = 1
                underlyingQueue = Transport.delegateThread
                name = "RestManager"
            }
            override func addOperation(_ block: @escaping @Sendable () -> Void) {
                Transport.backlog.enter()
                Transport.delegateThread.async {
                    Transport.backlog.leave()
                    block()
                }
            }
        }

        /// The delegate calls queued and not yet begun: past `limit` (32 MiB of 16 KiB chunks) the thread queuing one
        /// waits (FoundationNetworking reads on regardless: a slow disk piled chunks up), so the peer slows down. It is
        /// FoundationNetworking's queue, which creating, resuming or cancelling a task needs: those run `excused`.
        final class Backlog: @unchecked Sendable {
            private let lock = Lock()
            private var queued = 0
            /// Calls under way that wait for FoundationNetworking's queue.
            private var excused = 0
            static let limit = 2_048
            /// How long one call waits at most (a test makes it long, to see who waits).
            private let longestWait: TimeInterval

            init(longestWait: TimeInterval = 0.01) { self.longestWait = longestWait }

            func enter() {
                lock.withLock {
                    if queued >= Self.limit, DispatchQueue.getSpecific(key: Transport.delegateKey) == nil {
                        let deadline = Date(timeIntervalSinceNow: longestWait)
                        while queued >= Self.limit, excused == 0, lock.wait(until: deadline) {}
                    }
                    queued += 1
                }
            }

            /// Runs `body`, which waits for FoundationNetworking's queue: no call waits for the delegate queue then.
            func excused<Result>(_ body: () -> Result) -> Result {
                lock.withLock {
                    excused += 1
                    lock.broadcast()
                }
                defer { lock.withLock { excused -= 1 } }
                return body()
            }

            func leave() {
                lock.withLock {
                    queued -= 1
                    // Half empty before the waiter goes on: a wake-up per chunk would cost a thread switch per chunk.
                    if queued == Self.limit / 2 { lock.broadcast() }
                }
            }
        }
        static let backlog = Backlog()
        static let delegateKey = DispatchSpecificKey<Bool>()
        /// Where all sessions' delegate work runs (FoundationNetworking serialises it anyway), on a thread of its own
        /// whenever it has work. Never freed: Linux's `underlyingQueue` does not retain it.
        static let delegateThread: DispatchQueue = {
            let queue = DispatchQueue(label: "RestManager.session", qos: .userInitiated)
            queue.setSpecific(key: delegateKey, value: true)
            return queue
        }()
        /// No cache (on Linux a cache plus cancellation can crash), no cookies, no credential store: nothing on disk.
        static func leanConfiguration(maximumConnectionsPerHost: Int) -> URLSessionConfiguration {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            configuration.httpCookieStorage = nil
            configuration.httpShouldSetCookies = false
            // Also skips FoundationNetworking's cookie parsing of every header line (Linux).
            configuration.httpCookieAcceptPolicy = .never
            configuration.urlCredentialStorage = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            configuration.httpMaximumConnectionsPerHost = max(1, maximumConnectionsPerHost)
            return configuration
        }

        deinit { session.finishTasksAndInvalidate() }
    }

    /// A streamed body between the exchange (the delegate queue appends) and its one reader, ended by the completion.
    /// Its lifecycle: `waitingForHead` -- a 2xx head (`settleHead`) --> `open` -- the completion (`end`) --> `ended`
    /// (the reader gets the chunks left, then the end). A call that completes before a 2xx head (an error, a non-2xx,
    /// an answer from an interceptor) goes from `waitingForHead` to `ended` and `head()` says why.
    final class StreamBuffer: @unchecked Sendable {
        private let lock = Lock()
        /// How the body ended, once the call completed.
        private var ending: Result<Void, any Error>?
        private var headWaiter: CheckedContinuation<(ResponseBody, Response), any Error>?
        /// The head's outcome until `head()` takes it (no body here: it would keep this buffer alive).
        private var headOutcome: Result<Response, any Error>?
        /// The bytes the reader has not taken, in one buffer: a reader that fell behind takes them all in one copy.
        private var unread = Data()
        private var reader: CheckedContinuation<Data?, any Error>?
        private var handle: RequestHandle?

        /// Whether a 2xx head was handed over.
        var isOpen: Bool { lock.withLock { (try? headOutcome?.get()) != nil } }

        /// Records the call to cancel, before `stream(_:)` waits for the head: before any `cancel()` can come.
        func attach(_ handle: RequestHandle) { lock.withLock { self.handle = handle } }

        /// Ends the call (once nobody reads, or the reader's task was cancelled).
        func cancel() { lock.withLock { handle }?.cancel() }

        /// Waits for the head (or the reason there is none).
        func head() async throws -> (ResponseBody, Response) {
            try await withCheckedThrowingContinuation { continuation in
                let outcome = lock.withLock { () -> Result<Response, any Error>? in
                    if headOutcome == nil { headWaiter = continuation }
                    return headOutcome
                }
                if let outcome { continuation.resume(with: outcome.map { (ResponseBody(self), $0) }) }
            }
        }

        /// The head arrived (a 2xx: the caller gets the body), or the reason there is none.
        func settleHead(_ outcome: Result<Response, any Error>) {
            let waiter = lock.withLock { () -> CheckedContinuation<(ResponseBody, Response), any Error>? in
                headOutcome = outcome
                defer { headWaiter = nil }
                return headWaiter
            }
            waiter?.resume(with: outcome.map { (ResponseBody(self), $0) })
        }

        /// Queues a chunk for the reader, or hands it over to a waiting one; never waits for a reader behind: on Linux
        /// that holds FoundationNetworking's one queue, and so every call in the process (3.1 s for 4 ms GETs).
        func append(_ data: Data) throws {
            let waiting = try lock.withLock { () throws -> CheckedContinuation<Data?, any Error>? in
                // A reader waits only once it has taken every byte: this one comes next.
                if let reader {
                    self.reader = nil
                    return reader
                }
                let limit = ResponseBody.maximumUnreadBytes
                guard unread.count + data.count <= limit else {
                    throw ResponseBody.overflow("The stream's reader fell more than \(limit) bytes behind; read faster")
                }
                unread.append(data)
                return nil
            }
            waiting?.resume(returning: data)
        }

        /// The call completed with `results`: the end of an open body, or the outcome `head()` reports.
        func end(with results: Results) {
            // Without a 2xx head handed over: the answer (a 2xx has a response), or what `validate()` throws.
            let head =
                isOpen
                ? nil : Result { try results.validate() }.map { results.response ?? Response(fromURLResponse: nil) }
            let ending: Result<Void, any Error> = results.error.map { .failure($0) } ?? .success(())
            let waiting = lock.withLock { () -> CheckedContinuation<Data?, any Error>? in
                // An answer that did not come from the network (a cache's) is one chunk.
                if case .success? = head, let data = results.data { unread.append(data) }
                self.ending = ending
                defer { reader = nil }
                return unread.isEmpty ? reader : nil
            }
            if let head { settleHead(head) }
            waiting?.resume(with: ending.map { nil })
        }

        /// The next chunk; nil at the end; throws the error that ended the body.
        func next() async throws -> Data? {
            try await withCheckedThrowingContinuation { continuation in
                let outcome = lock.withLock { () -> Result<Data?, any Error>? in
                    if !unread.isEmpty {
                        defer { unread = Data() }
                        return .success(unread)
                    }
                    if let ending { return ending.map { nil } }
                    guard reader == nil else {
                        let reason = "Two tasks read one ResponseBody at the same time; a body has one reader"
                        return .failure(
                            CustomError.transport(URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: reason])))
                    }
                    reader = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        }
    }

    /// The body seam, for the transfers add-on (a download's file, an upload's): called under the exchange's lock on
    /// the delegate queue, `open` once, then per request `prepare`, `begin` at the head, `write` per chunk of a body it
    /// took, `complete` after a 2xx; `release` when the call ends.
    protocol Transfer: AnyObject, Sendable {
        /// Checks and claims the files before the first request; throwing ends the call with that error.
        func open() throws
        /// Adjusts each request as it goes out (a download asks for the rest of its file).
        func prepare(_ request: inout URLRequest)
        /// Where the body of the answer whose head this is goes.
        func begin(_ response: HTTPURLResponse) throws -> BodyTarget
        /// A chunk of a body that `begin` took (`.transfer`).
        func write(_ data: Data) throws
        /// A 2xx answer ended; false when the request must go out again (for the rest of the file).
        func complete() throws -> Bool
        /// The results to deliver, a 2xx body in memory that never went through `write` (a cache's) written through it.
        func written(_ results: Results) -> Results
        /// Reports how far the transfer has come, about ten times a second, and once (`final`) when the call succeeded.
        func reportProgress(of task: URLSessionTask?, final: Bool)
        /// The call is over: close files, let others use them.
        func release()
        /// Why a request failed when the transfer's body made it fail (a file that changed size while it was sent).
        var failure: CustomError? { get }
    }

    /// Where an answer's body goes (`awaitingHead` until the current request's head arrives).
    enum BodyTarget {
        /// Kept in memory, up to `maximumResponseSize`.
        case memory
        /// Its first 64 KiB kept, then the answer ends (any non-2xx answer's: the body of `.unacceptableStatusCode`).
        case errorBody
        /// To the transfer's `write`.
        case transfer
        /// To the reader of `stream(_:)`.
        case stream
        /// Not read: the request goes out again at once.
        case restart
        case awaitingHead
    }

    /// One call on the wire: its attempts, redirects, deadline, body as it arrives, and the handles waiting for it.
    /// Its lifecycle, in `state` and `attempt` (n; under `lock`); `perform` builds the request and calls `start()`:
    /// ```
    /// start() arms the deadline (timer queue) --> adapting(1)
    /// adapting(n) -- the interceptors' adapt (the steps' task; none without interceptors) --> sending(redirects: 0)
    /// adapting(1) -- an identical call is on the wire (de-duplication): the handle joins it --> finished, unseen
    /// sending(k) -- a redirect, or the rest of a short download (delegate queue) --> sending(k + 1 | k)
    /// sending(k) -- the task completes (delegate queue) --> deciding(n): the interceptors' decide (the steps' task)
    /// deciding(n) -- a retry (RetryPolicy, the authenticator's resend) --> waiting(n) -- its timer --> adapting(n + 1)
    /// any state -- delivered, deadline, last handle cancelled, an error --> finished (each completion goes out once)
    /// ```
    final class Exchange: @unchecked Sendable {
        enum State: Equatable {
            case adapting, deciding, waiting, finished
            case sending(redirects: Int)
        }

        private let lock = Lock()
        private let transport: Transport
        private var firstURL: URL { firstRequest.url ?? URL(fileURLWithPath: "/") }
        /// The call's settings (deadline, redirects, size limit, credentials, retries, events).
        private let settings: Snapshot
        /// Identical calls in flight by `sharingKey`, when this call may share one (de-duplication), and its key there.
        private let sharing: Locked<[String: Exchange]>?
        private var sharedKey: String?
        private var handles: [RequestHandle] = []
        private var task: URLSessionDataTask?
        /// The deadline, a retry's delay, progress reports: cancelled when the exchange finishes.
        private var timers: [any DispatchSourceTimer] = []
        private var state = State.adapting
        /// The current attempt's number, from 1.
        private var attempt = 0
        private var finished: Bool { state == .finished }
        /// The call's interceptors: the manager's, the request's, then the retry policy.
        private let interceptors: [any Interceptor]
        /// The interceptors' steps, run in order by one task `start()` makes where the call was made: every attempt
        /// sees the caller's task-local values (a refresh marks its own calls so) and priority. Nil without them.
        private let steps: AsyncStream<@Sendable () async -> Void>.Continuation?
        private let jobs: AsyncStream<@Sendable () async -> Void>?
        /// The task running the steps: cancelled when the call ends, so that no step waits on (a refresh, say).
        private var stepsTask: Task<Void, Never>?
        /// The retries each interceptor asked for in this call (`ownRetries` while it decides).
        private var retriesAsked: [Int]
        /// The request the interceptors made for the current attempt (`request` follows redirects).
        private var attemptRequest: URLRequest
        /// Whether URLSession asked about the current hop's redirect (it must: secrets are stripped there).
        private var redirectHookRan = false
        private var request: URLRequest
        private var body = Data()
        private let firstRequest: URLRequest
        /// When the call started (its deadline counts from there: assembling a body is part of the call).
        private let started: DispatchTime
        /// Where the current answer's body goes.
        private var target = BodyTarget.memory
        private let transfer: (any Transfer)?
        private let stream: StreamBuffer?
        /// When the last byte arrived or went out: a stream or a transfer ends after `idleTimeout` without one.
        private var lastActivity = DispatchTime.now()
        /// The current task's bytes sent when `lastActivity` was last moved.
        private var bytesSent: Int64 = 0
        /// What the call took until now; the attempt on the wire is the last, open while `task` is set.
        private var metrics = Metrics()

        init(
            request: URLRequest, value: Request, snapshot: Snapshot, transport: Transport, started: DispatchTime,
            sharing: Locked<[String: Exchange]>?
        ) {
            self.started = started
            self.settings = snapshot
            self.transport = transport
            self.sharing = sharing
            self.request = request
            self.firstRequest = request
            self.attemptRequest = request
            interceptors = snapshot.interceptors + value.interceptors + (snapshot.lastInterceptor.map { [$0] } ?? [])
            retriesAsked = Array(repeating: 0, count: interceptors.count)
            let queue = interceptors.isEmpty ? nil : AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
            jobs = queue?.stream
            steps = queue?.continuation
            transfer = value.transfer
            stream = value.stream
        }

        /// Adds a waiting handle; false when this exchange has already finished.
        func add(_ handle: RequestHandle) -> Bool {
            lock.withLock {
                guard !finished, handle.attach(to: self) else { return false }
                handles.append(handle)
                return true
            }
        }

        func start() {
            let deadline = min(settings.timeout, RestManager.never) - elapsed
            guard startTimer(after: deadline, { [weak self] in self?.deadlinePassed() }) else { return }
            // Streams and transfers may take any time while bytes move; they end when none does for `idleTimeout`. The
            // same timer reports a transfer's progress, ten times a second.
            if stream != nil || transfer != nil {
                let check = min(max(settings.idleTimeout / 8, 0.01), transfer == nil ? 1 : 0.1)
                startTimer(after: check, repeating: check) { [weak self] in self?.checkIdle() }
            }
            beginAttempt()
            // Made after the first step was queued, which it then runs without a hop to wait for it (a hop per call).
            if let jobs {
                let task = Task { for await job in jobs { await job() } }
                if !unlessFinished({ stepsTask = task }) { task.cancel() }
            }
        }

        /// Starts a timer on the deadline queue; false (and nothing started) when the exchange has finished.
        @discardableResult
        private func startTimer(
            after seconds: TimeInterval, repeating: TimeInterval = .infinity, _ handler: @escaping @Sendable () -> Void
        ) -> Bool {
            let timer = DispatchSource.makeTimerSource(queue: transport.timerQueue)
            timer.schedule(deadline: .now() + seconds, repeating: repeating)
            timer.setEventHandler(handler: handler)
            timer.resume()
            let kept = unlessFinished { timers.append(timer) }
            if !kept { timer.cancel() }
            return kept
        }

        /// Runs `body` under the lock unless the exchange has finished; whether it ran.
        @discardableResult
        private func unlessFinished(_ body: () -> Void) -> Bool {
            lock.withLock {
                if !finished { body() }
                return !finished
            }
        }

        /// Numbers the next attempt and lets the interceptors, if any, adapt the call's request for it (a step).
        private func beginAttempt() {
            let number = lock.withLock { () -> Int? in
                guard !finished else { return nil }
                state = .adapting
                attempt += 1
                return attempt
            }
            guard let number else { return }
            guard let steps else { return transmit(firstRequest, attempt: number) }
            steps.yield {
                var adapted = self.firstRequest
                do {
                    for (index, interceptor) in self.interceptors.enumerated() {
                        do {
                            adapted = try await interceptor.adapt(adapted, attempt: number)
                        } catch let answer as Answer {
                            // Answered without sending (a fresh cached answer): the interceptors after it decide on it.
                            self.lock.withLock { self.metrics.source = .cache }
                            return await self.decide(answer.results, for: adapted, attempt: number, from: index + 1)
                        }
                    }
                    try RequestBuilder.validateAdapted(adapted)
                    // An http(s) URL, which none is not: FoundationNetworking would speak FTP, or read a `data:` URL.
                    if adapted.url != self.firstRequest.url {
                        adapted.url = try RequestBuilder.urlWithQuery(
                            adapted.url ?? URL(fileURLWithPath: "/"), query: RestEntity())
                    }
                    self.transmit(adapted, attempt: number)
                } catch {
                    // As thrown: the caller catches its own interceptor's error.
                    self.finish(Results(withError: error))
                }
            }
        }

        private func transmit(_ next: URLRequest, attempt number: Int) {
            // Shared as adapted (its token included): a call made after a new login never gets the last user's answer.
            if number == 1, let sharing, joinedAnother(sharing, sending: next) { return }
            let proceeds = unlessFinished {
                state = .sending(redirects: 0)
                request = next
                attemptRequest = next
            }
            guard proceeds else { return }
            settings.eventHandler?(.started(next, attempt: number))
            send(next)
        }

        /// An attempt's outcome goes to the interceptors' `decide` (a step, when there are any): retried or delivered.
        private func attemptEnded(_ results: Results) {
            // A stream whose body the caller has begun to get cannot be sent again.
            guard let steps, stream?.isOpen != true else { return finish(results) }
            guard unlessFinished({ state = .deciding }) else { return }
            let (sent, number) = lock.withLock { (attemptRequest, attempt) }
            steps.yield { await self.decide(results, for: sent, attempt: number, from: 0) }
        }

        /// Asks the interceptors from `first` on, in order, then retries or delivers.
        private func decide(_ results: Results, for sent: URLRequest, attempt number: Int, from first: Int) async {
            var delivered = results
            var delay: TimeInterval?
            var asker = 0
            asking: for index in interceptors.indices.dropFirst(first) {
                let own = lock.withLock { retriesAsked[index] }
                let decision = await RestManager.$ownRetries.withValue(own) {
                    await interceptors[index].decide(after: delivered, for: sent, attempt: number)
                }
                switch decision {
                case .deliver: continue
                case .deliverInstead(let replacement): delivered = replacement
                case .retry(let seconds):
                    delay = RestManager.finite(seconds)
                    asker = index
                    break asking
                }
            }
            // The next attempt must start before the call's deadline, or the last answer is delivered now.
            guard let delay, number < RestManager.maximumAttempts, elapsed + delay < settings.timeout else {
                // Unless the call ended meanwhile (its files are let go): a download's file holds what the call reports.
                return finish(lock.withLock { finished ? nil : transfer?.written(delivered) } ?? delivered)
            }
            let waits = unlessFinished {
                state = .waiting
                retriesAsked[asker] += 1
            }
            guard waits else { return }
            let reason = delivered.error?.localizedDescription ?? "HTTP \(delivered.statusCode ?? 0)"
            settings.eventHandler?(.retrying(sent, attempt: number, delay: delay, reason: reason))
            // Holds the exchange while it waits (nothing else does then).
            startTimer(after: delay) { self.beginAttempt() }
        }

        /// Hands this call's handle to an identical call in flight (this one ends unseen), or records this one there.
        private func joinedAnother(_ table: Locked<[String: Exchange]>, sending request: URLRequest) -> Bool {
            let key = RestManager.sharingKey(request, settings)
            let waiting = lock.withLock { handles }
            let joined = table.withLock { table -> Bool in
                if let existing = table[key], waiting.allSatisfy({ existing.add($0) }) { return true }
                // Only a call that runs: `finish` takes out the entry it sees recorded, and a finished one saw none.
                if unlessFinished({ sharedKey = key }) { table[key] = self }
                return false
            }
            if joined { waiting.forEach(remove) }
            return joined
        }

        private func fail(_ error: any Error) { finish(Results(withError: CustomError.wrap(error))) }
        /// A caller's deadline passed. Callers sharing this call (de-duplication) joined later: each keeps its own.
        private func deadlinePassed() {
            let timedOut = CustomError.timedOut(firstURL, after: settings.timeout)
            let (late, next) = lock.withLock { () -> ([RequestHandle], TimeInterval?) in
                let now = DispatchTime.now().uptimeNanoseconds
                let left = { (handle: RequestHandle) in
                    self.settings.timeout - Double(now - handle.started.uptimeNanoseconds) / 1e9
                }
                guard let next = handles.map(left).filter({ $0 > 0.001 }).min() else { return ([], nil) }
                defer { handles.removeAll { left($0) <= 0.001 } }
                return (handles.filter { left($0) <= 0.001 }, next)
            }
            guard let next else { return fail(timedOut) }
            for handle in late { handle.deliver(Results(withError: timedOut)) }
            startTimer(after: next) { [weak self] in self?.deadlinePassed() }
        }
        /// Ends the call when no byte arrived or was sent for `idleTimeout`; reports a transfer's progress.
        private func checkIdle() {
            let idle = lock.withLock { () -> TimeInterval in
                if !finished { transfer?.reportProgress(of: task, final: false) }
                let sent = task?.countOfBytesSent ?? 0
                // Bytes going out count, and so does time with no task on the wire (adapting, deciding, waiting).
                if sent != bytesSent || task == nil {
                    bytesSent = sent
                    lastActivity = .now()
                }
                return RestManager.seconds(since: lastActivity)
            }
            guard idle >= settings.idleTimeout else { return }
            fail(CustomError.timedOut(firstURL, after: settings.idleTimeout, limit: .idle))
        }
        /// A handle was cancelled: when nobody waits any more, the network call is cancelled too.
        func remove(_ handle: RequestHandle) {
            lock.withLock { handles.removeAll { $0 === handle } }
            finish(Results(withError: CustomError.cancelled), unlessWatched: true)
        }

        /// What the call took until now, the attempt on the wire (if any) ended by `error`.
        func measured(endingWith error: (any Error)?) -> Metrics { lock.withLock { ended(metrics, by: error) } }

        /// `metrics` with the attempt on the wire, if any, ended by `error` (under `lock`).
        private func ended(_ metrics: Metrics, by error: (any Error)?) -> Metrics {
            var metrics = metrics
            metrics.retryCount = retriesAsked.reduce(0, +)
            guard let task, let last = metrics.attempts.indices.last else { return metrics }
            metrics.attempts[last].duration = elapsed - metrics.attempts[last].startOffset
            metrics.attempts[last].bytesSent = task.countOfBytesSent
            metrics.attempts[last].error = error.map(CustomError.wrap)
            return metrics
        }

        private func send(_ request: URLRequest) {
            let request = lock.withLock { withBody(request) }
            // A delegate task: its answer obeys `maximumResponseSize` as it arrives, and it counts the bytes it sends.
            let task = Transport.backlog.excused { transport.session.dataTask(with: request) }
            transport.delegate.register(self, for: task)
            let started = unlessFinished {
                self.task = task
                target = .awaitingHead
                body = Data()
                metrics.attempts.append(
                    Metrics.Attempt(
                        method: request.httpMethod ?? "GET", url: request.url ?? firstURL, startOffset: elapsed))
            }
            // A task created but never resumed would stay in the session forever: discard it.
            if started { Transport.backlog.excused { task.resume() } } else { cancelLater(task) }
        }

        /// `request` as it goes out (under `lock`): the transfer's adjustments, and on Linux its body as a stream that
        /// libcurl rewinds (`freshBodyStream()`) to resend on a fresh connection (`Data` went without its bytes).
        private func withBody(_ request: URLRequest) -> URLRequest {
            var request = request
            transfer?.prepare(&request)
            #if canImport(FoundationNetworking)
            if let body = request.httpBody {
                request.httpBodyStream = InputStream(data: body)  // in place of the data
                request.setValue(String(body.count), forHTTPHeaderField: "Content-Length")
            }
            // Its length is the `Content-Length` set with it, not chunked (a blank value is not sent).
            if request.httpBodyStream != nil { request.setValue(" ", forHTTPHeaderField: "Transfer-Encoding") }
            #endif
            return request
        }

        /// The body on the wire as a new stream, for libcurl to resend; none for a GET (a download's prepare resets).
        func freshBodyStream() -> InputStream? {
            lock.withLock { finished || request.httpMethod == "GET" ? nil : withBody(request).httpBodyStream }
        }

        // Called by the session delegate, on the session's delegate queue, one at a time.

        func redirectHookCalled() { lock.withLock { redirectHookRan = true } }

        func received(response: URLResponse, from task: URLSessionDataTask) {
            do {
                let head = try lock.withLock { () throws -> BodyTarget? in
                    guard task === self.task, !finished else { return nil }
                    lastActivity = .now()
                    let http = response as? HTTPURLResponse
                    let last = metrics.attempts.count - 1
                    metrics.attempts[last].statusCode = http?.statusCode
                    metrics.attempts[last].timeToHead = elapsed - metrics.attempts[last].startOffset
                    if stream != nil {
                        // A 2xx head with a body opens the stream; another (a 204 too) is decided whole, as any call's.
                        let status = http?.statusCode ?? 0
                        target = (200..<300).contains(status) && ![204, 205].contains(status) ? .stream : .errorBody
                    } else if let transfer, let http {
                        target = try transfer.begin(http)
                    } else {
                        target = .memory
                        // The announced length is a good first guess, capped (30 GB with a limit of Int.max trapped).
                        let expected = min(
                            response.expectedContentLength, Int64(min(settings.maximumResponseSize ?? .max, 16 << 20)))
                        if expected > 0 { body.reserveCapacity(Int(expected)) }
                    }
                    // An error answer's body says why; an endless one must not hold the call: its first 64 KiB.
                    if target == .memory, !(200..<300).contains(http?.statusCode ?? 0) { target = .errorBody }
                    if target == .restart {
                        metrics = ended(metrics, by: nil)
                        self.task = nil
                    }
                    return target
                }
                if head == .restart {
                    cancelLater(task)
                    send(lock.withLock { request })
                } else if head == .stream, let http = response as? HTTPURLResponse {
                    stream?.settleHead(.success(Response(fromURLResponse: http)))
                }
            } catch { fail(error) }
        }

        func received(data: Data, from task: URLSessionDataTask) {
            do {
                let enough = try lock.withLock { () throws -> Bool in
                    guard task === self.task, !finished else { return false }
                    lastActivity = .now()
                    metrics.attempts[metrics.attempts.count - 1].bytesReceived += Int64(data.count)
                    switch target {
                    case .stream: try stream?.append(data)
                    case .transfer: try transfer?.write(data)
                    case .errorBody, .restart, .awaitingHead:
                        body.append(data.prefix(max(0, Self.errorBodyLimit - body.count)))
                        return target == .errorBody && body.count >= Self.errorBodyLimit
                    case .memory:
                        // Decoded bytes (libcurl inflates gzip): a small compressed body cannot pass the limit.
                        if let limit = settings.maximumResponseSize, body.count + data.count > limit {
                            throw CustomError.responseTooLarge(limit: limit)
                        }
                        body.append(data)
                    }
                    return false
                }
                // The answer is complete as far as the call goes.
                if enough {
                    completed(task, error: nil)
                    cancelOffQueue(task)
                }
            } catch { fail(error) }
        }

        func completed(_ task: URLSessionTask, error: (any Error)?) {
            let urlError = error.map {
                Self.classified($0 as? URLError ?? URLError(.unknown, userInfo: [NSUnderlyingErrorKey: $0]))
            }
            // A cancel nobody here made: the delegate declined a challenge; the answer (401, 407) is the task's.
            let declined = urlError?.code == .cancelled && task.response is HTTPURLResponse
            let state = lock.withLock { () -> (body: Data?, hookRan: Bool, failure: CustomError?)? in
                guard task === self.task, !finished else { return nil }
                let timedOut = CustomError.timedOut(firstURL, after: settings.timeout)
                // The transfer knows better than libcurl ("aborted by callback") why its body could not be sent.
                let failure = urlError.flatMap {
                    transfer?.failure ?? (declined ? nil : $0.code == .timedOut ? timedOut : .transport($0))
                }
                metrics = ended(metrics, by: failure)
                // Completed: nothing may cancel it any more.
                self.task = nil
                defer { body = Data() }
                return (target == .transfer || target == .stream ? nil : body, redirectHookRan, failure)
            }
            guard let (data, hookRan, failure) = state else { return }
            if let failure, case .transport = failure { return attemptEnded(Results(withError: failure)) }
            if let failure { return fail(failure) }
            guard let http = task.response as? HTTPURLResponse else { return fail(CustomError.invalidResponse) }
            // URLSession must never follow a redirect itself (secrets would go elsewhere unchecked): fail loudly.
            if !hookRan, let original = task.originalRequest?.url, let current = task.currentRequest?.url,
                original != current
            {
                return fail(CustomError.unexpectedRedirect(current))
            }
            if settings.followsRedirects, [301, 302, 303, 307, 308].contains(http.statusCode),
                let location = http.value(forHTTPHeaderField: "Location")
            {
                return redirect(from: http, to: location)
            }
            if let transfer, (200..<300).contains(http.statusCode) {
                do {
                    if try !lock.withLock({ try transfer.complete() }) { return send(lock.withLock { request }) }
                } catch { return fail(error) }
            }
            attemptEnded(Results(withData: data, response: Response(fromURLResponse: http), error: nil))
        }

        private func redirect(from response: HTTPURLResponse, to location: String) {
            let (current, hops) = lock.withLock { () -> (URLRequest, Int) in
                if case .sending(let redirects) = state { state = .sending(redirects: redirects + 1) }
                redirectHookRan = false
                guard case .sending(let redirects) = state else { return (request, Int.max) }
                return (request, redirects)
            }
            guard hops <= settings.maximumRedirects else {
                return fail(CustomError.tooManyRedirects(firstURL, limit: settings.maximumRedirects))
            }
            // Checked and written as a request's URL is: http(s) with a host and a valid port, the scheme lower-cased.
            guard let base = current.url, let url = URL(string: location, relativeTo: base)?.absoluteURL,
                let target = try? RequestBuilder.urlWithQuery(url, query: RestEntity())
            else { return fail(CustomError.invalidURL(location, reason: "the redirect target is not an http(s) URL")) }
            var next = current
            next.url = target
            let method = current.httpMethod ?? "GET"
            // RFC 9110 §15.4 as browsers do it: 303 makes everything but HEAD a GET; 301/302 only POST.
            let becomesGet =
                response.statusCode == 303
                ? method != "HEAD" : [301, 302].contains(response.statusCode) && method == "POST"
            if becomesGet {
                next.httpMethod = "GET"
                next.httpBody = nil
                for name in RequestBuilder.bodyHeaderNames + ["Content-Length"] {
                    next.setValue(nil, forHTTPHeaderField: name)
                }
            }
            if !RestManager.isSameOrigin(base, target) {
                // Another origin gets only headers known to hold no secret: an unknown one may be an API key.
                let followers = RequestBuilder.crossOriginHeaderNames.union(
                    becomesGet ? [] : RequestBuilder.bodyHeaderNames.map { $0.lowercased() })
                for name in (current.allHTTPHeaderFields ?? [:]).keys where !followers.contains(name.lowercased()) {
                    next.setValue(nil, forHTTPHeaderField: name)
                }
            }
            lock.withLock {
                request = next
                metrics.redirectCount += 1
            }
            send(next)
        }

        /// Ends the exchange once and delivers `results` to every waiting handle (`unlessWatched`: only if none waits).
        private func finish(_ results: Results, unlessWatched: Bool = false) {
            var results = results
            let outcome: (waiting: [RequestHandle], resources: Resources, request: URLRequest)? = lock.withLock {
                guard !finished, !unlessWatched || handles.isEmpty else { return nil }
                if results.isSuccess { transfer?.reportProgress(of: task, final: true) }
                state = .finished
                metrics = ended(metrics, by: results.error)
                if metrics.attempts.last?.statusCode == 304, results.statusCode ?? 304 != 304 {
                    metrics.source = .revalidated
                }
                results.metrics = metrics
                // Closes a download's file; the task and the timers are stopped outside the lock.
                transfer?.release()
                defer {
                    handles = []
                    body = Data()
                    task = nil
                    timers = []
                }
                return (handles, (task, timers, target != .awaitingHead), request)
            }
            guard let outcome else { return }
            steps?.finish()
            lock.withLock { stepsTask }?.cancel()
            release(outcome.resources)
            if let key = lock.withLock({ sharedKey }) { sharing?.withLock { if $0[key] === self { $0[key] = nil } } }
            for handle in outcome.waiting { handle.deliver(results, request: outcome.request) }
        }

        private var elapsed: TimeInterval { RestManager.seconds(since: started) }
        /// How much of a non-2xx answer's body a call keeps (64 KiB): an error page, not an endless stream.
        static let errorBodyLimit = 65_536

        private typealias Resources = (task: URLSessionDataTask?, timers: [any DispatchSourceTimer], headArrived: Bool)

        /// Outside the lock: stops the timers and cancels the task unless it has completed.
        private func release(_ resources: Resources) {
            resources.timers.forEach { $0.cancel() }
            guard let task = resources.task else { return }
            if resources.headArrived { cancelOffQueue(task) } else { cancelLater(task) }
        }

        /// Cancels a task whose body is arriving (no redirect left to decide) off the delegate queue, where the cancel
        /// would wait behind the chunks libcurl goes on reading (hundreds of MB from a fast peer refused at 1 MiB).
        private func cancelOffQueue(_ task: URLSessionDataTask) {
            DispatchQueue.global().async { Transport.backlog.excused { task.cancel() } }
        }

        /// Cancels outside every lock, on the delegate queue: on Linux `cancel()` hops synchronously onto the session's
        /// queue, and a cancel that overtakes the redirect decision traps; the delegate queue orders the two.
        private func cancelLater(_ task: URLSessionDataTask) {
            transport.session.delegateQueue.addOperation { Transport.backlog.excused { task.cancel() } }
        }

        /// Linux reports TLS failures as -1 (unknown) with libcurl's text; they get the codes Apple platforms use
        /// (-1202 for a certificate not trusted, -1200 for another TLS failure), which no retry policy retries.
        static func classified(_ error: URLError) -> URLError {
            let text = error.localizedDescription
            guard error.code == .unknown, text.contains("SSL") || text.contains("TLS") else { return error }
            let untrusted = text.lowercased().contains("certificate")
            let summary = untrusted ? "The server's TLS certificate is not trusted" : "The TLS connection failed"
            return URLError(
                untrusted ? .serverCertificateUntrusted : .secureConnectionFailed,
                userInfo: [NSLocalizedDescriptionKey: "\(summary) (\(text))", NSUnderlyingErrorKey: error])
        }

    }

    /// The session's delegate: hands each task's events to its exchange; declines redirects and challenges.
    final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
        private let exchanges = Locked([Int: Exchange]())
        func register(_ exchange: Exchange, for task: URLSessionTask) {
            exchanges.withLock { $0[task.taskIdentifier] = exchange }
        }
        private func exchange(for task: URLSessionTask) -> Exchange? { exchanges.withLock { $0[task.taskIdentifier] } }
        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
        ) {
            exchange(for: dataTask)?.received(response: response, from: dataTask)
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            exchange(for: dataTask)?.received(data: data, from: dataTask)
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask,
            needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
        ) {
            completionHandler(exchange(for: task)?.freshBodyStream())
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) }?.completed(task, error: error)
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest,
            completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            exchange(for: task)?.redirectHookCalled()
            // A task cancelled before this call (on this queue) is not answered: on Linux that traps.
            guard task.state == .running else { return }
            completionHandler(nil)
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            #if canImport(FoundationNetworking)
            // Linux completes a 401 or 407 challenge no other way (the exchange reads the answer); libcurl checks TLS.
            completionHandler(.cancelAuthenticationChallenge, nil)
            #else
            // TLS validation and a 401 without credentials both stay Foundation's job here.
            completionHandler(.performDefaultHandling, nil)
            #endif
        }
    }

    // MARK: - Private helpers

    /// `seconds` within 0...10^9 (NaN is 0): a delay the deadline arithmetic and `Double.random` can use.
    static func finite(_ seconds: TimeInterval) -> TimeInterval { seconds.isNaN ? 0 : min(max(seconds, 0), 1e9) }

    /// A deadline that never comes: a billion seconds keeps the arithmetic in range.
    static let never: TimeInterval = 1e9

    static func seconds(since start: DispatchTime) -> TimeInterval {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }

    /// Runs a completion-handler call as `async`, cancelled with the surrounding Task (one that is already cancelled
    /// gets `cancelled` at once: nothing is sent). The completion runs once, so the continuation resumes once.
    func withCancellableHandle<Value: Sendable>(
        cancelled: Value,
        _ start: @escaping @Sendable (_ completion: @escaping @Sendable (Value) -> Void) -> RequestHandle
    ) async -> Value {
        if Task.isCancelled { return cancelled }
        let slot = Locked<(handle: RequestHandle?, cancelled: Bool)>((nil, false))
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
                let handle = start { continuation.resume(returning: $0) }
                // Set, then checked (onCancel does the reverse): one of the two cancels, twice is harmless.
                slot.withLock { $0.handle = handle }
                if slot.withLock({ $0.cancelled }) { handle.cancel() }
            }
        } onCancel: {
            slot.withLock { $0.cancelled = true }
            slot.withLock { $0.handle }?.cancel()
        }
    }

    /// A lock with a scoped `withLock` (NSLocking's own needs macOS 14; `Mutex` macOS 15). Within it, `wait(until:)`
    /// lets go of the lock until `broadcast()` or the deadline (then false), and takes it back.
    final class Lock: @unchecked Sendable {
        private let condition = NSCondition()

        func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
            condition.lock()
            defer { condition.unlock() }
            return try body()
        }

        func wait(until deadline: Date) -> Bool { condition.wait(until: deadline) }
        func broadcast() { condition.broadcast() }
    }

    /// A value behind a `Lock`.
    final class Locked<Value>: @unchecked Sendable {
        private let lock = Lock()
        private var value: Value
        init(_ value: Value) { self.value = value }
        func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
            try lock.withLock { try body(&value) }
        }
    }
}

nonisolated extension RestManager.Interceptor {
    /// Sends the request as it is.
    public func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest { request }
    /// Delivers the results as they are.
    public func decide(
        after results: RestManager.Results, for request: URLRequest, attempt: Int
    ) async -> RestManager.AttemptDecision {
        .deliver
    }
}
