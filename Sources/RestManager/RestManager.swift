//
//  RestManager.swift
//
//  A single-file, dependency-free REST client on URLSession that behaves the same on Linux and
//  on Apple platforms. Copy this file into any app or script: it needs only Foundation
//  (FoundationNetworking on Linux) and Dispatch.
//
//  Outline:
//    - Public API: request state, the tutorial's calls, async calls, utilities
//    - Nested types: HttpMethod, RestEntity, Response, Results, CustomError, RequestHandle, MultipartBody
//    - Request building and encoding
//    - Transport: session, exchange (one request with its redirects and deadline), delegate
//    - Private helpers
//

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Dispatch

/// A small REST client: set headers, query and body parameters, then call `makeRequest`.
///
/// ```swift
/// let rest = RestManager()
/// rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
/// rest.urlQueryParameters.add(value: "2", forKey: "page")
/// rest.makeRequest(toURL: URL(string: "https://reqres.in/api/users")!, withHttpMethod: .get) { results in
///     print(results.response?.httpStatusCode ?? 0)
/// }
/// ```
///
/// The properties (`requestHttpHeaders`, `urlQueryParameters`, `httpBodyParameters`, `httpBody`,
/// files) persist between requests, as in the tutorial: each call sends what they hold when it is
/// made (a snapshot), so changing them while requests are in flight is safe. Call
/// `clearParameters()` to start the next request from empty query, body and files.
public final class RestManager: @unchecked Sendable {

    // MARK: - Public API: request state

    /// Headers sent with every `makeRequest`. Lookups ignore the case of the name.
    public var requestHttpHeaders: RestEntity {
        get { state.withLock { $0.headers } }
        set { state.withLock { $0.headers = newValue.ignoringKeyCase() } }
    }

    /// Query parameters appended (percent-encoded, in insertion order) to the request URL.
    public var urlQueryParameters: RestEntity {
        get { state.withLock { $0.query } }
        set { state.withLock { $0.query = newValue } }
    }

    /// Body fields, encoded according to the `Content-Type` header: JSON (the default),
    /// `application/x-www-form-urlencoded`, or `multipart/form-data` (also used when files were added).
    public var httpBodyParameters: RestEntity {
        get { state.withLock { $0.bodyParameters } }
        set { state.withLock { $0.bodyParameters = newValue } }
    }

    /// A raw body, sent as is when `httpBodyParameters` is empty. Never sent with GET or HEAD.
    public var httpBody: Data? {
        get { state.withLock { $0.body } }
        set { state.withLock { $0.body = newValue } }
    }

    /// The longest a whole request may take, redirects included, in seconds (default 60).
    /// Enforced by the library itself, so 0.5 means half a second on Linux too.
    public var timeoutInterval: TimeInterval {
        get { state.withLock { $0.timeout } }
        set { state.withLock { $0.timeout = newValue } }
    }

    /// The queue completion handlers are called on (default: a global `.userInitiated` queue).
    ///
    /// With the default, completions run on RestManager's own background threads (`.userInitiated`,
    /// never the main thread), usually the one that received the answer, saving a thread hand-off.
    /// A completion may block there: it holds up no other request.
    public var callbackQueue: DispatchQueue {
        get { state.withLock { $0.callbackQueue } }
        set { state.withLock { $0.callbackQueue = newValue } }
    }

    /// Whether redirects are followed (default `true`). When `false`, the 3xx answer is delivered.
    public var followsRedirects: Bool {
        get { state.withLock { $0.followsRedirects } }
        set { state.withLock { $0.followsRedirects = newValue } }
    }

    /// How many redirects one request may follow before it fails with `.tooManyRedirects` (default 10).
    public var maximumRedirects: Int {
        get { state.withLock { $0.maximumRedirects } }
        set { state.withLock { $0.maximumRedirects = newValue } }
    }

    /// Opt-in: identical concurrent GET/HEAD requests (same URL and headers) share one network
    /// call; every caller still gets its own completion. Deduplicated callers share the first
    /// caller's timeout. Never applies to other methods.
    public var deduplicatesRequests: Bool {
        get { state.withLock { $0.deduplicates } }
        set { state.withLock { $0.deduplicates = newValue } }
    }

    /// Creates a manager with its own long-lived URLSession (no cookies, no cache, nothing on disk).
    ///
    /// - Parameter maximumConnectionsPerHost: how many connections to one host may be open at once.
    public init(maximumConnectionsPerHost: Int = 6) {
        transport = Transport(maximumConnectionsPerHost: maximumConnectionsPerHost)
    }

    /// Empties `urlQueryParameters`, `httpBodyParameters`, `httpBody` and the added files.
    /// Headers are kept: they usually describe the API rather than one request.
    public func clearParameters() {
        state.withLock { state in
            state.query = RestEntity()
            state.bodyParameters = RestEntity()
            state.body = nil
            state.files = []
        }
    }

    /// Adds a file to send as `multipart/form-data`, together with `httpBodyParameters` as text fields.
    ///
    /// ```swift
    /// rest.addFile(jpegData, fieldName: "avatar", fileName: "me.jpg", mimeType: "image/jpeg")
    /// rest.makeRequest(toURL: uploadURL, withHttpMethod: .post) { results in … }
    /// ```
    public func addFile(_ data: Data, fieldName: String, fileName: String, mimeType: String) {
        let part = MultipartBody.Part(name: fieldName, fileName: fileName, contentType: mimeType, data: data)
        state.withLock { $0.files.append(part) }
    }

    /// Sets `httpBody` to `value` encoded as JSON, and `Content-Type` to `application/json`
    /// unless a JSON type is already set.
    ///
    /// - Throws: `CustomError.bodyEncodingFailed` when the value cannot be encoded.
    public func setHttpBody<Value: Encodable>(_ value: Value, encoder: JSONEncoder = JSONEncoder()) throws {
        let data: Data
        do { data = try encoder.encode(value) } catch {
            throw CustomError.bodyEncodingFailed(String(describing: error))
        }
        state.withLock { state in
            state.body = data
            if !ContentKind(state.headers.value(forKey: "Content-Type")).isJSON {
                state.headers.add(value: "application/json", forKey: "Content-Type")
            }
        }
    }

    // MARK: - Public API: the tutorial's calls

    /// Sends a request built from the manager's headers, query and body, and calls `completion`
    /// exactly once with the outcome, on `callbackQueue`.
    ///
    /// - Parameters:
    ///   - url: an absolute `http` or `https` URL; a query already in it is kept.
    ///   - httpMethod: the method; sent upper-case.
    ///   - timeoutInterval: overrides the manager's `timeoutInterval` for this call.
    ///   - completion: receives data, response and error; an HTTP error status is not an `error`.
    /// - Returns: a handle whose `cancel()` ends the request with `CustomError.cancelled`.
    @discardableResult
    public func makeRequest(toURL url: URL,
                            withHttpMethod httpMethod: HttpMethod,
                            timeoutInterval: TimeInterval? = nil,
                            completion: @escaping @Sendable (_ result: Results) -> Void) -> RequestHandle {
        var snapshot = state.withLock { $0 }
        if let timeoutInterval { snapshot.timeout = timeoutInterval }
        return perform(url: url, method: httpMethod, snapshot: snapshot, completion: completion)
    }

    /// Downloads the bytes at `url` (a plain GET: the manager's headers and parameters are not
    /// sent) and calls `completion` with them, or with nil on any error or non-2xx status.
    @discardableResult
    public func getData(fromURL url: URL,
                        completion: @escaping @Sendable (_ data: Data?) -> Void) -> RequestHandle {
        loadData(fromURL: url) { result in completion(try? result.get()) }
    }

    /// Like `getData(fromURL:completion:)`, but says why it failed: a transport error, or
    /// `CustomError.unacceptableStatusCode` for a non-2xx answer.
    @discardableResult
    public func loadData(fromURL url: URL,
                         completion: @escaping @Sendable (Result<Data, CustomError>) -> Void) -> RequestHandle {
        let snapshot = state.withLock { $0.forPlainDownload() }
        return perform(url: url, method: .get, snapshot: snapshot) { results in
            completion(Result { try results.validatedData() }.mapError(CustomError.wrap))
        }
    }

    // MARK: - Public API: async calls

    /// The `await` form of `makeRequest`: never throws; the outcome is in `Results`.
    /// Cancelling the surrounding `Task` cancels the request (`Results.error` is `.cancelled`).
    public func makeRequest(toURL url: URL,
                            withHttpMethod httpMethod: HttpMethod,
                            timeoutInterval: TimeInterval? = nil) async -> Results {
        await withCancellableHandle { completion in
            self.makeRequest(toURL: url, withHttpMethod: httpMethod, timeoutInterval: timeoutInterval, completion: completion)
        }
    }

    /// The `await` form of `getData`: the bytes, or nil on any error or non-2xx status.
    public func getData(fromURL url: URL) async -> Data? {
        try? await data(fromURL: url)
    }

    /// Downloads the bytes at `url` with a plain GET.
    ///
    /// - Throws: `CustomError` (`.unacceptableStatusCode` for non-2xx, `.cancelled`, `.timedOut`, …).
    public func data(fromURL url: URL) async throws -> Data {
        try await withCancellableHandle { completion in
            self.loadData(fromURL: url, completion: completion)
        }.get()
    }

    /// Sends a request, checks for a 2xx status and decodes the body.
    ///
    /// ```swift
    /// let decoder = JSONDecoder()
    /// decoder.keyDecodingStrategy = .convertFromSnakeCase
    /// let page = try await rest.request(UserPage.self, fromURL: usersURL, decoder: decoder)
    /// ```
    /// - Throws: `CustomError.unacceptableStatusCode(code, body)`, `.emptyBody`, `.decodingFailed`,
    ///   or the transport error.
    public func request<Value: Decodable>(_ type: Value.Type = Value.self,
                                          fromURL url: URL,
                                          withHttpMethod httpMethod: HttpMethod = .get,
                                          decoder: JSONDecoder = JSONDecoder(),
                                          timeoutInterval: TimeInterval? = nil) async throws -> Value {
        let results = await makeRequest(toURL: url, withHttpMethod: httpMethod, timeoutInterval: timeoutInterval)
        try results.validate()
        return try results.decode(type, using: decoder)
    }

    // MARK: - Public API: utilities

    /// The `curl` command line equivalent to the request `makeRequest` would send now.
    /// `Authorization`, `Cookie` and API-key header values are replaced by `<redacted>`
    /// unless `revealingSecrets` is true.
    ///
    /// - Throws: the same `CustomError` that `makeRequest` would report for invalid input.
    public func curlCommand(forURL url: URL, withHttpMethod httpMethod: HttpMethod,
                            revealingSecrets: Bool = false) throws -> String {
        RequestBuilder.curlCommand(for: try makeURLRequest(toURL: url, withHttpMethod: httpMethod),
                                   revealingSecrets: revealingSecrets)
    }

    /// The `URLRequest` that `makeRequest` would send now (URL with query, headers, body), without sending it.
    ///
    /// - Throws: the same `CustomError` that `makeRequest` would report for invalid input.
    public func makeURLRequest(toURL url: URL, withHttpMethod httpMethod: HttpMethod) throws -> URLRequest {
        try RequestBuilder.build(url: url, method: httpMethod, snapshot: state.withLock { $0 })
    }

    // MARK: - Nested types: HttpMethod

    /// HTTP methods. The raw values are the tutorial's; `name` is what goes on the wire.
    public enum HttpMethod: String, Sendable, CaseIterable {
        case get
        case post
        case put
        case patch
        case delete
        case head
        case options

        /// The method as sent: upper-case (Foundation on Linux sends others verbatim).
        public var name: String { rawValue.uppercased() }
    }

    // MARK: - Nested types: RestEntity

    /// An ordered collection of string keys and values: headers, query or body parameters.
    ///
    /// Adding an existing key replaces its value in place. Entities used for headers ignore the
    /// case of keys (`value(forKey: "content-type")` finds `Content-Type`).
    public struct RestEntity: Sendable, Equatable {
        private var entries: [Entry] = []
        private var positions: [String: Int] = [:]
        private var keysIgnoreCase = false

        private struct Entry: Sendable, Equatable {
            var key: String
            var value: String
        }

        /// An empty entity whose keys are compared exactly.
        public init() {}

        /// An empty entity; `ignoringKeyCase` makes lookups case-insensitive (for headers).
        public init(ignoringKeyCase: Bool) { keysIgnoreCase = ignoringKeyCase }

        /// Sets `value` for `key`, replacing (in place) a value already stored for it.
        public mutating func add(value: String, forKey key: String) {
            let normalized = normalize(key)
            if let position = positions[normalized] {
                entries[position].value = value
            } else {
                positions[normalized] = entries.count
                entries.append(Entry(key: key, value: value))
            }
        }

        /// The value stored for `key`, or nil.
        public func value(forKey key: String) -> String? {
            positions[normalize(key)].map { entries[$0].value }
        }

        /// Removes the value stored for `key`, if any.
        public mutating func removeValue(forKey key: String) {
            guard let position = positions[normalize(key)] else { return }
            entries.remove(at: position)
            reindex()
        }

        /// Removes every value.
        public mutating func removeAll() {
            entries = []
            positions = [:]
        }

        /// All keys and values as a dictionary (unordered; see `orderedPairs` for insertion order).
        public func allValues() -> [String: String] {
            Dictionary(entries.map { ($0.key, $0.value) }, uniquingKeysWith: { _, last in last })
        }

        /// All keys and values in insertion order.
        public var orderedPairs: [(key: String, value: String)] { entries.map { ($0.key, $0.value) } }

        /// How many keys are stored.
        public func totalItems() -> Int { entries.count }

        /// The pairs as a URL query: RFC 3986 unreserved characters kept, everything else `%XX`.
        ///
        /// `a+b c` becomes `a%2Bb%20c`, so `+` never reaches a server as a space.
        public var percentEncodedQuery: String {
            joined(encoding: Encoding.queryAllowed, spaceAsPlus: false)
        }

        /// The pairs as an `application/x-www-form-urlencoded` body (WHATWG): `A–Z a–z 0–9 * - . _`
        /// kept, space as `+`, everything else `%XX`.
        public var formURLEncoded: String {
            joined(encoding: Encoding.formAllowed, spaceAsPlus: true)
        }

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

        /// Same pairs in the same order, and the same key comparison.
        public static func == (lhs: RestEntity, rhs: RestEntity) -> Bool {
            lhs.entries == rhs.entries && lhs.keysIgnoreCase == rhs.keysIgnoreCase
        }

        func ignoringKeyCase() -> RestEntity {
            guard !keysIgnoreCase else { return self }
            var copy = RestEntity(ignoringKeyCase: true)
            for entry in entries { copy.add(value: entry.value, forKey: entry.key) }
            return copy
        }

        private func normalize(_ key: String) -> String { keysIgnoreCase ? key.lowercased() : key }

        private mutating func reindex() {
            positions = [:]
            for (index, entry) in entries.enumerated() { positions[normalize(entry.key)] = index }
        }

        private func joined(encoding allowed: [Bool], spaceAsPlus: Bool) -> String {
            entries.map {
                Encoding.percentEncode($0.key, allowed: allowed, spaceAsPlus: spaceAsPlus) + "=" +
                    Encoding.percentEncode($0.value, allowed: allowed, spaceAsPlus: spaceAsPlus)
            }.joined(separator: "&")
        }
    }

    // MARK: - Nested types: Response and Results

    /// The HTTP part of an answer: status code and headers (readable under any spelling).
    public struct Response: Sendable {
        /// The response as Foundation delivered it.
        public var response: URLResponse?
        /// The HTTP status code, or 0 when there was no HTTP response.
        public var httpStatusCode: Int = 0
        /// Response headers; `headers.value(forKey: "etag")` finds `ETag` on every platform.
        ///
        /// Read from the response the first time they are asked for (copies share that work):
        /// reading every header is a measurable part of a small request, and most callers never look.
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
                for (name, value) in response?.allHeaderFields ?? [:] {
                    // Values are strings; interpolating them would go through `print` machinery.
                    if let name = name as? String { headers.add(value: value as? String ?? "\(value)", forKey: name) }
                }
                built = headers
                return headers
            }
        }
    }

    /// The outcome of a request: the body, the response, or the error that prevented one.
    public struct Results: Sendable {
        /// The body; empty (not nil) for an answer without one.
        public var data: Data?
        /// Status and headers, when an HTTP answer arrived.
        public var response: Response?
        /// Why there is no answer: always a `CustomError`. An HTTP error status is not an error here.
        public var error: Error?

        /// Creates results from an answer.
        public init(withData data: Data?, response: Response?, error: Error?) {
            self.data = data
            self.response = response
            self.error = error
        }

        /// Creates results for a request that produced no answer.
        public init(withError error: Error) {
            self.error = error
        }

        /// The HTTP status code, if an answer arrived.
        public var statusCode: Int? { response.map(\.httpStatusCode) }

        /// True when an answer arrived with a 2xx status.
        public var isSuccess: Bool { error == nil && (200..<300).contains(statusCode ?? 0) }

        /// Throws the request's error, or `CustomError.unacceptableStatusCode` for a non-2xx answer.
        public func validate() throws {
            if let error { throw error }
            guard let statusCode, (200..<300).contains(statusCode) else {
                throw CustomError.unacceptableStatusCode(statusCode ?? 0, body: data ?? Data())
            }
        }

        /// Decodes the body as `type` (whatever the status: error bodies decode too).
        ///
        /// - Throws: the request's error, `CustomError.emptyBody` for an empty body, or
        ///   `CustomError.decodingFailed` with the decoder's error.
        public func decode<Value: Decodable>(_ type: Value.Type = Value.self,
                                             using decoder: JSONDecoder = JSONDecoder()) throws -> Value {
            if let error { throw error }
            guard let data, !data.isEmpty else { throw CustomError.emptyBody(statusCode: statusCode ?? 0) }
            do { return try decoder.decode(type, from: data) } catch {
                throw CustomError.decodingFailed(error)
            }
        }

        func validatedData() throws -> Data {
            try validate()
            return data ?? Data()
        }
    }

    // MARK: - Nested types: CustomError

    /// Everything that can go wrong, each case saying what and where.
    public enum CustomError: Error, LocalizedError, Sendable {
        /// The tutorial's catch-all; kept for source compatibility.
        case failedToCreateRequest
        /// The URL is not an absolute http(s) URL, or contains control characters.
        case invalidURL(String, reason: String)
        /// A request header name or value is not allowed (CR/LF, non-token name); the value is not repeated.
        case invalidHeader(name: String, reason: String)
        /// The timeout is not a positive number of seconds.
        case invalidTimeout(TimeInterval)
        /// The body could not be encoded.
        case bodyEncodingFailed(String)
        /// No complete answer within the timeout.
        case timedOut(URL, after: TimeInterval)
        /// More redirects than allowed, or a redirect loop.
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
        case decodingFailed(Error)

        /// A sentence saying what went wrong.
        public var errorDescription: String? {
            switch self {
            case .failedToCreateRequest:
                return "Unable to create the URLRequest object."
            case let .invalidURL(url, reason):
                return "Invalid URL '\(url)': \(reason)."
            case let .invalidHeader(name, reason):
                return "Invalid request header '\(Encoding.printable(name))': \(reason)."
            case let .invalidTimeout(seconds):
                return "Invalid timeout \(seconds): it must be a positive number of seconds."
            case let .bodyEncodingFailed(reason):
                return "The request body could not be encoded: \(reason)."
            case let .timedOut(url, seconds):
                return "The request to \(url.absoluteString) timed out after \(seconds) s."
            case let .tooManyRedirects(url, limit):
                return "Too many redirects (more than \(limit)) starting from \(url.absoluteString)."
            case .cancelled:
                return "The request was cancelled."
            case let .transport(error):
                return "Network error \(error.code.rawValue): \(error.localizedDescription)"
            case .invalidResponse:
                return "The server's answer was not an HTTP response."
            case let .unacceptableStatusCode(code, body):
                return "The server answered with HTTP status \(code) (\(body.count) bytes of body)."
            case let .emptyBody(code):
                return "The answer (HTTP \(code)) has no body to decode."
            case let .decodingFailed(error):
                return "The body could not be decoded: \(error)."
            }
        }

        /// True for `.cancelled`.
        public var isCancellation: Bool {
            if case .cancelled = self { return true }
            return false
        }

        static func wrap(_ error: Error) -> CustomError {
            if let error = error as? CustomError { return error }
            if let error = error as? URLError { return .transport(error) }
            return .transport(URLError(.unknown, userInfo: [NSUnderlyingErrorKey: error]))
        }
    }

    // MARK: - Nested types: RequestHandle

    /// A request in flight; `cancel()` ends it at once with `CustomError.cancelled`.
    /// Its completion is called exactly once, whatever happens first.
    public final class RequestHandle: @unchecked Sendable {
        private let lock = Lock()
        private var completion: (@Sendable (Results) -> Void)?
        private let queue: DispatchQueue
        private weak var exchange: Exchange?
        private var wasCancelled = false

        init(queue: DispatchQueue, completion: @escaping @Sendable (Results) -> Void) {
            self.queue = queue
            self.completion = completion
        }

        /// Whether `cancel()` ended this request.
        public var isCancelled: Bool { lock.withLock { wasCancelled } }

        /// Cancels the request. Does nothing after completion. Safe from any thread.
        public func cancel() {
            let exchange: Exchange? = lock.withLock {
                guard completion != nil else { return nil }
                wasCancelled = true
                return self.exchange
            }
            guard deliver(Results(withError: CustomError.cancelled)) else { return }
            exchange?.remove(self)
        }

        /// Calls the completion if it has not been called yet; returns whether it did.
        ///
        /// For the default callback queue the completion runs on a RestManager thread: from an
        /// operation of `sessionQueue`, that same thread once the operation is over and the session
        /// queue has moved on without it; otherwise a fresh one. Other queues are dispatched to.
        @discardableResult
        func deliver(_ results: Results, from sessionQueue: SessionQueue? = nil) -> Bool {
            guard let completion = lock.withLock({ () -> (@Sendable (Results) -> Void)? in
                defer { self.completion = nil }
                return self.completion
            }) else { return false }
            guard queue === RestManager.defaultCallbackQueue else {
                queue.async { completion(results) }
                return true
            }
            if sessionQueue?.runAfterCurrentOperation({ completion(results) }) != true {
                RestManager.backgroundThread().async { completion(results) }
            }
            return true
        }

        /// Records the exchange serving this handle; false when the handle already completed.
        func attach(to exchange: Exchange) -> Bool {
            lock.withLock {
                guard completion != nil else { return false }
                self.exchange = exchange
                return true
            }
        }
    }

    // MARK: - Nested types: MultipartBody

    /// A `multipart/form-data` body: text fields and files, with a random boundary and CRLF framing.
    ///
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
        public init(boundary: String = "RestManager-" + UUID().uuidString) {
            self.boundary = boundary
        }

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
            for part in parts {
                var head = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Encoding.quotedParameter(part.name))\""
                if let fileName = part.fileName { head += "; filename=\"\(Encoding.quotedParameter(fileName))\"" }
                head += "\r\n"
                if let contentType = part.contentType { head += "Content-Type: \(Encoding.singleLine(contentType))\r\n" }
                head += "\r\n"
                body.append(Data(head.utf8))
                body.append(part.data)
                body.append(Data("\r\n".utf8))
            }
            body.append(Data("--\(boundary)--\r\n".utf8))
            return body
        }
    }

    // MARK: - Request building and encoding

    /// What one call sends: the manager's state when the call was made.
    struct Snapshot: Sendable {
        var headers = RestEntity(ignoringKeyCase: true) { didSet { content = Self.newContent() } }
        var query = RestEntity() { didSet { content = Self.newContent() } }
        var bodyParameters = RestEntity() { didSet { content = Self.newContent() } }
        var body: Data? { didSet { content = Self.newContent() } }
        var files: [MultipartBody.Part] = [] { didSet { content = Self.newContent() } }
        /// Names the five values above: any change gives a number never used before, so equal
        /// numbers mean equal values (0: all empty). Lets `LastRequest` recognise a repeated call.
        private(set) var content: UInt64 = 0
        var timeout: TimeInterval = 60
        var callbackQueue = RestManager.defaultCallbackQueue
        var followsRedirects = true
        var maximumRedirects = 10
        var deduplicates = false

        /// The same settings without headers, parameters or body: what `getData` sends.
        func forPlainDownload() -> Snapshot {
            var plain = Snapshot()
            plain.timeout = timeout
            plain.callbackQueue = callbackQueue
            plain.followsRedirects = followsRedirects
            plain.maximumRedirects = maximumRedirects
            plain.deduplicates = deduplicates
            return plain
        }

        private static let contentCounter = Locked<UInt64>(0)

        private static func newContent() -> UInt64 {
            contentCounter.withLock { counter in
                counter += 1
                return counter
            }
        }
    }

    /// The last request a manager built and what it was built from. The same call again (same
    /// headers, parameters and body, URL, method and timeout: polling, refreshing, retrying)
    /// sends it again instead of validating and encoding everything anew; any change builds afresh.
    final class LastRequest: Sendable {
        private struct Entry {
            let content: UInt64
            let url: URL
            let method: HttpMethod
            let timeout: TimeInterval
            let request: URLRequest
        }

        /// Larger bodies are not kept: a finished upload must not pin megabytes.
        static let largestKeptBody = 64 * 1024
        private let entry = Locked<Entry?>(nil)

        func request(url: URL, method: HttpMethod, snapshot: Snapshot) throws -> URLRequest {
            let kept = entry.withLock { entry -> URLRequest? in
                guard let entry, entry.content == snapshot.content, entry.method == method,
                      entry.timeout == snapshot.timeout, entry.url == url else { return nil }
                return entry.request
            }
            if let kept { return kept }
            let request = try RequestBuilder.build(url: url, method: method, snapshot: snapshot)
            if request.httpBody?.count ?? 0 <= Self.largestKeptBody {
                let built = Entry(content: snapshot.content, url: url, method: method, timeout: snapshot.timeout, request: request)
                entry.withLock { $0 = built }
            }
            return request
        }
    }

    /// The body format named by a `Content-Type` value.
    struct ContentKind {
        let isJSON: Bool
        let isForm: Bool
        let isMultipart: Bool

        init(_ contentType: String?) {
            // Trimmed in place: Foundation's `trimmingCharacters` is a measurable part of a small POST.
            var media = (contentType ?? "")[...]
            if let semicolon = media.firstIndex(of: ";") { media = media[..<semicolon] }
            while let first = media.first, first == " " || first == "\t" { media = media.dropFirst() }
            while let last = media.last, last == " " || last == "\t" { media = media.dropLast() }
            isJSON = Self.equalIgnoringCase(media, "application/json")
                || Self.equalIgnoringCase(media.suffix(5), "+json")
            isForm = Self.equalIgnoringCase(media, "application/x-www-form-urlencoded")
            isMultipart = Self.equalIgnoringCase(media, "multipart/form-data")
        }

        /// ASCII case-insensitive comparison with a lower-case `expected`, without building a string.
        private static func equalIgnoringCase(_ text: Substring, _ expected: String) -> Bool {
            text.utf8.elementsEqual(expected.utf8) { byte, lower in
                (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == lower
            }
        }
    }

    enum RequestBuilder {
        static let userAgent = "RestManager/1.0"

        static func build(url: URL, method: HttpMethod, snapshot: Snapshot) throws -> URLRequest {
            guard snapshot.timeout > 0, snapshot.timeout.isFinite else {
                throw CustomError.invalidTimeout(snapshot.timeout)
            }
            var request = URLRequest(url: try urlWithQuery(url, query: snapshot.query))
            if method != .get { request.httpMethod = method.name }
            // Foundation on Linux truncates its own timer to whole seconds (0.5 fires at once) and
            // traps on values beyond Int milliseconds; the library enforces the real deadline, so
            // Foundation's only has to come later (capped: 10^8 s is "never" for both).
            request.timeoutInterval = min(snapshot.timeout, 1e8).rounded(.up) + 1
            var headers = snapshot.headers
            for (name, value) in headers.orderedPairs { try validateHeader(name: name, value: value) }
            if method != .get && method != .head, let body = try body(for: snapshot, headers: &headers) {
                request.httpBody = body
            }
            if headers.value(forKey: "Accept") == nil { headers.add(value: "*/*", forKey: "Accept") }
            if headers.value(forKey: "User-Agent") == nil { headers.add(value: userAgent, forKey: "User-Agent") }
            // All at once: each `setValue(_:forHTTPHeaderField:)` searches the fields again on Linux.
            request.allHTTPHeaderFields = headers.allValues()
            return request
        }

        /// The body for the request, chosen by `Content-Type` (and setting it when missing).
        static func body(for snapshot: Snapshot, headers: inout RestEntity) throws -> Data? {
            let kind = ContentKind(headers.value(forKey: "Content-Type"))
            if !snapshot.files.isEmpty || kind.isMultipart {
                var multipart = MultipartBody()
                for (name, value) in snapshot.bodyParameters.orderedPairs { multipart.addField(name: name, value: value) }
                multipart.parts += snapshot.files
                headers.add(value: multipart.contentType, forKey: "Content-Type")
                return multipart.encoded()
            }
            if snapshot.bodyParameters.totalItems() > 0 {
                if kind.isForm { return Data(snapshot.bodyParameters.formURLEncoded.utf8) }
                if !kind.isJSON {
                    guard headers.value(forKey: "Content-Type") == nil else {
                        throw CustomError.bodyEncodingFailed(
                            "httpBodyParameters cannot be sent as '\(headers.value(forKey: "Content-Type") ?? "")'; use httpBody")
                    }
                    headers.add(value: "application/json", forKey: "Content-Type")
                }
                return snapshot.bodyParameters.jsonObject
            }
            if snapshot.body != nil, headers.value(forKey: "Content-Type") == nil {
                headers.add(value: "application/octet-stream", forKey: "Content-Type")
            }
            return snapshot.body
        }

        static func urlWithQuery(_ url: URL, query: RestEntity) throws -> URL {
            let text = url.absoluteString
            if let control = text.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw CustomError.invalidURL(Encoding.printable(text), reason: "it contains the control character U+\(String(control.value, radix: 16, uppercase: true))")
            }
            guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw CustomError.invalidURL(text, reason: "only absolute http and https URLs are supported")
            }
            if query.totalItems() == 0, url.fragment == nil, let host = url.host, !host.isEmpty {
                return url.absoluteURL // nothing to add: skip rebuilding (the common, hot case)
            }
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
                  let host = components.host, !host.isEmpty else {
                throw CustomError.invalidURL(text, reason: "it has no host")
            }
            components.fragment = nil
            if query.totalItems() > 0 {
                // Only our own encoder's output is assigned: an invalid string here would trap.
                let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
                components.percentEncodedQuery = existing + query.percentEncodedQuery
            }
            guard let result = components.url else { throw CustomError.invalidURL(text, reason: "it cannot be rebuilt") }
            return result
        }

        static func validateHeader(name: String, value: String) throws {
            guard !name.isEmpty, name.utf8.allSatisfy({ Encoding.tokenCharacters[Int($0)] }) else {
                throw CustomError.invalidHeader(name: name, reason: "a header name may contain only letters, digits and !#$%&'*+-.^_`|~")
            }
            if value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                throw CustomError.invalidHeader(name: name, reason: "the value contains CR, LF or NUL")
            }
        }

        /// Header names whose values are secrets: never shown, never sent to another host.
        static func isSensitive(headerName: String) -> Bool {
            let name = headerName.lowercased()
            return ["authorization", "proxy-authorization", "cookie", "set-cookie"].contains(name)
                || name.contains("api-key") || name.contains("apikey") || name.contains("api_key")
                || name.contains("token") || name.contains("secret")
        }

        static func curlCommand(for request: URLRequest, revealingSecrets: Bool) -> String {
            var parts = ["curl"]
            let method = request.httpMethod ?? "GET"
            if method == "HEAD" { parts.append("--head") } else if method != "GET" { parts.append("-X \(method)") }
            parts.append(Encoding.shellQuoted(request.url?.absoluteString ?? ""))
            let headers = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key.lowercased() < $1.key.lowercased() }
            for (name, value) in headers {
                let shown = !revealingSecrets && isSensitive(headerName: name) ? "<redacted>" : value
                parts.append("-H " + Encoding.shellQuoted("\(name): \(shown)"))
            }
            if let body = request.httpBody, !body.isEmpty {
                if let text = String(data: body, encoding: .utf8), !text.contains("\0") {
                    parts.append("--data-binary " + Encoding.shellQuoted(text))
                } else {
                    parts.append("--data-binary @body.bin  # \(body.count) bytes of binary data")
                }
            }
            return parts.joined(separator: " ")
        }
    }

    /// Percent-encoding, JSON strings and quoting, from explicit ASCII sets
    /// (`CharacterSet.alphanumerics` is Unicode-aware and `urlQueryAllowed` keeps `+`).
    enum Encoding {
        static let queryAllowed = asciiTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        static let formAllowed = asciiTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-._")
        static let tokenCharacters = asciiTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~")
        private static let hexDigits = Array("0123456789ABCDEF".utf8)
        private static let lowerHexDigits = Array("0123456789abcdef".utf8)

        static func asciiTable(_ characters: String) -> [Bool] {
            var table = [Bool](repeating: false, count: 256)
            for byte in characters.utf8 { table[Int(byte)] = true }
            return table
        }

        static func percentEncode(_ text: String, allowed: [Bool], spaceAsPlus: Bool) -> String {
            var output = [UInt8]()
            output.reserveCapacity(text.utf8.count)
            for byte in text.utf8 {
                if allowed[Int(byte)] {
                    output.append(byte)
                } else if spaceAsPlus && byte == 0x20 {
                    output.append(UInt8(ascii: "+"))
                } else {
                    output += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
                }
            }
            return String(decoding: output, as: UTF8.self)
        }

        /// Appends `text` as a JSON string literal, as UTF-8 (bytes from U+0080 up pass through).
        static func appendJSONString(_ text: String, to bytes: inout [UInt8]) {
            bytes.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
                case UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
                case UInt8(ascii: "\n"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case UInt8(ascii: "\r"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case UInt8(ascii: "\t"): bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                case ..<0x20: bytes += Array("\\u00".utf8) + [lowerHexDigits[Int(byte >> 4)], lowerHexDigits[Int(byte & 0x0F)]]
                default: bytes.append(byte)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }

        /// A multipart parameter value: quotes and line breaks escaped as browsers do.
        static func quotedParameter(_ text: String) -> String {
            text.replacingOccurrences(of: "\"", with: "%22")
                .replacingOccurrences(of: "\r", with: "%0D")
                .replacingOccurrences(of: "\n", with: "%0A")
        }

        static func singleLine(_ text: String) -> String {
            text.replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ")
        }

        static func shellQuoted(_ text: String) -> String {
            "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }

        /// Text for an error message, control characters made visible.
        static func printable(_ text: String) -> String {
            String(text.unicodeScalars.map { scalar -> String in
                scalar.value < 0x20 || scalar.value == 0x7F
                    ? "\\u{\(String(scalar.value, radix: 16))}" : String(scalar)
            }.joined())
        }
    }

    // MARK: - Transport

    /// The default `callbackQueue`, one instance so that it can be recognised: completions for it
    /// run on `backgroundThread()`s instead.
    static let defaultCallbackQueue = DispatchQueue.global(qos: .userInitiated)

    /// A private serial queue, i.e. a thread of its own whenever it has work: where the library's
    /// own work runs. A global queue adds only about one thread a second once all of its threads
    /// are blocked (in completions waiting for other requests, say), so work queued there can
    /// starve for seconds (Linux).
    static func backgroundThread() -> DispatchQueue {
        DispatchQueue(label: "RestManager.background", qos: .userInitiated)
    }

    private let state = Locked(Snapshot())
    private let transport: Transport
    private let inFlight = Locked([String: Exchange]())

    /// The one core request path: every public call ends here.
    private func perform(url: URL, method: HttpMethod, snapshot: Snapshot,
                         completion: @escaping @Sendable (Results) -> Void) -> RequestHandle {
        let handle = RequestHandle(queue: snapshot.callbackQueue, completion: completion)
        // Captures the transport and the in-flight table, not the manager: releasing the manager
        // never waits for its requests, and they still finish.
        let prepare = { @Sendable [transport, inFlight] in
            let request: URLRequest
            do {
                request = try transport.lastRequest.request(url: url, method: method, snapshot: snapshot)
            } catch {
                handle.deliver(Results(withError: CustomError.wrap(error)))
                return
            }
            if snapshot.deduplicates, method == .get || method == .head {
                Self.startShared(request, snapshot: snapshot, transport: transport, inFlight: inFlight, handle: handle)
            } else {
                let exchange = Exchange(request: request, snapshot: snapshot, transport: transport, onFinish: nil)
                if exchange.add(handle) { exchange.start() }
            }
        }
        // Never on the main thread, as in the tutorial (encoding a large body takes time). A caller
        // already on a background thread (typically a completion handler starting the next
        // request) prepares inline: one thread hand-off less per request.
        if Thread.isMainThread {
            RestManager.backgroundThread().async(execute: prepare)
        } else {
            prepare()
        }
        return handle
    }

    /// Joins an identical exchange in flight, or starts one that later callers can join.
    private static func startShared(_ request: URLRequest, snapshot: Snapshot, transport: Transport,
                                    inFlight: Locked<[String: Exchange]>, handle: RequestHandle) {
        let key = deduplicationKey(request)
        let newExchange = inFlight.withLock { table -> Exchange? in
            if let existing = table[key], existing.add(handle) { return nil }
            let exchange = Exchange(request: request, snapshot: snapshot, transport: transport) { finished in
                inFlight.withLock { table in
                    if table[key] === finished { table[key] = nil }
                }
            }
            guard exchange.add(handle) else { return nil }
            table[key] = exchange
            return exchange
        }
        newExchange?.start()
    }

    private static func deduplicationKey(_ request: URLRequest) -> String {
        let headers = (request.allHTTPHeaderFields ?? [:])
            .map { "\($0.key.lowercased()):\($0.value)" }.sorted().joined(separator: "\n")
        return "\(request.httpMethod ?? "GET") \(request.url?.absoluteString ?? "")\n\(headers)"
    }

    /// Owns the manager's one URLSession; in-flight exchanges keep it alive after the manager is gone.
    final class Transport: Sendable {
        let session: URLSession
        let deadlines = Deadlines()
        let lastRequest = LastRequest()
        /// The session's delegate queue, whose thread may run a completion after its operation (Linux).
        let sessionQueue: SessionQueue?

        init(maximumConnectionsPerHost: Int) {
            let configuration = URLSessionConfiguration.ephemeral
            // No cache (on Linux a cache plus cancellation can crash), no cookies, no stored
            // credentials: nothing written to disk, nothing sent that the caller did not set.
            configuration.urlCache = nil
            configuration.httpCookieStorage = nil
            configuration.httpShouldSetCookies = false
            // Also skips FoundationNetworking's per-header-line cookie parsing on Linux (~8% of a
            // small request's CPU), which runs even without a cookie store.
            configuration.httpCookieAcceptPolicy = .never
            configuration.urlCredentialStorage = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            configuration.httpMaximumConnectionsPerHost = max(1, maximumConnectionsPerHost)
            // The delegate queue must be serial: FoundationNetworking completes a task on it with a
            // check-then-act (`state != .completed`, call, mark completed) that is only atomic there;
            // on a concurrent queue a cancel racing the answer completes a task twice and traps in
            // TaskRegistry.remove (seen under ASan). A completion that blocks must not hold it either.
            #if canImport(FoundationNetworking)
            sessionQueue = SessionQueue()
            session = URLSession(configuration: configuration, delegate: SessionDelegate(), delegateQueue: sessionQueue)
            #else
            sessionQueue = nil
            session = URLSession(configuration: configuration, delegate: SessionDelegate(), delegateQueue: nil)
            #endif
        }

        deinit {
            deadlines.stop()
            session.finishTasksAndInvalidate()
        }
    }

    #if canImport(FoundationNetworking)
    /// A serial delegate queue whose operations can leave work to run once they have returned, on
    /// their own thread, while the queue goes on without that thread.
    ///
    /// URLSession calls completion handlers here, one at a time. Running the caller's completion on
    /// this thread saves a hand-off per request (raw URLSession's speed), but a completion that
    /// blocks must not hold every later callback of the session. So the exchange's handler leaves
    /// the completion to `runAfterCurrentOperation`: once Foundation's operation has returned (its
    /// task fully finished, which also keeps the next request from racing that bookkeeping),
    /// the remaining operations pass to a fresh worker, then the completion runs. Operations still
    /// run one at a time and in order; a completion that blocks holds up nothing.
    final class SessionQueue: OperationQueue, @unchecked Sendable {
        private let lock = Lock()
        /// Operations in order; run ones are set to nil at once (they hold the session and its tasks).
        private var pending: [(@Sendable () -> Void)?] = []
        private var head = 0
        /// The thread running the current operation; nil between operations.
        private var ownerThread: pthread_t?
        private var draining = false
        /// Left by the current operation, run after it on its thread.
        private var afterCurrent: [@Sendable () -> Void] = []

        override init() {
            super.init()
            maxConcurrentOperationCount = 1
        }

        override func addOperation(_ block: @escaping @Sendable () -> Void) {
            let starts = lock.withLock { () -> Bool in
                pending.append(block)
                defer { draining = true }
                return !draining
            }
            if starts { startDraining() }
        }

        override func addOperation(_ operation: Operation) {
            let box = UncheckedSendable(operation)
            addOperation { box.value.start() }
        }

        /// From inside an operation of this queue: runs `work` on this thread once the operation
        /// has returned and the queue has moved on without the thread. False (and `work` is not
        /// kept) when called from any other thread.
        func runAfterCurrentOperation(_ work: @escaping @Sendable () -> Void) -> Bool {
            lock.withLock {
                guard let ownerThread, pthread_equal(ownerThread, pthread_self()) != 0 else { return false }
                afterCurrent.append(work)
                return true
            }
        }

        /// Call with the lock held: whether no operation is waiting (and if so, forgets the run ones).
        private func resetIfEmpty() -> Bool {
            guard head >= pending.count else { return false }
            pending.removeAll(keepingCapacity: true)
            head = 0
            return true
        }

        /// Each drain loop on a thread of its own (see `backgroundThread()`).
        private func startDraining() {
            RestManager.backgroundThread().async { self.drain() }
        }

        private func drain() {
            while true {
                let operation = lock.withLock { () -> (@Sendable () -> Void)? in
                    guard !resetIfEmpty() else {
                        draining = false
                        ownerThread = nil
                        return nil
                    }
                    if head >= 64, head * 2 >= pending.count { // keep the array from growing under steady load
                        pending.removeFirst(head)
                        head = 0
                    }
                    defer { pending[head] = nil; head += 1 }
                    ownerThread = pthread_self()
                    return pending[head]
                }
                guard let operation else { return }
                operation()
                // Work left by the operation: hand the queue on (or leave it idle), then run the work.
                let (leftWork, handsOn) = lock.withLock { () -> ([@Sendable () -> Void], Bool) in
                    guard !afterCurrent.isEmpty else { return ([], false) }
                    defer { afterCurrent = [] }
                    ownerThread = nil
                    draining = !resetIfEmpty()
                    return (afterCurrent, draining)
                }
                guard !leftWork.isEmpty else { continue }
                if handsOn { startDraining() }
                for work in leftWork { work() }
                return
            }
        }
    }
    #else
    /// Apple platforms keep URLSession's own delegate queue; completions are always dispatched.
    final class SessionQueue: Sendable {
        func runAfterCurrentOperation(_ work: @escaping @Sendable () -> Void) -> Bool { false }
    }
    #endif

    /// Every deadline of one transport on one dispatch timer, armed for the earliest. A timer per
    /// request would wake libdispatch's timer thread twice per request (arm and cancel); here a
    /// steady stream of requests with the same timeout never touches the timer at all.
    final class Deadlines: @unchecked Sendable {
        private let lock = Lock()
        // A thread of its own (see `backgroundThread()`): deadlines fire even when a global queue's
        // threads are all blocked.
        private let timer = DispatchSource.makeTimerSource(queue: RestManager.backgroundThread())
        private var waiting: [UInt64: Exchange] = [:]
        /// Binary min-heap of (deadline, ticket); tickets no longer waiting are dropped lazily.
        private var heap: [(deadline: UInt64, ticket: UInt64)] = []
        private var nextTicket: UInt64 = 0
        private var armedFor = UInt64.max

        init() {
            timer.schedule(deadline: .distantFuture)
            // The handler keeps this object alive until `stop()` cancels the timer.
            timer.setEventHandler { self.fire() }
            timer.resume()
        }

        /// Registers `exchange` to be told when `seconds` have passed; returns its ticket.
        func add(_ exchange: Exchange, after seconds: TimeInterval) -> UInt64 {
            let now = DispatchTime.now().uptimeNanoseconds
            let deadline = now + UInt64(min(seconds, 1e9) * 1e9) // a billion seconds is "never"
            return lock.withLock {
                nextTicket += 1
                waiting[nextTicket] = exchange
                push((deadline, nextTicket))
                if deadline < armedFor { arm(deadline) }
                return nextTicket
            }
        }

        /// Forgets a ticket (the exchange finished); unknown tickets are ignored.
        func remove(_ ticket: UInt64) {
            lock.withLock {
                waiting[ticket] = nil
                dropStaleTop()
            }
        }

        func stop() { timer.cancel() }

        private func fire() {
            let now = DispatchTime.now().uptimeNanoseconds
            let due = lock.withLock { () -> [Exchange] in
                var due: [Exchange] = []
                while let top = heap.first, top.deadline <= now {
                    popTop()
                    if let exchange = waiting.removeValue(forKey: top.ticket) { due.append(exchange) }
                }
                dropStaleTop()
                armedFor = .max
                if let next = heap.first { arm(next.deadline) }
                return due
            }
            for exchange in due { exchange.deadlinePassed() }
        }

        /// Call with the lock held.
        private func arm(_ deadline: UInt64) {
            armedFor = deadline
            timer.schedule(deadline: DispatchTime(uptimeNanoseconds: deadline))
        }

        private func dropStaleTop() {
            while let top = heap.first, waiting[top.ticket] == nil { popTop() }
        }

        private func push(_ entry: (deadline: UInt64, ticket: UInt64)) {
            heap.append(entry)
            var child = heap.count - 1
            while child > 0, heap[(child - 1) / 2].deadline > heap[child].deadline {
                heap.swapAt(child, (child - 1) / 2)
                child = (child - 1) / 2
            }
        }

        private func popTop() {
            heap.swapAt(0, heap.count - 1)
            heap.removeLast()
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
                if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
                guard smallest != parent else { return }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
    }

    /// One request on the wire: its redirects, its deadline, and the handles waiting for it.
    final class Exchange: @unchecked Sendable {
        private let lock = Lock()
        private let transport: Transport
        private let firstURL: URL
        private let timeout: TimeInterval
        private let followsRedirects: Bool
        private let maximumRedirects: Int
        private let onFinish: (@Sendable (Exchange) -> Void)?
        private var handles: [RequestHandle] = []
        private var task: URLSessionDataTask?
        private var deadlineTicket: UInt64?
        private var redirectCount = 0
        private var finished = false
        private var request: URLRequest

        init(request: URLRequest, snapshot: Snapshot, transport: Transport,
             onFinish: (@Sendable (Exchange) -> Void)?) {
            self.request = request
            self.transport = transport
            self.firstURL = request.url ?? URL(fileURLWithPath: "/")
            self.timeout = snapshot.timeout
            self.followsRedirects = snapshot.followsRedirects
            self.maximumRedirects = max(0, snapshot.maximumRedirects)
            self.onFinish = onFinish
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
            guard !lock.withLock({ finished }) else { return } // cancelled before it started
            let ticket = transport.deadlines.add(self, after: timeout)
            let stillRunning = lock.withLock { () -> Bool in
                guard !finished else { return false }
                deadlineTicket = ticket
                return true
            }
            guard stillRunning else { return transport.deadlines.remove(ticket) }
            send(request)
        }

        /// Called by `Deadlines` when the timeout has passed.
        func deadlinePassed() {
            finish(Results(withError: CustomError.timedOut(firstURL, after: timeout)))
        }

        /// A handle was cancelled: when nobody waits any more, the network call is cancelled too.
        func remove(_ handle: RequestHandle) {
            let resources: Resources? = lock.withLock {
                handles.removeAll { $0 === handle }
                guard handles.isEmpty, !finished else { return nil }
                finished = true
                return takeResources()
            }
            guard let resources else { return }
            release(resources)
            onFinish?(self)
        }

        private func send(_ request: URLRequest) {
            let task = transport.session.dataTask(with: request) { data, response, error in
                self.received(data: data, response: response, error: error)
            }
            let started = lock.withLock { () -> Bool in
                guard !finished else { return false }
                self.task = task
                return true
            }
            // A task created but never resumed would stay in the session forever, holding this
            // exchange (and the session) alive: discard it.
            if started { task.resume() } else { cancelLater(task) }
        }

        private func received(data: Data?, response: URLResponse?, error: Error?) {
            // This task has completed, so nothing may cancel it any more. Its state still says
            // `.running` while its completion handler runs (Linux), so clear it here rather than
            // let `release` queue a cancel per request (an extra delegate-queue wake-up each time).
            let completedTask = lock.withLock { () -> URLSessionDataTask? in
                defer { task = nil }
                return task
            }
            if let error {
                let urlError = error as? URLError ?? URLError(.unknown, userInfo: [NSUnderlyingErrorKey: error])
                switch urlError.code {
                case .cancelled:
                    // The session delegate cancels HTTP auth challenges (Linux would wait forever);
                    // the 401 is then in the task's response. A cancel of ours finished already.
                    let taskResponse = response ?? completedTask?.response
                    if let http = taskResponse as? HTTPURLResponse, http.statusCode == 401 {
                        return finish(Results(withData: data ?? Data(), response: Response(fromURLResponse: http), error: nil),
                                      onSessionQueue: true)
                    }
                    return finish(Results(withError: CustomError.cancelled))
                case .timedOut:
                    return finish(Results(withError: CustomError.timedOut(firstURL, after: timeout)))
                case .httpTooManyRedirects:
                    return finish(Results(withError: CustomError.tooManyRedirects(firstURL, limit: maximumRedirects)))
                default:
                    return finish(Results(withError: CustomError.transport(urlError)))
                }
            }
            guard let http = response as? HTTPURLResponse else {
                return finish(Results(withError: CustomError.invalidResponse))
            }
            if followsRedirects, [301, 302, 303, 307, 308].contains(http.statusCode),
               let location = http.value(forHTTPHeaderField: "Location") {
                return redirect(from: http, to: location)
            }
            finish(Results(withData: data ?? Data(), response: Response(fromURLResponse: http), error: nil), onSessionQueue: true)
        }

        private func redirect(from response: HTTPURLResponse, to location: String) {
            let (current, hops) = lock.withLock { () -> (URLRequest, Int) in
                redirectCount += 1
                return (request, redirectCount)
            }
            guard hops <= maximumRedirects else {
                return finish(Results(withError: CustomError.tooManyRedirects(firstURL, limit: maximumRedirects)))
            }
            guard let currentURL = current.url,
                  let target = URL(string: location, relativeTo: currentURL)?.absoluteURL,
                  let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  target.host != nil else {
                return finish(Results(withError: CustomError.invalidURL(location, reason: "the redirect target is not an http(s) URL")))
            }
            var next = current
            next.url = target
            let method = current.httpMethod ?? "GET"
            let becomesGet = response.statusCode == 303 ? method != "HEAD"
                : (response.statusCode == 301 || response.statusCode == 302) && method == "POST"
            if becomesGet {
                next.httpMethod = "GET"
                next.httpBody = nil
                next.setValue(nil, forHTTPHeaderField: "Content-Type")
                next.setValue(nil, forHTTPHeaderField: "Content-Length")
            }
            if !Self.sameOrigin(currentURL, target) {
                for name in (current.allHTTPHeaderFields ?? [:]).keys where RequestBuilder.isSensitive(headerName: name) {
                    next.setValue(nil, forHTTPHeaderField: name)
                }
            }
            lock.withLock { request = next }
            send(next)
        }

        /// Ends the exchange once. `onSessionQueue`: called by the task's own completion handler,
        /// so a single waiting completion may run on this thread once Foundation's operation is over.
        private func finish(_ results: Results, onSessionQueue: Bool = false) {
            let outcome: (waiting: [RequestHandle], resources: Resources)? = lock.withLock {
                guard !finished else { return nil }
                finished = true
                defer { handles = [] }
                return (handles, takeResources())
            }
            guard let outcome else { return }
            release(outcome.resources)
            onFinish?(self)
            let sessionQueue = onSessionQueue && outcome.waiting.count == 1 ? transport.sessionQueue : nil
            for handle in outcome.waiting { handle.deliver(results, from: sessionQueue) }
        }

        private typealias Resources = (task: URLSessionDataTask?, deadlineTicket: UInt64?)

        /// Hands over the task and the deadline; call with the lock held.
        private func takeResources() -> Resources {
            defer { task = nil; deadlineTicket = nil }
            return (task, deadlineTicket)
        }

        /// Outside the lock: forgets the deadline and cancels the task unless it has completed.
        private func release(_ resources: Resources) {
            if let ticket = resources.deadlineTicket { transport.deadlines.remove(ticket) }
            if let task = resources.task, task.state != .completed { cancelLater(task) }
        }

        /// Cancels outside every lock, on the session's delegate queue: on Linux `cancel()` hops
        /// synchronously onto the session's queue, and a cancel that overtakes the redirect
        /// decision traps in FoundationNetworking ("Received callback for HTTP redirection, but
        /// we're not waiting for it"); the delegate queue orders the two.
        private func cancelLater(_ task: URLSessionDataTask) {
            transport.session.delegateQueue.addOperation { task.cancel() }
        }

        private static func sameOrigin(_ first: URL, _ second: URL) -> Bool {
            first.scheme?.lowercased() == second.scheme?.lowercased()
                && first.host?.lowercased() == second.host?.lowercased()
                && effectivePort(first) == effectivePort(second)
        }

        private static func effectivePort(_ url: URL) -> Int {
            url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        }
    }

    /// Handles only redirects and challenges; data arrives through completion handlers.
    final class SessionDelegate: NSObject, URLSessionTaskDelegate, Sendable {
        func urlSession(_ session: URLSession, task: URLSessionTask,
                        willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
                        completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
            // The exchange follows redirects itself, identically on every platform. A task that was
            // cancelled before this call (cancels run on this same queue) is not answered: on Linux
            // the answer would reach a task no longer waiting for it, and that traps.
            guard task.state == .running else { return }
            completionHandler(nil)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
            #if canImport(FoundationNetworking)
            // Swift 6.3.1 on Linux never completes a 401 Basic challenge otherwise; the 401 is
            // read back from the task's response. (TLS is verified by libcurl there, never here.)
            completionHandler(.cancelAuthenticationChallenge, nil)
            #else
            // TLS validation and a 401 without credentials both stay Foundation's job here.
            completionHandler(.performDefaultHandling, nil)
            #endif
        }
    }

    // MARK: - Private helpers

    /// Runs a completion-handler call as `async`, cancelling it when the surrounding Task is cancelled.
    /// The handle's completion runs once, so the continuation resumes exactly once.
    private func withCancellableHandle<Value: Sendable>(
        _ start: @escaping @Sendable (_ completion: @escaping @Sendable (Value) -> Void) -> RequestHandle
    ) async -> Value {
        let slot = Locked(HandleSlot())
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
                let handle = start { continuation.resume(returning: $0) }
                let cancelNow = slot.withLock { slot -> Bool in
                    slot.handle = handle
                    return slot.cancelled
                }
                if cancelNow { handle.cancel() }
            }
        } onCancel: {
            let handle = slot.withLock { slot -> RequestHandle? in
                slot.cancelled = true
                return slot.handle
            }
            handle?.cancel()
        }
    }

    private struct HandleSlot: Sendable {
        var handle: RequestHandle?
        var cancelled = false
    }

    /// An `NSLock` with a scoped `withLock` (NSLocking's own needs macOS 14; `Mutex` macOS 15).
    final class Lock: @unchecked Sendable {
        private let lock = NSLock()

        func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
            lock.lock()
            defer { lock.unlock() }
            return try body()
        }
    }

    /// Carries a value the compiler cannot check across a concurrency boundary; the caller vouches.
    struct UncheckedSendable<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
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
