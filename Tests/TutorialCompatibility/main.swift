// A program written against the seed tutorial's API, compiled with RestManager.swift alone
// (`swiftc -swift-version 6 -warnings-as-errors RestManager.swift main.swift`) and run against
// Python's stock http.server (a server this project does not control). See run.sh.

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct UserData: Codable {
    let page: Int?
    let perPage: Int?
    let total: Int?
    let totalPages: Int?
    let data: [UserInfo]?
}

struct UserInfo: Codable {
    let id: Int?
    let email: String?
    let firstName: String?
    let lastName: String?
    let avatar: String?
}

let rest = RestManager()
let base = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "http://127.0.0.1:8000"
let expectedAvatar = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : ""
let failures = FailureCount()

final class FailureCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func check(_ condition: Bool, _ what: String) {
        lock.lock(); defer { lock.unlock() }
        if !condition { count += 1 }
        print(condition ? "ok   \(what)" : "FAIL \(what)")
    }
    var total: Int { lock.lock(); defer { lock.unlock() }; return count }
}

/// Waits for one tutorial-style call to complete.
func waitFor(_ start: (@escaping @Sendable () -> Void) -> Void) {
    let done = DispatchSemaphore(value: 0)
    start { done.signal() }
    if done.wait(timeout: .now() + 20) == .timedOut { failures.check(false, "completion arrived") }
}

// 1. The users list, decoded with convertFromSnakeCase (the server redirects /api/users to /api/users/).
waitFor { finished in
    guard let url = URL(string: base + "/api/users") else { return finished() }
    rest.requestHttpHeaders.add(value: "application/json", forKey: "Content-Type")
    rest.urlQueryParameters.add(value: "2", forKey: "page")
    rest.makeRequest(toURL: url, withHttpMethod: .get) { results in
        failures.check(results.error == nil, "list: no error (\(results.error?.localizedDescription ?? "-"))")
        failures.check(results.response?.httpStatusCode == 200, "list: HTTP 200 after the redirect")
        if let data = results.data {
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            let userData = try? decoder.decode(UserData.self, from: data)
            failures.check(userData?.totalPages == 2 && userData?.data?.count == 6, "list: decoded 6 users of 2 pages")
        }
        // 2. Response headers, read under another spelling than the server's.
        let server = results.response?.headers.value(forKey: "server") ?? ""
        failures.check(server.contains("SimpleHTTP"), "headers: 'server' header readable in lower case (\(server))")
        failures.check((results.response?.headers.totalItems() ?? 0) >= 3, "headers: all values listed")
        finished()
    }
}

// 3. A user that does not exist: the status code.
waitFor { finished in
    rest.urlQueryParameters = RestManager.RestEntity()
    guard let url = URL(string: base + "/api/users/100") else { return finished() }
    rest.makeRequest(toURL: url, withHttpMethod: .get) { results in
        failures.check(results.response?.httpStatusCode == 404, "status: HTTP 404 for user 100")
        finished()
    }
}

// 4. POST JSON: the stock server does not implement POST and says so with 501.
waitFor { finished in
    guard let url = URL(string: base + "/api/users") else { return finished() }
    rest.httpBodyParameters.add(value: "John", forKey: "name")
    rest.httpBodyParameters.add(value: "Developer", forKey: "job")
    rest.makeRequest(toURL: url, withHttpMethod: .post) { results in
        failures.check(results.response?.httpStatusCode == 501, "post: the server's 501 arrives as a response")
        finished()
    }
}

// 5. A single user, then the avatar through getData.
waitFor { finished in
    guard let url = URL(string: base + "/api/users/1") else { return finished() }
    rest.httpBodyParameters = RestManager.RestEntity()
    rest.makeRequest(toURL: url, withHttpMethod: .get) { results in
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        struct Single: Codable { let data: UserInfo }
        let user = results.data.flatMap { try? decoder.decode(Single.self, from: $0) }
        failures.check(user?.data.firstName == "George", "single user decoded")
        guard let avatar = user?.data.avatar, let avatarURL = URL(string: avatar) else { return finished() }
        rest.getData(fromURL: avatarURL) { data in
            let expected = (try? Data(contentsOf: URL(fileURLWithPath: expectedAvatar))) ?? Data([1])
            failures.check(data == expected, "avatar: getData returned the file's bytes")
            finished()
        }
    }
}

// getData of a missing file is nil, not the server's HTML error page.
waitFor { finished in
    guard let url = URL(string: base + "/img/faces/99-image.jpg") else { return finished() }
    rest.getData(fromURL: url) { data in
        failures.check(data == nil, "getData: nil for a 404")
        finished()
    }
}

print(failures.total == 0 ? "tutorial program: all checks passed" : "tutorial program: \(failures.total) checks failed")
exit(failures.total == 0 ? 0 : 1)
