import Foundation
import ChainwatchCore
@testable import ChainwatchPolicyFile

/// Paths found from this file's location, so tests run from any working directory.
enum TestPaths {
    static let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let fixtures = here.appendingPathComponent("Fixtures")
    static let broken = fixtures.appendingPathComponent("broken")
    static let policies = here.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("policies")
    static func brokenFile(_ name: String) -> String { broken.appendingPathComponent(name).path }
    /// A fixed "now" (2026-11-22) so expiry warnings never drift.
    static let now = UnixTime(seconds: 1_795_323_599)
}
