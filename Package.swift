// swift-tools-version:6.2
import PackageDescription

// No package dependencies, on purpose: the library is one copy-in file, and everything else
// here (mock server, demo, benchmark, tests) uses only the toolchain.
let package = Package(
    name: "RestManager",
    platforms: [.macOS(.v10_15), .iOS(.v13), .tvOS(.v13), .watchOS(.v6)],
    products: [
        .library(name: "RestManager", targets: ["RestManager"]),
        .library(name: "MockServer", targets: ["MockServer"]),
        .executable(name: "restdemo", targets: ["restdemo"]),
        .executable(name: "restbench", targets: ["restbench"])
    ],
    targets: [
        .target(name: "RestManager"),
        .target(name: "MockServer"),
        .executableTarget(name: "restdemo", dependencies: ["RestManager", "MockServer"]),
        .target(name: "HeapStatistics"),
        .executableTarget(name: "restbench", dependencies: ["RestManager", "MockServer", "HeapStatistics"]),
        .testTarget(name: "RestManagerTests", dependencies: ["RestManager", "MockServer", "HeapStatistics"]),
        // An app developer's tests written with Swift Testing (parallel by default), one MockServer per test.
        .testTarget(name: "MockServerSwiftTestingTests", dependencies: ["RestManager", "MockServer"])
    ],
    swiftLanguageModes: [.v6]
)
