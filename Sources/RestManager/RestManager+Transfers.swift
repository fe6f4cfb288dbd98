//  RestManager+Transfers.swift — an add-on to RestManager.swift: downloads to a file (resumed, never written through
//  a link), uploads and multipart files streamed from disk, progress; on the core's body seam (`RestManager.Transfer`).

public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

nonisolated extension RestManager {

    // MARK: - Public API

    /// Streams the body at `url` (a GET with the manager's headers, not its query or body) into `<destination>.part`,
    /// renamed to `destination` once complete with a 2xx; the next call resumes a `.part`.
    /// Ends when no byte moves for `idleTimeoutInterval`; `timeoutInterval` bounds the whole call (none by default).
    /// ```swift
    /// rest.download(fromURL: videoURL, to: talkFile, progress: { print($0.fractionCompleted ?? 0) }) { result in … }
    /// ```
    @discardableResult
    public func download(
        fromURL url: URL,
        to destination: URL,
        timeoutInterval: TimeInterval? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completion: @escaping @Sendable (Result<URL, CustomError>) -> Void
    ) -> RequestHandle {
        var request = Request(.get, url: url)
        request.timeoutInterval = timeoutInterval
        let file = { DownloadFile(destination: destination, reporter: $0) }
        return startTransfer(request, progress: progress, making: file) { completion($0.validated(destination)) }
    }

    /// The `await` form of `download(fromURL:to:timeoutInterval:progress:completion:)`: `destination`, or a thrown
    /// `CustomError` (`.unacceptableStatusCode`, `.fileAccessFailed`, `.cancelled`, …).
    @concurrent
    public func download(
        fromURL url: URL,
        to destination: URL,
        timeoutInterval: TimeInterval? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> URL {
        try await withCancellableHandle(cancelled: .failure(CustomError.cancelled)) {
            self.download(
                fromURL: url, to: destination, timeoutInterval: timeoutInterval, progress: progress, completion: $0)
        }.get()
    }

    /// Sends the file at `fileURL` as the body, streamed from disk, with the manager's headers and credential (not its
    /// query or body; `Content-Type` `application/octet-stream` unless set). A missing file, a folder, a FIFO, a device
    /// or a file that changes size while it is sent (a link sends its target) is `.fileAccessFailed`. Timeouts as for
    /// `download`.
    @discardableResult
    public func upload(
        fileAt fileURL: URL,
        toURL url: URL,
        withHttpMethod httpMethod: HttpMethod = .post,
        timeoutInterval: TimeInterval? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        completion: @escaping @Sendable (Results) -> Void
    ) -> RequestHandle {
        var request = Request(httpMethod, url: url)
        request.timeoutInterval = timeoutInterval
        request.bodyFile = fileURL
        let file = { UploadFile(fileURL, temporary: false, reporter: $0) }
        return startTransfer(request, progress: progress, making: file, completion: completion)
    }

    /// The `await` form of `upload(fileAt:toURL:withHttpMethod:timeoutInterval:progress:completion:)`.
    @concurrent
    public func upload(
        fileAt fileURL: URL,
        toURL url: URL,
        withHttpMethod httpMethod: HttpMethod = .post,
        timeoutInterval: TimeInterval? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async -> Results {
        await withCancellableHandle(cancelled: Results(withError: CustomError.cancelled)) {
            self.upload(
                fileAt: fileURL, toURL: url, withHttpMethod: httpMethod, timeoutInterval: timeoutInterval,
                progress: progress,
                completion: $0)
        }
    }

    /// Adds the file at `fileURL` to send as `multipart/form-data` (`fileName` defaults to its own name): the body is
    /// assembled in a temporary file, removed when the call ends, and sent as `upload(fileAt:)` sends a file.
    public func addFile(at fileURL: URL, fieldName: String, fileName: String? = nil, mimeType: String) {
        let name = fileName ?? fileURL.lastPathComponent
        var part = MultipartBody.Part(name: fieldName, fileName: name, contentType: mimeType, data: Data())
        part.fileURL = fileURL
        addPart(part, assembler: Self.assembleMultipart)
    }

    /// How far a download or upload has come, reported on `callbackQueue` about ten times a second and once at the end;
    /// `completedBytes` never decreases (a resumed download counts what was on disk).
    public struct TransferProgress: Sendable, Equatable {
        /// Bytes transferred so far.
        public var completedBytes: Int64
        /// The size, from `Content-Length` or `Content-Range` (or the file's); nil when unknown.
        public var totalBytes: Int64?

        /// A figure.
        public init(completedBytes: Int64, totalBytes: Int64?) {
            self.completedBytes = completedBytes
            self.totalBytes = totalBytes
        }

        /// From 0 to 1, or nil when the size is not known (1 for an empty transfer).
        public var fractionCompleted: Double? {
            totalBytes.map { $0 > 0 ? min(1, Double(completedBytes) / Double($0)) : 1 }
        }
    }

    /// Sends `request` with the transfer `making` makes: no whole-call deadline unless the call asks for one, and
    /// progress on a serial queue in front of `callbackQueue` (so every report comes before the completion).
    private func startTransfer(
        _ request: Request,
        progress: (@Sendable (TransferProgress) -> Void)?,
        making: (ProgressReporter?) -> any Transfer,
        completion: @escaping @Sendable (Results) -> Void
    ) -> RequestHandle {
        var request = request
        var snapshot = withState { $0 }
        snapshot.timeout = Self.never
        request.transfer = making(ProgressReporter(progress, snapshot: &snapshot))
        return perform(request, snapshot: snapshot, completion: completion)
    }

    // MARK: - Progress

    /// Sends figures that moved forward to the handler on a serial queue the completion uses too (so it comes last);
    /// called under the exchange's lock, so reports stay in order.
    final class ProgressReporter: @unchecked Sendable {
        private let handler: @Sendable (TransferProgress) -> Void
        private let queue: DispatchQueue
        private var last: TransferProgress?

        /// Nil without a handler; otherwise the snapshot's callback queue becomes a serial one in front of it.
        init?(_ handler: (@Sendable (TransferProgress) -> Void)?, snapshot: inout Snapshot) {
            guard let handler else { return nil }
            self.handler = handler
            queue = DispatchQueue(label: "RestManager.progress", target: snapshot.callbackQueue)
            snapshot.callbackQueue = queue
        }

        func report(_ figure: TransferProgress) {
            guard figure != last, figure.completedBytes >= last?.completedBytes ?? 0 else { return }
            last = figure
            queue.async { [handler] in handler(figure) }
        }
    }

    // MARK: - Uploads

    /// A body sent from a file, checked before the first request; a temporary one (a multipart body) is removed after.
    final class UploadFile: Transfer, @unchecked Sendable {
        private let file: URL
        private let temporary: Bool
        private let reporter: ProgressReporter?
        private var size: Int64?

        init(_ file: URL, temporary: Bool, reporter: ProgressReporter?) {
            self.file = file
            self.temporary = temporary
            self.reporter = reporter
        }

        deinit { release() }

        func release() {
            if temporary { try? FileManager.default.removeItem(at: file) }
        }

        func open() throws {
            try FileStream.checkReadable(file)
            size = FileStream.size(file)
        }

        /// The file as a stream of exactly `size` bytes, on Linux the library's own (FoundationNetworking's file reader
        /// sends a grown file past `Content-Length`, traps under a reset or a cancel). None after a 303 (a GET).
        func prepare(_ request: inout URLRequest) {
            guard request.httpMethod != "GET", let size else { return }
            #if canImport(FoundationNetworking)
            request.httpBodyStream = BodyStream(file, length: size)
            #else
            request.httpBodyStream = InputStream(url: file)
            #endif
            request.setValue(String(size), forHTTPHeaderField: "Content-Length")
        }

        func begin(_ response: HTTPURLResponse) throws -> BodyTarget { .memory }
        func write(_ data: Data) throws {}
        func written(_ results: Results) -> Results { results }

        /// A file that changed size while it was sent (exactly `size` bytes went out, or the request was aborted).
        var failure: CustomError? {
            FileStream.size(file) == size ? nil : FileStream.failure(file, "it changed size while it was sent")
        }

        func complete() throws -> Bool {
            if let failure { throw failure }
            return true
        }

        func reportProgress(of task: URLSessionTask?, final: Bool) {
            guard let reporter else { return }
            if final, let size {
                reporter.report(TransferProgress(completedBytes: size, totalBytes: size))
            } else if let task {
                let expected = task.countOfBytesExpectedToSend > 0 ? task.countOfBytesExpectedToSend : size
                reporter.report(TransferProgress(completedBytes: task.countOfBytesSent, totalBytes: expected))
            }
        }
    }

    #if canImport(FoundationNetworking)
    /// A file's first `length` bytes as a body, read as libcurl sends them; -1 (the request is aborted) when the file
    /// ends sooner or cannot be read (a FIFO swapped in under the name: opened without blocking).
    final class BodyStream: InputStream {
        private let descriptor: Int32
        private var remaining: Int64

        init(_ file: URL, length: Int64) {
            remaining = length
            descriptor = Foundation.open(file.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            super.init(data: Data())
        }

        deinit { Foundation.close(descriptor) }

        override var hasBytesAvailable: Bool { remaining > 0 }

        override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
            let count = Foundation.read(descriptor, buffer, Int(min(Int64(maxLength), remaining)))
            guard count > 0 else { return -1 }
            remaining -= Int64(count)
            return count
        }
    }
    #endif

    /// `value` with its files added by URL and its body fields as one multipart body in a temporary file, to be
    /// streamed from there; `check` throws once the call is cancelled or past its deadline.
    @Sendable
    static func assembleMultipart(_ value: Request, check: () throws -> Void) throws -> Request {
        var multipart = MultipartBody()
        for (name, field) in value.bodyParameters.orderedPairs { multipart.addField(name: name, value: field) }
        multipart.parts += value.files
        let name = "RestManager-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString).multipart"
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(name)
        let upload = UploadFile(file, temporary: true, reporter: nil)
        try write(multipart, to: file, check: check)
        var streamed = value
        streamed.files = []
        streamed.bodyParameters = RestEntity()
        streamed.bodyFile = file
        streamed.transfer = upload
        streamed.headers.add(value: multipart.contentType, forKey: "Content-Type")
        return streamed
    }

    /// Writes the encoded body to `file`, copying file parts (which have no `data`) in 1 MiB pieces, never whole.
    private static func write(_ multipart: MultipartBody, to file: URL, check: () throws -> Void) throws {
        let output = try FileStream(writingTo: file, append: false)
        for part in multipart.parts {
            try output.write(multipart.head(of: part) + part.data)
            if let source = part.fileURL {
                try FileStream.checkReadable(source)
                guard let input = fopen(source.path, "rb") else { throw FileStream.failure(source) }
                defer { fclose(input) }
                var buffer = [UInt8](repeating: 0, count: 1 << 20)
                while case let count = fread(&buffer, 1, buffer.count, input), count > 0 {
                    try check()
                    try output.write(Data(buffer[..<count]))
                }
                guard ferror(input) == 0 else { throw FileStream.failure(source, "it cannot be read") }
            }
            try output.write(Data("\r\n".utf8))
        }
        try output.write(Data("--\(multipart.boundary)--\r\n".utf8))
        try output.finish()
    }

    // MARK: - Downloads

    /// A download's file: bytes to `<destination>.part`, the validator to resume them by to `….part.validator`, one
    /// writer at a time by `….part.lock` (called under the exchange's lock).
    final class DownloadFile: Transfer, @unchecked Sendable {
        let destination: URL
        private let reporter: ProgressReporter?
        private var partial: URL { URL(fileURLWithPath: destination.path + ".part") }
        private var validatorFile: URL { URL(fileURLWithPath: destination.path + ".part.validator") }
        private var output: FileStream?
        private var sentValidator: String?
        private var offset: Int64 = 0
        private var written: Int64 = 0
        private var total: Int64?
        /// Where the current 206 must end (its Content-Range's last byte + 1); nil for a 200.
        private var rangeEnd: Int64?
        /// Answers in a row that took the file no further (empty 206s, the same first part again): no endless loop.
        private var answersWithoutProgress = 0
        /// The furthest end of the file an answer reached.
        private var reached: Int64 = 0
        /// `<destination>.part.lock`, locked (`flock`) while this download runs.
        private var lock: Int32 = -1
        /// Whether the partial file was started over once already (a second mismatch fails the call).
        private var restarted = false

        init(destination: URL, reporter: ProgressReporter?) {
            self.destination = destination
            self.reporter = reporter
        }

        deinit { release() }

        var failure: CustomError? { nil }

        /// Checks the destination, creates its missing parent folders and takes its lock.
        func open() throws {
            guard destination.isFileURL else { throw FileStream.failure(destination, "it is not a file URL") }
            var status = stat()
            let type = lstat(destination.path, &status) == 0 ? status.st_mode & S_IFMT : S_IFREG
            guard type != S_IFDIR else { throw FileStream.failure(destination, "it is a folder") }
            guard type == S_IFREG || type == S_IFLNK else { throw FileStream.notRegular(destination) }
            guard destination.lastPathComponent.utf8.count <= 240 else {
                throw FileStream.failure(destination, "its name is longer than 240 bytes (its partial files add 15)")
            }
            let folder = destination.deletingLastPathComponent()
            do { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) } catch {
                throw FileStream.failure(destination, "its folder cannot be created (\(error.localizedDescription))")
            }
            // One writer per destination in any process; a lock no longer at the path (a finished download unlinked
            // it) is none.
            let path = destination.path + ".part.lock"
            lock = Foundation.open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
            var held = stat()
            var named = stat()
            guard lock >= 0, flock(lock, LOCK_EX | LOCK_NB) == 0, fstat(lock, &held) == 0, stat(path, &named) == 0,
                held.st_ino == named.st_ino, held.st_dev == named.st_dev
            else {
                release()
                throw FileStream.failure(destination, "another download to it is in progress")
            }
        }

        /// Closes the files and lets the next download to this destination start.
        func release() {
            output = nil  // FileStream closes its file when released
            if lock >= 0 { close(lock) }
            lock = -1
        }

        /// Asks for the rest of a partial file that has a validator; otherwise starts from nothing.
        func prepare(_ request: inout URLRequest) {
            output = nil
            let size = FileStream.size(partial) ?? 0
            var status = stat()
            let regular = lstat(validatorFile.path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG  // no link
            let validatorText = regular ? try? String(contentsOf: validatorFile, encoding: .utf8) : nil
            let validator = size > 0 ? validatorText.flatMap { $0.isEmpty ? nil : $0 } : nil
            offset = validator == nil ? 0 : size
            written = 0
            total = nil
            sentValidator = validator
            request.setValue(validator.map { _ in "bytes=\(offset)-" }, forHTTPHeaderField: "Range")
            request.setValue(validator, forHTTPHeaderField: "If-Range")
            // Ranges count the bytes as sent, and the file must be those bytes.
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }

        /// A 206 continuing the partial file appends to it, a 200 rewrites it; a 416 or another 206 start over once.
        func begin(_ response: HTTPURLResponse) throws -> BodyTarget {
            let status = response.statusCode
            let validator =
                response.value(forHTTPHeaderField: "ETag").flatMap { $0.hasPrefix("W/") ? nil : $0 }
                ?? response.value(forHTTPHeaderField: "Last-Modified")
            let range = response.value(forHTTPHeaderField: "Content-Range").flatMap(Self.contentRange)
            if status == 206 || (status == 416 && sentValidator != nil) {
                // The validator sent comes back unchanged (ETag, quoted or not, or date) if the answer has one of them.
                let echoed = ["ETag", "Last-Modified"].compactMap { response.value(forHTTPHeaderField: $0) }
                guard status == 206, let range, range.start == offset,
                    sentValidator == nil || echoed.isEmpty || echoed.contains(where: { $0 == sentValidator })
                else {
                    if restarted { throw Self.violation("twice in a row an answer did not continue the file as asked") }
                    restarted = true
                    for file in [partial, validatorFile] { try? FileManager.default.removeItem(at: file) }
                    return .restart
                }
                total = range.total
                rangeEnd = range.last + 1
                output = try FileStream(writingTo: partial, append: offset > 0)
                if sentValidator == nil { try saveValidator(validator) }
                return .transfer
            }
            guard (200..<300).contains(status) else { return .errorBody }
            offset = 0
            total = response.expectedContentLength >= 0 ? response.expectedContentLength : nil
            rangeEnd = nil
            output = try FileStream(writingTo: partial, append: false)
            try saveValidator(validator)
            return .transfer
        }

        private func saveValidator(_ validator: String?) throws {
            let file = try FileStream(writingTo: validatorFile, append: false)
            try file.write(Data((validator ?? "").utf8))
            try file.finish()
        }

        /// Appends `data`; bytes past the 206's Content-Range are not written, and fail the call.
        func write(_ data: Data) throws {
            let room = rangeEnd.map { $0 - offset - written } ?? Int64(data.count)
            try output?.write(data.prefix(Int(max(0, min(room, Int64(data.count))))))
            written += min(room, Int64(data.count))
            if room < Int64(data.count) { throw Self.violation("the 206 answer is longer than its Content-Range") }
        }

        /// A 2xx answer with its body in memory (a cache's, which never came through `write`) is written as one.
        func written(_ results: Results) -> Results {
            guard results.isSuccess, let body = results.data, let http = results.response?.response as? HTTPURLResponse
            else { return results }
            do {
                guard try begin(http) == .transfer else { return results }
                try write(body)
                _ = try complete()
                return results
            } catch {
                return Results(withError: CustomError.wrap(error))
            }
        }

        /// A server that breaks the range rules: never retried (the same answer would come again).
        static func violation(_ reason: String) -> CustomError {
            let description = "The server's answer is unusable: " + reason
            return .transport(URLError(.cannotParseResponse, userInfo: [NSLocalizedDescriptionKey: description]))
        }

        /// Closes the partial file, renamed to the destination atomically unless a short 206's rest comes (false).
        func complete() throws -> Bool {
            guard let output else { throw CustomError.invalidResponse }
            self.output = nil
            try output.finish()
            answersWithoutProgress = offset + written > reached ? 0 : answersWithoutProgress + 1
            reached = max(reached, offset + written)
            guard answersWithoutProgress < 3 else {
                throw Self.violation("3 answers in a row took the file no further")
            }
            if rangeEnd != nil, let total, offset + written < total { return false }
            guard rename(partial.path, destination.path) == 0 else { throw FileStream.failure(destination) }
            for file in [validatorFile.path, destination.path + ".part.lock"] { unlink(file) }
            return true
        }

        /// Bytes on disk so far (a resumed download counts what it started from; none before a 2xx); at the end, all.
        func reportProgress(of task: URLSessionTask?, final: Bool) {
            guard let reporter, output != nil || final else { return }
            let completed = offset + written
            reporter.report(TransferProgress(completedBytes: completed, totalBytes: final ? completed : total))
        }

        /// `bytes first-last/total` (RFC 9110 §14.4; the total may be `*`, and must be past `last` when given).
        static func contentRange(_ text: String) -> (start: Int64, last: Int64, total: Int64?)? {
            let parts = text.split(omittingEmptySubsequences: false) { " -/".contains($0) }
            let numbers = parts.map { $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } ? Int64($0) : nil }
            guard parts.count == 4, parts[0].lowercased() == "bytes", let start = numbers[1], let last = numbers[2],
                last >= start, last < Int64.max, numbers[3].map({ $0 > last }) ?? (parts[3] == "*")
            else { return nil }
            return (start, last, numbers[3])
        }
    }

    // MARK: - Files

    /// A file written with C stdio (no exceptions on any platform); errors are `CustomError`s.
    final class FileStream {
        private var file: UnsafeMutablePointer<FILE>?
        private let url: URL

        /// Opens a regular file, never through a link (a planted `.part -> victim` is refused; a FIFO does not block).
        init(writingTo url: URL, append: Bool) throws {
            self.url = url
            let flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0)
            let descriptor = open(url.path, flags, 0o644)
            guard descriptor >= 0 else { throw Self.failure(url, errno == ELOOP ? "it is a symbolic link" : nil) }
            var status = stat()
            let regular = fstat(descriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
            // Truncated only once known to be a regular file (never a device or FIFO swapped in under the name).
            if regular, append || ftruncate(descriptor, 0) == 0 { file = fdopen(descriptor, append ? "ab" : "wb") }
            if file == nil {
                close(descriptor)
                throw Self.failure(url, regular ? nil : "it is not a regular file")
            }
        }

        deinit {
            if let file { fclose(file) }
        }

        func write(_ data: Data) throws {
            let count = data.withUnsafeBytes { bytes in file.map { fwrite(bytes.baseAddress, 1, bytes.count, $0) } ?? 0
            }
            guard count == data.count else { throw Self.failure(url) }
        }

        /// Closes the file: the last buffered bytes go out now, so a full disk may show here, as `.fileAccessFailed`.
        func finish() throws {
            guard let file else { return }
            self.file = nil
            guard fclose(file) == 0 else { throw Self.failure(url) }
        }

        /// Throws `.fileAccessFailed` unless `url` is a readable regular file (a body needs a size; a FIFO blocks).
        static func checkReadable(_ url: URL) throws {
            var status = stat()
            guard url.isFileURL, stat(url.path, &status) == 0 else { throw failure(url, "it does not exist") }
            guard status.st_mode & S_IFMT != S_IFDIR else { throw failure(url, "it is a folder") }
            guard status.st_mode & S_IFMT == S_IFREG else { throw notRegular(url) }
            guard access(url.path, R_OK) == 0 else { throw failure(url, "it is not readable") }
        }

        static func notRegular(_ url: URL) -> CustomError {
            failure(url, "it is not a regular file (a device, FIFO or socket)")
        }

        /// The size of the file at `url`, or of what it links to (`attributesOfItem` would give the link's own).
        static func size(_ url: URL) -> Int64? {
            var status = stat()
            return stat(url.path, &status) == 0 ? Int64(status.st_size) : nil
        }

        /// `.fileAccessFailed` with `reason`, or the system's reason for the last failed call.
        static func failure(_ url: URL, _ reason: String? = nil) -> CustomError {
            .fileAccessFailed(url, reason: reason ?? String(cString: strerror(errno)))
        }
    }
}
