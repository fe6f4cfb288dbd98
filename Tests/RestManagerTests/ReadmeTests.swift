import Foundation
import XCTest

/// The README's examples that the suite runs must be the ones it shows.
final class ReadmeTests: XCTestCase {
    func testTheReadmeShowsTheTestingExampleAsTheSuiteRunsIt() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try String(contentsOf: root.appendingPathComponent("Tests/RestManagerTests/UserServiceExampleTests.swift"), encoding: .utf8)
        let start = try XCTUnwrap(example.range(of: "import Foundation")).lowerBound
        let code = String(example[start...]).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(readme.contains(code), "README.md's 'Testing your own code' example differs from UserServiceExampleTests.swift")
    }
}
