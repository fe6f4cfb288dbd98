//  RestManager+ResponseCache.swift — an add-on to RestManager.swift: a private, in-memory HTTP cache of GET answers
//  that revalidates with ETag / Last-Modified (RFC 9110 §13, RFC 9111); only an `Interceptor` on the core's seam.

#if canImport(FoundationNetworking)
import Foundation  // this file's public API names `URLRequest` alone, which lives in FoundationNetworking here
public import FoundationNetworking
#else
public import Foundation
#endif

nonisolated extension RestManager {
    /// A private, in-memory cache of GET answers that revalidates with ETag / Last-Modified.
    /// `rest.interceptors.append(RestManager.ResponseCache())`
    ///
    /// Stores a 200 to a GET that has a validator or `max-age`, unless the request or the answer says `no-store` or the
    /// answer has `Vary: *`; keyed by URL, the request's credential headers (`Authorization`, `Cookie`, `X-API-Key`…)
    /// and the values of the headers `Vary` names; never an answer reached through a redirect. A fresh entry (by
    /// `max-age` and `Age`, without `no-cache`, and no older than the request's own `max-age` if it has one) answers
    /// without a request; otherwise the next GET asks with `If-None-Match` / `If-Modified-Since`, and a 304 is
    /// delivered as the stored 200 with its headers updated (a caller's own conditional GET gets its 304). A delivered
    /// entry says so in ``statusHeader``. POST, PUT, PATCH and DELETE to a URL drop its entries.
    public final class ResponseCache: Interceptor, @unchecked Sendable {
        /// The header that tells a stored answer: `fresh` (no request was sent) or `revalidated` (after a 304).
        public static let statusHeader = "RestManager-Cache"

        private struct Entry {
            var key: String
            var response: HTTPURLResponse
            var body: Data
            /// The request's values of the headers the answer's `Vary` names, lower-cased names.
            var varied: [String: String]
            /// When the answer was made, by its `Age` (RFC 9111 §4.2.3); fresh for its `lifetime` from then.
            var bornAt: Date
            var lastUsed: UInt64
        }

        private let lock = NSLock()
        private let maximumBytes: Int
        private var entries: [String: [Entry]] = [:]
        /// The bytes of all stored bodies, kept by `replace` (summing them for each answer made filling up quadratic).
        private var storedBytes = 0
        private var clock: UInt64 = 0
        /// The revalidations sent and not yet decided on: URL and validators.
        private var revalidating: [String] = []

        /// A cache that keeps at most `maximumBytes` of bodies (least recently used go first).
        public init(maximumBytes: Int = 10 << 20) { self.maximumBytes = max(0, maximumBytes) }

        /// Forgets every stored answer.
        public func removeAll() {
            withLock { entries.keys.forEach { replace($0, with: []) } }
        }

        /// Answers a GET from a fresh entry, or asks for the stored one's validity.
        public func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            let control = Self.directives(request.value(forHTTPHeaderField: "Cache-Control"))
            guard isGet(request), !control.contains("no-store"),
                request.value(forHTTPHeaderField: "If-None-Match") == nil,
                request.value(forHTTPHeaderField: "If-Modified-Since") == nil,
                let entry = lookUp(request)
            else { return request }
            // RFC 9111 §5.2.1: the request's no-cache, or a max-age its age exceeds, asks for a revalidation.
            let age = -entry.bornAt.timeIntervalSinceNow
            let fresh = age < Self.lifetime(entry.response) && age <= Self.maxAge(control) ?? .infinity
            if fresh, !control.contains("no-cache") { throw Answer(Self.results(entry, status: "fresh")) }
            var conditional = request
            conditional.setValue(entry.response.value(forHTTPHeaderField: "ETag"), forHTTPHeaderField: "If-None-Match")
            let lastModified = entry.response.value(forHTTPHeaderField: "Last-Modified")
            conditional.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since")
            withLock {
                revalidating.append(Self.validators(conditional))
                if revalidating.count > 1_000 { revalidating.removeFirst() }  // left by calls ended early
            }
            return conditional
        }

        /// Turns a 304 into the stored answer, stores a 200, and drops a URL's entries after an unsafe method.
        public func decide(after results: Results, for request: URLRequest, attempt: Int) async -> AttemptDecision {
            let revalidation = isGet(request) && tookRevalidation(request)
            guard let http = results.response?.response as? HTTPURLResponse, results.error == nil, let url = request.url
            else {
                return .deliver
            }
            guard isGet(request) else {
                // RFC 9111 §4.4: a successful unsafe or unknown method invalidates the URL for every user and variant.
                if (200..<400).contains(http.statusCode), !["HEAD", "OPTIONS", "TRACE"].contains(request.httpMethod) {
                    let prefix = url.absoluteString + "\n"
                    withLock { entries.keys.filter { $0.hasPrefix(prefix) }.forEach { replace($0, with: []) } }
                }
                return .deliver
            }
            if http.statusCode == 304, revalidation {
                // No entry any more (evicted meanwhile): ask again without validators (the 304 is not the caller's).
                guard let entry = revalidated(request, with: http) else { return .retry(after: 0) }
                return .deliverInstead(Self.results(entry, status: "revalidated"))
            }
            // Not a body sent to a file or stream (nil), nor one a redirect led to (it may lead elsewhere next time).
            if http.statusCode == 200, http.url == url, let body = results.data { store(body, http, for: request) }
            return .deliver
        }

        // MARK: - Entries

        /// The URL and every credential header: one user's answers never reach another, or a caller after a logout.
        private func key(_ request: URLRequest) -> String {
            let credentials = (request.allHTTPHeaderFields ?? [:]).filter { name, _ in
                Self.credentialNameParts.contains { name.lowercased().contains($0) }
            }
            let lines = credentials.map { "\($0.key.lowercased()): \($0.value)" }.sorted()
            return (request.url?.absoluteString ?? "") + "\n" + lines.joined(separator: "\n")
        }

        /// What names of headers that carry credentials contain (Cookie, X-API-Key, PRIVATE-TOKEN, X-Session-Id…).
        private static let credentialNameParts = ["auth", "cookie", "key", "token", "session", "secret", "passw"]

        /// Whether this cache sent `request`'s validators (and forgets it once): a 304 to a caller's own stays a 304.
        private func tookRevalidation(_ request: URLRequest) -> Bool {
            withLock {
                guard let index = revalidating.firstIndex(of: Self.validators(request)) else { return false }
                revalidating.remove(at: index)
                return true
            }
        }

        private static func validators(_ request: URLRequest) -> String {
            let values = ["If-None-Match", "If-Modified-Since"].map { request.value(forHTTPHeaderField: $0) ?? "" }
            return ([request.url?.absoluteString ?? ""] + values).joined(separator: "\n")
        }

        /// The entry for `request`, its use recorded and `change` made to it, under the lock.
        private func lookUp(_ request: URLRequest, change: (inout Entry) -> Void = { _ in }) -> Entry? {
            let entryKey = key(request)
            return withLock {
                let varies = { (entry: Entry) in
                    entry.varied.allSatisfy { request.value(forHTTPHeaderField: $0.key) ?? "" == $0.value }
                }
                guard let index = entries[entryKey]?.firstIndex(where: varies), var entry = entries[entryKey]?[index]
                else { return nil }
                clock += 1
                entry.lastUsed = clock
                change(&entry)
                entries[entryKey]?[index] = entry
                return entry
            }
        }

        private func store(_ body: Data, _ response: HTTPURLResponse, for request: URLRequest) {
            let control = Self.directives(response.value(forHTTPHeaderField: "Cache-Control"))
            let requestControl = Self.directives(request.value(forHTTPHeaderField: "Cache-Control"))
            let vary = Self.directives(response.value(forHTTPHeaderField: "Vary"))
            let hasValidator = ["ETag", "Last-Modified"].contains { response.value(forHTTPHeaderField: $0) != nil }
            let storable =
                !control.contains("no-store") && !requestControl.contains("no-store") && !vary.contains("*")
                && (hasValidator || Self.lifetime(response) > Self.age(response)) && body.count <= maximumBytes
            var varied: [String: String] = [:]
            for name in vary where !name.isEmpty { varied[name] = request.value(forHTTPHeaderField: name) ?? "" }
            let entryKey = key(request)
            withLock {
                var list = entries[entryKey] ?? []
                list.removeAll { $0.varied == varied }
                if storable {
                    clock += 1
                    let entry = Entry(
                        key: entryKey, response: response, body: body, varied: varied,
                        bornAt: Date() - Self.age(response),
                        lastUsed: clock)
                    list.append(entry)
                }
                replace(entryKey, with: list)
                guard storedBytes > maximumBytes else { return }
                // The least recently used go until the bodies fit (`lastUsed` is unique: a tick of `clock`).
                for entry in entries.values.joined().sorted(by: { $0.lastUsed < $1.lastUsed })
                where storedBytes > maximumBytes {
                    replace(entry.key, with: entries[entry.key]?.filter { $0.lastUsed != entry.lastUsed } ?? [])
                }
            }
        }

        /// Stores `list` as the entries for `key` (under the lock), keeping `storedBytes`.
        private func replace(_ key: String, with list: [Entry]) {
            let bytes = { (list: [Entry]) in list.reduce(0) { $0 + $1.body.count } }
            storedBytes += bytes(list) - bytes(entries[key] ?? [])
            entries[key] = list.isEmpty ? nil : list
        }

        /// The stored entry with the 304's headers (RFC 9111 §4.3.4), fresh again; nil if gone or replaced meanwhile.
        private func revalidated(_ request: URLRequest, with notModified: HTTPURLResponse) -> Entry? {
            var matched = false
            let entry = lookUp(request) { entry in
                matched =
                    request.value(forHTTPHeaderField: "If-None-Match")
                    == entry.response.value(forHTTPHeaderField: "ETag")
                    && request.value(forHTTPHeaderField: "If-Modified-Since")
                        == entry.response.value(forHTTPHeaderField: "Last-Modified")
                guard matched else { return }
                // By lower-cased name, in one pass: the 304's replace the stored ones (a peer may send thousands), but
                // for its Content-Length, which describes the 304 (RFC 9111 §3.2).
                var merged: [String: (name: String, value: String)] = [:]
                let updates = notModified.allHeaderFields.filter { "\($0.key.base)".lowercased() != "content-length" }
                let fields = Array(entry.response.allHeaderFields) + Array(updates)
                for case let (name as String, value as String) in fields { merged[name.lowercased()] = (name, value) }
                let headers = Dictionary(uniqueKeysWithValues: merged.values.map { ($0.name, $0.value) })
                let url = entry.response.url ?? request.url ?? URL(fileURLWithPath: "/")
                entry.response =
                    HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)
                    ?? entry.response
                entry.bornAt = Date() - Self.age(notModified)
            }
            return matched ? entry : nil
        }

        // MARK: - Helpers

        private func withLock<Value>(_ body: () throws -> Value) rethrows -> Value {
            lock.lock()
            defer { lock.unlock() }
            return try body()
        }

        private func isGet(_ request: URLRequest) -> Bool { (request.httpMethod ?? "GET") == "GET" }

        /// The lower-cased items of a comma-separated value: `Cache-Control` directives (`max-age=60`), `Vary` names.
        private static func directives(_ value: String?) -> [String] {
            (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        }

        /// Seconds an answer stays fresh from when it was made: its `max-age` (`s-maxage` is for shared caches); 0 with
        /// any `no-cache` (qualified too: entries replay whole, RFC 9111 §5.2.2.4), or a `max-age` not digits.
        private static func lifetime(_ response: HTTPURLResponse) -> TimeInterval {
            let control = directives(response.value(forHTTPHeaderField: "Cache-Control"))
            return control.contains { $0 == "no-cache" || $0.hasPrefix("no-cache=") } ? 0 : maxAge(control) ?? 0
        }

        private static func maxAge(_ control: [String]) -> TimeInterval? {
            control.first { $0.hasPrefix("max-age=") }.flatMap { deltaSeconds($0.dropFirst(8)) }
        }

        private static func age(_ response: HTTPURLResponse) -> TimeInterval {
            response.value(forHTTPHeaderField: "Age").flatMap(deltaSeconds) ?? 0
        }

        /// RFC 9111 §1.2.2: digits only, a larger number than 2^31 being 2^31; quoted too (§5.2: `max-age="60"`).
        private static func deltaSeconds<Text: StringProtocol>(_ text: Text) -> TimeInterval? {
            let digits = text.hasPrefix("\"") && text.hasSuffix("\"") ? text.dropFirst().dropLast() : text[...]
            guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return min(Double(digits) ?? .infinity, 2_147_483_648)
        }

        private static func results(_ entry: Entry, status: String) -> Results {
            var response = Response(fromURLResponse: entry.response)
            response.headers.add(value: status, forKey: statusHeader)
            // RFC 9111 §4: its age now, not the one it arrived with (a 304 may have updated neither).
            response.headers.add(value: String(Int(max(0, -entry.bornAt.timeIntervalSinceNow))), forKey: "Age")
            return Results(withData: entry.body, response: response, error: nil)
        }
    }
}
