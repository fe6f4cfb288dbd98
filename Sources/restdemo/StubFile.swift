// `restdemo serve --stubs FILE.json`: stubs for the mock server from a JSON file, so that fixtures
// can be served without writing Swift. A malformed file is refused with its line and the reason.

import Foundation
import MockServer

/// One stub from the file.
struct FileStub {
    let method: String?
    let path: String
    let response: MockServer.Response
}

enum StubFile {
    static let keys: Set<String> = ["method", "path", "status", "headers", "body", "bodyFile", "delay", "bytesPerSecond", "fault"]

    /// Reads and checks every stub in `path`; throws `Exit` 66 when it cannot be read, 65 when it is malformed.
    static func load(_ path: String) throws -> [FileStub] {
        let file = URL(fileURLWithPath: path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Exit(code: Exit.noInput, message: "cannot read the stubs file \(path)")
        }
        let json: Any
        do { json = try JSONSerialization.jsonObject(with: data) } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? error.localizedDescription
            let line = characterOffset(in: detail).map { lineNumber(ofOffset: $0, in: data) } ?? 1
            throw Exit(code: Exit.badData, message: "\(path):\(line): not valid JSON (\(detail))")
        }
        guard let entries = json as? [Any] else {
            throw Exit(code: Exit.badData, message: "\(path):1: the file must be a JSON array of stubs")
        }
        let lines = topLevelObjectLines(in: data)
        return try entries.enumerated().map { index, entry in
            let line = index < lines.count ? lines[index] : 1
            do { return try stub(from: entry, relativeTo: file.deletingLastPathComponent()) } catch let problem as Problem {
                throw Exit(code: Exit.badData, message: "\(path):\(line): stub \(index + 1): \(problem.reason)")
            }
        }
    }

    private struct Problem: Error { let reason: String }

    private static func stub(from entry: Any, relativeTo folder: URL) throws -> FileStub {
        guard let object = entry as? [String: Any] else { throw Problem(reason: "each stub must be a JSON object") }
        if let unknown = object.keys.filter({ !keys.contains($0) }).sorted().first {
            throw Problem(reason: "unknown key '\(unknown)' (known: \(keys.sorted().joined(separator: ", ")))")
        }
        guard let path = object["path"] as? String, path.hasPrefix("/") else {
            throw Problem(reason: "'path' must be a string starting with / (end it with * for a prefix)")
        }
        let method = try optional(object, "method", as: String.self)
        let status = try optional(object, "status", as: Int.self) ?? 200
        guard (100...599).contains(status) else { throw Problem(reason: "'status' must be from 100 to 599, not \(status)") }
        var headers: [(name: String, value: String)] = []
        if let given = object["headers"] {
            guard let pairs = given as? [String: Any] else { throw Problem(reason: "'headers' must be an object of names and string values") }
            for (name, value) in pairs.sorted(by: { $0.key < $1.key }) {
                guard let value = value as? String else { throw Problem(reason: "header '\(name)' must have a string value") }
                headers.append((name, value))
            }
            if let problem = MockServer.Response.headerProblem(headers) { throw Problem(reason: problem) }
        }
        var body = Data()
        let hasContentType = headers.contains { $0.name.lowercased() == "content-type" }
        switch (object["body"], object["bodyFile"]) {
        case (.some, .some): throw Problem(reason: "give 'body' or 'bodyFile', not both")
        case (let text as String, nil):
            body = Data(text.utf8)
            if !hasContentType { headers.append(("Content-Type", "text/plain; charset=utf-8")) }
        case (.some(let value), nil):
            guard let encoded = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) else {
                throw Problem(reason: "'body' cannot be written as JSON")
            }
            body = encoded
            if !hasContentType { headers.append(("Content-Type", "application/json; charset=utf-8")) }
        case (nil, let name as String):
            let url = URL(fileURLWithPath: name, relativeTo: folder)
            guard let contents = FileManager.default.contents(atPath: url.path) else {
                throw Problem(reason: "cannot read bodyFile '\(url.path)'")
            }
            body = contents
        case (nil, .some): throw Problem(reason: "'bodyFile' must be a path (relative to the stubs file)")
        case (nil, nil): break
        }
        var response = MockServer.Response(status: status, headers: headers, body: body)
        if let delay = try optional(object, "delay", as: Double.self) {
            guard delay >= 0, delay <= 3600 else { throw Problem(reason: "'delay' must be from 0 to 3600 seconds") }
            response.delay = delay
        }
        if let rate = try optional(object, "bytesPerSecond", as: Int.self) {
            guard rate > 0 else { throw Problem(reason: "'bytesPerSecond' must be above 0") }
            response.bytesPerSecond = rate
        }
        if let name = try optional(object, "fault", as: String.self) {
            guard let fault = MockServer.Fault(rawValue: name) else {
                throw Problem(reason: "unknown fault '\(name)' (one of \(MockServer.Fault.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            response.fault = fault
        }
        return FileStub(method: method, path: path, response: response)
    }

    private static func optional<Value>(_ object: [String: Any], _ key: String, as type: Value.Type) throws -> Value? {
        guard let value = object[key] else { return nil }
        if Value.self == Int.self, let number = value as? NSNumber, !(value is Bool), number.doubleValue == number.doubleValue.rounded(),
            abs(number.doubleValue) < 1e15
        {
            return number.intValue as? Value
        }
        if Value.self == Double.self, let number = value as? NSNumber, !(value is Bool), number.doubleValue.isFinite {
            return number.doubleValue as? Value
        }
        if let value = value as? Value, !(value is NSNumber) { return value }
        throw Problem(reason: "'\(key)' must be \(Value.self == String.self ? "a string" : Value.self == Int.self ? "a whole number" : "a number")")
    }

    /// "… around character 20." → 20
    private static func characterOffset(in detail: String) -> Int? {
        guard let range = detail.range(of: "character ") else { return nil }
        return Int(detail[range.upperBound...].prefix { $0.isNumber })
    }

    private static func lineNumber(ofOffset offset: Int, in data: Data) -> Int {
        1 + data.prefix(max(0, offset)).filter { $0 == UInt8(ascii: "\n") }.count
    }

    /// The line each element of the top-level array starts on (strings and nesting skipped).
    private static func topLevelObjectLines(in data: Data) -> [Int] {
        var lines: [Int] = []
        var line = 1
        var depth = 0
        var inString = false
        var escaped = false
        for byte in data {
            if byte == UInt8(ascii: "\n") { line += 1 }
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                if depth == 1 { lines.append(line) }
                inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 1 { lines.append(line) }
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default:
                if depth == 1, byte != UInt8(ascii: ","), byte > 32 { lines.append(line) }
            }
        }
        return lines
    }
}
