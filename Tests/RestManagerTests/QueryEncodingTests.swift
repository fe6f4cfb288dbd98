import Foundation
import XCTest
import RestManager

final class QueryEncodingTests: MockServerTestCase {
    func testHostileValuesReachTheServerExactly() throws {
        let values = ["a+b c", "x&y=z", "100%", "#frag?/path", "café", "👩‍💻 emoji", "~-._", "semi;colon,comma"]
        for (index, value) in values.enumerated() { rest.urlQueryParameters.add(value: value, forKey: "k\(index) +&=") }
        let echo = try echo(send(.get, "/_test/echo"))
        XCTAssertEqual(echo.queryPairs.map(\.0), values.indices.map { "k\($0) +&=" })
        XCTAssertEqual(echo.queryPairs.map(\.1), values)
        // Only unreserved characters stay literal: no raw '+', '&' inside values, spaces as %20.
        XCTAssertTrue(echo.rawQuery?.hasPrefix("k0%20%2B%26%3D=a%2Bb%20c&") ?? false, echo.rawQuery ?? "nil")
    }

    func testParametersKeepInsertionOrderAndReplaceInPlace() throws {
        rest.urlQueryParameters.add(value: "1", forKey: "zeta")
        rest.urlQueryParameters.add(value: "2", forKey: "alpha")
        rest.urlQueryParameters.add(value: "3", forKey: "mid")
        rest.urlQueryParameters.add(value: "9", forKey: "zeta")
        let echo = try echo(send(.get, "/_test/echo"))
        XCTAssertEqual(echo.rawQuery, "zeta=9&alpha=2&mid=3")
    }

    /// `removeValue(forKey:)` takes every value of a key, `removeAll()` every key; what is left goes out in order.
    func testRemovedParametersAreNotSent() throws {
        rest.urlQueryParameters.append(value: "a", forKey: "tag")
        rest.urlQueryParameters.add(value: "1", forKey: "page")
        rest.urlQueryParameters.append(value: "b", forKey: "tag")
        rest.urlQueryParameters.removeValue(forKey: "tag")
        XCTAssertEqual(try echo(send(.get, "/_test/echo")).rawQuery, "page=1")
        rest.urlQueryParameters.removeAll()
        rest.urlQueryParameters.add(value: "2", forKey: "next")
        XCTAssertEqual(try echo(send(.get, "/_test/echo")).rawQuery, "next=2")
        rest.urlQueryParameters.removeAll()
        XCTAssertEqual(rest.urlQueryParameters.totalItems(), 0)
        XCTAssertNil(try echo(send(.get, "/_test/echo")).rawQuery)
    }

    func testQueryAlreadyInTheURLIsKept() throws {
        rest.urlQueryParameters.add(value: "two", forKey: "b")
        let echo = try echo(send(.get, "/_test/echo?a=one%2B&c"))
        XCTAssertEqual(echo.rawQuery, "a=one%2B&c&b=two")
    }

    /// A URL relative to another (`URL(string:relativeTo:)`) is resolved before the parameters are added.
    func testParametersAreAddedToARelativeURL() throws {
        rest.urlQueryParameters.add(value: "2", forKey: "page")
        let relative = try XCTUnwrap(URL(string: "_test/echo?a=1", relativeTo: URL(string: server.baseURL.absoluteString + "/")))
        let done = expectation(description: "relative")
        let box = ResultBox<RestManager.Results>()
        rest.makeRequest(toURL: relative, withHttpMethod: .get) { results in
            box.set(results)
            done.fulfill()
        }
        wait(for: [done], timeout: 15)
        let echo = try echo(try XCTUnwrap(box.value))
        XCTAssertEqual(echo.path, "/_test/echo")
        XCTAssertEqual(echo.rawQuery, "a=1&page=2")
    }

    /// A fragment is never sent, nor kept in the request built (libcurl would drop it; events and cURL would show it);
    /// with no parameters to add, the URL's own query goes exactly as written.
    func testAFragmentIsDroppedAndTheQueryLeftAlone() throws {
        XCTAssertEqual(try echo(send(.get, "/_test/echo?a=b#section")).rawQuery, "a=b")
        XCTAssertNil(try echo(send(.get, "/_test/echo#section")).rawQuery)
        let built = { try self.rest.makeURLRequest(toURL: self.url($0), withHttpMethod: .get).url?.absoluteString }
        XCTAssertEqual(try built("/_test/echo?a=b#section"), url("/_test/echo?a=b").absoluteString)
        rest.urlQueryParameters.add(value: "2", forKey: "page")
        XCTAssertEqual(try built("/_test/echo?a=b#section"), url("/_test/echo?a=b&page=2").absoluteString)
        XCTAssertEqual(try echo(send(.get, "/_test/echo?a=b#section")).rawQuery, "a=b&page=2")
    }

    /// RFC 3986's unreserved characters go out as they are, in names and values.
    func testUnreservedCharactersStayLiteralOnTheWire() throws {
        rest.urlQueryParameters.add(value: "a~b-c.d_e", forKey: "~k-._")
        XCTAssertEqual(try echo(send(.get, "/_test/echo")).rawQuery, "~k-._=a~b-c.d_e")
    }

    func testPercentEncodedQueryUsesOnlyUnreservedCharacters() {
        var entity = RestManager.RestEntity()
        entity.add(value: "a+b c/d?e#f%g*h'i!j", forKey: "q")
        XCTAssertEqual(entity.percentEncodedQuery, "q=a%2Bb%20c%2Fd%3Fe%23f%25g%2Ah%27i%21j")
    }

    func testRandomUnicodeRoundTripsThroughTheServer() throws {
        var generator = SeededGenerator(seed: 42)
        for _ in 0..<20 {
            rest.urlQueryParameters = RestManager.RestEntity()
            var expected: [(String, String)] = []
            for index in 0..<5 {
                let name = "n\(index)" + SeededGenerator.randomText(&generator, length: 4)
                let value = SeededGenerator.randomText(&generator, length: Int.random(in: 0...12, using: &generator))
                rest.urlQueryParameters.add(value: value, forKey: name)
                expected.append((name, value))
            }
            let echo = try echo(send(.get, "/_test/echo"))
            XCTAssertEqual(echo.queryPairs.map(\.0), expected.map(\.0))
            XCTAssertEqual(echo.queryPairs.map(\.1), expected.map(\.1))
        }
    }
}

/// A deterministic random source for property tests (SplitMix64).
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }

    /// Text mixing ASCII punctuation, spaces, accents, CJK and emoji (no unpaired surrogates).
    static func randomText(_ generator: inout SeededGenerator, length: Int) -> String {
        let pools: [ClosedRange<UInt32>] = [0x20...0x7E, 0xA0...0x24F, 0x4E00...0x4E80, 0x1F600...0x1F64F]
        var text = ""
        for _ in 0..<length {
            let pool = pools[Int.random(in: 0..<pools.count, using: &generator)]
            if let scalar = Unicode.Scalar(UInt32.random(in: pool, using: &generator)) { text.unicodeScalars.append(scalar) }
        }
        return text
    }
}
