// How an app tests its own networking code with Swift Testing and MockServer: a real loopback server per test,
// no shared state, so tests run in parallel (Swift Testing's default) where static URLProtocol stubs break.

import Foundation
import MockServer
import RestManager
import Testing

struct Product: Codable, Equatable, Sendable {
    let id: Int
    let name: String
}

/// The app's service under test: one manager, requests as values, a retry policy for a flaky API.
final class CatalogService: Sendable {
    private let rest = RestManager()

    init(baseURL: URL) {
        rest.baseURL = baseURL
        rest.timeoutInterval = 10
        rest.retryPolicy = RestManager.RetryPolicy(maximumRetries: 1, initialDelay: 0.05)
        rest.requestHttpHeaders.add(value: "catalog-app/1.0", forKey: "User-Agent")
    }

    func product(id: Int) async throws -> Product {
        try await rest.request(Product.self, for: RestManager.Request(url: URL(string: "v1/products/\(id)")!))
    }

    func search(_ text: String) async throws -> [Product] {
        var request = RestManager.Request(url: URL(string: "v1/products")!)
        request.queryParameters.add(value: text, forKey: "q")
        return try await rest.request([Product].self, for: request)
    }

    func add(_ product: Product) async throws -> Product {
        var request = RestManager.Request(.post, url: URL(string: "v1/products")!)
        try request.setBody(product)
        return try await rest.request(Product.self, for: request)
    }
}

/// Starts a server for one test and stops it when the test ends, whatever happens.
func withServer<Result>(_ body: (MockServer, CatalogService) async throws -> Result) async throws -> Result {
    var configuration = MockServer.Configuration()
    configuration.servesReqres = false  // only what the test defines answers
    let server = MockServer(configuration: configuration)
    try server.start()
    defer { server.stop() }
    return try await body(server, CatalogService(baseURL: server.baseURL))
}

@Suite("CatalogService against MockServer")
struct CatalogServiceTests {
    @Test func loadsAProduct() async throws {
        try await withServer { server, service in
            server.stub("GET", path: "/v1/products/7", response: .json(#"{"id":7,"name":"Lamp"}"#))
            #expect(try await service.product(id: 7) == Product(id: 7, name: "Lamp"))
            let request = try #require(server.takeRequest(timeout: 5))
            #expect(request.method == "GET")
            #expect(request.header("User-Agent") == "catalog-app/1.0")
        }
    }

    @Test func sendsTheSearchTextEncoded() async throws {
        try await withServer { server, service in
            server.stub(path: "/v1/products", response: .json("[]"))
            let found = try await service.search("desk lamp & shade")
            #expect(found.isEmpty)
            #expect(server.takeRequest(timeout: 5)?.rawQuery == "q=desk%20lamp%20%26%20shade")
        }
    }

    @Test func postsTheNewProductAsJSON() async throws {
        try await withServer { server, service in
            server.stub("POST", path: "/v1/products") { request in
                MockServer.Response(status: 201, headers: [("Content-Type", "application/json")], body: request.body)
            }
            #expect(try await service.add(Product(id: 9, name: "Chair")) == Product(id: 9, name: "Chair"))
            let request = try #require(server.takeRequest(timeout: 5))
            #expect(request.header("Content-Type") == "application/json")
            // JSONEncoder's key order is not fixed: compare the decoded value.
            #expect(try JSONDecoder().decode(Product.self, from: request.body) == Product(id: 9, name: "Chair"))
        }
    }

    @Test func aQueued503IsRetriedOnce() async throws {
        try await withServer { server, service in
            server.enqueue(MockServer.Response(status: 503))
            server.stub(path: "/v1/products/1", response: .json(#"{"id":1,"name":"Desk"}"#))
            let product = try await service.product(id: 1)
            #expect(product.name == "Desk")
            #expect(server.receivedRequests.count == 2)
        }
    }

    @Test func aMissingProductIsA404Error() async throws {
        try await withServer { server, service in
            server.stub(path: "/v1/products/404", response: MockServer.Response(status: 404))
            await #expect {
                try await service.product(id: 404)
            } throws: { error in
                guard case .unacceptableStatusCode(404, _)? = error as? RestManager.CustomError else { return false }
                return true
            }
        }
    }

    /// Faults are real socket behaviour: the service sees the error an app would see in production.
    @Test(arguments: [MockServer.Fault.closeWithoutResponse, .closeAfterHeaders, .closeMidBody, .resetConnection])
    func aBrokenConnectionIsAnError(fault: MockServer.Fault) async throws {
        try await withServer { server, service in
            var broken = MockServer.Response(status: 200, body: Data(repeating: 1, count: 1000))
            broken.fault = fault
            server.stub(path: "/v1/products/5", response: broken)
            await #expect(throws: RestManager.CustomError.self) { try await service.product(id: 5) }
        }
    }
}

/// Many tests at once, each with its own server: nothing is shared, so nothing races (this target runs under TSan in CI).
@Suite("Parallel servers")
struct ParallelServerTests {
    /// How many of these tests run at the same moment (each waits, briefly, for the others to start).
    actor Gate {
        private var running = 0
        private(set) var mostAtOnce = 0
        private var deadline: Date?

        func enter() {
            running += 1
            mostAtOnce = max(mostAtOnce, running)
            if deadline == nil { deadline = Date() + 30 }
        }

        func leave() { running -= 1 }

        /// True once `count` tests have been running at once, or when the shared deadline has passed.
        func reached(_ count: Int) -> Bool { mostAtOnce >= count || Date() > (deadline ?? .distantFuture) }
    }

    static let gate = Gate()

    @Test(arguments: 1...24)
    func eachTestHasItsOwnServer(number: Int) async throws {
        await Self.gate.enter()
        try await withServer { server, service in
            server.stub(path: "/v1/products/\(number)", response: .json(#"{"id":\#(number),"name":"item \#(number)"}"#))
            while await !Self.gate.reached(20) { try await Task.sleep(nanoseconds: 10_000_000) }
            #expect(try await service.product(id: number) == Product(id: number, name: "item \(number)"))
            #expect(server.receivedRequests.map(\.path) == ["/v1/products/\(number)"], "no other test's request")
        }
        await Self.gate.leave()
        #expect(await Self.gate.mostAtOnce >= 20, "Swift Testing ran at least 20 of these at once")
    }
}
