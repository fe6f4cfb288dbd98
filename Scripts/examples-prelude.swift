// The names the documentation's Swift examples assume, for Scripts/check-examples.py: each example is type-checked
// as the body of a function beside these declarations (a name an example declares itself shadows one here).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let rest = RestManager()
let usersURL = URL(string: "https://reqres.in/api/users")!
let avatarURL = URL(string: "https://reqres.in/img/faces/2-image.jpg")!
let profileURL = URL(string: "https://reqres.in/api/users/2")!
let videoURL = URL(string: "https://example.com/talk.mp4")!
let photoURL = URL(fileURLWithPath: "/tmp/photo.jpg")
let uploadURL = URL(string: "https://example.com/upload")!
let movies = URL(fileURLWithPath: "/tmp/movies", isDirectory: true)
let talkFile = movies.appendingPathComponent("talk.mp4")
let jpeg = Data()
let token = "an access token"
let expiry = Date().addingTimeInterval(3600)
let refreshToken = "a refresh token"
let storedCredential = RestManager.Authenticator.Credential(accessToken: token, expiresAt: expiry)
let snakeCaseDecoder: JSONDecoder = {
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    return decoder
}()

/// reqres.in's page of users.
struct UserPage: Decodable, Sendable {
    struct User: Decodable, Sendable {
        let id: Int
        let email: String
    }
    let page: Int
    let data: [User]
}

/// A user to create.
struct NewUser: Encodable, Sendable {
    let name: String
    let job: String
}

/// An app's token endpoint.
enum TokenService {
    static func refresh(using refreshToken: String) async throws -> RestManager.Authenticator.Credential {
        RestManager.Authenticator.Credential(accessToken: "new", expiresAt: Date().addingTimeInterval(3600))
    }
}
let tokenService = TokenService.self

/// An app's request signature.
func signature(of request: URLRequest) -> String { "signature" }

/// An interceptor that sends a call again once after a 503.
struct RetryOnce503: RestManager.Interceptor {
    func decide(
        after results: RestManager.Results, for request: URLRequest, attempt: Int
    ) async -> RestManager.AttemptDecision {
        results.statusCode == 503 && attempt == 1 ? .retry(after: 0) : .deliver
    }
}

extension TokenService {
    /// A refresh given the credential that was rejected.
    static func refresh(_ rejected: RestManager.Authenticator.Credential?) async throws -> RestManager.Authenticator.Credential {
        try await refresh(using: refreshToken)
    }
}

let request = RestManager.Request(url: usersURL)

/// An app's request signature, by another name.
func hmac(_ request: URLRequest) -> String { signature(of: request) }
