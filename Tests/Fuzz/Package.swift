// swift-tools-version: 6.2
// libFuzzer targets for chainwatch's parsers, one executable each. A package of its own, so the root package's
// `swift build` and `swift test` never build them; run.sh builds them with
// `swift build --sanitize=fuzzer --sanitize=address` and runs them. See FUZZING.md at the repository root.
import PackageDescription

let core = Target.Dependency.product(name: "ChainwatchCore", package: "chainwatch")

let package = Package(
    name: "chainwatch-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "chainwatch", path: "../.."),
    ],
    targets: [
        // Reading decisions from an input, split points, invariant checks, a byte-level reading of body framing.
        .target(name: "FuzzSupport", dependencies: [core]),
        .executableTarget(name: "FuzzTLSObserver", dependencies: [core, "FuzzSupport"]),
        .executableTarget(name: "FuzzHandshakeWatch", dependencies: [core, "FuzzSupport"]),
        // ProbeClient with a deterministic stand-in TLSCrypto (Sources/FuzzProbeClient/StandInCrypto.swift).
        .executableTarget(name: "FuzzProbeClient", dependencies: [core, "FuzzSupport"]),
        .executableTarget(name: "FuzzRequestHead", dependencies: [core, "FuzzSupport"]),
        .executableTarget(name: "FuzzResponseHead", dependencies: [core, "FuzzSupport"]),
        .executableTarget(name: "FuzzBodyScanner", dependencies: [core, "FuzzSupport"]),
        .executableTarget(name: "FuzzHostsFile", dependencies: [core, "FuzzSupport"]),
        .executableTarget(name: "FuzzPolicyLoader", dependencies: [
            core, "FuzzSupport", .product(name: "ChainwatchPolicyFile", package: "chainwatch"),
        ]),
    ]
)
