import Foundation
import XCTest

/// The documentation's examples that the suite runs must be the ones it shows.
final class ReadmeTests: XCTestCase {
    func testTheTestingArticleShowsTheExampleAsTheSuiteRunsIt() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let article = root.appendingPathComponent("Sources/RestManager/RestManager.docc/TestingWithMockServer.md")
        let readme = try String(contentsOf: article, encoding: .utf8)
        let example = try String(contentsOf: root.appendingPathComponent("Tests/RestManagerTests/UserServiceExampleTests.swift"), encoding: .utf8)
        let start = try XCTUnwrap(example.range(of: "import Foundation")).lowerBound
        let code = String(example[start...]).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(readme.contains(code), "TestingWithMockServer.md's complete example differs from UserServiceExampleTests.swift")
    }
}
