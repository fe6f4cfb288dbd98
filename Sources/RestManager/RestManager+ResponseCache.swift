//  RestManager+ResponseCache.swift — an add-on to RestManager.swift: a private, in-memory HTTP cache of GET answers
//  that revalidates with ETag / Last-Modified (RFC 9110 §13, RFC 9111); only an `Interceptor` on the core's seam.

#if canImport(FoundationNetworking)
// The public API here names `URLRequest` alone, which lives in FoundationNetworking on Linux.
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif

nonisolated extension RestManager {
    /// A private, in-memory cache of GET answers that revalidates with ETag / Last-Modified.
    /// `rest.interceptors.append(RestManager.ResponseCache())`
    ///
    /// Stores a 200 to a GET that has a validator or `max-age`, unless the request or the answer says `no-store` or the
    /// answer has `Vary: *`. Default-deny keying: an answer is served only to a request with the same normalized URL,
    /// the same value of every request header not in ``harmlessHeaders`` (or `ignoring`), the same cookies in
    /// `cookieStorage` for its URL, and the same values of the headers `Vary` names. A fresh entry (by `max-age` and
    /// `Age`, without `no-cache`, and no older than the request's own `max-age` if it has one) answers without a
    /// request; otherwise the next GET asks with `If-None-Match` / `If-Modified-Since`, and a 304 to that question is
    /// delivered as the stored 200 with its headers updated (a caller's own conditional GET gets its 304). A delivered
    /// entry says so in ``statusHeader``. A successful unsafe method drops the entries of its URL and of its
    /// same-origin `Location` and `Content-Location`.
    public final class ResponseCache: Interceptor, @unchecked Sendable {
        /// The header that tells a stored answer: `fresh` (no request was sent) or `revalidated` (after a 304).
        public static let statusHeader = "RestManager-Cache"

        /// Request headers that never identify a user (lower-cased): the only ones that do not key the entries, with
        /// the names given as `ignoring`. Every other header's value is part of an entry's key.
        public static let harmlessHeaders: Set<String> = [
            "accept", "accept-charset", "accept-encoding", "accept-language", "cache-control", "connection",
            "content-length", "content-type", "if-match", "if-modified-since", "if-none-match", "if-range",
            "if-unmodified-since", "pragma", "te", "user-agent"
        ]

        /// What an entry costs besides its bytes (body, header names and values, key), counted against `maximumBytes`.
        public static let entryOverhead = 512

        private struct Entry {
            var key: String
            var response: HTTPURLResponse
            var body: Data
            /// The request's values of the headers the answer's `Vary` names, lower-cased names.
            var varied: [String: String]
            /// When the answer was made, by its `Age` (RFC 9111 §4.2.3); fresh for its `lifetime` from then.
            var bornAt: Date
            var lastUsed: UInt64
            /// Reached through a redirect: never fresh, since the URL asked for may lead elsewhere next time.
            var redirected: Bool
            /// What it counts against `maximumBytes`.
            var cost: Int
        }

        private let lock = NSLock()
        private let maximumBytes: Int
        private let ignored: Set<String>
        private let cookieStorage: HTTPCookieStorage?
        private var entries: [String: [Entry]] = [:]
        /// The cost of all entries, kept by `replace` (summing them for each answer made filling up quadratic).
        private var storedBytes = 0
        private var clock: UInt64 = 0
        /// Every use of an entry, oldest first from `usesStart`: eviction takes them in order, skipping a use whose
        /// entry was used again since (its `lastUsed` is newer) or is gone, so making room costs what it evicts.
        private var uses: [(tick: UInt64, key: String)] = []
        private var usesStart = 0
        private var entryCount = 0

        /// A cache that holds at most `maximumBytes` (bodies, headers and keys, plus ``entryOverhead`` an entry; least
        /// recently used go first). `ignoring`: request headers that carry no user's identity but would make every
        /// request a miss (`["X-Request-ID"]`). `cookieStorage`: the store whose cookies the session sends (a
        /// configuration's `httpCookieStorage`; `.shared` is `URLSessionConfiguration.default`'s); they key the
        /// entries, since URLSession adds them after the interceptors ran.
        public init(
            maximumBytes: Int = 10 << 20, ignoring: Set<String> = [], cookieStorage: HTTPCookieStorage? = .shared
        ) {
            self.maximumBytes = max(0, maximumBytes)
            ignored = Set(ignoring.map { $0.lowercased() })
            self.cookieStorage = cookieStorage
        }

        /// The bytes the entries count now (at most `maximumBytes`).
        public var currentBytes: Int { withLock { storedBytes } }

        /// Forgets every stored answer.
        public func removeAll() {
            withLock { entries.keys.forEach { replace($0, with: []) } }
        }

        /// Answers a GET from a fresh entry, or asks for the stored one's validity.
        public func adapt(_ request: URLRequest, attempt: Int) async throws -> URLRequest {
            let control = Self.directives(request.value(forHTTPHeaderField: "Cache-Control"))
            guard isGet(request), !control.contains("no-store"), !Self.isConditional(request),
                let entry = lookUp(request)
            else { return request }
            // RFC 9111 §5.2.1: the request's no-cache, or a max-age its age exceeds, asks for a revalidation.
            let age = -entry.bornAt.timeIntervalSinceNow
            let lifetime = entry.redirected ? 0 : Self.lifetime(entry.response)
            let fresh = age < lifetime && age <= Self.maxAge(control) ?? .infinity
            if fresh, !control.contains("no-cache") { throw Answer(Self.results(entry, status: "fresh")) }
            var conditional = request
            conditional.setValue(entry.response.value(forHTTPHeaderField: "ETag"), forHTTPHeaderField: "If-None-Match")
            let lastModified = entry.response.value(forHTTPHeaderField: "Last-Modified")
            conditional.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since")
            // The mark that this call's 304 answers the cache's question, carried by the request to `decide` and never
            // sent: no list shared by calls to overflow or to be left behind by a call that ended early.
            conditional.cachePolicy = Self.revalidationMark
            return conditional
        }

        /// Turns a 304 into the stored answer, stores a 200, and drops a URL's entries after an unsafe method.
        public func decide(after results: Results, for request: URLRequest, attempt: Int) async -> AttemptDecision {
            guard let http = results.response?.response as? HTTPURLResponse, results.error == nil, let url = request.url
            else {
                return .deliver
            }
            guard isGet(request) else {
                // RFC 9111 §4.4: a successful unsafe or unknown method invalidates the URL for every user and variant.
                if (200..<400).contains(http.statusCode), !["HEAD", "OPTIONS", "TRACE"].contains(request.httpMethod) {
                    invalidate(url, after: http)
                }
                return .deliver
            }
            let revalidation = request.cachePolicy == Self.revalidationMark && Self.isConditional(request)
            if http.statusCode == 304, revalidation {
                // No entry any more (evicted meanwhile): ask again without validators (the 304 is not the caller's).
                guard let entry = revalidated(request, with: http) else { return .retry(after: 0) }
                return .deliverInstead(Self.results(entry, status: "revalidated"))
            }
            // Not a body sent to a file or stream (nil); one a redirect led to is stored, but always revalidated.
            if http.statusCode == 200, let body = results.data { store(body, http, for: request) }
            return .deliver
        }

        // MARK: - Keys

        private static let revalidationMark = URLRequest.CachePolicy.reloadIgnoringLocalCacheData

        private static func isConditional(_ request: URLRequest) -> Bool {
            ["If-None-Match", "If-Modified-Since"].contains { request.value(forHTTPHeaderField: $0) != nil }
        }

        /// Default-deny: the URL, every header but the harmless and ignored ones, and the stored cookies for the URL.
        private func key(_ request: URLRequest) -> String {
            var lines = (request.allHTTPHeaderFields ?? [:]).compactMap { name, value -> String? in
                let lower = name.lowercased()
                return Self.harmlessHeaders.contains(lower) || ignored.contains(lower) ? nil : "\(lower): \(value)"
            }
            if let url = request.url, let cookies = cookieStorage?.cookies(for: url), !cookies.isEmpty {
                lines.append(
                    "cookie (stored): " + cookies.map { "\($0.name)=\($0.value)" }.sorted().joined(separator: "; "))
            }
            return Self.normalized(request.url) + "\n" + lines.sorted().joined(separator: "\n")
        }

        /// RFC 9110 §4.2.3 and RFC 3986 §6.2.2: scheme and host lower-cased, the default port and an empty path
        /// written as `/`, percent-encoded unreserved characters decoded and other escapes upper-cased.
        static func normalized(_ url: URL?) -> String {
            guard let url, var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
                return url?.absoluteString ?? ""
            }
            parts.scheme = parts.scheme?.lowercased()
            parts.percentEncodedHost = parts.percentEncodedHost?.lowercased()
            if (parts.scheme, parts.port) == ("http", 80) || (parts.scheme, parts.port) == ("https", 443) {
                parts.port = nil
            }
            parts.fragment = nil
            let path = parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
            let query = parts.percentEncodedQuery.map(normalizedEscapes)
            let origin =
                "\(parts.scheme ?? "")://\(parts.percentEncodedHost ?? "")" + (parts.port.map { ":\($0)" } ?? "")
            return origin + normalizedEscapes(path) + (query.map { "?" + $0 } ?? "")
        }

        /// `%41` is `A`, `%7e` is `~`, `%2f` is `%2F`: the same resource however its unreserved characters are written.
        private static func normalizedEscapes(_ text: String) -> String {
            var output = ""
            var rest = Substring(text)
            while let percent = rest.firstIndex(of: "%") {
                output += rest[..<percent]
                let hex = rest[percent...].dropFirst().prefix(2)
                guard hex.count == 2, let byte = UInt8(hex, radix: 16) else {
                    output += "%"
                    rest = rest[percent...].dropFirst()
                    continue
                }
                let unreserved =
                    byte < 128
                    && (Character(Unicode.Scalar(byte)).isLetter
                        || Character(Unicode.Scalar(byte)).isNumber || "-._~".utf8.contains(byte))
                output += unreserved ? String(Unicode.Scalar(byte)) : "%" + hex.uppercased()
                rest = rest[percent...].dropFirst(3)
            }
            return output + rest
        }

        // MARK: - Entries

        /// The entry for `request`, its use recorded and `change` made to it, under the lock.
        private func lookUp(_ request: URLRequest, change: (inout Entry) -> Void = { _ in }) -> Entry? {
            let entryKey = key(request)
            return withLock {
                let varies = { (entry: Entry) in
                    entry.varied.allSatisfy { request.value(forHTTPHeaderField: $0.key) ?? "" == $0.value }
                }
                guard let index = entries[entryKey]?.firstIndex(where: varies), var entry = entries[entryKey]?[index]
                else { return nil }
                entry.lastUsed = tick(entryKey)
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
            let redirected = Self.normalized(response.url) != Self.normalized(request.url)
            var varied: [String: String] = [:]
            for name in vary where !name.isEmpty { varied[name] = request.value(forHTTPHeaderField: name) ?? "" }
            let entryKey = key(request)
            let cost = Self.cost(body, response, key: entryKey, varied: varied)
            let storable =
                !control.contains("no-store") && !requestControl.contains("no-store") && !vary.contains("*")
                && (hasValidator || !redirected && Self.lifetime(response) > Self.age(response)) && cost <= maximumBytes
            withLock {
                var list = entries[entryKey] ?? []
                list.removeAll { $0.varied == varied }
                if storable {
                    let entry = Entry(
                        key: entryKey, response: response, body: body, varied: varied,
                        bornAt: Date() - Self.age(response), lastUsed: tick(entryKey), redirected: redirected,
                        cost: cost)
                    list.append(entry)
                }
                replace(entryKey, with: list)
            }
        }

        /// Body, header names and values, the key (held twice: in the table and the entry), the varied values, and
        /// the overhead.
        private static func cost(
            _ body: Data, _ response: HTTPURLResponse, key: String, varied: [String: String]
        ) -> Int {
            let headers = response.allHeaderFields.reduce(0) { $0 + "\($1.key)".utf8.count + "\($1.value)".utf8.count }
            let variedBytes = varied.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            return body.count + headers + 2 * key.utf8.count + variedBytes + entryOverhead
        }

        /// A new use of the entry at `key` (under the lock): its `lastUsed`.
        private func tick(_ key: String) -> UInt64 {
            clock += 1
            uses.append((clock, key))
            // Taken and stale uses are dropped once they are most of the list: it stays within twice the entries.
            if uses.count - usesStart > 2 * entryCount + 64 || usesStart > 64 && usesStart > uses.count / 2 {
                uses = uses[usesStart...].filter { use in
                    entries[use.key]?.contains { $0.lastUsed == use.tick } ?? false
                }
                uses.append((clock, key))
                usesStart = 0
            }
            return clock
        }

        /// Stores `list` as the entries for `key` (under the lock), keeping `storedBytes`; then the least recently
        /// used entries go until all fit.
        private func replace(_ key: String, with list: [Entry]) {
            let bytes = { (list: [Entry]) in list.reduce(0) { $0 + $1.cost } }
            storedBytes += bytes(list) - bytes(entries[key] ?? [])
            entryCount += list.count - (entries[key]?.count ?? 0)
            entries[key] = list.isEmpty ? nil : list
            while storedBytes > maximumBytes, usesStart < uses.count {
                let use = uses[usesStart]
                usesStart += 1
                guard let list = entries[use.key], let victim = list.first(where: { $0.lastUsed == use.tick }) else {
                    continue
                }
                let kept = list.filter { $0.lastUsed != use.tick }
                storedBytes -= victim.cost
                entryCount -= 1
                entries[use.key] = kept.isEmpty ? nil : kept
            }
        }

        /// RFC 9111 §4.4: the URL's entries, and those of its `Location` and `Content-Location` on the same origin.
        private func invalidate(_ url: URL, after response: HTTPURLResponse) {
            let origin = { (url: URL) in Self.normalized(URL(string: "/", relativeTo: url)?.absoluteURL) }
            let related = ["Location", "Content-Location"].compactMap { name in
                response.value(forHTTPHeaderField: name).flatMap { URL(string: $0, relativeTo: url)?.absoluteURL }
            }
            let prefixes = ([url] + related.filter { origin($0) == origin(url) }).map { Self.normalized($0) + "\n" }
            withLock {
                let doomed = entries.keys.filter { key in prefixes.contains { key.hasPrefix($0) } }
                doomed.forEach { replace($0, with: []) }
            }
        }

        /// The stored entry with the 304's headers (RFC 9111 §4.3.4), fresh again; nil if gone or replaced meanwhile.
        /// A 304 that says `no-store` still answers this call, but the entry goes (§5.2.2.5).
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
            guard matched, let entry else { return nil }
            let noStore = Self.directives(notModified.value(forHTTPHeaderField: "Cache-Control")).contains("no-store")
            // Headers merged above may have grown the entry: its cost is taken again; a no-store 304 removes it.
            withLock {
                let list = entries[entry.key] ?? []
                let kept = list.filter { $0.lastUsed != entry.lastUsed }
                var updated = entry
                updated.cost = Self.cost(entry.body, entry.response, key: entry.key, varied: entry.varied)
                replace(entry.key, with: noStore ? kept : kept + [updated])
            }
            return entry
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
