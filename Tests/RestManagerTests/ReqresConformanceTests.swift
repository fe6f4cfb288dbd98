import Foundation
import XCTest
import MockServer
import RestManager

/// reqres.in's keys are snake_case (`per_page`, `total_pages`).
private func snakeCaseDecoder() -> JSONDecoder {
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    return decoder
}

/// The mock's reqres.in imitation, checked byte for byte where the answer is deterministic.
final class ReqresConformanceTests: MockServerTestCase {

    private let support =
        #""support":{"url":"https://reqres.in/#support-heading","text":"To keep ReqRes free, contributions towards server costs are appreciated!"}"#

    private func body(_ results: RestManager.Results) -> String { String(decoding: results.data ?? Data(), as: UTF8.self) }

    private func user(_ id: Int, _ first: String, _ last: String) -> String {
        #"{"id":\#(id),"email":"\#(first.lowercased()).\#(last.lowercased())@reqres.in","first_name":"\#(first)","last_name":"\#(last)","avatar":"\#(server.baseURL.absoluteString)/img/faces/\#(id)-image.jpg"}"#
    }

    func testSingleUserExactBytesAndHeaders() {
        let results = send(.get, "/api/users/2")
        XCTAssertEqual(results.statusCode, 200)
        XCTAssertEqual(body(results), #"{"data":\#(user(2, "Janet", "Weaver")),\#(support)}"#)
        XCTAssertEqual(results.response?.headers.value(forKey: "content-type"), "application/json; charset=utf-8")
        XCTAssertEqual(results.response?.headers.value(forKey: "access-control-allow-origin"), "*")
    }

    func testPageTwoExactBytes() {
        let users = [
            (7, "Michael", "Lawson"), (8, "Lindsay", "Ferguson"), (9, "Tobias", "Funke"),
            (10, "Byron", "Fields"), (11, "George", "Edwards"), (12, "Rachel", "Howell")
        ].map { user($0.0, $0.1, $0.2) }
        let results = send(.get, "/api/users?page=2")
        XCTAssertEqual(body(results), #"{"page":2,"per_page":6,"total":12,"total_pages":2,"data":[\#(users.joined(separator: ","))],\#(support)}"#)
    }

    func testPaginationArithmetic() throws {
        struct Page: Decodable { let page: Int; let perPage: Int; let totalPages: Int; let data: [Item] }
        struct Item: Decodable { let id: Int }
        func page(_ query: String) throws -> Page { try send(.get, "/api/users" + query).decode(Page.self, using: snakeCaseDecoder()) }
        XCTAssertEqual(try page("").data.map(\.id), [1, 2, 3, 4, 5, 6])
        XCTAssertEqual(try page("?page=0").page, 1)
        XCTAssertEqual(try page("?page=abc").page, 1)
        XCTAssertEqual(try page("?page=2abc").data.first?.id, 7)
        XCTAssertEqual(try page("?page=3").data.count, 0)
        let small = try page("?per_page=5&page=3")
        XCTAssertEqual(small.totalPages, 3)
        XCTAssertEqual(small.data.map(\.id), [11, 12])
        XCTAssertEqual(try page("?per_page=12").data.count, 12)
    }

    func testUnknownIdsAreEmpty404() {
        for path in ["/api/users/23", "/api/users/abc", "/api/users/0", "/api/unknown/13", "/api/users/2/extra"] {
            let results = send(.get, path)
            XCTAssertEqual(results.statusCode, 404, path)
            XCTAssertEqual(body(results), "{}", path)
        }
    }

    func testColourResourcesUnderAnyName() {
        let expected = ##"{"data":{"id":2,"name":"fuchsia rose","year":2001,"color":"#C74375","pantone_value":"17-2031"},"## + support + "}"
        XCTAssertEqual(body(send(.get, "/api/unknown/2")), expected)
        XCTAssertEqual(body(send(.get, "/api/products/2")), expected)
        XCTAssertTrue(
            body(send(.get, "/api/unknown")).hasPrefix(
                ##"{"page":1,"per_page":6,"total":12,"total_pages":2,"data":[{"id":1,"name":"cerulean","year":2000,"color":"#98B2D1","pantone_value":"15-4020"}"##
            ))
    }

    func testCreateEchoesFieldsThenIdAndCreatedAt() throws {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBody = Data(#"{"name":"morpheus","job":"leader","level":3,"tags":["a"]}"#.utf8)
        let results = send(.post, "/api/users")
        XCTAssertEqual(results.statusCode, 201)
        let text = body(results)
        let pattern =
            #"^\{"name":"morpheus","job":"leader","level":3,"tags":\["a"\],"id":"[0-9]{1,3}","createdAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"\}$"#
        XCTAssertNotNil(text.range(of: pattern, options: .regularExpression), text)
    }

    func testCreateFromAFormBody() {
        rest.requestHttpHeaders.add(value: "application/x-www-form-urlencoded", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "neo one", forKey: "name")
        XCTAssertTrue(body(send(.post, "/api/users")).hasPrefix(#"{"name":"neo one","id":""#))
    }

    func testUpdateAndDelete() {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        rest.httpBodyParameters.add(value: "zion resident", forKey: "job")
        for method in [RestManager.HttpMethod.put, .patch] {
            let results = send(method, "/api/users/2")
            XCTAssertEqual(results.statusCode, 200)
            XCTAssertNotNil(body(results).range(of: #"^\{"job":"zion resident","updatedAt":"[0-9T:.\-]+Z"\}$"#, options: .regularExpression))
        }
        let deleted = send(.delete, "/api/users/2")
        XCTAssertEqual(deleted.statusCode, 204)
        XCTAssertEqual(deleted.data, Data())
        XCTAssertNil(deleted.response?.headers.value(forKey: "Content-Type"))
    }

    func testRegisterLoginLogout() {
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
        func post(_ path: String, _ json: String) -> (Int?, String) {
            rest.httpBody = Data(json.utf8)
            let results = send(.post, path)
            return (results.statusCode, body(results))
        }
        XCTAssertTrue(
            post("/api/register", #"{"email":"eve.holt@reqres.in","password":"pistol"}"#) == (200, #"{"id":4,"token":"QpwL5tke4Pnpja7X4"}"#))
        XCTAssertTrue(post("/api/register", #"{"email":"sydney@fife"}"#) == (400, #"{"error":"Missing password"}"#))
        XCTAssertTrue(post("/api/register", #"{"password":"x"}"#) == (400, #"{"error":"Missing email or username"}"#))
        XCTAssertTrue(
            post("/api/register", #"{"email":"nobody@x.io","password":"x"}"#) == (400, #"{"error":"Note: Only defined users succeed registration"}"#))
        XCTAssertTrue(post("/api/login", #"{"email":"janet.weaver@reqres.in","password":"any"}"#) == (200, #"{"token":"QpwL5tke4Pnpja7X2"}"#))
        XCTAssertTrue(post("/api/login", #"{"email":"nobody@x.io","password":"x"}"#) == (400, #"{"error":"user not found"}"#))
        XCTAssertTrue(post("/api/login", #"{"email":"eve.holt@reqres.in"}"#) == (400, #"{"error":"Missing password"}"#))
        XCTAssertTrue(post("/api/logout", "") == (200, "{}"))
    }

    func testDelayParameter() {
        let started = Date()
        XCTAssertEqual(send(.get, "/api/users?delay=1").statusCode, 200)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.95)
    }

    func testPreflight() {
        rest.requestHttpHeaders.add(value: "x-api-key", forKey: "Access-Control-Request-Headers")
        let results = send(.options, "/api/users")
        XCTAssertEqual(results.statusCode, 204)
        XCTAssertEqual(results.response?.headers.value(forKey: "access-control-allow-methods"), "GET,HEAD,PUT,PATCH,POST,DELETE")
        XCTAssertEqual(results.response?.headers.value(forKey: "access-control-allow-headers"), "x-api-key")
    }

    func testAvatarsAreDistinctJPEGs() throws {
        var seen = Set<Data>()
        for id in 1...12 {
            let results = send(.get, "/img/faces/\(id)-image.jpg")
            XCTAssertEqual(results.response?.headers.value(forKey: "content-type"), "image/jpeg")
            let data = try XCTUnwrap(results.data)
            XCTAssertEqual(Array(data.prefix(3)), [0xFF, 0xD8, 0xFF])
            XCTAssertEqual(Array(data.suffix(2)), [0xFF, 0xD9])
            seen.insert(data)
        }
        XCTAssertEqual(seen.count, 12)
        XCTAssertEqual(send(.get, "/img/faces/13-image.jpg").statusCode, 404)
    }
}

final class ReqresOptionsTests: MockServerTestCase {
    override var serverConfiguration: MockServer.Configuration {
        var configuration = MockServer.Configuration()
        configuration.pageSize = 3
        configuration.requiresAPIKey = true
        return configuration
    }

    func testAPIKeyIsRequiredWhenSwitchedOn() {
        let missing = send(.get, "/api/users")
        XCTAssertEqual(missing.statusCode, 401)
        XCTAssertEqual(
            String(decoding: missing.data ?? Data(), as: UTF8.self),
            #"{"error":"Missing API key.","how_to_get_one":"https://reqres.in/signup"}"#)
        rest.requestHttpHeaders.add(value: "reqres-free-v1", forKey: "x-api-key")
        XCTAssertEqual(send(.get, "/api/users").statusCode, 200)
    }

    func testTutorialEraPageSize() throws {
        rest.requestHttpHeaders.add(value: "reqres-free-v1", forKey: "x-api-key")
        struct Page: Decodable { let perPage: Int; let totalPages: Int }
        let page = try send(.get, "/api/users").decode(Page.self, using: snakeCaseDecoder())
        XCTAssertEqual(page.perPage, 3)
        XCTAssertEqual(page.totalPages, 4)
    }
}
