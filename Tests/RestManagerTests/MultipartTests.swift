import Foundation
import XCTest
import RestManager

final class MultipartTests: MockServerTestCase {
    /// Splits a multipart body on its boundary into (headers, data) parts: the reverse of the encoder.
    static func parse(_ body: Data, boundary: String) -> [(headers: String, data: Data)]? {
        let delimiter = Data("--\(boundary)".utf8)
        var parts: [(String, Data)] = []
        var cursor = body.startIndex
        guard body.starts(with: delimiter) else { return nil }
        while let start = body.range(of: delimiter, in: cursor..<body.endIndex) {
            let afterDelimiter = start.upperBound
            if body[afterDelimiter...].starts(with: Data("--\r\n".utf8)) { return parts }
            guard body[afterDelimiter...].starts(with: Data("\r\n".utf8)),
                let headEnd = body.range(of: Data("\r\n\r\n".utf8), in: afterDelimiter..<body.endIndex),
                let next = body.range(of: Data("\r\n--\(boundary)".utf8), in: headEnd.upperBound..<body.endIndex)
            else { return nil }
            let headers = String(decoding: body[(afterDelimiter + 2)..<headEnd.lowerBound], as: UTF8.self)
            parts.append((headers, Data(body[headEnd.upperBound..<next.lowerBound])))
            cursor = next.lowerBound + 2
        }
        return nil
    }

    func testFieldsAndFilesReachTheServerFramedExactly() throws {
        rest.httpBodyParameters.add(value: "Holiday \"2026\"", forKey: "title")
        let jpeg = Data([0xFF, 0xD8, 0x0D, 0x0A, 0x2D, 0x2D, 0xFF, 0xD9])
        // Quotes and line ends cannot end a parameter or start a header of their own.
        rest.addFile(jpeg, fieldName: "pho\"to", fileName: "be\"ach\r\n.jpg", mimeType: "image/jpeg\r\nX-Injected: 1")
        let echo = try echo(send(.post, "/_test/echo"))
        let contentType = try XCTUnwrap(echo.header("Content-Type"))
        XCTAssertTrue(contentType.hasPrefix("multipart/form-data; boundary=RestManager-"))
        let boundary = String(contentType.split(separator: "=", maxSplits: 1)[1])
        let parts = try XCTUnwrap(Self.parse(echo.bodyData, boundary: boundary))
        XCTAssertEqual(parts.count, 2)
        XCTAssertEqual(parts[0].headers, "Content-Disposition: form-data; name=\"title\"")
        XCTAssertEqual(String(decoding: parts[0].data, as: UTF8.self), "Holiday \"2026\"")
        XCTAssertEqual(
            parts[1].headers,
            "Content-Disposition: form-data; name=\"pho%22to\"; filename=\"be%22ach%0D%0A.jpg\"\r\nContent-Type: image/jpeg  X-Injected: 1")
        XCTAssertEqual(parts[1].data, jpeg)
        XCTAssertTrue(echo.bodyText.hasSuffix("--\(boundary)--\r\n"))
    }

    func testBoundariesAreRandom() {
        XCTAssertNotEqual(RestManager.MultipartBody().boundary, RestManager.MultipartBody().boundary)
    }

    func testRandomPartsParseBackIdentically() throws {
        var generator = SeededGenerator(seed: 99)
        for _ in 0..<50 {
            var body = RestManager.MultipartBody()
            var expected: [Data] = []
            for index in 0..<Int.random(in: 1...5, using: &generator) {
                let bytes = Data((0..<Int.random(in: 0...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                body.addFile(
                    fieldName: "f\(index)", fileName: SeededGenerator.randomText(&generator, length: 5), mimeType: "application/octet-stream",
                    data: bytes)
                expected.append(bytes)
            }
            let parts = try XCTUnwrap(Self.parse(body.encoded(), boundary: body.boundary))
            XCTAssertEqual(parts.map(\.data), expected)
        }
    }
}
