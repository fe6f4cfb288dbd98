// MockServer: a reqres.in stand-in plus test endpoints, on POSIX sockets and threads.
//
// One thread accepts; each connection gets its own thread with blocking I/O, which is the
// simplest model that is fast enough (tens of thousands of small requests per second) and
// easy to stop: every wait polls a wake-up pipe that `stop()` makes readable.

import Foundation
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A local HTTP/1.1 server imitating reqres.in, with test endpoints under `/_test/`.
///
/// ```swift
/// let server = MockServer()
/// try server.start()
/// defer { server.stop() }
/// print(server.baseURL) // http://127.0.0.1:54321
/// ```
public final class MockServer: @unchecked Sendable {

    /// What the server imitates and which limits it enforces.
    public struct Configuration: Sendable {
        /// The address to listen on: `127.0.0.1` (default) or `::1`.
        public var host = "127.0.0.1"
        /// The port; 0 picks a free one (read it back from `port`).
        public var port: UInt16 = 0
        /// reqres' default page size (6; 3 reproduces the tutorial's era).
        public var pageSize = 6
        /// Whether `/api` requests need an `x-api-key` header (401 without it).
        public var requiresAPIKey = false
        /// Largest request line plus headers; larger gets 431.
        public var maximumHeaderBytes = 16 * 1024
        /// Largest request body; larger gets 413.
        public var maximumBodyBytes = 16 * 1024 * 1024
        /// Most connections open at once. A new client beyond it closes the connection that has
        /// been waiting longest for a request to arrive (so slow or idle clients cannot lock others
        /// out); only when every connection is busy answering does it get 503.
        public var maximumConnections = 512
        /// How long an idle keep-alive connection stays open, in seconds; also how long a response
        /// write may wait for a client that reads nothing.
        public var idleTimeout: TimeInterval = 30
        /// How long a request's head may take from its first byte, in seconds (then 408 and close).
        public var requestHeadTimeout: TimeInterval = 10
        /// After `requestHeadTimeout` of grace, a body must arrive at least this fast (then 408 and close).
        public var minimumBodyBytesPerSecond = 1024
        /// How long `stop()` lets a request body under way finish arriving, in seconds: closing a connection while a
        /// FoundationNetworking client uploads a file crashes the client's process (`EasyHandle.swift:484`).
        public var stopGracePeriod: TimeInterval = 5
        /// Whether requests are kept for `receivedRequests` (turn off for benchmarks and long runs).
        public var recordsRequests = true
        /// How many of the most recent requests `receivedRequests` (and `takeRequest`) keep, so that
        /// a long-running server's memory stays bounded.
        public var maximumRecordedRequests = 10_000
        /// Whether the reqres.in routes and `/_test/` endpoints answer what no stub or queued answer
        /// does; when false such requests get 404 with a JSON body naming method and path.
        public var servesReqres = true

        /// The defaults.
        public init() {}
    }

    /// The configuration the server was created with.
    public let configuration: Configuration

    private let lock = NSLock()
    private var listener: Int32 = -1
    private var wakePipe: (read: Int32, write: Int32) = (-1, -1)
    private var boundPort: UInt16 = 0
    private var running = false
    /// When `stop()` began: request bodies under way may still arrive whole for `stopGracePeriod`.
    private var stoppedAt: DispatchTime?
    /// Each open connection: its socket, whether it is answering, since when it waits for a
    /// request, and whether it was told to close to make room.
    private struct Slot {
        let descriptor: Int32
        var answering = false
        var waitingSince = DispatchTime.now().uptimeNanoseconds
        var evicted = false
    }
    private var openConnections: [Int: Slot] = [:]
    private var nextConnectionID = 0
    private var records: [ReceivedRequest] = []
    private var handledCount = 0
    private var evictions = 0
    private var runningThreads = 0
    private let threadCountLock = NSLock()  // separate: start() spawns while holding `lock`
    private let threads = DispatchGroup()
    private let requestArrived = NSCondition()
    private var builtCatalogue: ReqresAPI.Catalogue?

    /// Stubs, queued answers and requests not yet taken (see `stub`, `enqueue`, `takeRequest`).
    let testKit: TestKit

    /// Creates a stopped server.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        testKit = TestKit(maximumUntaken: configuration.maximumRecordedRequests)
    }

    deinit { stop() }

    // MARK: - Lifecycle

    /// Binds, listens and starts accepting connections.
    ///
    /// - Throws: `MockServer.Failure` when the socket cannot be set up (for example a busy port).
    public func start() throws {
        lock.lock()
        defer { lock.unlock() }
        guard !running else { return }
        let pipe = try Socket.makePipe()
        let listener: Int32
        let port: UInt16
        do {
            (listener, port) = try Socket.listen(host: configuration.host, port: configuration.port)
        } catch {
            Socket.close(pipe.read)
            Socket.close(pipe.write)
            throw error
        }
        self.listener = listener
        self.wakePipe = pipe
        self.boundPort = port
        builtCatalogue = nil
        stoppedAt = nil
        running = true
        spawn { [self] in acceptLoop(listener: listener, wake: pipe.read) }
    }

    /// Closes the listener and every connection, and waits for every server thread to end. A request body under way
    /// may finish arriving first, for up to `stopGracePeriod` seconds.
    public func stop() {
        lock.lock()
        guard running else { lock.unlock(); return }
        running = false
        stoppedAt = .now()
        let wake = wakePipe
        lock.unlock()
        // Every wait in the server polls this pipe; one byte wakes them all.
        Socket.signal(wake.write)
        _ = threads.wait(timeout: .now() + 10 + min(max(0, configuration.stopGracePeriod), 3600))
        lock.lock()
        Socket.close(listener)
        listener = -1
        for (_, slot) in openConnections { Socket.close(slot.descriptor) }
        openConnections = [:]
        Socket.close(wake.read)
        Socket.close(wake.write)
        wakePipe = (-1, -1)
        lock.unlock()
    }

    // MARK: - Inspection

    /// The port the server listens on (0 before `start()`).
    public var port: UInt16 { lock.lock(); defer { lock.unlock() }; return boundPort }

    /// `http://127.0.0.1:<port>` (or `http://[::1]:<port>`), no trailing slash.
    public var baseURL: URL {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return URL(string: "http://\(host):\(port)")!  // built from our own host and number
    }

    /// The requests received so far, oldest first: the most recent `maximumRecordedRequests` of
    /// them (when `recordsRequests` is on).
    public var receivedRequests: [ReceivedRequest] {
        lock.lock(); defer { lock.unlock() }
        return Array(records.suffix(max(0, configuration.maximumRecordedRequests)))
    }

    /// The most recent request whose path is `path`, if any.
    public func lastRequest(path: String) -> ReceivedRequest? {
        receivedRequests.last { $0.path == path }
    }

    /// Blocks until the server has parsed at least `count` requests since `start()`, or `timeout` passes.
    /// Returns whether they arrived. (Tests wait on this event rather than sleeping.)
    @discardableResult
    public func waitForRequests(_ count: Int, timeout: TimeInterval = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        requestArrived.lock()
        defer { requestArrived.unlock() }
        while handledRequestCount < count {
            if !requestArrived.wait(until: deadline) { return handledRequestCount >= count }
        }
        return true
    }

    /// Forgets the recorded requests (those `takeRequest` has not taken too).
    public func clearReceivedRequests() {
        lock.lock()
        records = []
        lock.unlock()
        testKit.reset()
    }

    /// How many connections are open now (not counting those closed to make room and still ending).
    public var openConnectionCount: Int { lock.lock(); defer { lock.unlock() }; return openConnections.values.filter { !$0.evicted }.count }

    /// How many connections were closed to make room for new clients since `start()`.
    public var evictedConnectionCount: Int { lock.lock(); defer { lock.unlock() }; return evictions }

    /// How many server threads (the acceptor and one per connection) are running now; 0 after `stop()`.
    public var runningThreadCount: Int { threadCountLock.lock(); defer { threadCountLock.unlock() }; return runningThreads }

    /// How many connections were accepted since `start()`.
    public var acceptedConnectionCount: Int { lock.lock(); defer { lock.unlock() }; return nextConnectionID }

    /// Seconds left for request bodies under way to arrive whole since `stop()` began; nil while running or once over.
    func stopGraceLeft() -> TimeInterval? {
        lock.lock()
        defer { lock.unlock() }
        guard let stoppedAt else { return nil }
        let left = configuration.stopGracePeriod - Double(DispatchTime.now().uptimeNanoseconds - stoppedAt.uptimeNanoseconds) / 1e9
        return left > 0 ? left : nil
    }

    /// How many requests were parsed since `start()`.
    public var handledRequestCount: Int { lock.lock(); defer { lock.unlock() }; return handledCount }

    /// Why the server could not start.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        /// What failed, with the system's reason.
        public let description: String
    }

    // MARK: - Internals shared with connections

    func record(_ request: ReceivedRequest) {
        lock.lock()
        handledCount += 1
        if configuration.recordsRequests {
            testKit.received(request)
            records.append(request)
            // Trimmed in batches, so recording stays O(1) per request.
            let limit = max(0, configuration.maximumRecordedRequests)
            if records.count >= 2 * max(1, limit) { records.removeFirst(records.count - limit) }
        }
        lock.unlock()
        requestArrived.lock()
        requestArrived.broadcast()
        requestArrived.unlock()
    }

    /// Marks a connection as answering (not to be closed to make room) or waiting for a request.
    func setAnswering(_ id: Int, _ answering: Bool) {
        lock.lock()
        openConnections[id]?.answering = answering
        // Ordered by when the last request arrived: a client may read an answer before its writer gets here again,
        // so the time an answer ended would not order connections as their clients saw them.
        if answering { openConnections[id]?.waitingSince = DispatchTime.now().uptimeNanoseconds }
        lock.unlock()
    }

    /// Waits up to `seconds`; returns false when the server is stopping.
    func pause(seconds: TimeInterval) -> Bool {
        Socket.poll([], wake: wakeDescriptor, timeout: seconds) != .stopping
    }

    /// The reqres answers that never change, built once per start (they name the server's own URL).
    var catalogue: ReqresAPI.Catalogue {
        lock.lock()
        defer { lock.unlock() }
        if let builtCatalogue { return builtCatalogue }
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let catalogue = ReqresAPI.Catalogue(base: "http://\(host):\(boundPort)")
        builtCatalogue = catalogue
        return catalogue
    }

    var wakeDescriptor: Int32 { lock.lock(); defer { lock.unlock() }; return wakePipe.read }

    private func spawn(_ body: @escaping @Sendable () -> Void) {
        threads.enter()
        threadCountLock.lock()
        runningThreads += 1
        threadCountLock.unlock()
        let thread = Thread { [self] in
            body()
            threadCountLock.lock()
            runningThreads -= 1
            threadCountLock.unlock()
            threads.leave()
        }
        thread.stackSize = 512 * 1024
        thread.start()
    }

    private func acceptLoop(listener: Int32, wake: Int32) {
        while true {
            guard Socket.poll([listener], wake: wake, timeout: nil) == .ready else { return }
            guard let client = Socket.accept(listener) else { continue }
            lock.lock()
            let tooMany = !makeRoomIfFull()
            let id = nextConnectionID
            if !tooMany {
                nextConnectionID += 1
                openConnections[id] = Slot(descriptor: client)
            }
            lock.unlock()
            if tooMany {
                Socket.writeAll(client, HTTPResponse(status: 503, text: "Too many connections\n").serialized(keepAlive: false, includeBody: true))
                Socket.close(client)
                continue
            }
            spawn { [self] in
                Connection(descriptor: client, id: id, server: self, wake: wake).run()
                lock.lock()
                let slot = openConnections.removeValue(forKey: id)
                lock.unlock()
                if let slot { Socket.close(slot.descriptor) }
            }
        }
    }

    /// With the lock held: true when a new connection fits, after closing the connection that has
    /// waited longest for its request if the limit is reached; false when all are busy answering.
    private func makeRoomIfFull() -> Bool {
        let live = openConnections.filter { !$0.value.evicted }
        guard live.count >= configuration.maximumConnections else { return true }
        guard let oldest = live.filter({ !$0.value.answering }).min(by: { $0.value.waitingSince < $1.value.waitingSince }) else {
            return false
        }
        // The socket stays open until its own thread closes it (no descriptor reuse race); shutting
        // it down wakes that thread, which then ends.
        Socket.shutdownBoth(oldest.value.descriptor)
        openConnections[oldest.key]?.evicted = true
        evictions += 1
        return true
    }
}

/// A request as the server received it.
public struct ReceivedRequest: Sendable {
    /// The method, as sent.
    public let method: String
    /// The request target, as sent (path and query).
    public let target: String
    /// The path, without the query, still percent-encoded.
    public let path: String
    /// The query after `?`, exactly as sent (nil when there was no `?`).
    public let rawQuery: String?
    /// The query decoded as a form: `+` as space, `%XX` as bytes, in order.
    public let queryItems: [(name: String, value: String)]
    /// The header lines, in order, names as sent.
    public let headers: [(name: String, value: String)]
    /// The body bytes (de-chunked).
    public let body: Data
    /// Which connection carried it (connections are numbered from 0).
    public let connectionID: Int

    /// The first header named `name`, compared without case.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The first query value named `name`.
    public func query(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }
}
