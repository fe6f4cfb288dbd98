// The reqres.in answers, as Codable structs decoded with the snake-case strategy (as in the tutorial).

import Foundation

struct User: Codable {
    let id: Int
    let email: String
    let firstName: String
    let lastName: String
    let avatar: String
}

struct UserPage: Codable {
    let page: Int
    let perPage: Int
    let total: Int
    let totalPages: Int
    let data: [User]
}

struct SingleUser: Codable {
    let data: User
}

struct CreatedUser: Codable {
    let id: String
    let createdAt: String
}

struct UpdatedUser: Codable {
    let updatedAt: String
}

struct Token: Codable {
    let id: Int?
    let token: String
}

struct APIError: Codable {
    let error: String
}

extension JSONDecoder {
    static var snakeCase: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }
}
