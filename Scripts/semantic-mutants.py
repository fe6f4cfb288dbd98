#!/usr/bin/env python3
"""Semantic mutants: plausible hand-written bugs (a check removed, the wrong collection, a neighbouring constant), each
applied alone to a library file, the tests named next to it run, and the file restored. The seed of the semantic
catalogue the issue "Tests that pin down every promise" asks for; Scripts/mutate.py's mechanical operators are the other.

Usage: python3 Scripts/semantic-mutants.py     (from the package root; about 1 minute per mutant)
Prints one line per mutant: killed, SURVIVED, NOCOMPILE or SKIP (its pattern is no longer in the file). Exit 1 when one
survived."""
import os, subprocess, sys
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
C='Sources/RestManager/RestManager.swift'; A='Sources/RestManager/RestManager+Authentication.swift'; R='Sources/RestManager/RestManager+ResponseCache.swift'
cases = [
 ("cache key without Authorization", R, '''+ "\\n" + (request.value(forHTTPHeaderField: "Authorization") ?? "")''', '''+ "\\n"''', "ResponseCacheTests"),
 ("cache ignores a request's no-cache", R, '''if !noCache, entry.freshUntil > Date()''', '''if entry.freshUntil > Date()''', "ResponseCacheTests"),
 ("cache: HEAD invalidates too", R, '''let unsafe = ["POST", "PUT", "PATCH", "DELETE"].contains(request.httpMethod ?? "GET")''', '''let unsafe = true''', "ResponseCacheTests"),
 ("auth token to every origin", A, '''if let base = manager.baseURL, !Exchange.sameOrigin(base, url) { return request }''', '''''', "AuthenticatorScopeTests"),
 ("auth: a 401 from another origin refreshes", A, '''guard let answered, let sent = request.url, Exchange.sameOrigin(answered, sent) else { return .deliver }''', '''guard answered != nil, request.url != nil else { return .deliver }''', "AuthenticatorScopeTests"),
 ("auth: logout loses to the refresh", A, '''if generation != startedGeneration {''', '''if false, generation != startedGeneration {''', "AuthenticatorScopeTests"),
 ("auth: refresh margin 30 s flat", A, '''return expiresAt.timeIntervalSinceNow < min(30, max(0, life) / 4)''', '''return expiresAt.timeIntervalSinceNow < 30 + 0 * life''', "AuthenticatorScopeTests"),
 ("redaction: sig not secret", C, '''"key", "auth", "authorization", "sig", "jwt"''', '''"key", "auth", "authorization", "jwt"''', "SecretTests"),
 ("redirect: unknown headers follow", C, '''for name in (current.allHTTPHeaderFields ?? [:]).keys where !followers.contains(name.lowercased()) {''', '''for name in (current.allHTTPHeaderFields ?? [:]).keys where !followers.contains(name.lowercased()) && Redaction.isSecretHeader(name) {''', "SecretTests|RedirectTests|OriginTests"),
 ("Retry-After: asctime not read", C, '''"EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"]''', '''"EEEE, dd-MMM-yy HH:mm:ss 'GMT'"]''', "RetryPolicyTests"),
 ("206 overlong appended", C, '''if room < Int64(data.count) { throw Self.violation("the 206 answer is longer than its Content-Range") }''', '''''', "TransferIntegrityTests"),
 ("interceptors: request's before manager's", C, '''let interceptors = snapshot.interceptors + value.interceptors + (snapshot.retryPolicy.map { [$0] } ?? [])''', '''let interceptors = value.interceptors + snapshot.interceptors + (snapshot.retryPolicy.map { [$0] } ?? [])''', "InterceptorTests"),
 ("download: no destination lock", C, '''guard lock >= 0, flock(lock, LOCK_EX | LOCK_NB) == 0 else {''', '''guard lock >= 0 || true else {''', "DownloadDestinationLockTests"),
 ("auth: a second refresh for a replaced credential", A, '''if let stored, stored.accessToken != rejected?.accessToken { return .newer(stored) }''', '''if false, let stored { return .newer(stored) }''', "AuthenticatorTests"),
 ("framing: Expect allowed", C, '''"upgrade", "expect", "te", "trailer"''', '''"upgrade", "te", "trailer"''', "RequestSafetyTests|InterceptorTests"),
]
survived = False
for name, path, old, new, tests in cases:
    text = open(path).read()
    if text.count(old) != 1:
        print(f"SKIP {name}: pattern count {text.count(old)}"); continue
    open(path, "w").write(text.replace(old, new))
    try:
        b = subprocess.run(["swift", "build", "--build-tests"], capture_output=True, text=True)
        if b.returncode != 0:
            print(f"NOCOMPILE {name}: {b.stdout[-300:]}"); continue
        t = subprocess.run(["swift", "test", "--skip-build", "--filter", tests], capture_output=True, text=True)
        verdict = "killed" if t.returncode != 0 else "SURVIVED"
        survived = survived or verdict == "SURVIVED"
        print(f"{verdict}: {name}", flush=True)
    finally:
        open(path, "w").write(text)
sys.exit(1 if survived else 0)
