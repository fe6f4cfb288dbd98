import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import RestManager

/// A certificate nobody trusts is a distinct, readable error, delivered at once: never retried.
final class TLSFailureTests: MockServerTestCase {
    /// A self-signed certificate for localhost (valid until 2126) and its key: test material, trusted by nobody.
    private static let certificate = """
        -----BEGIN CERTIFICATE-----
        MIIBgDCCASWgAwIBAgIUD44zuNd1Y2MM9toIPC/sppAKMggwCgYIKoZIzj0EAwIw
        FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNTA2MjQyNVoYDzIxMjYxMTAx
        MDYyNDI1WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
        PQMBBwNCAATKPRGVHPxHrlrNHV63bh6Jj79HziJuvvVX+3v9hFJgDy1BpSEzjrZP
        CJowdHhHFTnVJSBL0ZzmKHJMgnG0txG6o1MwUTAdBgNVHQ4EFgQUahHnY4UZCeU4
        acj5rJj09igbHCIwHwYDVR0jBBgwFoAUahHnY4UZCeU4acj5rJj09igbHCIwDwYD
        VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEA9eKMt96Pnwo8XM5mFqyB
        T/8UDX69qjRcTDhJ1RWcHXMCIQDfrgrn9A46/WssW4Fs9SA/mSX9yyEPEMisAdbX
        pyIAGA==
        -----END CERTIFICATE-----
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgNQ4B/965XNWMlHSL
        wzIZSwyYG2Fm422W5YrDL7bnKq6hRANCAATKPRGVHPxHrlrNHV63bh6Jj79HziJu
        vvVX+3v9hFJgDy1BpSEzjrZPCJowdHhHFTnVJSBL0ZzmKHJMgnG0txG6
        -----END PRIVATE KEY-----

        """
    /// A loopback TLS server that logs each connection it accepts, one line each, before the handshake.
    private static let server = """
        import socket, ssl, sys
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1])
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        print(listener.getsockname()[1], flush=True)
        while True:
            connection, _ = listener.accept()
            print("accepted", flush=True)
            try:
                context.wrap_socket(connection, server_side=True).close()
            except Exception:
                connection.close()

        """

    func testAnUntrustedCertificateIsNotRetriedAndSaysWhy() throws {
        let pem = scratch.appendingPathComponent("server.pem")
        try Self.certificate.write(to: pem, atomically: true, encoding: .utf8)
        let python = try startPythonServer(Self.server, named: "tls_server", arguments: [pem.path])
        defer { python.stop() }
        let port = try XCTUnwrap(python.port)
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 2, initialDelay: 0)
        let results = send(.get, "/x", base: "https://127.0.0.1:\(port)")
        guard case .transport(let error)? = results.error as? RestManager.CustomError else {
            return XCTFail("\(String(describing: results.error))")
        }
        #if canImport(FoundationNetworking)
        XCTAssertEqual(error.code, .serverCertificateUntrusted)
        let description = results.error?.localizedDescription ?? ""
        let expected = "Network error -1202: The server's TLS certificate is not trusted (SSL certificate problem: "
        XCTAssertTrue(description.hasPrefix(expected), description)
        #endif
        // One more call, not retried: the server logs connections in order, so its line comes after every earlier one.
        rest.retryPolicy = nil
        XCTAssertNotNil(send(.get, "/x", base: "https://127.0.0.1:\(port)").error)
        let accepted = python.log.split(separator: "\n").filter { $0 == "accepted" }
        XCTAssertEqual(accepted.count, 2, "the first call made one attempt, not three")
    }

    /// libcurl's TLS texts are read whatever their case ("Certificate" in some backends' words), and only TLS failures
    /// of code -1 are given Apple's codes.
    func testTLSFailureTextsAreClassifiedWhateverTheirCase() {
        let cases: [(String, URLError.Code)] = [
            ("SSL: Certificate verify failed", .serverCertificateUntrusted),
            ("SSL connect error", .secureConnectionFailed), ("TLS alert", .secureConnectionFailed),
            ("Couldn't connect to server", .unknown)
        ]
        for (text, code) in cases {
            let error = URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: text])
            XCTAssertEqual(RestManager.Exchange.classified(error).code, code, text)
        }
    }
}
