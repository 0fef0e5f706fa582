#!/usr/bin/env bash
# Builds chainwatch and chainwatch-bench with one sanitizer, runs the unit suite (swift test) and the e2e suite
# (pytest) against that build, and fails when a step fails or when the sanitizer wrote any report.
# Usage: Tests/sanitizers/run.sh address|thread [pytest arguments...]   (see `make sanitize` in the Makefile)
#
# Every sanitized process (the test runner, each proxy and bench process the e2e tests start) writes its reports
# to <scratch>/reports/<kind>.<pid>, not only to its stderr (an e2e proxy's stderr is a log file in a pytest
# temporary directory): a report fails the run even when the test around it passed, and is printed at the end.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=$PWD/Tests/sanitizers

kind=${1:?usage: $0 address|thread [pytest arguments...]}
shift
case $kind in
    address) scratch=.build-asan; flags=(-c release --sanitize=address --scratch-path "$scratch") ;;
    thread)  scratch=.build-tsan; flags=(-c release --sanitize=thread --scratch-path "$scratch" -Xswiftc -DSANITIZE_THREAD) ;;
    *) echo "$0: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;;
esac
reports=$PWD/$scratch/reports
rm -rf "$reports" && mkdir -p "$reports"

# halt_on_error: ASan stops at its first error (its default); TSan goes on, so one run lists every race, and the
# process exits with exitcode at its end. Leaks are checked at exit (LeakSanitizer, part of ASan on Linux); the
# suppressions file names the third-party noise and why.
# The symbolizer by its full path: a report must name its frames (the suppressions match function names) also in a
# process whose PATH a test has narrowed.
symbolizer=$(command -v llvm-symbolizer || true)
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:exitcode=86:log_path=$reports/asan${symbolizer:+:external_symbolizer_path=$symbolizer}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0:exitcode=86"
export TSAN_OPTIONS="halt_on_error=0:exitcode=66:second_deadlock_stack=1:log_path=$reports/tsan${symbolizer:+:external_symbolizer_path=$symbolizer}"
# For the few e2e tests that must know (Tests/e2e/conftest.py).
export CHAINWATCH_SANITIZER=$kind

status=0
timed() {
    local start=$SECONDS rc
    "$@"; rc=$?
    echo "sanitize-$kind: $((SECONDS - start)) s, exit $rc: $*"
    [ "$rc" = 0 ] || status=1
    return "$rc"
}

timed swift build "${flags[@]}" --product chainwatch || exit 1
timed swift build "${flags[@]}" --product chainwatch-bench || exit 1
# --disable-testable-imports: Package.swift compiles the modules the unit tests import with -enable-testing already,
# so the unit tests reuse the objects just built (SwiftPM would otherwise add the flag itself and build everything again).
timed swift test "${flags[@]}" --disable-testable-imports
bin=$PWD/$scratch/release
timed env CHAINWATCH_BIN="$bin/chainwatch" CHAINWATCH_BENCH_BIN="$bin/chainwatch-bench" \
    python3 -m pytest -q Tests/e2e "$@"

found=$(find "$reports" -type f | sort)
if [ -n "$found" ]; then
    for f in $found; do echo "==== $f"; cat "$f"; done
    echo "sanitize-$kind: FAILED: $(echo "$found" | wc -l) sanitizer report file(s) in $reports" >&2
    exit 1
fi
[ "$status" = 0 ] && echo "sanitize-$kind: clean (no sanitizer report)" || echo "sanitize-$kind: FAILED (a step failed)" >&2
exit "$status"
