// The README's "Testing your own code" example, kept here so that it cannot rot: an app's own
// service built on RestManager, tested against MockServer. (It sets up its own server, as an app's
// test would, instead of using this suite's shared fixture.)

import Foundation
import XCTest
import MockServer
import RestManager

struct User: Codable, Equatable, Sendable {
    let id: Int
    let name: String
}

/// An app's service: one manager for its API, calls made one at a time (as a screen makes them).
final class UserService: @unchecked Sendable {
    private let rest = RestManager()
    private let baseURL: URL

    init(baseURL: URL) {
        self.baseURL = baseURL
        rest.requestHttpHeaders.add(value: "application/json", forKey: "Accept")
    }

    func user(id: Int) async throws -> User {
        try await rest.request(User.self, fromURL: baseURL.appendingPathComponent("v1/users/\(id)"))
    }

    /// Renames a user; a 503 (the API restarting) is tried once more.
    func rename(id: Int, to name: String) async throws -> User {
        try rest.setHttpBody(["name": name])
        let url = baseURL.appendingPathComponent("v1/users/\(id)")
        let first = await rest.makeRequest(toURL: url, withHttpMethod: .put)
        let results = first.statusCode == 503 ? await rest.makeRequest(toURL: url, withHttpMethod: .put) : first
        try results.validate()
        return try results.decode(User.self)
    }
}

final class UserServiceTests: XCTestCase {
    private var server: MockServer!
    private var service: UserService!

    override func setUpWithError() throws {
        var configuration = MockServer.Configuration()
        configuration.servesReqres = false  // only what each test defines answers
        server = MockServer(configuration: configuration)
        try server.start()
        service = UserService(baseURL: server.baseURL)
    }

    override func tearDown() {
        server.stop()
        server = nil
        service = nil
        super.tearDown()
    }

    func testLoadsAUser() async throws {
        server.stub("GET", path: "/v1/users/7", response: .json(#"{"id":7,"name":"Ann"}"#))
        let user = try await service.user(id: 7)
        XCTAssertEqual(user, User(id: 7, name: "Ann"))
        let request = try XCTUnwrap(server.takeRequest())
        XCTAssertEqual(request.method, "GET")
        XCTAssertEqual(request.path, "/v1/users/7")
        XCTAssertEqual(request.header("Accept"), "application/json")
    }

    func testRenameTriesAgainAfterA503() async throws {
        server.enqueue(MockServer.Response(status: 503))
        server.enqueue(.json(#"{"id":7,"name":"Bo"}"#))
        let user = try await service.rename(id: 7, to: "Bo")
        XCTAssertEqual(user, User(id: 7, name: "Bo"))
        for _ in 0..<2 {
            let request = try XCTUnwrap(server.takeRequest())
            XCTAssertEqual(request.method, "PUT")
            XCTAssertEqual(request.path, "/v1/users/7")
            XCTAssertEqual(request.body, Data(#"{"name":"Bo"}"#.utf8))
        }
        XCTAssertNil(server.takeRequest(timeout: 0.1), "no third attempt")
    }

    func testAConnectionCutMidBodyIsAnError() async throws {
        var broken = MockServer.Response.json(#"{"id":7,"name":"Ann"}"#)
        broken.fault = .closeMidBody
        server.enqueue(broken)
        do {
            _ = try await service.user(id: 7)
            XCTFail("a cut answer must not decode")
        } catch let error as RestManager.CustomError {
            guard case .transport = error else { return XCTFail("\(error)") }
        }
    }
}
