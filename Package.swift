// swift-tools-version: 6.2
import PackageDescription

// The git commit `make build` passes (CHAINWATCH_COMMIT), shown by `--version` and `/metrics`; a build without it
// (plain `swift build`, a tree without git) says none. Only letters, digits and `-` are taken.
let commit = Context.environment["CHAINWATCH_COMMIT"].flatMap { value in
    !value.isEmpty && value.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" } ? value : nil
}

// The modules the unit tests import with `@testable` are compiled for testing in every configuration, so `make test`
// runs the unit tests against the optimized objects `make build` ships: `swift build -c release --build-tests` adds
// only the test targets to them instead of building everything again in debug (about 2.5 minutes less on 2 cores).
// It costs the shipped code nothing measurable: a cold TLS 1.3 connection ran 4 652 778 instructions without it and
// 4 655 605 with it (bench/alert-cost-callgrind.sh --cold, 2026-11-27).
let testable: [SwiftSetting] = [.unsafeFlags(["-enable-testing"])]
// The test targets themselves are not optimized: they build in about half the time, and what they test is.
let unoptimized: [SwiftSetting] = [.unsafeFlags(["-Onone"], .when(configuration: .release))]

let package = Package(
    name: "chainwatch",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "chainwatch", targets: ["chainwatch"]),
        .executable(name: "chainwatch-bench", targets: ["chainwatch-bench"]),
        // For the fuzzers' nested package (Tests/Fuzz), which depends on this one by path.
        .library(name: "ChainwatchCore", targets: ["ChainwatchCore"]),
        .library(name: "ChainwatchPolicyFile", targets: ["ChainwatchPolicyFile"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // C at the bottom: system libraries through pkg-config.
        .systemLibrary(name: "CLibevent", pkgConfig: "libevent_openssl", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // RFC 8879 certificate decompression for ChainwatchCrypto.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CBrotli", pkgConfig: "libbrotlidec", providers: [.apt(["libbrotli-dev"])]),
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),

        // Pure logic: no Foundation, no C, no clock.
        .target(name: "ChainwatchCore", dependencies: ["ChainwatchLock"], swiftSettings: [.strictMemorySafety()] + testable),

        // Lock is Synchronization.Mutex, or a pthread mutex in the ThreadSanitizer build (-DSANITIZE_THREAD).
        .target(name: "ChainwatchLock"),

        // The primitives of chainwatch's own TLS client (Core's `TLSCrypto`): swift-crypto for key exchange
        // (X25519MLKEM768 included), AEAD and hashes; OpenSSL's libcrypto for signature verification; Debian's
        // zlib, brotli and zstd for certificate decompression.
        .target(name: "ChainwatchCrypto", dependencies: [
            "ChainwatchCore", "ChainwatchOpenSSL", "CZlib", "CBrotli", "CZstd", .product(name: "Crypto", package: "swift-crypto"),
        ]),

        // Thin owning wrappers. Certificates and their validation are OpenSSL's; an ECDSA certificate signature is
        // checked with swift-crypto first (`CertificateSignatureCheck`), OpenSSL's verdict standing for the rest.
        .target(name: "ChainwatchOpenSSL", dependencies: [
            "COpenSSL", "ChainwatchCore", "ChainwatchLock", .product(name: "Crypto", package: "swift-crypto"),
        ]),
        .target(name: "ChainwatchEventLoop", dependencies: ["CLibevent", "ChainwatchLock"]),
        .target(name: "ChainwatchProcess"),
        .target(name: "CBuildInfo", cSettings: commit.map { [.define("CHAINWATCH_COMMIT", to: "\"\($0)\"")] } ?? []),
        .target(name: "ChainwatchPolicyFile", dependencies: ["ChainwatchCore", "ChainwatchOpenSSL", .product(name: "Yams", package: "Yams")],
                swiftSettings: testable),

        // The server.
        .target(name: "ChainwatchProxy", dependencies: [
            "ChainwatchCore", "ChainwatchOpenSSL", "ChainwatchCrypto", "ChainwatchEventLoop", "ChainwatchPolicyFile", "ChainwatchLock",
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: testable),

        // Thin executables.
        .executableTarget(name: "chainwatch", dependencies: [
            "ChainwatchProxy", "ChainwatchPolicyFile", "ChainwatchCore", "ChainwatchOpenSSL", "ChainwatchProcess", "CBuildInfo",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "chainwatch-bench", dependencies: [
            "CLibevent", "COpenSSL", "ChainwatchProcess", "ChainwatchCore", "ChainwatchCrypto", "CBuildInfo",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Histogram", package: "hdrhistogram-swift"),
        ]),

        .testTarget(name: "ChainwatchCoreTests", dependencies: ["ChainwatchCore"], resources: [.copy("Fixtures")], swiftSettings: unoptimized),
        .testTarget(name: "ChainwatchCryptoTests", dependencies: [
            "ChainwatchCrypto", "ChainwatchCore", .product(name: "Crypto", package: "swift-crypto"),
        ], swiftSettings: unoptimized),
        .testTarget(name: "ChainwatchOpenSSLTests", dependencies: [
            "ChainwatchOpenSSL", "ChainwatchCore", .product(name: "Crypto", package: "swift-crypto"),
        ], resources: [.copy("Fixtures")], swiftSettings: unoptimized),
        .testTarget(name: "ChainwatchProxyTests", dependencies: ["ChainwatchProxy", "ChainwatchEventLoop", "ChainwatchCore", "ChainwatchOpenSSL", "ChainwatchLock"], swiftSettings: unoptimized),
        .testTarget(name: "ChainwatchProcessTests", dependencies: ["ChainwatchProcess"], swiftSettings: unoptimized),
        .testTarget(name: "ChainwatchPolicyFileTests", dependencies: ["ChainwatchPolicyFile", "ChainwatchCore"], resources: [.copy("Fixtures")], swiftSettings: unoptimized),
    ]
)
