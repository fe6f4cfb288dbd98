//  RestManager+RetryPolicy.swift — an add-on to RestManager.swift: retries with exponential backoff and Retry-After,
//  as an `Interceptor` that runs after all others. Nothing but the core's public seam.

public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

nonisolated extension RestManager {
    /// When and how failed requests are tried again (default nil: never); an interceptor that runs after all others.
    public var retryPolicy: RetryPolicy? {
        get { withState { $0.lastInterceptor as? RetryPolicy } }
        set { withState { $0.lastInterceptor = newValue } }
    }

    /// When to try a request again: which methods, on which statuses and network errors, after what delay
    /// (`rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 3)`). All attempts share the call's one deadline.
    public struct RetryPolicy: Interceptor {
        /// Retries after the first attempt (default 2).
        public var maximumRetries: Int
        /// The delay before the first retry, doubled for each one after it (default 0.5 s).
        public var initialDelay: TimeInterval
        /// The longest delay; a longer `Retry-After` is not waited for (default 30 s).
        public var maximumDelay: TimeInterval
        /// Statuses worth another attempt (default 408, 429, 500, 502, 503, 504).
        public var retryableStatusCodes: Set<Int>
        /// Methods that may be sent twice (default the idempotent GET, HEAD, PUT, DELETE, OPTIONS).
        public var retryableMethods: Set<HttpMethod>
        /// A policy; the defaults are the common ones (Alamofire's, plus 429).
        public init(
            maximumRetries: Int = 2, initialDelay: TimeInterval = 0.5, maximumDelay: TimeInterval = 30,
            retryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504],
            retryableMethods: Set<HttpMethod> = [.get, .head, .put, .delete, .options]
        ) {
            self.maximumRetries = maximumRetries
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
            self.retryableStatusCodes = retryableStatusCodes
            self.retryableMethods = retryableMethods
        }

        /// Network errors after which the request may not have reached the server, or its connection broke (Linux
        /// reports a body cut short as -1, an empty reply as -1011).
        static let retryableErrors: Set<URLError.Code> = [
            .cannotConnectToHost, .networkConnectionLost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet,
            .badServerResponse, .unknown
        ]

        /// Asks for a retry with the policy's delay, or delivers. Retries and backoff count this policy's own retries
        /// in the call (an authenticator's resend is not one). A method an interceptor made that is none of
        /// `HttpMethod`'s is never retried (RFC 9110 §9.2.2).
        public func decide(after results: Results, for request: URLRequest, attempt: Int) async -> AttemptDecision {
            guard let method = HttpMethod(rawValue: (request.httpMethod ?? "GET").lowercased()) else { return .deliver }
            let retry = RestManager.ownRetries + 1
            return delay(beforeRetry: retry, after: results, method: method).map { .retry(after: $0) } ?? .deliver
        }

        /// The delay before retry number `retry` (from 1) after `results`; nil for no retry.
        func delay(beforeRetry retry: Int, after results: Results, method: HttpMethod) -> TimeInterval? {
            guard retry <= maximumRetries, retryableMethods.contains(method) else { return nil }
            if let error = results.error {
                guard case .transport(let urlError)? = error as? CustomError,
                    Self.retryableErrors.contains(urlError.code)
                else { return nil }
            } else {
                let status = results.statusCode ?? 0
                guard retryableStatusCodes.contains(status) else { return nil }
                // A Retry-After that is neither seconds nor an HTTP date falls back to the backoff below.
                if status == 429 || status == 503,
                    let seconds = results.response?.headers.value(forKey: "Retry-After").flatMap(Self.seconds)
                {
                    return seconds <= RestManager.finite(maximumDelay) ? seconds : nil
                }
            }
            // NaN, negative and infinite settings are clamped: Double.random traps on an infinite range.
            let ceiling = min(
                RestManager.finite(maximumDelay), RestManager.finite(initialDelay * pow(2, Double(min(retry, 64) - 1))))
            return ceiling > 0 ? Double.random(in: ceiling / 2...ceiling) : 0
        }

        /// `Retry-After` (RFC 9110 §10.2.3): whole seconds, or an HTTP date in any of its three forms.
        static func seconds(fromRetryAfter value: String) -> TimeInterval? {
            let text = value.trimmingCharacters(in: .whitespaces)
            // Any number of digits: a long wait the server asks for is one, not an unreadable value.
            if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
                return TimeInterval(text)
            }
            return date(fromHTTPDate: text).map { max(0, $0.timeIntervalSinceNow) }
        }

        /// An HTTP date (RFC 9110 §5.6.7): IMF-fixdate, RFC 850 or asctime, on a 24-hour clock, in GMT.
        static func date(fromHTTPDate text: String) -> Date? {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            // asctime pads a one-digit day with a space: `Sun Nov 6 08:49:37 1994`.
            let single = text.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            for format in [
                "EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"
            ] {
                formatter.dateFormat = format
                if let date = formatter.date(from: single) { return date }
            }
            return nil
        }
    }
}
