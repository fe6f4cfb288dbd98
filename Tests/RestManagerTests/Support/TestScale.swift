import Foundation

/// `RESTMANAGER_QUICK=1 swift test`: a contributor's quick run. The large transfers go at 16 MiB instead of 100 and
/// 256, the in-process fuzz sends 5,000 requests instead of 100,000 and the stress test 2,000 instead of 10,000: the
/// same code paths in a fraction of the time. CI runs the full sizes.
enum TestScale {
    static let quick = ProcessInfo.processInfo.environment["RESTMANAGER_QUICK"] == "1"
}
