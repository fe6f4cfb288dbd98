// The reqres.in imitation: users, colours, pagination, auth endpoints, avatars (see shared/reqres-api.md).

import Foundation

enum ReqresAPI {
    struct User {
        let id: Int
        let firstName: String
        let lastName: String
        var email: String { "\(firstName.lowercased()).\(lastName.lowercased())@reqres.in" }
    }

    static let users: [User] = [
        ("George", "Bluth"), ("Janet", "Weaver"), ("Emma", "Wong"), ("Eve", "Holt"), ("Charles", "Morris"),
        ("Tracey", "Ramos"), ("Michael", "Lawson"), ("Lindsay", "Ferguson"), ("Tobias", "Funke"),
        ("Byron", "Fields"), ("George", "Edwards"), ("Rachel", "Howell")
    ].enumerated().map { User(id: $0.offset + 1, firstName: $0.element.0, lastName: $0.element.1) }

    static let colours: [(name: String, year: Int, color: String, pantone: String)] = [
        ("cerulean", 2000, "#98B2D1", "15-4020"), ("fuchsia rose", 2001, "#C74375", "17-2031"),
        ("true red", 2002, "#BF1932", "19-1664"), ("aqua sky", 2003, "#7BC4C4", "14-4811"),
        ("tigerlily", 2004, "#E2583E", "17-1456"), ("blue turquoise", 2005, "#53B0AE", "15-5217"),
        ("sand dollar", 2006, "#DECDBE", "13-1106"), ("chili pepper", 2007, "#9B1B30", "19-1557"),
        ("blue iris", 2008, "#5A5B9F", "18-3943"), ("mimosa", 2009, "#F0C05A", "14-0848"),
        ("turquoise", 2010, "#45B5AA", "15-5519"), ("honeysuckle", 2011, "#D94F70", "18-2120")
    ]

    static let support = JSONText.object([
        ("url", JSONText.string("https://reqres.in/#support-heading")),
        ("text", JSONText.string("To keep ReqRes free, contributions towards server costs are appreciated!"))
    ])

    static let tokenPrefix = "QpwL5tke4Pnpja7X"

    /// Every user and colour as JSON, and the single-item answers, computed once per server.
    final class Catalogue: @unchecked Sendable {
        let users: [String]
        let colours: [String]
        let singleUsers: [HTTPResponse]
        let singleColours: [HTTPResponse]

        init(base: String) {
            users = ReqresAPI.users.map { userJSON($0, base: base) }
            colours = ReqresAPI.colours.indices.map(colourJSON)
            func envelope(_ item: String) -> HTTPResponse { json(200, JSONText.object([("data", item), ("support", support)])) }
            singleUsers = users.map(envelope)
            singleColours = colours.map(envelope)
        }
    }

    static func userJSON(_ user: User, base: String) -> String {
        JSONText.object([
            ("id", "\(user.id)"), ("email", JSONText.string(user.email)),
            ("first_name", JSONText.string(user.firstName)), ("last_name", JSONText.string(user.lastName)),
            ("avatar", JSONText.string("\(base)/img/faces/\(user.id)-image.jpg"))
        ])
    }

    static func colourJSON(_ index: Int) -> String {
        let colour = colours[index]
        return JSONText.object([
            ("id", "\(index + 1)"), ("name", JSONText.string(colour.name)), ("year", "\(colour.year)"),
            ("color", JSONText.string(colour.color)), ("pantone_value", JSONText.string(colour.pantone))
        ])
    }

    static func reply(to request: ReceivedRequest, server: MockServer) -> Reply {
        let segments = request.path.split(separator: "/").map(String.init)
        if request.method == "OPTIONS" {
            return .response(
                HTTPResponse(
                    status: 204,
                    headers: [
                        ("Access-Control-Allow-Origin", "*"),
                        ("Access-Control-Allow-Methods", "GET,HEAD,PUT,PATCH,POST,DELETE"),
                        ("Access-Control-Allow-Headers", request.header("Access-Control-Request-Headers") ?? "*"),
                        ("Vary", "Access-Control-Request-Headers")
                    ]))
        }
        if let text = request.query("delay"), Numbers.seconds(text, maximum: 60) == nil {
            return .response(badNumber("delay must be a number of seconds in 0...60, not '\(HeaderText.printable(text))'"))
        }
        var response = answer(request, segments: Array(segments.dropFirst()), server: server)
        if let delay = request.query("delay").flatMap({ Numbers.seconds($0, maximum: 60) }), delay > 0 {
            response.delayBeforeHeaders = delay
        }
        return .response(response)
    }

    private static func answer(_ request: ReceivedRequest, segments: [String], server: MockServer) -> HTTPResponse {
        if server.configuration.requiresAPIKey && (request.header("x-api-key") ?? "").isEmpty {
            return json(
                401,
                JSONText.object([
                    ("error", JSONText.string("Missing API key.")),
                    ("how_to_get_one", JSONText.string("https://reqres.in/signup"))
                ]))
        }
        guard let resource = segments.first, segments.count <= 2 else { return json(404, "{}") }
        let id = segments.count == 2 ? segments[1] : nil
        switch (request.method, resource) {
        case ("POST", "register"), ("POST", "login"):
            return authenticate(request, registering: resource == "register")
        case ("POST", "logout"):
            return json(200, "{}")
        case ("GET", _), ("HEAD", _):
            let catalogue = server.catalogue
            let items = resource == "users" ? catalogue.users : catalogue.colours
            guard let id else {
                guard let page = page(items, request: request, pageSize: server.configuration.pageSize) else {
                    return badNumber("page and per_page must be whole numbers from -\(pagingLimit) to \(pagingLimit)")
                }
                return json(200, page)
            }
            guard let number = Int(id), id.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), (1...items.count).contains(number) else {
                return json(404, "{}")
            }
            return (resource == "users" ? catalogue.singleUsers : catalogue.singleColours)[number - 1]
        case ("POST", _):
            guard let fields = fields(of: request) else { return json(400, JSONText.object([("error", JSONText.string("Invalid JSON body"))])) }
            return json(
                201,
                JSONText.object(
                    fields + [
                        ("id", JSONText.string(String(Int.random(in: 1...999)))),
                        ("createdAt", JSONText.string(timestamp()))
                    ]))
        case ("PUT", _), ("PATCH", _):
            guard let fields = fields(of: request) else { return json(400, JSONText.object([("error", JSONText.string("Invalid JSON body"))])) }
            return json(200, JSONText.object(fields + [("updatedAt", JSONText.string(timestamp()))]))
        case ("DELETE", _):
            return HTTPResponse(status: 204, headers: [("Access-Control-Allow-Origin", "*")])
        default:
            return json(404, "{}")
        }
    }

    /// The largest page or page size the mock takes (in magnitude): the arithmetic below cannot overflow.
    static let pagingLimit = 1_000_000

    /// The list envelope, with the original app's arithmetic (JavaScript `parseInt`, `||`, `slice`);
    /// nil when `page` or `per_page` is beyond `pagingLimit`.
    private static func page(_ items: [String], request: ReceivedRequest, pageSize: Int) -> String? {
        let page = parseInt(request.query("page")) ?? 1
        let perPage = parseInt(request.query("per_page")) ?? max(1, min(pageSize, pagingLimit))
        guard abs(page) <= pagingLimit, abs(perPage) <= pagingLimit else { return nil }
        let total = items.count
        let totalPages = perPage == 0 ? 0 : Int((Double(total) / Double(perPage)).rounded(.up))
        let data = slice(items, from: (page - 1) * perPage, to: page * perPage)
        return JSONText.object([
            ("page", "\(page)"), ("per_page", "\(perPage)"), ("total", "\(total)"),
            ("total_pages", "\(totalPages)"), ("data", JSONText.array(data)), ("support", support)
        ])
    }

    /// `parseInt(text) || nil`: leading digits with an optional sign; nil for none or 0.
    static func parseInt(_ text: String?) -> Int? {
        guard let text else { return nil }
        var characters = Substring(text.trimmingCharacters(in: .whitespaces))
        var sign = 1
        if let first = characters.first, first == "-" || first == "+" {
            sign = first == "-" ? -1 : 1
            characters = characters.dropFirst()
        }
        let digits = characters.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty else { return nil }
        // More than 12 digits is beyond any limit; keep it out of range without overflowing.
        guard digits.count <= 12, let value = Int(digits) else { return sign * 1_000_000_000_000 }
        return value == 0 ? nil : sign * value
    }

    /// JavaScript's `Array.prototype.slice`: negative indices count from the end.
    static func slice<T>(_ items: [T], from start: Int, to end: Int) -> [T] {
        func clamp(_ index: Int) -> Int { index < 0 ? max(0, items.count + index) : min(index, items.count) }
        let lower = clamp(start)
        let upper = clamp(end)
        return lower < upper ? Array(items[lower..<upper]) : []
    }

    private static func authenticate(_ request: ReceivedRequest, registering: Bool) -> HTTPResponse {
        let fields = fields(of: request) ?? []
        func value(_ name: String) -> String? {
            guard let raw = fields.first(where: { $0.0 == name })?.1 else { return nil }
            let text = JSONText.stringValue(raw) ?? raw
            return text.isEmpty || raw == "null" ? nil : text
        }
        func failure(_ message: String) -> HTTPResponse {
            json(400, JSONText.object([("error", JSONText.string(message))]))
        }
        guard let email = value("email") ?? value("username") else { return failure("Missing email or username") }
        guard value("password") != nil else { return failure("Missing password") }
        guard let user = users.first(where: { $0.email == email }) else {
            return failure(registering ? "Note: Only defined users succeed registration" : "user not found")
        }
        let token = JSONText.string("\(tokenPrefix)\(user.id)")
        return json(
            200,
            registering
                ? JSONText.object([("id", "\(user.id)"), ("token", token)])
                : JSONText.object([("token", token)]))
    }

    /// The request's fields as (name, JSON text): from a JSON object or a form body. Nil for invalid JSON.
    private static func fields(of request: ReceivedRequest) -> [(String, String)]? {
        let contentType = request.header("Content-Type")?.lowercased() ?? ""
        if request.body.isEmpty { return [] }
        if contentType.hasPrefix("application/x-www-form-urlencoded") {
            return FormDecoding.decode(String(decoding: request.body, as: UTF8.self)).map { ($0.name, JSONText.string($0.value)) }
        }
        guard let members = JSONText.members(of: Array(request.body)) else {
            return contentType.contains("json") ? nil : []
        }
        return members.map { ($0.name, $0.value) }
    }

    /// `2025-06-27T15:57:58.187Z`
    static func timestamp(_ date: Date = Date()) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    /// 400 with `{"error": message}`.
    static func badNumber(_ message: String) -> HTTPResponse {
        json(400, JSONText.object([("error", JSONText.string(message))]))
    }

    static func json(_ status: Int, _ body: String) -> HTTPResponse {
        let bytes = Array(body.utf8)
        return HTTPResponse(
            status: status,
            headers: [
                ("Content-Type", "application/json; charset=utf-8"),
                ("Access-Control-Allow-Origin", "*"),
                ("ETag", "\"\(String(bytes.count, radix: 16))-\(String(Checksum.crc32(bytes), radix: 16))\"")
            ], body: bytes)
    }

    /// `/img/faces/<id>-image.jpg`: a real JPEG, different for each of the 12 users.
    static func avatar(_ request: ReceivedRequest) -> HTTPResponse {
        let name = request.path.split(separator: "/").last.map(String.init) ?? ""
        guard request.method == "GET" || request.method == "HEAD", name.hasSuffix("-image.jpg"),
            let id = Int(name.dropLast("-image.jpg".count)), (1...12).contains(id)
        else {
            return HTTPResponse(status: 404, text: "Not Found\n")
        }
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "image/jpeg"), ("Cache-Control", "max-age=14400")],
            body: JPEG.avatar(seed: id))
    }
}
