// The response cache add-on: the same unchanged 1 MiB resource fetched again and again, in one run: without the cache,
// with it revalidating every time (validators, no freshness: a 304 each time), raw URLSession sending the same
// If-None-Match (the floor of a revalidation here: one round trip), and with it serving a fresh answer (max-age).

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Dispatch
import RestManager

enum CacheBench {
    /// `count` sequential GETs per client: requests per second, and body bytes that came over the network.
    static func run(base: String, count: Int) -> [Row] {
        let path = base + "/_test/files/1048576"
        guard let revalidating = URL(string: path), let fresh = URL(string: path + "?maxAge=3600") else { return [] }
        let session = URLSession(configuration: .ephemeral)
        let clients: [(name: String, get: () -> (ok: Bool, bodyBytes: Int))] = [
            ("RestManager", getter(RestManager(), revalidating, cached: false)),
            ("RestManager + ResponseCache, a 304 each time", getter(cachedManager(), revalidating, cached: true)),
            ("raw URLSession sending If-None-Match (a 304 each time)", rawConditional(session, revalidating)),
            ("RestManager + ResponseCache, fresh (max-age)", getter(cachedManager(), fresh, cached: true))
        ]
        var rows: [Row] = []
        var plainRate = 0.0
        for (index, client) in clients.enumerated() {
            var bytes = 0
            var failures = 0
            let started = Clock.nanoseconds()
            for _ in 0..<count {
                let outcome = client.get()
                if !outcome.ok { failures += 1 }
                bytes += outcome.bodyBytes
            }
            let rate = Double(count) / (Double(Clock.nanoseconds() - started) / 1e9)
            if index == 0 { plainRate = rate }
            rows.append(
                Row(
                    scenario: "\(count) GETs of an unchanged 1 MiB resource", client: client.name, inFlight: 1,
                    requestsPerSecond: rate, p50Microseconds: 0, p99Microseconds: 0, cpuMicrosecondsPerRequest: nil,
                    ratioToRaw: rate / plainRate, failures: failures, extra: ["bodyBytesReceived": Double(bytes)]))
        }
        session.invalidateAndCancel()
        return rows
    }

    private static func cachedManager() -> RestManager {
        let rest = RestManager()
        rest.interceptors.append(RestManager.ResponseCache())
        return rest
    }

    /// One GET through `rest`: whether the whole body came back, and how much of it came over the network.
    private static func getter(_ rest: RestManager, _ target: URL, cached: Bool) -> () -> (ok: Bool, bodyBytes: Int) {
        {
            let results = send(rest, target)
            let fromCache = results.response?.headers.value(forKey: RestManager.ResponseCache.statusHeader) != nil
            let ok = results.statusCode == 200 && results.data?.count == 1 << 20
            return (ok, fromCache ? 0 : results.data?.count ?? 0)
        }
    }

    /// Raw URLSession asking with the resource's ETag: a 304 and no body each time.
    private static func rawConditional(_ session: URLSession, _ target: URL) -> () -> (ok: Bool, bodyBytes: Int) {
        {
            var request = URLRequest(url: target)
            request.setValue("\"1048576-v1\"", forHTTPHeaderField: "If-None-Match")
            let done = DispatchSemaphore(value: 0)
            let box = Box<(Int, Int)>()
            session.dataTask(with: request) { data, response, _ in
                box.value = ((response as? HTTPURLResponse)?.statusCode ?? 0, data?.count ?? 0)
                done.signal()
            }.resume()
            done.wait()
            return (box.value?.0 == 304, box.value?.1 ?? 0)
        }
    }

    private static func send(_ rest: RestManager, _ target: URL) -> RestManager.Results {
        let done = DispatchSemaphore(value: 0)
        let box = Box<RestManager.Results>()
        rest.makeRequest(toURL: target, withHttpMethod: .get) { results in
            box.value = results
            done.signal()
        }
        done.wait()
        return box.value ?? RestManager.Results(withError: RestManager.CustomError.cancelled)
    }

    /// Written by a completion, read after the semaphore it signals.
    private final class Box<Value>: @unchecked Sendable {
        var value: Value?
    }
}
