//  RestManager+CurlCommand.swift — an add-on to RestManager.swift: the `curl` command for a request, secrets
//  redacted (headers, URL and body fields), for logs and bug reports. Copy it beside the core when you need it.

public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

nonisolated extension RestManager {
    // MARK: - Public API

    /// The `curl` command for the request `makeRequest` would send now; secrets `<redacted>` unless `revealingSecrets`.
    /// - Throws: the same `CustomError` that `makeRequest` would report for invalid input.
    public func curlCommand(
        forURL url: URL, withHttpMethod httpMethod: HttpMethod, revealingSecrets: Bool = false
    ) throws -> String {
        Self.curlCommand(
            for: try makeURLRequest(toURL: url, withHttpMethod: httpMethod), revealingSecrets: revealingSecrets)
    }

    /// The `curl` command for `request` as sent now (no token); secrets `<redacted>` unless `revealingSecrets`.
    /// - Throws: the same `CustomError` that `makeRequest` would report for invalid input.
    public func curlCommand(for request: Request, revealingSecrets: Bool = false) throws -> String {
        Self.curlCommand(
            for: try RequestBuilder.build(request, snapshot: withState { $0 }), revealingSecrets: revealingSecrets)
    }

    // MARK: - The command

    /// `request` as a `curl` command line, each part shell-quoted.
    static func curlCommand(for request: URLRequest, revealingSecrets: Bool) -> String {
        var parts = ["curl"]
        let method = request.httpMethod ?? "GET"
        if method == "HEAD" { parts.append("--head") } else if method != "GET" { parts.append("-X \(method)") }
        let url = request.url?.absoluteString ?? ""
        parts.append(shellQuoted(revealingSecrets ? url : Redaction.url(url)))
        let headers = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key.lowercased() < $1.key.lowercased() }
        for (name, value) in headers {
            let shown = !revealingSecrets && Redaction.isSecretHeader(name) ? "<redacted>" : value
            parts.append("-H " + shellQuoted("\(name): \(shown)"))
        }
        if var body = request.httpBody, !body.isEmpty {
            if !revealingSecrets {
                body = redactedBody(body, contentType: request.value(forHTTPHeaderField: "Content-Type"))
            }
            let text = String(data: body, encoding: .utf8).flatMap {
                $0.contains("\0") ? nil : shellQuoted($0)
            }
            parts.append("--data-binary " + (text ?? "@body.bin  # \(body.count) bytes of binary data"))
        }
        return parts.joined(separator: " ")
    }

    /// `text` in single quotes, for a POSIX shell.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// A body with the values of secret-named JSON (object members at any depth) or form fields `<redacted>`.
    static func redactedBody(_ body: Data, contentType: String?) -> Data {
        let media = RestManager.mediaType(contentType)
        if media == "application/x-www-form-urlencoded", let text = String(data: body, encoding: .utf8) {
            return Data(Redaction.redactingPairs(Substring(text)).utf8)
        }
        guard media == "application/json",
            let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])
        else { return body }
        var found = false
        let redacted = redactingJSON(object, found: &found)
        guard found, let data = try? JSONSerialization.data(withJSONObject: redacted, options: [.sortedKeys]) else {
            return body
        }
        return data
    }

    private static func redactingJSON(_ value: Any, found: inout Bool) -> Any {
        if let array = value as? [Any] { return array.map { redactingJSON($0, found: &found) } }
        guard let object = value as? [String: Any] else { return value }
        var copy = object
        for (name, member) in object {
            if Redaction.isSecretName(name) {
                copy[name] = "<redacted>"
                found = true
            } else {
                copy[name] = redactingJSON(member, found: &found)
            }
        }
        return copy
    }
}
