// Binary formats the mock serves without any library: JPEG avatars, gzip bodies, CRC-32.

import Foundation

enum Checksum {
    private static let table: [UInt32] = (0..<256).map { index -> UInt32 in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}

enum Gzip {
    /// A valid gzip stream holding `bytes` in stored (uncompressed) deflate blocks.
    static func stored(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF]
        var offset = 0
        repeat {
            let count = min(65535, bytes.count - offset)
            let final: UInt8 = offset + count == bytes.count ? 1 : 0
            output += [final, UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
            output += bytes[offset..<offset + count]
            offset += count
        } while offset < bytes.count
        output += littleEndian(Checksum.crc32(bytes)) + littleEndian(UInt32(truncatingIfNeeded: bytes.count))
        return output
    }

    /// `count` zero bytes, compressed with fixed-Huffman back-references (258 bytes per 13 bits).
    /// The CRC is left 0: a reader checks it only at the end, and this body is for limits that stop earlier.
    static func zeros(_ count: Int) -> [UInt8] {
        var bits = LSBBitWriter()
        bits.write(0b011, count: 3)  // final block, fixed Huffman (BTYPE 01)
        bits.writeHuffman(0x30, count: 8)  // literal 0
        var left = count - 1
        while left >= 258 {
            bits.writeHuffman(0b1100_0101, count: 8)  // length 258 (symbol 285)
            bits.writeHuffman(0, count: 5)  // distance 1
            left -= 258
        }
        while left > 0 {
            bits.writeHuffman(0x30, count: 8)
            left -= 1
        }
        bits.writeHuffman(0, count: 7)  // end of block
        return [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF] + bits.finished() + littleEndian(0) + littleEndian(UInt32(truncatingIfNeeded: count))
    }

    /// Deflate's bit order: values least significant bit first, Huffman codes most significant first.
    private struct LSBBitWriter {
        private var bytes: [UInt8] = []
        private var current: UInt32 = 0
        private var used: UInt32 = 0

        mutating func write(_ value: UInt32, count: Int) {
            for index in 0..<count { push((value >> UInt32(index)) & 1) }
        }

        mutating func writeHuffman(_ code: UInt32, count: Int) {
            for index in stride(from: count - 1, through: 0, by: -1) { push((code >> UInt32(index)) & 1) }
        }

        private mutating func push(_ bit: UInt32) {
            current |= bit << used
            used += 1
            if used == 8 {
                bytes.append(UInt8(current))
                current = 0
                used = 0
            }
        }

        func finished() -> [UInt8] { used > 0 ? bytes + [UInt8(current)] : bytes }
    }

    private static func littleEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF), UInt8(value >> 24)]
    }
}

/// A minimal baseline JPEG encoder: 64×64 pixels, one flat colour per 8×8 block (DC only),
/// enough for a real, decodable, per-user avatar.
enum JPEG {
    static func avatar(seed: Int) -> [UInt8] {
        let hue = Double(seed * 37 % 360) / 360
        let background = rgb(hue: hue, saturation: 0.45, value: 0.95)
        let face = rgb(hue: (hue + 0.5).truncatingRemainder(dividingBy: 1), saturation: 0.6, value: 0.7)
        var blocks: [(Double, Double, Double)] = []
        for row in 0..<8 {
            for column in 0..<8 {
                let dx = Double(column) - 3.5
                let dy = Double(row) - 3.5
                let inside = dx * dx + dy * dy < 9 + Double(seed % 4)
                let base = inside ? face : background
                let shade = 1 - Double(row) * 0.03
                blocks.append((base.0 * shade, base.1 * shade, base.2 * shade))
            }
        }
        return encode(blocksPerSide: 8, colours: blocks)
    }

    private static func rgb(hue: Double, saturation: Double, value: Double) -> (Double, Double, Double) {
        let sector = hue * 6
        let index = Int(sector) % 6
        let fraction = sector - Double(Int(sector))
        let p = value * (1 - saturation)
        let q = value * (1 - saturation * fraction)
        let t = value * (1 - saturation * (1 - fraction))
        let triples = [(value, t, p), (q, value, p), (p, value, t), (p, q, value), (t, p, value), (value, p, q)]
        let (r, g, b) = triples[index]
        return (r * 255, g * 255, b * 255)
    }

    // Annex K luminance DC table: code lengths per length 1...16, then symbols 0...11.
    private static let dcCounts: [UInt8] = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    private static let dcCodes: [(code: UInt32, length: Int)] = {
        var codes: [(UInt32, Int)] = []
        var code: UInt32 = 0
        for (index, count) in dcCounts.enumerated() {
            for _ in 0..<count {
                codes.append((code, index + 1))
                code += 1
            }
            code <<= 1
        }
        return codes
    }()

    private static func encode(blocksPerSide: Int, colours: [(Double, Double, Double)]) -> [UInt8] {
        let size = blocksPerSide * 8
        var out: [UInt8] = [0xFF, 0xD8]
        out += [0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
        out += [0xFF, 0xDB, 0x00, 0x43, 0x00] + [UInt8](repeating: 1, count: 64)
        out += [
            0xFF, 0xC0, 0x00, 0x11, 8, UInt8(size >> 8), UInt8(size & 0xFF), UInt8(size >> 8), UInt8(size & 0xFF), 3,
            1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0
        ]
        out += [0xFF, 0xC4, 0x00, UInt8(3 + 16 + 12), 0x00] + dcCounts + Array(0...11)
        // AC table with a single symbol, end-of-block, coded as the one-bit code "0".
        out += [0xFF, 0xC4, 0x00, UInt8(3 + 16 + 1), 0x10, 1] + [UInt8](repeating: 0, count: 15) + [0x00]
        out += [0xFF, 0xDA, 0x00, 0x0C, 3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0]
        var writer = BitWriter()
        var previous = [0, 0, 0]
        for (r, g, b) in colours {
            let y = 0.299 * r + 0.587 * g + 0.114 * b
            let cb = 128 - 0.168736 * r - 0.331264 * g + 0.5 * b
            let cr = 128 + 0.5 * r - 0.418688 * g - 0.081312 * b
            for (component, value) in [y, cb, cr].enumerated() {
                // A flat block's DC coefficient is 8 × (value − 128); the quantizer is 1.
                let dc = Int((8 * (min(255, max(0, value)) - 128)).rounded())
                let difference = dc - previous[component]
                previous[component] = dc
                let magnitude = abs(difference)
                let category = magnitude == 0 ? 0 : Int.bitWidth - magnitude.leadingZeroBitCount
                writer.write(dcCodes[category].code, count: dcCodes[category].length)
                if category > 0 {
                    let bits = difference < 0 ? difference + (1 << category) - 1 : difference
                    writer.write(UInt32(bits), count: category)
                }
                writer.write(0, count: 1)  // end of block
            }
        }
        out += writer.finished()
        out += [0xFF, 0xD9]
        return out
    }

    private struct BitWriter {
        private var bytes: [UInt8] = []
        private var accumulator: UInt32 = 0
        private var used = 0

        mutating func write(_ value: UInt32, count: Int) {
            for shift in stride(from: count - 1, through: 0, by: -1) {
                accumulator = accumulator << 1 | (value >> UInt32(shift) & 1)
                used += 1
                if used == 8 { flushByte() }
            }
        }

        private mutating func flushByte() {
            let byte = UInt8(accumulator & 0xFF)
            bytes.append(byte)
            if byte == 0xFF { bytes.append(0) }  // byte stuffing
            accumulator = 0
            used = 0
        }

        mutating func finished() -> [UInt8] {
            while used != 0 { write(1, count: 1) }  // pad with one-bits
            return bytes
        }
    }
}
