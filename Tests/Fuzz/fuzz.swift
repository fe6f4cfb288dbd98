// The libFuzzer entry point for Tests/Fuzz/run.sh: compiled with the library files into one module. Each input's first
// byte picks a function that reads outside text; a crash, a sanitizer report or a broken promise (`fatalError`) ends
// the run with the input saved.

import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let selector = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    let text = String(decoding: rest, as: UTF8.self)
    switch selector % 8 {
    case 0: redactsTheUserInfo(text)
    case 1: checksURL(text, query: RestManager.RestEntity())
    case 2: checksURLWithQuery(text)
    case 3: followsRedirect(to: text)
    case 4: joinsBaseURL(text)
    case 5: splitsLinesAnywhere(rest)
    case 6: redactsBodies(rest, text)
    default: readsHeaderValues(text)
    }
    return 0
}

/// `user:password@` keeps the user and hides the password, whatever the rest of the URL holds.
private func redactsTheUserInfo(_ text: String) {
    let redacted = RestManager.Redaction.url(text)
    guard let original = authority(of: text), let at = original.lastIndex(of: "@"),
        let colon = original[..<at].firstIndex(of: ":")
    else { return }
    let shown = authority(of: redacted) ?? ""
    let shownUser = shown[..<(shown.lastIndex(of: "@") ?? shown.startIndex)]
    if shownUser != original[...colon] + "<redacted>" {
        fatalError("the user info of \(text.debugDescription) became \(redacted.debugDescription)")
    }
}

/// The text between "://" and the first "/", "?" or "#" after it.
private func authority(of text: String) -> Substring? {
    guard let schemeEnd = text.range(of: "://") else { return nil }
    let rest = text[schemeEnd.upperBound...]
    return rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]
}

private func checksURL(_ text: String, query: RestManager.RestEntity) {
    guard let url = URL(string: text) else { return }
    _ = try? RestManager.RequestBuilder.urlWithQuery(url, query: query)
}

private func checksURLWithQuery(_ text: String) {
    var query = RestManager.RestEntity()
    query.add(value: text, forKey: text)
    checksURL("http://h/p?x=1#f", query: query)
}

/// A `Location` resolved and checked as the exchange does.
private func followsRedirect(to location: String) {
    guard let base = URL(string: "https://user:pw@api.example.com:8443/v1/items?token=abc"),
        let target = URL(string: location, relativeTo: base)?.absoluteURL
    else { return }
    _ = try? RestManager.RequestBuilder.urlWithQuery(target, query: RestManager.RestEntity())
    _ = RestManager.isSameOrigin(base, target)
}

private func joinsBaseURL(_ text: String) {
    guard let relative = URL(string: text) else { return }
    for base in ["https://h/api", "https://h/api/?key=S#fragment", "http://h:8080"] {
        guard let base = URL(string: base) else { continue }
        _ = try? RestManager.RequestBuilder.resolve(relative, against: base)
    }
}

/// The same bytes whole and cut at one point (chosen by the first byte) give the same lines; the lines then parse as
/// an event stream.
private func splitsLinesAnywhere(_ bytes: [UInt8]) {
    let cut = bytes.first.map { Int($0) % (bytes.count + 1) } ?? 0
    let whole = lines(of: [bytes[...]])
    let pieces = lines(of: [bytes[..<cut], bytes[cut...]])
    if whole != pieces { fatalError("the lines of \(bytes) differ when cut at \(cut)") }
    var parser = RestManager.EventStreamParser()
    parser.startStream()
    for line in whole { _ = try? parser.take(line) }
    parser.endStream()
}

private func lines(of chunks: [ArraySlice<UInt8>]) -> [String] {
    var splitter = RestManager.LineSplitter()
    var lines: [String] = []
    for chunk in chunks { try? splitter.split(Data(chunk), into: &lines) }
    if let last = splitter.finish() { lines.append(last) }
    return lines
}

private func redactsBodies(_ bytes: [UInt8], _ text: String) {
    for type in ["application/json", "application/x-www-form-urlencoded", "application/vnd.api+json; charset=utf-8"] {
        _ = RestManager.redactedBody(Data(bytes), contentType: type)
    }
    _ = RestManager.mediaType(text)
}

private func readsHeaderValues(_ text: String) {
    _ = RestManager.DownloadFile.contentRange(text)
    _ = RestManager.CustomError.invalidURL(text, reason: "fuzzed").description
    _ = RestManager.Encoding.printable(text)
}
