internal import COpenSSL

/// Certificates' EC public keys decoded through OpenSSL's own built-in EC method rather than OpenSSL 3.0's provider
/// decoders, which cost a P-256 leaf about 170 µs of its 200 µs decoding: the largest single cost of a cold first
/// contact (bench/RESULTS.md, 2026-11-27). An ENGINE whose method for EC keys is the library's built-in one
/// (`c_chainwatch_decode_ec_keys_builtin` in COpenSSL's shim: same code, same checks). It reaches every EC key
/// operation of the process, key generation included (OpenSSL's curve names only, not "P-256"): the shim says what.
public enum BuiltinECKeys {
    /// Registers it, once per process, before any other thread uses OpenSSL. False when OpenSSL refused: keys are then
    /// decoded as by default, more slowly and as correctly.
    public static func register() -> Bool { c_chainwatch_decode_ec_keys_builtin() == 1 }
}

/// The OpenSSL library's life in the process.
public enum OpenSSLLibrary {
    /// Initialises OpenSSL without its exit handler, which frees the library context's locks at `exit` while a
    /// thread that outlives `run` may still be using them (a validation thread mid-job: a SIGSEGV in
    /// `CRYPTO_THREAD_read_lock` under ThreadSanitizer; `ValidationQueue.stop` waits for the jobs, for a bounded time).
    /// The process's memory goes with it anyway. Call before any other OpenSSL use, once; false when OpenSSL failed.
    public static func initializeWithoutExitCleanup() -> Bool { c_chainwatch_openssl_without_exit_cleanup() == 1 }
}
