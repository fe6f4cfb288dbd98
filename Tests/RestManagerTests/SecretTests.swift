import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import MockServer
import RestManager

/// One rule of what is secret: what stays behind on a redirect to another origin, and what is `<redacted>` in text.
final class SecretTests: MockServerTestCase {
    /// Secret headers seen in the wild, one per family (credentials, cloud keys, custom auth, tokens, cookies).
    static let secretHeaders = [
        "Authorization", "Proxy-Authorization", "Cookie", "X-API-Key", "Api-Key", "Ocp-Apim-Subscription-Key", "x-functions-key",
        "X-Auth-Key", "X-Auth-Token", "X-Access-Key", "X-Master-Key", "Authentication", "X-Upstream-Authorization",
        "X-Amz-Security-Token", "X-Goog-Api-Key", "PRIVATE-TOKEN", "X-CSRF-Token", "X-Csrf"
    ]
    /// Query and body names that hold secrets, and look-alikes that do not.
    static let secretNames = [
        "sig", "jwt", "token", "access_token", "api_key", "key", "access_key", "private_key", "code", "password", "pwd", "pass",
        "secret", "client_secret", "refresh_token", "authorization", "otp", "pin", "ticket", "SAMLResponse", "X-Amz-Credential",
        "X-Amz-Signature", "X-Goog-Signature", "session_id"
    ]
    static let harmlessNames = ["page", "keyboard", "zipcode", "author", "pinned", "sort"]

    private func crossOriginRedirect(status: Int, method: RestManager.HttpMethod) throws -> (Echo, MockServer) {
        let other = MockServer()
        try other.start()
        let target = "http://127.0.0.1:\(other.port)/_test/echo".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let results = send(method, "/_test/redirect/\(status)?to=\(target)")
        return (try echo(results), other)
    }

    func testOnACrossOriginRedirectOnlySafeHeadersFollow() throws {
        for (index, name) in Self.secretHeaders.enumerated() { rest.requestHttpHeaders.add(value: "s3cret-\(index)", forKey: name) }
        rest.requestHttpHeaders.add(value: "custom", forKey: "X-Tenant")
        let safe = [("Accept", "application/json"), ("Accept-Language", "fr"), ("User-Agent", "App/1"), ("Cache-Control", "no-cache")]
        for (name, value) in safe { rest.requestHttpHeaders.add(value: value, forKey: name) }
        rest.requestHttpHeaders.add(value: "text/plain", forKey: "Content-Type")
        rest.httpBody = Data("body".utf8)
        let (kept, other) = try crossOriginRedirect(status: 307, method: .post)
        defer { other.stop() }
        XCTAssertEqual(kept.method, "POST")
        XCTAssertEqual(kept.bodyText, "body")
        let sent = Set(kept.headerNames().map { $0.lowercased() })
        let expected: Set<String> = ["accept", "accept-language", "user-agent", "cache-control", "content-type", "content-length", "host"]
        XCTAssertEqual(sent.subtracting(["accept-encoding", "connection"]), expected)
        for (name, value) in safe { XCTAssertEqual(kept.header(name), value, name) }
        XCTAssertEqual(kept.header("Content-Type"), "text/plain", "a 307 keeps the body and the headers that describe it")
        // The same headers reach the same origin.
        let same = try echo(send(.post, "/_test/redirect/307?to=/_test/echo"))
        for (index, name) in Self.secretHeaders.enumerated() { XCTAssertEqual(same.header(name), "s3cret-\(index)", name) }
        XCTAssertEqual(same.header("X-Tenant"), "custom")
    }

    func testA303ToAnotherOriginDropsTheBodyHeadersToo() throws {
        rest.requestHttpHeaders.add(value: "text/plain", forKey: "Content-Type")
        rest.requestHttpHeaders.add(value: "fr", forKey: "Content-Language")
        rest.httpBody = Data("body".utf8)
        let (echoed, other) = try crossOriginRedirect(status: 303, method: .post)
        defer { other.stop() }
        XCTAssertEqual(echoed.method, "GET")
        XCTAssertNil(echoed.header("Content-Type"))
        XCTAssertNil(echoed.header("Content-Language"))
    }

    /// A session configuration's `httpAdditionalHeaders` are the manager's headers: kept from another origin like them
    /// (URLSession would add them to the redirected request too), shown in cURL, redacted.
    func testAConfigurationsHeadersObeyTheRedirectRule() throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer s3cret", "X-API-Key": "k3y", "Accept-Language": "fr"]
        let manager = RestManager(configuration: configuration)
        XCTAssertEqual(configuration.httpAdditionalHeaders?.count, 3, "the caller's configuration is not changed")
        XCTAssertEqual(manager.requestHttpHeaders.value(forKey: "authorization"), "Bearer s3cret")
        let same = try echo(send(.get, "/_test/echo", using: manager))
        XCTAssertEqual(same.header("Authorization"), "Bearer s3cret")
        XCTAssertEqual(same.header("X-API-Key"), "k3y")
        let other = MockServer()
        try other.start()
        defer { other.stop() }
        let target = "http://127.0.0.1:\(other.port)/_test/echo".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let moved = try echo(send(.get, "/_test/redirect/302?to=\(target)", using: manager))
        XCTAssertEqual(moved.header("Host"), "127.0.0.1:\(other.port)")
        XCTAssertNil(moved.header("Authorization"))
        XCTAssertNil(moved.header("X-API-Key"))
        XCTAssertEqual(moved.header("Accept-Language"), "fr")
        let curl = try manager.curlCommand(for: RestManager.Request(url: url("/x")))
        XCTAssertTrue(curl.contains("-H 'Authorization: <redacted>'"), curl)
    }

    /// A header that frames the message stays the session's: it is not refused as a manager's header would be.
    func testAConfigurationsFramingHeaderStaysTheSessions() throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["Connection": "close"]
        let manager = RestManager(configuration: configuration)
        XCTAssertNil(manager.requestHttpHeaders.value(forKey: "Connection"))
        let results = send(.get, "/_test/echo", using: manager)
        XCTAssertNil(results.error)
        XCTAssertEqual(try echo(results).header("Connection"), "close")
    }

    /// `print(error)` and `"\(error)"` show the redacted sentence, never the URL the underlying `URLError` keeps.
    func testPrintingAnErrorShowsNoSecret() {
        let refused = send(.get, "/x?api_key=S3CRET&page=2", base: "http://127.0.0.1:1")
        var slow = RestManager.Request(url: url("/_test/delay?seconds=5&api_key=S3CRET"))
        slow.timeoutInterval = 0.2
        let timedOut = send(slow)
        for results in [refused, timedOut] {
            guard let error = results.error else { return XCTFail("no error") }
            let printed = "\(error)"
            XCTAssertFalse(printed.contains("S3CRET"), printed)
            XCTAssertEqual(printed, error.localizedDescription)
        }
        XCTAssertTrue("\(timedOut.error.map { "\($0)" } ?? "")".contains("api_key=<redacted>"))
    }

    func testSecretHeadersAreRedactedInCurl() throws {
        for (index, name) in Self.secretHeaders.enumerated() { rest.requestHttpHeaders.add(value: "s3cret-\(index)", forKey: name) }
        rest.requestHttpHeaders.add(value: "custom", forKey: "X-Tenant")
        let line = try rest.curlCommand(forURL: url("/x"), withHttpMethod: .get)
        for name in Self.secretHeaders { XCTAssertTrue(line.contains("-H '\(name): <redacted>'"), "\(name): \(line)") }
        XCTAssertTrue(line.contains("-H 'X-Tenant: custom'"), line)
        XCTAssertFalse(line.contains("s3cret"), line)
        let revealed = try rest.curlCommand(forURL: url("/x"), withHttpMethod: .get, revealingSecrets: true)
        XCTAssertTrue(revealed.contains("-H 'Ocp-Apim-Subscription-Key: s3cret-5'"), revealed)
    }

    func testSecretQueryNamesAreRedactedInCurlEventsAndErrors() throws {
        for name in Self.secretNames + Self.harmlessNames { rest.urlQueryParameters.add(value: "v-\(name)", forKey: name) }
        let redacted = (Self.secretNames.map { "\($0)=<redacted>" } + Self.harmlessNames.map { "\($0)=v-\($0)" }).joined(separator: "&")
        let line = try rest.curlCommand(forURL: url("/_test/echo"), withHttpMethod: .get)
        XCTAssertTrue(line.hasPrefix("curl '\(server.baseURL.absoluteString)/_test/echo?\(redacted)'"), line)
        let events = ResultBox<String>()
        rest.eventHandler = { events.set($0.description) }
        XCTAssertEqual(send(.get, "/_test/echo").statusCode, 200)
        let lines = events.all
        XCTAssertEqual(lines.count, 2, "\(lines)")
        for text in lines { XCTAssertTrue(text.contains("/_test/echo?\(redacted)"), text) }
        for name in Self.secretNames {
            XCTAssertFalse(lines.joined().contains("&\(name)=v-") || lines.joined().contains("?\(name)=v-"), name)
        }
        let invalid = RestManager.CustomError.invalidURL("http://h/x?sig=abc&X-Amz-Signature=def&page=1", reason: "test")
        XCTAssertEqual(invalid.localizedDescription, "Invalid URL 'http://h/x?sig=<redacted>&X-Amz-Signature=<redacted>&page=1': test.")
        // A name is what the server decodes: `%6B%65%79` is `key` (a client that encodes every byte sends it so).
        let encoded = RestManager.CustomError.invalidURL("http://h/x?%6B%65%79=abc&p%69n=1234&%70age=2", reason: "test")
        XCTAssertEqual(encoded.localizedDescription, "Invalid URL 'http://h/x?%6B%65%79=<redacted>&p%69n=<redacted>&%70age=2': test.")
    }

    func testATokenAsTheURLsUserNameIsRedacted() throws {
        let line = try rest.curlCommand(forURL: XCTUnwrap(URL(string: "https://ghp_abc123@github.example/repos")), withHttpMethod: .get)
        XCTAssertTrue(line.hasPrefix("curl 'https://<redacted>@github.example/repos'"), line)
        let withPassword = try rest.curlCommand(forURL: XCTUnwrap(URL(string: "https://me:pw@h/")), withHttpMethod: .get)
        XCTAssertTrue(withPassword.hasPrefix("curl 'https://me:<redacted>@h/'"), withPassword)
        let timedOut = RestManager.CustomError.timedOut(try XCTUnwrap(URL(string: "https://ghp_abc123@h/x")), after: 1, limit: .idle)
        XCTAssertEqual(
            timedOut.localizedDescription,
            "The request to https://<redacted>@h/x timed out after 1.0 s: no byte was sent or received for that long "
                + "(raise the manager's idleTimeoutInterval to wait longer).")
    }

    func testSecretJSONAndFormFieldsAreRedactedInCurl() throws {
        var request = RestManager.Request(.post, url: url("/login"))
        request.headers.add(value: "application/json", forKey: "Content-Type")
        request.body = Data(#"{"user":"neo","password":"p4ss","nested":[{"client_secret":"c5"}],"refresh_token":"r7"}"#.utf8)
        let json = try rest.curlCommand(for: request)
        XCTAssertTrue(
            json.hasSuffix(
                #"--data-binary '{"nested":[{"client_secret":"<redacted>"}],"password":"<redacted>","refresh_token":"<redacted>","user":"neo"}'"#),
            json)
        XCTAssertTrue(try rest.curlCommand(for: request, revealingSecrets: true).contains(#""password":"p4ss""#))
        var form = RestManager.Request(.post, url: url("/login"))
        form.headers.add(value: "application/x-www-form-urlencoded", forKey: "Content-Type")
        for (name, value) in [("username", "neo"), ("password", "p 4ss"), ("grant_type", "password"), ("code", "c0de")] {
            form.bodyParameters.append(value: value, forKey: name)
        }
        let line = try rest.curlCommand(for: form)
        XCTAssertTrue(line.hasSuffix("--data-binary 'username=neo&password=<redacted>&grant_type=password&code=<redacted>'"), line)
        var plain = RestManager.Request(.post, url: url("/x"))
        plain.body = Data(#"{"password":"not JSON-typed"}"#.utf8)
        XCTAssertTrue(try rest.curlCommand(for: plain).contains("not JSON-typed"), "an octet-stream body is not parsed")
    }

    /// A fragment holds pairs too (an OAuth2 implicit grant's `#access_token=…`), and a query value may hold a URL
    /// with its own secrets (`to=https%3A…%3Fsig%3D…`): both are redacted wherever a URL is printed.
    func testFragmentsAndURLsInsideQueryValuesAreRedacted() throws {
        let cases = [
            ("https://h/cb#access_token=abc&state=xyz", "https://h/cb#access_token=<redacted>&state=xyz"),
            ("https://h/cb?page=2#token=abc", "https://h/cb?page=2#token=<redacted>"),
            ("https://h/doc#section-2", "https://h/doc#section-2"),
            (
                "https://h/go?to=https%3A%2F%2Fs3.example%2Fo%3Fsig%3Dabc%26x%3D1&lang=en",
                "https://h/go?to=<redacted>&lang=en"
            ),
            ("https://h/go?to=https%253A%252F%252Fs%252Fo%253Ftoken%253Dabc", "https://h/go?to=<redacted>"),
            ("https://h/go?next=/a?token=t&b=1", "https://h/go?next=<redacted>&b=1"),
            ("https://h/go?state=a%3D1%26password%3Dpw", "https://h/go?state=<redacted>"),
            ("https://h/go?next=%2Fhome%3Fpage%3D2&q=a%20b", "https://h/go?next=%2Fhome%3Fpage%3D2&q=a%20b")
        ]
        for (text, shown) in cases {
            let request = URLRequest(url: try XCTUnwrap(URL(string: text)))
            XCTAssertEqual(RestManager.Event.started(request, attempt: 1).description, "started GET \(shown) (attempt 1)")
            XCTAssertEqual(
                RestManager.CustomError.invalidURL(text, reason: "test").localizedDescription, "Invalid URL '\(shown)': test.")
        }
    }
}
