#!/usr/bin/env python3
"""Semantic mutants: plausible hand-written bugs (a check removed, the wrong collection, a neighbouring constant), each
applied alone to a library file, the tests named next to it run, and the file restored. The seed of the semantic
catalogue the issue "Tests that pin down every promise" asks for; Scripts/mutate.py's mechanical operators are the other.

Usage: python3 Scripts/semantic-mutants.py                       all of them (about 1 minute each)
       python3 Scripts/semantic-mutants.py --sample 2 --seed-from-commit   CI: two, chosen by the commit
       python3 Scripts/semantic-mutants.py --match WORDS                 those whose name contains WORDS
Prints one line per mutant: killed, SURVIVED, NOCOMPILE or SKIP (its pattern is no longer in the file). Exit 1 when one
survived or did not compile (every mutant here is a plausible bug that compiles). Triage: Scripts/MUTATION-REPORT.md."""
import argparse, os, random, subprocess, sys
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
C='Sources/RestManager/RestManager.swift'; A='Sources/RestManager/RestManager+Authentication.swift'; R='Sources/RestManager/RestManager+ResponseCache.swift'
S='Sources/RestManager/RestManager+ServerSentEvents.swift'; T='Sources/RestManager/RestManager+Transfers.swift'
P='Sources/RestManager/RestManager+RetryPolicy.swift'; M='Sources/MockServer/Connection.swift'
cases = [
 ("cache: an unsafe method drops only its caller's entries", R, '''let doomed = entries.keys.filter { key in prefixes.contains { key.hasPrefix($0) } }''', '''let doomed = entries.keys.filter { key in prefixes.contains { key == $0 } }''', "ResponseCacheTests"),
 ("cache: an answer's Age left as it arrived", R, '''            response.headers.add(value: String(Int(max(0, -entry.bornAt.timeIntervalSinceNow))), forKey: "Age")
''', '''''', "ResponseCacheTests"),
 ("cache: a 304's headers merged by exact name", R, '''merged[name.lowercased()] = (name, value)''', '''merged[name] = (name, value)''', "ResponseCacheTests"),
 ("cache: answers without a validator stored", R, '''let hasValidator = ["ETag", "Last-Modified"].contains { response.value(forHTTPHeaderField: $0) != nil }''', '''let hasValidator = true''', "ResponseCacheTests"),
 ("dedup: the timeout not in the key", C, '''let settings = "\\(snapshot.followsRedirects) \\(limits) \\(snapshot.timeout)"''', '''let settings = "\\(snapshot.followsRedirects) \\(limits)"''', "DeduplicationTests"),
 ("session headers left to URLSession", C, '''configuration.httpAdditionalHeaders = headers.filter { frames($0.key) }''', '''configuration.httpAdditionalHeaders = headers''', "SecretTests"),
 ("cache: a caller's conditional taken for a revalidation", R, '''let revalidation = request.cachePolicy == Self.revalidationMark && Self.isConditional(request)''', '''let revalidation = Self.isConditional(request)''', "ResponseCacheTests"),
 ("Retry-After: ten digits unreadable", P, '''if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {''', '''if !text.isEmpty, text.utf8.count <= 9, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {''', "RetryPolicyTests"),
 ("upload: the caller's file removed after the call, as a multipart body's is", T, '''if temporary { try? FileManager.default.removeItem(at: file) }''', '''try? FileManager.default.removeItem(at: file)''', "UploadTests"),
 ("progress: a figure counts as new only when its bytes grew (the final total lost)", T, '''guard figure != last, figure.completedBytes >= last?.completedBytes ?? 0 else { return }''', '''guard figure.completedBytes > last?.completedBytes ?? -1 else { return }''', "DownloadTests"),
 ("download: a Content-Range may end at Int64.max (its end overflows)", T, '''last >= start, last < Int64.max,''', '''last >= start,''', "DownloadTests|TransferIntegrityTests"),
 ("upload: the file left to FoundationNetworking's reader (a reset traps, a grown file goes past Content-Length)", T, '''guard request.httpMethod != "GET", let size else { return }''', '''guard request.httpMethod == "NONE", let size else { return }''', 'UploadConnectionResetTests|TransferIntegrityTests'),
 ("upload: a 303's GET keeps the file's bytes", T, '''guard request.httpMethod != "GET", let size else { return }''', '''guard let size else { return }''', 'UploadTests'),
 ("upload: the size of the link", T, '''return stat(url.path, &status) == 0 ? Int64(status.st_size) : nil''', '''return lstat(url.path, &status) == 0 ? Int64(status.st_size) : nil''', "TransferIntegrityTests"),
 ('upload: the body stream reads past its length', T, '''Int(min(Int64(maxLength), remaining))''', '''maxLength''', 'TransferIntegrityTests'),
 ('a streamed body sent chunked', C, '''if request.httpBodyStream != nil { request.setValue(" ", forHTTPHeaderField: "Transfer-Encoding") }''', '''''', 'UploadTests|ConnectionResendTests'),
 ('a body in memory sent as Data (a resend goes without its bytes)', C, '''request.httpBodyStream = InputStream(data: body)  // in place of the data''', '''''', 'ConnectionResendTests'),
 ('no new body stream for a resend', C, '''completionHandler(exchange(for: task)?.freshBodyStream())''', '''completionHandler(nil)''', 'ConnectionResendTests'),
 ("a transfer's failure not asked after a transport error", C, '''transfer?.failure ?? (declined ? nil :''', '''(declined ? nil :''', 'TransferIntegrityTests'),
 ("error printed with its URLError", C, '''public enum CustomError: Error, LocalizedError, Sendable, CustomStringConvertible {''', '''public enum CustomError: Error, LocalizedError, Sendable {''', "SecretTests"),
 ("response headers added one by one", C, '''headers.append(value: value as? String ?? "\\(value)", forKey: name)''', '''headers.add(value: value as? String ?? "\\(value)", forKey: name)''', "ResponseTests"),
 ("cache key without credentials", R, '''return Self.normalized(request.url) + "\\n" + lines.sorted().joined(separator: "\\n")''', '''return Self.normalized(request.url) + "\\n"''', "ResponseCacheTests"),
 ("cache key: a list of credential names instead of default-deny", R, '''return Self.harmlessHeaders.contains(lower) || ignored.contains(lower) ? nil : "\\(lower): \\(value)"''', '''return ["authorization", "cookie", "x-api-key"].contains(lower) ? "\\(lower): \\(value)" : nil''', "ResponseCacheTests"),
 ("cache key: the store's cookies left out", R, '''if let url = request.url, let cookies = cookieStorage?.cookies(for: url), !cookies.isEmpty {''', '''if let url = request.url, let cookies = cookieStorage?.cookies(for: url), cookies.isEmpty {''', "ResponseCacheTests"),
 ("cache key: the ignored names not ignored", R, '''return Self.harmlessHeaders.contains(lower) || ignored.contains(lower) ? nil : "\\(lower): \\(value)"''', '''return Self.harmlessHeaders.contains(lower) ? nil : "\\(lower): \\(value)"''', "ResponseCacheTests"),
 ("cache: URLs compared as strings", R, '''guard let url, var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else {''', '''guard let url, var parts = URLComponents(url: url, resolvingAgainstBaseURL: true), url.path == "-" else {''', "ResponseCacheTests"),
 ("cache: only the body counted", R, '''return body.count + headers + 2 * key.utf8.count + variedBytes + entryOverhead''', '''return body.count + 0 * (headers + 2 * key.utf8.count + variedBytes + entryOverhead)''', "ResponseCacheTests"),
 ("cache: a no-store 304 keeps the entry", R, '''replace(entry.key, with: noStore ? kept : kept + [updated])''', '''replace(entry.key, with: kept + [updated])''', "ResponseCacheTests"),
 ("cache: Location and Content-Location not invalidated", R, '''let prefixes = ([url] + related.filter { origin($0) == origin(url) }).map { Self.normalized($0) + "\\n" }''', '''let prefixes = [url].map { Self.normalized($0) + "\\n" }''', "ResponseCacheTests"),
 ("cache: another origin's Content-Location invalidated", R, '''let prefixes = ([url] + related.filter { origin($0) == origin(url) }).map { Self.normalized($0) + "\\n" }''', '''let prefixes = ([url] + related).map { Self.normalized($0) + "\\n" }''', "ResponseCacheTests"),
 ("cache: max-age not digits accepted", R, '''guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }''', '''guard !digits.isEmpty else { return nil }''', "ResponseCacheTests"),
 ("cache: a quoted max-age not unquoted (stale)", R, '''let digits = text.hasPrefix("\\"") && text.hasSuffix("\\"") ? text.dropFirst().dropLast() : text[...]''', '''let digits = text[...]''', "ResponseCacheTests"),
 ("cache: quotes trimmed from either end of max-age", R, '''let digits = text.hasPrefix("\\"") && text.hasSuffix("\\"") ? text.dropFirst().dropLast() : text[...]''', '''let digits = Substring(text.trimmingCharacters(in: ["\\""]))''', "ResponseCacheTests"),
 ("cache ignores a request's no-cache", R, '''if fresh, !control.contains("no-cache") {''', '''if fresh {''', "ResponseCacheTests"),
 ("cache: a request's max-age ignored", R, '''let fresh = age < lifetime && age <= Self.maxAge(control) ?? .infinity''', '''let fresh = age < lifetime''', "ResponseCacheTests"),
 ("cache: an answer reached by a redirect served fresh", R, '''let lifetime = entry.redirected ? 0 : Self.lifetime(entry.response)''', '''let lifetime = Self.lifetime(entry.response)''', "ResponseCacheTests"),
 ("cache: a 304's validators not merged", R, '''let updates = notModified.allHeaderFields.filter { "\\($0.key.base)".lowercased() != "content-length" }''', '''let updates = notModified.allHeaderFields.filter { !["content-length", "etag"].contains("\\($0.key.base)".lowercased()) }''', "ResponseCacheTests"),
 ("cache: a 304's Content-Length merged", R, '''let updates = notModified.allHeaderFields.filter { "\\($0.key.base)".lowercased() != "content-length" }''', '''let updates = notModified.allHeaderFields''', "ResponseCacheTests"),
 ("cache: HEAD invalidates too", R, '''!["HEAD", "OPTIONS", "TRACE"].contains(request.httpMethod) {''', '''true {''', "ResponseCacheTests"),
 ("auth token to every origin", A, '''if let base = manager.baseURL, !RestManager.isSameOrigin(base, url) { return request }''', '''''', "AuthenticatorScopeTests"),
 ("auth: a 401 from another origin refreshes", A, '''guard let answered, let sent = request.url, RestManager.isSameOrigin(answered, sent) else {''', '''guard answered != nil, request.url != nil else {''', "AuthenticatorScopeTests"),
 ("auth: logout loses to the refresh", A, '''guard generation == startedGeneration, case .refreshing(let waiting) = state else { return [] }''', '''guard case .refreshing(let waiting) = state else { return [] }''', "AuthenticatorScopeTests|AuthenticatorTests"),
 ("auth: refresh margin 30 s flat", A, '''return expiresAt.timeIntervalSinceNow < min(30, max(0, life) / 4)''', '''return expiresAt.timeIntervalSinceNow < 30 + 0 * life''', "AuthenticatorScopeTests"),
 ("redaction: percent-encoded names not decoded", C, '''return isSecretName(name.removingPercentEncoding ?? name)''', '''return isSecretName(name)''', "SecretTests"),
 ("redaction: 'session' not a secret part", C, '''            "signature", "session", "credential"
''', '''            "signature", "credential"
''', "SecretTests"),
 ("redaction: a csrf header not secret", C, '''"signature", "session", "credential", "csrf"]''', '''"signature", "session", "credential"]''', "SecretTests"),
 ("redaction: a body without secrets re-encoded", "Sources/RestManager/RestManager+CurlCommand.swift", '''guard found, let data = try? JSONSerialization.data(withJSONObject: redacted, options: [.sortedKeys]) else {''', '''guard let data = try? JSONSerialization.data(withJSONObject: redacted, options: [.sortedKeys]) else {''', "CurlCommandTests"),
 ('entity: add keeps later duplicates', C, '            entries = entries.prefix(first + 1) + entries.dropFirst(first + 1).filter { $0.normalized != normalized }\n', '', 'ReviewFindingsTests'),
 ('multipart: a quote in a field name not escaped', C, 'text.replacingOccurrences(of: "\\"", with: "%22").replacingOccurrences(of: "\\r", with: "%0D")', 'text.replacingOccurrences(of: "\\r", with: "%0D")', 'MultipartTests'),
 ("multipart: CR kept in a part's Content-Type", C, 'text.replacingOccurrences(of: "\\r", with: " ").replacingOccurrences(of: "\\n", with: " ")', 'text.replacingOccurrences(of: "\\n", with: " ")', 'MultipartTests'),
 ('an empty body never nil for an Optional', C, '                if let none = none as? Value { return none }\n', '', 'AsyncAndCodableTests'),
 ('SSE: a BOM dropped from any line', 'Sources/RestManager/RestManager+ServerSentEvents.swift', 'if atStart, line.first == "\\u{FEFF}" { line = line.dropFirst() }', 'if line.first == "\\u{FEFF}" { line = line.dropFirst() }', 'ServerSentEventsTests'),
 ('retry: no jitter', 'Sources/RestManager/RestManager+RetryPolicy.swift', 'return ceiling > 0 ? Double.random(in: ceiling / 2...ceiling) : 0', 'return ceiling', 'RetryPolicyTests'),
 ("auth: a caller's own bearer token refreshed on a 401", 'Sources/RestManager/RestManager+Authentication.swift', 'return withLock { sentTokens.contains(token) ? token : nil }', 'return token', 'AuthenticatorTests'),
 ('redirect: a 303 makes HEAD a GET', 'Sources/RestManager/RestManager.swift', '? method != "HEAD" : [301, 302].contains(response.statusCode) && method == "POST"', '? true : [301, 302].contains(response.statusCode) && method == "POST"', 'RedirectTests'),
 ("redaction: sig not secret", C, '''"key", "auth", "authorization", "sig", "jwt"''', '''"key", "auth", "authorization", "jwt"''', "SecretTests"),
 ("redirect: unknown headers follow", C, '''for name in (current.allHTTPHeaderFields ?? [:]).keys where !followers.contains(name.lowercased()) {''', '''for name in (current.allHTTPHeaderFields ?? [:]).keys where !followers.contains(name.lowercased()) && Redaction.isSecretHeader(name) {''', "SecretTests|RedirectTests|OriginTests"),
 ("Retry-After: asctime not read", P, '''"EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"''', '''"EEEE, dd-MMM-yy HH:mm:ss 'GMT'"''', "RetryPolicyTests"),
 ("206 overlong appended", T, '''if room < Int64(data.count) { throw Self.violation("the 206 answer is longer than its Content-Range") }''', '''''', "TransferIntegrityTests"),
 ("interceptors: request's before manager's", C, '''interceptors = snapshot.interceptors + value.interceptors + (snapshot.lastInterceptor.map { [$0] } ?? [])''', '''interceptors = value.interceptors + snapshot.interceptors + (snapshot.lastInterceptor.map { [$0] } ?? [])''', "InterceptorTests"),
 ("download: no destination lock", T, '''guard lock >= 0, flock(lock, LOCK_EX | LOCK_NB) == 0, fstat(lock, &held) == 0, stat(path, &named) == 0,''', '''guard lock >= 0, fstat(lock, &held) == 0, stat(path, &named) == 0,''', "DownloadDestinationLockTests"),
 ("auth: a second refresh for a replaced credential", A, '''if let stored, stored.accessToken != rejected?.accessToken {''', '''if false, let stored {''', "AuthenticatorTests"),
 ("framing: Expect allowed", C, '''"expect", "te", "trailer"''', '''"te", "trailer"''', "RequestSafetyTests|InterceptorTests"),
 # Request building and encoding
 ("request's headers do not win over the manager's", C, '''            for (name, _) in value.headers.orderedPairs { headers.removeValue(forKey: name) }
''', '''''', "MethodAndHeaderTests|ValueRequestTests"),
 ("body headers kept without a body", C, '''for name in bodyHeaderNames { headers.removeValue(forKey: name) }''', '''''', "MethodAndHeaderTests|BodyEncodingTests|ValueRequestTests"),
 ("no default Accept", C, '''if headers.value(forKey: "Accept") == nil { headers.add(value: "*/*", forKey: "Accept") }''', '''''', "MethodAndHeaderTests"),
 ("form encodes a space as %20", C, '''public var formURLEncoded: String { joined(encoding: Encoding.formAllowed, spaceAsPlus: true) }''', '''public var formURLEncoded: String { joined(encoding: Encoding.formAllowed, spaceAsPlus: false) }''', "BodyEncodingTests|QueryEncodingTests"),
 ("query encodes a space as +", C, '''public var percentEncodedQuery: String { joined(encoding: Encoding.queryAllowed, spaceAsPlus: false) }''', '''public var percentEncodedQuery: String { joined(encoding: Encoding.queryAllowed, spaceAsPlus: true) }''', "QueryEncodingTests"),
 ("query uses the form's unreserved set", C, '''static let queryAllowed = asciiTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")''', '''static let queryAllowed = asciiTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-._")''', "QueryEncodingTests"),
 ("a URL's own query replaced by the parameters", C, '''let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""''', '''let existing = ""''', "QueryEncodingTests"),
 ("a fragment kept when parameters are added", C, '''            components.fragment = nil
''', '''''', "QueryEncodingTests"),
 ("base URL's query after the request's", C, '''let queries = [baseParts.query, relativeParts.query].compactMap { $0 }''', '''let queries = [relativeParts.query, baseParts.query].compactMap { $0 }''', "RequestSafetyTests"),
 ("base URL's trailing slash kept (double slash)", C, '''while prefix.hasSuffix("/") { prefix.removeLast() }''', '''''', "ValueRequestTests|RequestSafetyTests"),
 ("port 0 accepted", C, '''!(Int(port).map { (1...65535).contains($0) } ?? false)''', '''!(Int(port).map { (0...65535).contains($0) } ?? false)''', "RequestSafetyTests"),
 ("CR allowed in a header value", C, '''if value.unicodeScalars.contains(where: { $0 == "\\r" || $0 == "\\n" || $0 == "\\0" }) {''', '''if value.unicodeScalars.contains(where: { $0 == "\\n" || $0 == "\\0" }) {''', "MethodAndHeaderTests|RequestSafetyTests"),
 ("form Content-Type sends JSON", C, '''if media == "application/x-www-form-urlencoded" {''', '''if false {''', "BodyEncodingTests"),
 ("multipart without its closing boundary", C, '''return body + Data("--\\(boundary)--\\r\\n".utf8)''', '''return body''', "MultipartTests"),
 ("+json not a JSON type", C, '''return media.hasSuffix("+json") ? "application/json" : media''', '''return media''', "BodyEncodingTests"),
 ("a raw body without Content-Type", C, '''if value.bodyFile != nil || request.httpBody != nil, headers.value(forKey: "Content-Type") == nil {''', '''if value.bodyFile != nil, headers.value(forKey: "Content-Type") == nil {''', "BodyEncodingTests|ValueRequestTests"),
 ("query parameters not counted in the URL's length", C, '''return query.totalItems() > 0 ? try urlWithQuery(result, query: RestEntity()) : result''', '''return result''', "RequestSafetyTests"),
 ("method sent lower-case", C, '''public var name: String { rawValue.uppercased() }''', '''public var name: String { rawValue }''', "MethodAndHeaderTests"),
 # Redirects
 ("303 keeps POST", C, '''                response.statusCode == 303
                ? method != "HEAD" : [301, 302].contains(response.statusCode) && method == "POST"''', '''[301, 302].contains(response.statusCode) && method == "POST"''', "RedirectTests"),
 ("307 turns POST into GET", C, ''': [301, 302].contains(response.statusCode) && method == "POST"''', ''': [301, 302, 307].contains(response.statusCode) && method == "POST"''', "RedirectTests"),
 ("a Location resolved against the first URL", C, '''guard let base = current.url, let url = URL(string: location, relativeTo: base)?.absoluteURL,''', '''guard let base = current.url, let url = URL(string: location, relativeTo: firstURL)?.absoluteURL,''', "RedirectTests"),
 ("HEAD shown as -X HEAD in cURL", "Sources/RestManager/RestManager+CurlCommand.swift", '''if method == "HEAD" { parts.append("--head") } else if method != "GET" { parts.append("-X \\(method)") }''', '''if method != "GET" { parts.append("-X \\(method)") }''', "CurlCommandTests"),
 ("finished names the call's relative URL", C, '''        func describe(_ request: URLRequest) { lock.withLock { eventRequest = request } }''', '''        func describe(_ request: URLRequest) {}''', "EventTests"),
 ("stream: an already cancelled task sends", C, '''        if Task.isCancelled { throw CustomError.cancelled }
        let buffer = StreamBuffer()''', '''        let buffer = StreamBuffer()''', "CancellationTests"),
 ("a 300 is a success", C, '''public var isSuccess: Bool { error == nil && (200..<300).contains(statusCode ?? 0) }''', '''public var isSuccess: Bool { error == nil && (200...300).contains(statusCode ?? 0) }''', "ErrorTests"),
 ("cancel after completion marks the handle cancelled", C, '''if taken != nil { wasCancelled = cancelling }''', '''wasCancelled = wasCancelled || cancelling''', "CancellationTests|NoSilentChangeTests"),
 ("an untrusted certificate as a generic TLS failure", C, '''let untrusted = text.lowercased().contains("certificate")''', '''let untrusted = false''', "TLSFailureTests"),
 ("an empty body for an Optional type throws", C, '''                if let none = none as? Value { return none }
''', '''''', "ReviewFindingsTests"),
 ("JSON control characters unescaped", C, '''                case ..<0x20:
                    bytes += Array("\\\\u00".utf8) + [lowerHexDigits[Int(byte >> 4)], lowerHexDigits[Int(byte & 0x0F)]]
''', '''''', "BodyEncodingTests"),
 ("multipart file name unquoted", C, '''            text.replacingOccurrences(of: "\\"", with: "%22").replacingOccurrences(of: "\\r", with: "%0D")
                .replacingOccurrences(of: "\\n", with: "%0A")''', '''            text''', "MultipartTests"),
 ("percent-encoding in lower-case hex", C, '''default: output += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]''', '''default: output += [UInt8(ascii: "%"), lowerHexDigits[Int(byte >> 4)], lowerHexDigits[Int(byte & 0x0F)]]''', "QueryEncodingTests|BodyEncodingTests"),
 ("an empty header name accepted", C, '''guard !name.isEmpty, name.utf8.allSatisfy({ Encoding.tokenCharacters[Int($0)] }) else {''', '''guard name.utf8.allSatisfy({ Encoding.tokenCharacters[Int($0)] }) else {''', "MethodAndHeaderTests"),
 ("a declined challenge's 401 lost", C, '''let declined = urlError?.code == .cancelled && task.response is HTTPURLResponse''', '''let declined = false''', "AuthChallengeTests"),
 ("negative maximumRedirects kept", C, '''set { withState { $0.maximumRedirects = max(0, newValue) } }''', '''set { withState { $0.maximumRedirects = newValue } }''', "RedirectTests"),
 ("negative maximumResponseSize kept", C, '''set { withState { $0.maximumResponseSize = newValue.map { max(0, $0) } } }''', '''set { withState { $0.maximumResponseSize = newValue } }''', "ResponseSizeLimitTests"),
 ("an infinite timeout accepted", C, '''guard timeout > 0, timeout.isFinite else { throw CustomError.invalidTimeout(timeout) }''', '''guard timeout > 0 else { throw CustomError.invalidTimeout(timeout) }''', "TimeoutTests"),
 ("event duration in seconds", C, '''return "finished \\(line(request)) \\(outcome) in \\(String(format: "%.1f", duration * 1000)) ms"''', '''return "finished \\(line(request)) \\(outcome) in \\(String(format: "%.1f", duration)) ms"''', "EventTests"),
 ("an already cancelled task sends", C, '''        if Task.isCancelled { return cancelled }
        let slot''', '''        let slot''', "CancellationTests"),
 ("a relative URL without base: wrong reason", C, '''reason: "it is relative and the manager has no baseURL")''', '''reason: "only absolute http and https URLs are supported")''', "ValueRequestTests"),
 ("loadData keeps the manager's headers", C, '''        snapshot.headers = RestEntity(ignoringKeyCase: true)
        snapshot.interceptors = []''', '''        snapshot.interceptors = []''', "AsyncAndCodableTests"),
 ("clearParameters keeps files", C, '''            state.files = []
            state.assembleBody = nil''', '''            state.assembleBody = nil''', "UploadTests"),
 ("httpAdditionalHeaders framing kept out", C, '''        for (name, value) in headers where !frames(name) {''', '''        for (name, value) in headers {''', "SecretTests"),
 ("User-Agent not defaulted", C, '''if headers.value(forKey: "User-Agent") == nil { headers.add(value: userAgent, forKey: "User-Agent") }''', '''''', "MethodAndHeaderTests"),
 ("base URL fragment kept", C, '''            let beforeFragment = text[..<(text.firstIndex(of: "#") ?? text.endIndex)]''', '''            let beforeFragment = text[...]''', "RequestSafetyTests"),
 ("redaction: a lone user name kept", C, '''                    let user = authority[..<at].firstIndex(of: ":").map { authority[...$0] } ?? ""''', '''                    let user = authority[..<at].firstIndex(of: ":").map { authority[...$0] } ?? authority[..<at]''', "SecretTests"),
 ("auth: an answer does not prove the token", A, '''if results.response != nil { proven(token) }''', '''if results.response != nil { _ = token }''', "AuthenticatorTests"),
 ("auth: only the last token remembered", A, '''if sentTokens.count > 8 { sentTokens.removeFirst() }''', '''if sentTokens.count > 1 { sentTokens.removeFirst() }''', "AuthenticatorTests"),
 ("auth: a 401 to an older token refreshes again", A, '''                if current.accessToken != token { return .resend }
''', '''''', "AuthenticatorTests"),
 ("auth: a refresh's error without its reason", A, '''let reason = "the credential refresh failed: \\(error.localizedDescription)"''', '''let reason = "the credential refresh failed"''', "AuthenticatorTests"),
 ("auth: refreshes before sending not reported", A, '''            return try await authenticator.adapt(request, onRefresh: { events?(.refreshingCredential) })''', '''            _ = events
            return try await authenticator.adapt(request, onRefresh: {})''', "AuthenticatorTests"),
 ("retry: a body cut short not retried", P, '''.badServerResponse, .unknown''', '''.badServerResponse''', "RetryPolicyTests"),
 ("retry: every transport error retried", P, '''                    Self.retryableErrors.contains(urlError.code)''', '''                    Self.retryableErrors.contains(urlError.code) || true''', "RetryPolicyTests"),
 ("retry: the first retry waits twice the initial delay", P, '''pow(2, Double(min(retry, 64) - 1))''', '''pow(2, Double(min(retry, 64)))''', "RetryPolicyTests"),
 ("retry: no floor under the jitter", P, '''Double.random(in: ceiling / 2...ceiling)''', '''Double.random(in: 0...ceiling)''', "RetryPolicyTests"),
 ("retry: Retry-After with spaces unread", P, '''let text = value.trimmingCharacters(in: .whitespaces)''', '''let text = value''', "RetryPolicyTests"),
 ("retry: RFC 850 dates unread", P, '''"EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"''', '''"EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"''', "RetryPolicyTests"),
 ("cache: an unsafe method's error invalidates", R, '''(200..<400).contains(http.statusCode)''', '''(200..<600).contains(http.statusCode)''', "ResponseCacheTests"),
 ("cache: an answer larger than the cache stored", R, '''&& (hasValidator || !redirected && Self.lifetime(response) > Self.age(response)) && cost <= maximumBytes''', '''&& (hasValidator || !redirected && Self.lifetime(response) > Self.age(response))''', "ResponseCacheTests"),
 ("cache: a 304 with other validators revalidates", R, '''                guard matched else { return }
''', '''                matched = true
''', "ResponseCacheTests"),
 ("cache: Vary names compared by case", R, '''let vary = Self.directives(response.value(forHTTPHeaderField: "Vary"))''', '''let vary = (response.value(forHTTPHeaderField: "Vary") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }''', "ResponseCacheTests"),
 ("SSE: an empty Last-Event-ID sent", S, '''if let id = parser.lastEventID, !id.isEmpty {''', '''if let id = parser.lastEventID {''', "ServerSentEventsTests"),
 ("SSE: no Accept header", S, '''                request.headers.add(value: "text/event-stream", forKey: "Accept")
''', '''''', "ServerSentEventsTests"),
 ("SSE: a Content-Type with parameters refused", S, '''let media = contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()''', '''let media = Optional(contentType.lowercased())''', "ServerSentEventsTests"),
 ("download: a 416 without a validator restarts", T, '''if status == 206 || (status == 416 && sentValidator != nil) {''', '''if status == 206 || status == 416 {''', "DownloadTests"),
 ("download: the lock file left behind", T, '''for file in [validatorFile.path, destination.path + ".part.lock"] { unlink(file) }''', '''for file in [validatorFile.path] { unlink(file) }''', "DownloadTests"),
 ("progress: the same figure twice", T, '''guard figure != last, figure.completedBytes >= last?.completedBytes ?? 0 else { return }''', '''guard figure.completedBytes >= last?.completedBytes ?? 0 else { return }''', "DownloadTests"),
 ("mock: the first matching stub wins", 'Sources/MockServer/Stubs.swift', '''return (nil, stubs.last { $0.matches(request) })''', '''return (nil, stubs.first { $0.matches(request) })''', "MockServerTestKitTests|AuthenticatorTests"),
 ("mock: a prefix stub matches only exactly", 'Sources/MockServer/Stubs.swift', '''        if path.hasSuffix("*") { return request.path.hasPrefix(String(path.dropLast())) }
''', '''''', "MockServerTestKitTests|AuthenticatorTests"),
 ("mock: stubs before queued answers", 'Sources/MockServer/Stubs.swift', '''            if !queued.isEmpty { return (queued.removeFirst(), nil) }
            return (nil, stubs.last { $0.matches(request) })''', '''            if let stub = stubs.last(where: { $0.matches(request) }) { return (nil, stub) }
            if !queued.isEmpty { return (queued.removeFirst(), nil) }
            return (nil, nil)''', "MockServerTestKitTests|AuthenticatorTests"),
 ("mock: removeAllStubs keeps queued answers", 'Sources/MockServer/Stubs.swift', '''            stubs = []
            queued = []''', '''            stubs = []''', "MockServerTestKitTests|AuthenticatorTests"),
 ("mock: a stub's method ignored", 'Sources/MockServer/Stubs.swift', '''        if let method, method != request.method.uppercased() { return false }
''', '''''', "MockServerTestKitTests|AuthenticatorTests"),
 ("add moves a key to the end", C, '''            entries[first].value = value
            entries = entries.prefix(first + 1) + entries.dropFirst(first + 1).filter { $0.normalized != normalized }''', '''            entries.removeAll { $0.normalized == normalized }
            entries.append(Entry(key: key, value: value, normalized: normalized))''', "QueryEncodingTests"),
 ("allValues keeps the last of a repeated key", C, '''values[key] = values[key].map { $0 + ", " + entry.value } ?? entry.value''', '''values[key] = entry.value''', "MethodAndHeaderTests"),
 ("stream: the network waits for a reader behind", C, '''                let limit = ResponseBody.maximumUnreadBytes
                guard unread.count + data.count <= limit else {''', '''                let limit = ResponseBody.maximumUnreadBytes
                let deadline = Date(timeIntervalSinceNow: 0.5)
                while unread.count + data.count > limit, lock.wait(until: deadline) {}
                guard unread.count + data.count <= limit else {''', "StreamingTests"),
 ("stream: retried after its head", C, '''guard let steps, stream?.isOpen != true else { return finish(results) }''', '''guard let steps else { return finish(results) }''', "StreamingTests"),
 ("stream: a cached answer's body dropped", C, '''                if case .success? = head, let data = results.data { unread.append(data) }
''', '''''', "ResponseCacheTests"),
 ("one redirect fewer than the limit", C, '''guard hops <= settings.maximumRedirects else''', '''guard hops < settings.maximumRedirects else''', "RedirectTests"),
 ("an origin without its port", C, '''return "\\(scheme)://\\(url.host?.lowercased() ?? ""):\\(url.port ?? (scheme == "https" ? 443 : 80))"''', '''return "\\(scheme)://\\(url.host?.lowercased() ?? "")"''', "OriginTests|SecretTests|AuthenticatorScopeTests"),
 ("body headers dropped on a cross-origin 307", C, '''becomesGet ? [] : RequestBuilder.bodyHeaderNames.map { $0.lowercased() })''', '''[] as [String])''', "RedirectTests|SecretTests"),
 ("a redirect to another scheme followed", C, '''let target = try? RequestBuilder.urlWithQuery(url, query: RestEntity())''', '''let target = Optional(url)''', "RedirectTests"),
 # Deadline, size limit, attempts
 ("size limit off by one", C, '''if let limit = settings.maximumResponseSize, body.count + data.count > limit {''', '''if let limit = settings.maximumResponseSize, body.count + data.count >= limit {''', "ResponseSizeLimitTests"),
 ("a retry that ends after the deadline", C, '''elapsed + delay < settings.timeout''', '''elapsed < settings.timeout''', "RetryPolicyTests|InterceptorTests"),
 ("no cap on attempts", C, '''guard let delay, number < RestManager.maximumAttempts,''', '''guard let delay,''', "InterceptorTests"),
 # De-duplication
 ("sharing key from the path alone", C, '''"\\(request.httpMethod ?? "GET") \\(request.url?.absoluteString ?? "")\\n''', '''"\\(request.httpMethod ?? "GET") \\(request.url?.path ?? "")\\n''', "DeduplicationTests"),
 ("dedup: the size limit not in the key", C, '''let limits = [snapshot.maximumRedirects, snapshot.maximumResponseSize ?? -1]''', '''let limits = [snapshot.maximumRedirects]''', "DeduplicationTests"),
 ("dedup: shared before the interceptors adapt", C, '''if number == 1, let sharing, joinedAnother(sharing, sending: next) { return }''', '''if number == 1, let sharing, joinedAnother(sharing, sending: firstRequest) { return }''', "DeduplicationTests"),
 ("sharing key without headers", C, '''?? "")\\n\\(headers)\\n\\(settings)"''', '''?? "")\\n\\n\\(settings)"''', "DeduplicationTests"),
 ("POST de-duplicated", C, '''let shared = snapshot.deduplicates && [.get, .head].contains(value.method) && value.transfer == nil''', '''let shared = snapshot.deduplicates && value.transfer == nil''', "DeduplicationTests"),
 # Redaction
 ("Cookie shown in cURL", C, '''return ["cookie", "key", "auth", "token",''', '''return ["key", "auth", "token",''', "SecretTests|CurlCommandTests"),
 ("otp not a secret name", C, '''"code", "otp", "pin"''', '''"code", "pin"''', "SecretTests"),
 # Retry policy
 ("PATCH retried by default", P, '''retryableMethods: Set<HttpMethod> = [.get, .head, .put, .delete, .options]''', '''retryableMethods: Set<HttpMethod> = [.get, .head, .put, .patch, .delete, .options]''', "RetryPolicyTests"),
 ("Retry-After read only on 503", P, '''if status == 429 || status == 503,''', '''if status == 503,''', "RetryPolicyTests"),
 ("backoff grows linearly", P, '''RestManager.finite(initialDelay * pow(2, Double(min(retry, 64) - 1)))''', '''RestManager.finite(initialDelay * Double(min(retry, 64)))''', "RetryPolicyTests"),
 ("one retry too many", P, '''guard retry <= maximumRetries, retryableMethods.contains(method) else { return nil }''', '''guard retry <= maximumRetries + 1, retryableMethods.contains(method) else { return nil }''', "RetryPolicyTests"),
 ("a Retry-After longer than maximumDelay waited for", P, '''return seconds <= RestManager.finite(maximumDelay) ? seconds : nil''', '''return seconds''', "RetryPolicyTests"),
 # Downloads and progress
 ("a 206 at another offset appended", T, '''guard status == 206, let range, range.start == offset,''', '''guard status == 206, let range,''', "DownloadTests|TransferIntegrityTests"),
 ("a weak ETag as the resume validator", T, '''response.value(forHTTPHeaderField: "ETag").flatMap { $0.hasPrefix("W/") ? nil : $0 }''', '''response.value(forHTTPHeaderField: "ETag")''', "DownloadTests"),
 ("empty 206s without bound", T, '''guard answersWithoutProgress < 3 else''', '''guard answersWithoutProgress < 1000 else''', "TransferIntegrityTests"),
 ("no back-pressure on a slow delegate", C, '''while queued >= Self.limit, excused == 0, lock.wait(until: deadline) {}''', '''''', "TransferBackPressureTests|DelegateBacklogTests"),
 ("FoundationNetworking's timer before the library's deadline", C, '''request.timeoutInterval = min(timeout, 1e8).rounded(.up) + 1''', '''request.timeoutInterval = min(timeout, 1e8).rounded(.down)''', 'UploadTimerTests'),
 ("an excused call does not let a waiting caller go on", C, '''while queued >= Self.limit, excused == 0, lock.wait(until: deadline) {}''', '''while queued >= Self.limit, lock.wait(until: deadline) {}''', "DelegateBacklogTests"),
 ("the validator read through a link", T, '''let validatorText = regular ? try? String(contentsOf: validatorFile, encoding: .utf8) : nil''', '''let validatorText = try? String(contentsOf: validatorFile, encoding: .utf8)''', "TransferIntegrityTests"),
 ("the rest of a short 206 one byte short", T, '''if rangeEnd != nil, let total, offset + written < total { return false }''', '''if rangeEnd != nil, let total, offset + written < total - 1 { return false }''', "DownloadTests"),
 ("a closed range, which httpbin refuses past the end", T, '''request.setValue(validator.map { _ in "bytes=\\(offset)-" }, forHTTPHeaderField: "Range")''', '''request.setValue(validator.map { _ in "bytes=\\(offset)-\\(offset + 8_388_607)" }, forHTTPHeaderField: "Range")''', "DownloadTests"),
 ("a transfer keeps the manager's deadline", T, '''snapshot.timeout = Self.never''', '''_ = snapshot.timeout''', "TransferTimeoutTests"),
 ("no idle timeout for transfers", C, '''if stream != nil || transfer != nil {''', '''if stream != nil {''', "TransferTimeoutTests"),
 ('a file that changed size while sent succeeds', T, '''FileStream.size(file) == size ? nil : FileStream.failure(file, "it changed size while it was sent")''', '''nil''', 'TransferIntegrityTests'),
 ("a Content-Range total equal to its last byte", T, '''numbers[3].map({ $0 > last })''', '''numbers[3].map({ $0 >= last })''', "DownloadTests|TransferIntegrityTests"),
 ("progress may go backwards", T, '''guard figure != last, figure.completedBytes >= last?.completedBytes ?? 0 else { return }''', '''guard figure != last else { return }''', "DownloadTests|UploadTests"),
 ("no final progress report", C, '''if results.isSuccess { transfer?.reportProgress(of: task, final: true) }''', '''''', "DownloadTests|UploadTests"),
 # Events and interceptors
 ("finished reported after the completion", C, '''            eventHandler?(.finished(named, results, duration: results.metrics?.duration ?? 0))
            queue.async { [results] in taken(results) }''', '''            queue.async { [results] in taken(results) }
            eventHandler?(.finished(named, results, duration: results.metrics?.duration ?? 0))''', "EventTests"),
 ("an adapted request not validated", C, '''            for (name, value) in request.allHTTPHeaderFields ?? [:] { try validateHeader(name: name, value: value) }''', '''''', "InterceptorTests|RequestSafetyTests|NoSilentChangeTests"),
 ("an answer skips the later interceptors", C, '''return await self.decide(answer.results, for: adapted, attempt: number, from: index + 1)''', '''return await self.decide(answer.results, for: adapted, attempt: number, from: interceptors.count)''', "InterceptorTests|ResponseCacheTests"),
 # Authenticator
 ("getData keeps the interceptors", C, '''        snapshot.interceptors = []
''', '''''', "AuthenticatorTests|AuthenticatorScopeTests"),
 ("no refresh-loop guard", A, '''return refreshesExhausted() ? .giveUp : .refresh(current)''', '''return .refresh(current)''', "AuthenticatorTests"),
 ("a token with CR used", A, '''guard !token.unicodeScalars.contains(where: { $0 == "\\r" || $0 == "\\n" || $0 == "\\0" }) else {''', '''guard true else {''', "AuthenticatorScopeTests"),
 ("the caller's Authorization overwritten", A, '''guard !Self.isRefreshing, request.value(forHTTPHeaderField: "Authorization") == nil else { return request }''', '''guard !Self.isRefreshing else { return request }''', "AuthenticatorTests|AuthenticatorScopeTests"),
 # Response cache
 ("Vary ignored", R, '''entry.varied.allSatisfy { request.value(forHTTPHeaderField: $0.key) ?? "" == $0.value }''', '''true''', "ResponseCacheTests"),
 ("Age not subtracted", R, '''bornAt: Date() - Self.age(response)''', '''bornAt: Date()''', "ResponseCacheTests"),
 ("an answer's no-store stored", R, '''!control.contains("no-store") && !requestControl.contains("no-store")''', '''!requestControl.contains("no-store")''', "ResponseCacheTests"),
 ("the newest entry evicted", R, '''let use = uses[usesStart]''', '''let use = uses[uses.count - 1]''', "ResponseCacheTests"),
 ("cache: removeAll forgets the entries, not their bytes", R, '''withLock { entries.keys.forEach { replace($0, with: []) } }''', '''withLock { entries = [:] }''', "ResponseCacheTests"),
 ("cache: an invalidation forgets the entries, not their bytes", R, '''doomed.forEach { replace($0, with: []) }''', '''doomed.forEach { entries[$0] = nil }''', "ResponseCacheTests"),
 ("a 304's headers not merged", R, '''let fields = Array(entry.response.allHeaderFields) + Array(updates)''', '''let fields = Array(entry.response.allHeaderFields)''', "ResponseCacheTests"),
 # Streaming
 ("CR then LF across chunks is two line ends", C, '''if afterCR, byte == 10, index == start {''', '''if afterCR, byte == 10, index == start, index > 0 {''', "StreamingTests"),
 ("empty lines dropped", C, '''                    lines.append(String(decoding: partial, as: UTF8.self))''', '''                    if !partial.isEmpty { lines.append(String(decoding: partial, as: UTF8.self)) }''', "StreamingTests"),
 ("a last line without a line end dropped", C, '''guard !partial.isEmpty else { return nil }''', '''guard false else { return nil }''', "StreamingTests"),
 ("unread bytes without bound", C, '''guard unread.count + data.count <= limit else {''', '''guard true else {''', "StreamingTests"),
 ("an error body kept whole (a stream's, a download's)", C, '''body.append(data.prefix(max(0, Self.errorBodyLimit - body.count)))''', '''body.append(data)''', "StreamingTests|DownloadTests|EveryCallEndsTests"),
 ("streams de-duplicated", C, '''sharing: shared && value.stream == nil && value.interceptors.isEmpty ? inFlight : nil)''', '''sharing: shared && value.interceptors.isEmpty ? inFlight : nil)''', "StreamingTests"),
 ("no idle timeout", C, '''guard idle >= settings.idleTimeout else''', '''guard idle >= settings.idleTimeout * 1000 else''', "StreamingTests"),
 ("an idle timeout reported as the whole call's", C, '''limit: .idle)''', '''limit: .wholeCall)''', "TransferTimeoutTests"),
 ("the idle check blind to bytes going out", C, '''if sent != bytesSent || task == nil {''', '''if task == nil {''', "TransferTimeoutTests"),
 ("decode of a failed call without its error", C, '''        ) throws -> Value {
            if let error { throw error }''', '''        ) throws -> Value {''', "AsyncAndCodableTests"),
 ("a cancelled handle's exchange starts anyway", C, '''guard !finished, handle.attach(to: self) else { return false }''', '''guard !finished else { return false }
                _ = handle.attach(to: self)''', "CancellationTests"),
 ("an open stream cancelled on the delegate queue", C, '''if resources.headArrived { cancelOffQueue(task) } else { cancelLater(task) }''', '''cancelLater(task)''', "StreamingTests"),
 ("a non-2xx head opens the stream", C, '''target = (200..<300).contains(status) && ![204, 205].contains(status) ? .stream : .errorBody''', '''target = .stream''', "StreamingTests"),
 ("every leading space stripped", S, '''if value.first == " " { value = value.dropFirst() }''', '''while value.first == " " { value = value.dropFirst() }''', "ServerSentEventsTests"),
 ("BOM kept", S, '''if atStart, line.first == "\\u{FEFF}" { line = line.dropFirst() }''', '''''', "ServerSentEventsTests"),
 ("event type kept for the next event", S, '''            type = ""
''', '''''', "ServerSentEventsTests"),
 ("an id with NUL accepted", S, '''case "id" where !value.contains("\\u{0}") && value.utf8.count <= 65_536: idBuffer''', '''case "id" where value.utf8.count <= 65_536: idBuffer''', "ServerSentEventsTests"),
 ("makeURLRequest: files by URL not assembled", C, '''        if let assemble = value.assembleBody {
            value = try assemble(value, {})''', '''        if false, let assemble = value.assembleBody {
            value = try assemble(value, {})''', "UploadTests"),
 ("SSE: an event too long to hold reconnects", S, '''if quietConnections > 0 { fatal.append(.dataLengthExceedsMaximum) }''', '''''', "ServerSentEventsTests"),
 ("SSE: a connection's events not counted", S, '''                            quietConnections = 0
''', '''''', "ServerSentEventsTests"),
 ("SSE: quiet connections do not back off", S, '''let backoff = quietConnections == 0 ? 0 : Swift.min(0.05 * Double(1 << quietConnections), 30)''', '''let backoff = 0.0''', "ServerSentEventsTests"),
 ("SSE: the backoff after a connection with events", S, '''let backoff = quietConnections == 0 ? 0 : Swift.min(0.05 * Double(1 << quietConnections), 30)''', '''let backoff = Swift.min(0.05 * Double(1 << quietConnections), 30)''', "ServerSentEventsTests"),
 ("an adapted URL not checked", C, '''                        adapted.url = try RequestBuilder.urlWithQuery(
                            adapted.url ?? URL(fileURLWithPath: "/"), query: RestEntity())
''', '''''', "InterceptorTests"),
 ("no URL length limit (libcurl's Out of memory)", C, '''text.utf8.count > 1_000_000 {''', '''text.utf8.count > 100_000_000 {''', "RequestSafetyTests"),
 ("URL length limit off by one", C, '''text.utf8.count > 1_000_000 {''', '''text.utf8.count >= 1_000_000 {''', "RequestSafetyTests"),
 ("a too-long URL cut before it is redacted", C, '''Redaction.url(text).prefix(60) + "…"''', '''Redaction.url(String(text.prefix(60))) + "…"''', "RequestSafetyTests"),
 ("SSE: a request's body dropped without a word", S, '''guard request.body == nil, request.bodyParameters.totalItems() == 0, request.files.isEmpty else {''', '''guard true else {''', "ServerSentEventsTests"),
 ("mock: a stub path without its slash never matches", 'Sources/MockServer/Stubs.swift', '''self.path = path.hasPrefix("/") || path.hasPrefix("*") ? path : "/" + path''', '''self.path = path''', "MockServerTestKitTests"),
 ("cache: a qualified no-cache ignored", R, '''control.contains { $0 == "no-cache" || $0.hasPrefix("no-cache=") }''', '''control.contains("no-cache")''', "ResponseCacheTests"),
 ("SSE: retry digits past an Int ignored", S, '''let milliseconds = Int(value) ?? Int.max''', '''guard let milliseconds = Int(value) else { break }''', "ServerSentEventsTests"),
 ("retry with non-digits accepted", S, '''case "retry" where !value.isEmpty && value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }):''', '''case "retry":''', "ServerSentEventsTests"),
 ("no Last-Event-ID on reconnection", S, '''if let id = parser.lastEventID, !id.isEmpty { request.headers.add(value: id, forKey: "Last-Event-ID") }''', '''''', "ServerSentEventsTests"),
 ("a 204 reconnects", S, '''if response.httpStatusCode == 204 {''', '''if response.httpStatusCode == 299 {''', "ServerSentEventsTests"),
 ("any Content-Type accepted", S, '''guard media == "text/event-stream" else {''', '''guard true else {''', "ServerSentEventsTests"),
 ("an event without data dispatched", S, '''guard hasData else { return nil }''', '''''', "ServerSentEventsTests"),
 ("idle timeout not checked", C, '''if value.stream != nil || value.transfer != nil, !(snapshot.idleTimeout > 0) {''', '''if false, !(snapshot.idleTimeout > 0) {''', "TransferTimeoutTests"),
 ("SSE: events(in:) ends quietly on a network error", S, '''let failure = source.request == nil ? nil : error as? CustomError''', '''let failure = error as? CustomError''', "ServerSentEventsTests"),
 ("SSE: a huge retry not capped", S, '''let delay = Swift.max(RestManager.finite(Double(parser.reconnectionTime) / 1000), backoff, 0.1)''', '''let delay = Swift.max(Double(parser.reconnectionTime) / 1000, backoff, 0.1)''', "ServerSentEventsTests"),
 ("stream: a second reader replaces the first", C, '''guard reader == nil else {''', '''guard true else {''', "StreamingTests"),
 ("lines: no bound on a line", C, '''if partial.count > limit {''', '''if false, partial.count > limit {''', "StreamingTests"),
 ("SSE: no bound on an event's data", S, '''guard data.utf8.count + (hasData ? 1 : 0) + value.utf8.count <= limit else {''', '''guard true else {''', "ServerSentEventsTests"),
 ("mock: stop closes under an upload", M, '''guard result == .stopping, inBody, let left = server.stopGraceLeft() else { return result }''', '''guard result == .stopping, inBody && false, let left = server.stopGraceLeft() else { return result }''', "MockServerStopGraceTests"),
 ("a cached answer to a download not written", C, '''return finish(lock.withLock { finished ? nil : transfer?.written(delivered) } ?? delivered)''', '''return finish(delivered)''', "ResponseCacheTests"),
 ("cache: a download's absent body stored", R, '''if http.statusCode == 200, let body = results.data { store(body, http, for: request) }''', '''if http.statusCode == 200 { store(results.data ?? Data(), http, for: request) }''', "ResponseCacheTests"),
 ("a cached answer written after the call ended", C, '''return finish(lock.withLock { finished ? nil : transfer?.written(delivered) } ?? delivered)''', '''return finish(lock.withLock { transfer?.written(delivered) } ?? delivered)''', "ResponseCacheTests"),
 ("mock: a half-sent head holds the stop", M, '''switch waitForInput(timeout: max(0, waitLimit), inBody: headDone != nil) {''', '''switch waitForInput(timeout: max(0, waitLimit), inBody: requestStarted != nil) {''', "MockServerStopGraceTests"),
 ("a line cut off at the end taken", S, '''guard let line, !current.endedMidLine else {''', '''guard let line else {''', "ServerSentEventsTests"),
 ("lines: the end mid-line not told", C, '''if last != nil { endedMidLine = true }''', '''''', "ServerSentEventsTests"),
 ("an unterminated block's id kept", S, '''            idBuffer = lastEventID
''', '''''', "ServerSentEventsTests"),
 ("cache: a gone entry's 304 delivered on a later attempt", R, '''guard let entry = revalidated(request, with: http) else { return .retry(after: 0) }''', '''guard let entry = revalidated(request, with: http) else { return attempt == 1 ? .retry(after: 0) : .deliver }''', "ResponseCacheTests"),
 ("auth: a refresh after a logout", A, '''guard stored != nil else { return .answered(.failure(Self.removed)) }''', '''''', "AuthenticatorTests"),
 ("SSE: an ID too long to send back kept", S, '''&& value.utf8.count <= 65_536: idBuffer = String(value)''', ''': idBuffer = String(value)''', "ServerSentEventsTests"),
 ("downloads: only empty answers count as no progress", T, '''answersWithoutProgress = offset + written > reached ? 0 : answersWithoutProgress + 1''', '''answersWithoutProgress = written > 0 ? 0 : answersWithoutProgress + 1''', "TransferIntegrityTests"),
 ("mock parser: bare LF accepted in head", "Sources/MockServer/HTTPMessage.swift", '''guard index > 0, buffer[base + index - 1] == Self.cr else { return .failure(status: 400, reason: "bare LF in request head") }''', '''guard index > 0 else { return .failure(status: 400, reason: "bare LF in request head") }''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: CL and TE together", "Sources/MockServer/HTTPMessage.swift", '''guard contentLengths.isEmpty else { return .failure(status: 400, reason: "both Content-Length and Transfer-Encoding") }''', '''guard contentLengths.isEmpty || true else { return .failure(status: 400, reason: "both Content-Length and Transfer-Encoding") }''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: differing Content-Lengths", "Sources/MockServer/HTTPMessage.swift", '''guard contentLengths.allSatisfy({ $0 == first }) else''', '''guard !contentLengths.isEmpty else''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: chunk data without CRLF", "Sources/MockServer/HTTPMessage.swift", '''guard buffer[base + position] == Self.cr, buffer[base + position + 1] == Self.lf else {''', '''guard buffer[base + position] == Self.cr || true else {''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: chunk size limit doubled", "Sources/MockServer/HTTPMessage.swift", '''if value > limit { tooLarge = true }''', '''if value > limit * 2 { tooLarge = true }''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: lowercase f refused", "Sources/MockServer/HTTPMessage.swift", '''case 97...102: digit = Int(byte) - 87''', '''case 97...101: digit = Int(byte) - 87''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: two Host headers", "Sources/MockServer/HTTPMessage.swift", '''if hosts > 1 {''', '''if hosts > 2 {''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: HTTP/1.1 without Host", "Sources/MockServer/HTTPMessage.swift", '''if version == "HTTP/1.1" && hosts == 0 {''', '''if version == "HTTP/1.1" && hosts < 0 {''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: control bytes in head", "Sources/MockServer/HTTPMessage.swift", '''} else if byte == 0 || byte == 127 || (byte < 32 && byte != 9) {''', '''} else if byte == 0 {''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: head limit x4", "Sources/MockServer/HTTPMessage.swift", '''if index > maximumHeaderBytes { return .failure(status: 431''', '''if index > maximumHeaderBytes * 4 { return .failure(status: 431''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("mock parser: chunk line limit", "Sources/MockServer/HTTPMessage.swift", '''if index - from > limit { return .failure(HeadFailure(status: 400, reason: "chunk line too long")) }''', '''if index - from > limit * 64 { return .failure(HeadFailure(status: 400, reason: "chunk line too long")) }''', "MockServerHardeningTests|MockServerFuzzTests|MockServerHTTPTests|MockServerTestKitTests"),
 ("restdemo: --timeout in any notation", "Sources/restdemo/CommandLine.swift", '''let decimal = value.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || $0 == 46 }''', '''let decimal = !value.isEmpty''', "RestDemoTests"),
 ("restdemo: --retries up to 100", "Sources/restdemo/CommandLine.swift", '''options.retries = try wholeNumber(value, name: "--retries", command: nil, range: 0...10)''', '''options.retries = try wholeNumber(value, name: "--retries", command: nil, range: 0...100)''', "RestDemoTests"),
 ("restdemo: an option as a value", "Sources/restdemo/CommandLine.swift", '''guard index < arguments.count, !arguments[index].hasPrefix("--") else {''', '''guard index < arguments.count else {''', "RestDemoTests"),
 ("restdemo: one extra argument", "Sources/restdemo/CommandLine.swift", '''if invocation.positionals.count > spec.positionals.count {''', '''if invocation.positionals.count > spec.positionals.count + 1 {''', "RestDemoTests"),
 ("backlog: the delegate thread waits too", "Sources/RestManager/RestManager.swift", '''if queued >= Self.limit, DispatchQueue.getSpecific(key: Transport.delegateKey) == nil {''', '''if queued >= Self.limit {''', "DelegateBacklogTests|TransferBackPressureTests"),
 ("backlog: excused calls wait", "Sources/RestManager/RestManager.swift", '''while queued >= Self.limit, excused == 0, lock.wait(until: deadline) {}''', '''while queued >= Self.limit, lock.wait(until: deadline) {}''', "DelegateBacklogTests|TransferBackPressureTests"),
 ("backlog: no limit", "Sources/RestManager/RestManager.swift", '''static let limit = 2_048''', '''static let limit = 2_048_000''', "DelegateBacklogTests|TransferBackPressureTests"),
 ("kit: the mock's Date sent with a stub's own", 'Sources/MockServer/HTTPMessage.swift', 'if !headers.contains(where: { $0.name.lowercased() == "date" }) { head += "Date: \\(Self.httpDate())\\r\\n" }', 'head += "Date: \\(Self.httpDate())\\r\\n"', 'MockServerTestKitTests'),
 ("kit: a raw answer keeps the connection open", "Sources/MockServer/Connection.swift", '''                guard write(Array(piece.data)[...]) else { return false }
            }
            return false''', '''                guard write(Array(piece.data)[...]) else { return false }
            }
            return keepAlive''', "MockServerTestKitTests"),
 ("kit: an event's id may hold a CR", "Sources/MockServer/Stubs.swift", '''if let value, value.unicodeScalars.contains(where: { $0 == "\\r" || $0 == "\\n" }) {''', '''if let value, value.unicodeScalars.contains(where: { $0 == "\\n" }) {''', "MockServerResponseHeaderTests"),
 ("kit: the first matching stub wins", "Sources/MockServer/Stubs.swift", '''return (nil, stubs.last { $0.matches(request) })''', '''return (nil, stubs.first { $0.matches(request) })''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests"),
 ("kit: a path without its slash kept", "Sources/MockServer/Stubs.swift", '''self.path = path.hasPrefix("/") || path.hasPrefix("*") ? path : "/" + path''', '''self.path = path''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests"),
 ("kit: a wildcard read as exact", "Sources/MockServer/Stubs.swift", '''if path.hasSuffix("*") { return request.path.hasPrefix(String(path.dropLast())) }''', '''if path.hasSuffix("*") { return request.path == path }''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests"),
 ("kit: stubs before queued answers", "Sources/MockServer/Stubs.swift", '''if !queued.isEmpty { return (queued.removeFirst(), nil) }''', '''if !queued.isEmpty, !stubs.contains(where: { $0.matches(request) }) { return (queued.removeFirst(), nil) }''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests"),
 ("kit: a repeated fault for any target", "Sources/MockServer/Stubs.swift", '''if let repeated, repeated.method == request.method, repeated.target == request.target {''', '''if let repeated, repeated.method == request.method {''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests"),
 ("kit: untaken requests kept without bound", "Sources/MockServer/Stubs.swift", '''if untaken.count > maximumUntaken {''', '''if untaken.count > maximumUntaken * 100 {''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests|MockServerLifecycleTests"),
 ("kit: takeRequest does not wait", "Sources/MockServer/Stubs.swift", '''if !condition.wait(until: deadline) { break }''', '''break''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests"),
 ("kit: a stub's method compared by case", "Sources/MockServer/Stubs.swift", '''if let method, method != request.method.uppercased() { return false }''', '''if let method, method != request.method { return false }''', "MockServerTestKitTests|UserServiceExampleTests|MockServerHTTPTests|ReqresConformanceTests"),
 ("restdemo: the token to every origin", "Sources/restdemo/Client.swift", '''        rest.baseURL = base
''', '''''', "RestDemoTests"),
 ("restdemo: the API key to every origin", "Sources/restdemo/Transfers.swift", '''if RestManager.isSameOrigin(url, base) { rest.requestHttpHeaders.add(''', '''if !url.absoluteString.isEmpty { rest.requestHttpHeaders.add(''', "RestDemoTests"),
 ("restdemo: an unreadable answer is unreachable", "Sources/restdemo/Transfers.swift", '''where urlError.code == .cannotParseResponse:''', '''where urlError.code == .cannotParseResponse && what.isEmpty:''', "RestDemoStreamingTests"),
 ('interceptors: a call cancelled while adapting goes on', C, '            guard proceeds else { return }\n', '', 'InterceptorTests'),
 ('errors: a space shown as an escape', C, '$0.value < 0x20 || $0.value == 0x7F ?', '$0.value <= 0x20 || $0.value == 0x7F ?', 'ErrorTests'),
 ('restdemo: reconnections reported only with --verbose', "Sources/restdemo/Streaming.swift", 'if !options.verbose {\n            rest.eventHandler', 'if options.verbose {\n            rest.eventHandler', 'RestDemoStreamingTests'),
 ("interceptors: decide in a task of its own (loses the caller's task-local values)", C, '''steps.yield { await self.decide(results, for: sent, attempt: number, from: 0) }''', '''Task { await self.decide(results, for: sent, attempt: number, from: 0) }''', "InterceptorTests"),
 ("interceptors: adapt in a task of its own (a refresh's retried request waits for itself)", C, '''            steps.yield {
                var adapted = self.firstRequest''', '''            Task {
                var adapted = self.firstRequest''', "AuthenticatorTests|InterceptorTests"),
 ("upload: progress totals from the task alone (0 on Linux)", T, '''let expected = task.countOfBytesExpectedToSend > 0 ? task.countOfBytesExpectedToSend : size''', '''let expected = task.countOfBytesExpectedToSend''', "UploadTests"),
 ("multipart: a part's file never closed", T, '''                defer { fclose(input) }
''', '''''', "UploadTests"),
 ("retry policy: a method it does not know taken for a GET", P, '''guard let method = HttpMethod(rawValue: (request.httpMethod ?? "GET").lowercased()) else { return .deliver }''', '''let method = HttpMethod(rawValue: (request.httpMethod ?? "GET").lowercased()) ?? .get''', "RetryPolicyTests"),
 ("url: the port read up to the first slash only", C, '''let authority = rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]''', '''let authority = rest[..<(rest.firstIndex(of: "/") ?? rest.endIndex)]''', "RequestSafetyTests"),
 ("lines: a leading LF taken for the end of a CRLF", C, '''private var afterCR = false''', '''private var afterCR = true''', "StreamingTests"),
 ("lines: a line of exactly the limit refused", C, '''if partial.count > limit {''', '''if partial.count >= limit {''', "StreamingTests"),
 # Every call ends; no silent change
 ("an error answer in memory kept whole", C, '''if target == .memory, !(200..<300).contains(http?.statusCode ?? 0) { target = .errorBody }''', '''''', "EveryCallEndsTests"),
 ("an error body cut at 64 KiB but the call goes on", C, '''return target == .errorBody && body.count >= Self.errorBodyLimit''', '''return false''', "EveryCallEndsTests"),
 ("an interceptor's error wrapped", C, '''self.finish(Results(withError: error))''', '''self.fail(error)''', "InterceptorTests"),
 ("an interceptor's method not checked", C, '''guard !method.isEmpty, method.utf8.allSatisfy({ Encoding.tokenCharacters[Int($0)] }) else {''', '''guard !method.isEmpty else {''', "NoSilentChangeTests"),
 ("repeated header values collapsed on assignment", C, '''for entry in entries { copy.append(value: entry.value, forKey: entry.key) }''', '''for entry in entries { copy.add(value: entry.value, forKey: entry.key) }''', "NoSilentChangeTests"),
 ("a repeated JSON key sent twice", C, '''if let repeated = snapshot.bodyParameters.orderedPairs.first(where: { !seen.insert($0.key).inserted }) {''', '''if let repeated = snapshot.bodyParameters.orderedPairs.first(where: { _ in false }) {''', "NoSilentChangeTests"),
 ("Last-Event-ID dropped across origins", C, '''"cache-control", "last-event-id"''', '''"cache-control"''', "NoSilentChangeTests"),
 ("a fragment's secrets shown", C, '''return output + fragment.prefix(1) + redactingPairs(fragment.dropFirst())''', '''return output + fragment''', "SecretTests"),
 ("a URL inside a query value not looked into", C, '''return isSecretName(name.removingPercentEncoding ?? name) || nested''', '''return isSecretName(name.removingPercentEncoding ?? name)''', "SecretTests"),
 ("SSE: retry 0 reconnects at once", S, '''(Double(parser.reconnectionTime) / 1000), backoff, 0.1)''', '''(Double(parser.reconnectionTime) / 1000), backoff)''', "ServerSentEventsTests"),
 ("a 204 opens a stream", C, '''&& ![204, 205].contains(status)''', '''''', "ServerSentEventsTests"),
 ("auth: a refresh's own 401 waits for the refresh", A, '''guard !Self.isRefreshing, let token = sentToken(of: request) else { return .deliver }''', '''guard let token = sentToken(of: request) else { return .deliver }''', "AuthenticatorTests"),
 ("auth: a logout waits for the refresh to return", A, '''                    guard case .refreshing(let waiting) = state else { return [] }
                    state = .idle
                    return waiting''', '''                    return []''', "AuthenticatorTests"),
 ("auth: rejections counted in one call only", A, '''if withLock({ storedIsUnproven && refreshesExhausted() }) { throw Self.exhausted }''', '''''', "AuthenticatorTests"),
 ("a call's steps not cancelled when it ends", C, '''lock.withLock { stepsTask }?.cancel()''', '''_ = lock.withLock { stepsTask }''', "AuthenticatorTests"),
 ("retry policy: counts the call's attempts", P, '''let retry = RestManager.ownRetries + 1''', '''let retry = attempt''', "RetryPolicyTests"),
 ("a Content-Range number with a sign", T, '''let numbers = parts.map { $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } ? Int64($0) : nil }''', '''let numbers = parts.map { Int64($0) }''', "DownloadTests"),
 ("metrics: a redirect not counted", C, '''                metrics.redirectCount += 1
''', '''''', "MetricsTests"),
 ("metrics: body bytes received not counted", C, '''                    metrics.attempts[metrics.attempts.count - 1].bytesReceived += Int64(data.count)
''', '''''', "MetricsTests"),
 ("metrics: a caller who joined a shared call reported as the network's", C, '''joined = self.exchange != nil''', '''joined = false''', "MetricsTests"),
 ("metrics: a cancelled call reports no attempt", C, '''results.metrics ?? exchange?.measured(endingWith: results.error) ?? none''', '''results.metrics ?? none''', "MetricsTests"),
 ("metrics: a revalidated answer reported as the network's", C, '''                    metrics.source = .revalidated
''', '''''', "MetricsTests"),
 ("metrics: retries not counted", C, '''            metrics.retryCount = retriesAsked.reduce(0, +)
''', '''''', "MetricsTests"),
 ("metrics: an attempt's end not recorded when its task completes", C, '''                metrics = ended(metrics, by: failure)
''', '''''', "MetricsTests"),
 ("metrics: a cached answer reported as the network's", C, '''                            self.lock.withLock { self.metrics.source = .cache }
''', '''''', "MetricsTests"),
]
options = argparse.ArgumentParser()
options.add_argument("--sample", type=int)
options.add_argument("--seed-from-commit", action="store_true")
options.add_argument("--match")
options.add_argument("--from", dest="first", type=int, default=0, help="start at this case (0-based)")
arguments = options.parse_args()
chosen = [case for case in cases[arguments.first:] if arguments.match is None or arguments.match in case[0]]
if arguments.sample:
    seed = 1
    if arguments.seed_from_commit:
        seed = int(subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()[:8] or "1", 16)
    chosen = random.Random(seed).sample(chosen, min(arguments.sample, len(chosen)))
print(f"semantic mutants: {len(chosen)} of {len(cases)}", flush=True)
survived = False
for name, path, old, new, tests in chosen:
    text = open(path).read()
    if text.count(old) != 1:
        print(f"SKIP {name}: pattern count {text.count(old)}"); continue
    open(path, "w").write(text.replace(old, new))
    try:
        b = subprocess.run(["swift", "build", "--build-tests"], capture_output=True, text=True, errors="replace")
        if b.returncode != 0:
            print(f"NOCOMPILE {name}: {b.stdout[-300:]}", flush=True); survived = True; continue
        # A mutant may make a test loop forever: ten minutes, then its whole process group goes.
        t = subprocess.Popen(["swift", "test", "--skip-build", "--filter", tests], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            returncode = t.wait(timeout=600)
        except subprocess.TimeoutExpired:
            os.killpg(t.pid, 9); t.wait(); returncode = "timeout"
            # xctest may run in a group of its own (see Scripts/mutate.py): what runs from this .build goes too.
            subprocess.run(["pkill", "-9", "-f", os.path.join(os.getcwd(), ".build") + "/"], check=False)
        verdict = "killed" if returncode != 0 else "SURVIVED"
        survived = survived or verdict == "SURVIVED"
        print(f"{verdict}: {name}", flush=True)
    finally:
        open(path, "w").write(text)
sys.exit(1 if survived else 0)
