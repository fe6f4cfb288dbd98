// An app target's code, compiled the way a new Xcode 26 app compiles it: with the library files copied in, default
// actor isolation MainActor and approachable concurrency (Scripts/copy-in-check.sh passes the flags). Every
// declaration here is main-actor isolated unless it says otherwise, as in such an app. It calls each kind of API the
// way app code does and checks every result; the first wrong one exits 1 with a line on stderr.
// Usage: app BASE_URL SCRATCH_FOLDER (Tests/AppTarget/server.py serves BASE_URL).

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A model type as an app declares it: decoded off the main actor, so its conformance must not be main-actor
/// isolated (`nonisolated`, as Swift's migration guide says for Codable models in a MainActor-default target).
nonisolated struct User: Decodable, Sendable {
    let id: Int
    let name: String

    /// Notes where decoding ran: the library's async calls decode on their own executor, never the main actor.
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(Int.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        if Thread.isMainThread {
            decodedOnMainThread.set()
        }
    }

    private enum CodingKeys: String, CodingKey {
        case id
        case name
    }
}

/// Set when a `User` was decoded on the main thread.
nonisolated let decodedOnMainThread = Flag()

/// A view model as an app writes one: main-actor state, updated from the library's callbacks and async calls.
final class UsersViewModel {
    let rest = RestManager()
    let base: URL
    var names: [String] = []
    var log: [String] = []

    init(base: URL) {
        self.base = base
    }

    /// The tutorial's pattern: a completion on the library's queue, hopping to the main queue to update state.
    func loadWithTutorialPattern(then next: @escaping @MainActor () -> Void) {
        rest.makeRequest(toURL: base.appendingPathComponent("users"), withHttpMethod: .get) { results in
            let onMain = Thread.isMainThread
            let users = results.data.flatMap { try? JSONDecoder().decode([User].self, from: $0) } ?? []
            DispatchQueue.main.async {
                self.log.append("tutorial completion on main thread: \(onMain)")
                self.names = users.map(\.name)
                next()
            }
        }
    }

    /// `callbackQueue = .main`: the completion runs on the main queue, where main-actor state may be touched.
    func loadOnMainQueue(then next: @escaping @MainActor () -> Void) {
        let rest = RestManager()
        rest.callbackQueue = .main
        rest.makeRequest(toURL: base.appendingPathComponent("users/1"), withHttpMethod: .get) { results in
            MainActor.assumeIsolated {
                self.log.append("main-queue completion: HTTP \(results.response?.httpStatusCode ?? 0)")
                next()
            }
        }
    }

    /// The async calls, a stream, server-sent events, a cached GET and a download with progress.
    func loadAsync(scratch: URL) async throws {
        let users: [User] = try await rest.request([User].self, fromURL: base.appendingPathComponent("users"))
        log.append("async users: \(users.map(\.name).joined(separator: ",")), decoded on main thread: \(decodedOnMainThread.isSet)")

        let (body, response) = try await rest.stream(RestManager.Request(url: base.appendingPathComponent("lines")))
        var lines: [String] = []
        for try await line in body.lines {
            lines.append(line)
        }
        log.append("stream HTTP \(response.httpStatusCode): \(lines.joined(separator: "|"))")

        var events: [String] = []
        for try await event in rest.events(for: RestManager.Request(url: base.appendingPathComponent("events"))) {
            events.append("\(event.event):\(event.data)")
        }
        log.append("events: \(events.joined(separator: "|"))")

        let cached = RestManager()
        cached.interceptors.append(RestManager.ResponseCache())
        let cachedURL = base.appendingPathComponent("cached/\(UUID().uuidString)")
        let first = await cached.makeRequest(toURL: cachedURL, withHttpMethod: .get)
        let second = await cached.makeRequest(toURL: cachedURL, withHttpMethod: .get)
        let bodies = [first, second].map { String(decoding: $0.data ?? Data(), as: UTF8.self) }
        log.append("cached: \(bodies.joined(separator: "|"))")

        let reports = Reports()
        let destination = scratch.appendingPathComponent("download.bin")
        let saved = try await rest.download(
            fromURL: base.appendingPathComponent("download"), to: destination, progress: { reports.add($0) })
        let size = (try? FileManager.default.attributesOfItem(atPath: saved.path)[.size] as? Int) ?? -1
        log.append("download: \(size) bytes, last progress \(reports.last)")
    }
}

/// A flag set from any thread.
nonisolated final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    func set() {
        lock.lock()
        value = true
        lock.unlock()
    }

    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// Progress reports arrive on the library's queue: a lock-protected box, not main-actor state.
nonisolated final class Reports: @unchecked Sendable {
    private let lock = NSLock()
    private var completed: Int64 = -1

    func add(_ progress: RestManager.TransferProgress) {
        lock.lock()
        completed = progress.completedBytes
        lock.unlock()
    }

    var last: Int64 {
        lock.lock()
        defer { lock.unlock() }
        return completed
    }
}

func expect(_ got: [String], _ want: [String]) {
    guard got == want else {
        FileHandle.standardError.write(Data("app target: got\n\(got.joined(separator: "\n"))\nwanted\n\(want.joined(separator: "\n"))\n".utf8))
        exit(1)
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let base = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: app BASE_URL SCRATCH_FOLDER\n".utf8))
    exit(64)
}
let model = UsersViewModel(base: base)
model.loadWithTutorialPattern {
    model.loadOnMainQueue {
        Task {
            do {
                try await model.loadAsync(scratch: URL(fileURLWithPath: arguments[2]))
            } catch {
                FileHandle.standardError.write(Data("app target: \(error)\n".utf8))
                exit(1)
            }
            expect(model.names, ["Ada", "Grace"])
            expect(
                model.log,
                [
                    "tutorial completion on main thread: false",
                    "main-queue completion: HTTP 200",
                    "async users: Ada,Grace, decoded on main thread: false",
                    "stream HTTP 200: one|two|three",
                    "events: message:first|update:second",
                    "cached: v1|v1",
                    "download: 300000 bytes, last progress 300000"
                ])
            print("app target: every result right (\(model.log.count) checks)")
            exit(0)
        }
    }
}
// The main run loop drains the main queue on the main thread, as an app's does (dispatchMain on Linux would not).
RunLoop.main.run()
