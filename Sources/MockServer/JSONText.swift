// Compact JSON written by hand (to keep reqres' key order), and a reader for flat request objects.

import Foundation

enum JSONText {
    static func string(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }

    /// `{"a":1,"b":"x"}` from pairs whose values are already JSON text.
    static func object(_ members: [(String, String)]) -> String {
        "{" + members.map { "\(string($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    static func array(_ items: [String]) -> String { "[" + items.joined(separator: ",") + "]" }

    /// The members of a top-level JSON object, values kept as their JSON text, in order.
    /// Nil when the text is not a JSON object.
    static func members(of data: [UInt8]) -> [(name: String, value: String)]? {
        var reader = Reader(bytes: data)
        return reader.topLevelObject()
    }

    /// The string a JSON value holds (nil when it is not a string).
    static func stringValue(_ json: String) -> String? {
        var reader = Reader(bytes: Array(json.utf8))
        reader.skipSpace()
        guard let value = reader.stringLiteral() else { return nil }
        reader.skipSpace()
        return reader.atEnd ? value : nil
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0
        var depth = 0

        var atEnd: Bool { index >= bytes.count }

        mutating func skipSpace() {
            while index < bytes.count, [32, 9, 10, 13].contains(bytes[index]) { index += 1 }
        }

        mutating func topLevelObject() -> [(name: String, value: String)]? {
            skipSpace()
            guard consume(UInt8(ascii: "{")) else { return nil }
            var members: [(name: String, value: String)] = []
            skipSpace()
            if consume(UInt8(ascii: "}")) { return finished(members) }
            while true {
                skipSpace()
                guard let name = stringLiteral() else { return nil }
                skipSpace()
                guard consume(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                let start = index
                guard skipValue() else { return nil }
                members.append((name, String(decoding: bytes[start..<index], as: UTF8.self)))
                skipSpace()
                if consume(UInt8(ascii: ",")) { continue }
                guard consume(UInt8(ascii: "}")) else { return nil }
                return finished(members)
            }
        }

        private mutating func finished(_ members: [(name: String, value: String)]) -> [(name: String, value: String)]? {
            skipSpace()
            return atEnd ? members : nil
        }

        private mutating func consume(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func stringLiteral() -> String? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            var output: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: output, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escaped = bytes[index]
                    index += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(escaped)
                    case UInt8(ascii: "b"): output.append(8)
                    case UInt8(ascii: "f"): output.append(12)
                    case UInt8(ascii: "n"): output.append(10)
                    case UInt8(ascii: "r"): output.append(13)
                    case UInt8(ascii: "t"): output.append(9)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(scalar), consume(UInt8(ascii: "\\")), consume(UInt8(ascii: "u")),
                            let low = hex4(), (0xDC00..<0xE000).contains(low)
                        {
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        output += Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8)
                    default: return nil
                    }
                case 0..<32:
                    return nil
                default:
                    output.append(byte)
                }
            }
            return nil
        }

        private mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) else {
                return nil
            }
            index += 4
            return value
        }

        private mutating func skipValue() -> Bool {
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return stringLiteral() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                defer { depth -= 1 }
                guard depth < 64 else { return false }
                let close = bytes[index] == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                let isObject = close == UInt8(ascii: "}")
                index += 1
                skipSpace()
                if consume(close) { return true }
                while true {
                    skipSpace()
                    if isObject {
                        guard stringLiteral() != nil else { return false }
                        skipSpace()
                        guard consume(UInt8(ascii: ":")) else { return false }
                        skipSpace()
                    }
                    guard skipValue() else { return false }
                    skipSpace()
                    if consume(UInt8(ascii: ",")) { continue }
                    return consume(close)
                }
            default:
                let start = index
                while index < bytes.count, !([UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 32, 9, 10, 13].contains(bytes[index])) {
                    index += 1
                }
                let literal = String(decoding: bytes[start..<index], as: UTF8.self)
                return ["true", "false", "null"].contains(literal) || Double(literal) != nil
            }
        }
    }
}
