#!/usr/bin/env bash
# Builds the libFuzzer targets of this package (AddressSanitizer, release) and runs each in turn, one process at a
# time, for a bounded time or number of executions. See FUZZING.md at the repository root.
#
#   Tests/Fuzz/run.sh --time SECONDS [TARGET...]   each target for SECONDS
#   Tests/Fuzz/run.sh --runs N [TARGET...]         each target for N executions (at most FUZZ_MAX_TIME s if set)
#   Tests/Fuzz/run.sh --regress [TARGET...]        each target once over its seeds, no fuzzing
#   Tests/Fuzz/run.sh --build                      build only
#
# FUZZ_TIMEOUT (10) is libFuzzer's limit for one input in seconds; raise it for a run at a low priority (nice 19) on a
# busy machine, where a starved process would otherwise report a timeout that is no finding.
#
# Seeds are read from corpus/TARGET (checked in); what a run learns goes to .build/corpus/TARGET (kept between runs,
# not in git); a crashing input is written to .build/artifacts/TARGET/ and the run fails. Each target's libFuzzer
# output is in .build/logs/TARGET.log; one summary line per target is printed. Exits non-zero if any target failed.
set -euo pipefail
cd "$(dirname "$0")"

ALL=(FuzzTLSObserver FuzzHandshakeWatch FuzzProbeClient FuzzRequestHead FuzzResponseHead FuzzBodyScanner FuzzPolicyLoader FuzzHostsFile)
declare -A DICT=([FuzzTLSObserver]=tls [FuzzHandshakeWatch]=tls [FuzzProbeClient]=FuzzProbeClient [FuzzRequestHead]=http [FuzzResponseHead]=http
                 [FuzzBodyScanner]=http [FuzzPolicyLoader]=policy)
# Longest input generated (libFuzzer's default is the longest seed, at least 4096): smaller where a few lines or
# messages reach every path, so the executions go further.
declare -A MAXLEN=([FuzzHostsFile]=1024 [FuzzRequestHead]=2048 [FuzzResponseHead]=2048)

mode=${1:-}
case "$mode" in
    --time|--runs) bound=${2:?"$mode needs a number"}; shift 2 ;;
    --regress|--build) shift ;;
    *) echo "usage: $0 --time SECONDS | --runs N | --regress | --build [TARGET...]" >&2; exit 2 ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")

start=$SECONDS
# The sanitizer flags also as -Xswiftc, which reaches every Swift module of every package: SwiftPM's --sanitize alone
# has, on some machines, left the root package's modules (a dependency here) without coverage counters.
build=(swift build -c release --sanitize=fuzzer --sanitize=address -Xswiftc -sanitize=fuzzer,address -v)
bin=.build/release
mkdir -p .build
# Uninstrumented code gives libFuzzer nothing to steer by (it still runs, and finds little). Some full rebuilds have
# produced such binaries (SwiftPM 6.3: once only the C code, Yams' libyaml, had counters; CI's machine twice in a row
# for ChainwatchCore), so check the Swift modules themselves and the targets, and build once more from scratch.
instrumented() {
    local t m objects counters
    for m in ChainwatchCore ChainwatchPolicyFile Yams FuzzSupport; do
        objects=("$bin/$m.build/"*.o)
        counters=$(nm -A "${objects[@]}" 2>/dev/null | grep -c __sancov_gen || true)
        if [ "${counters:-0}" = 0 ]; then
            echo "fuzz: $m is not instrumented (${#objects[@]} object files, no __sancov_gen; nm: $(nm "${objects[0]}" 2>&1 >/dev/null | head -1; command -v nm || echo missing))" >&2
            # What the build passed to swiftc for it (the log is `swift build -v`).
            grep -E -- "-module-name $m( |$)" .build/build.log | head -1 | grep -o -E -- '-sanitize[^ ]*|-sanitize-coverage[^ ]*' \
                | sort -u | tr '\n' ' ' | sed 's/^/fuzz: its swiftc flags: /; s/$/\n/' >&2
            return 1
        fi
    done
    for t in "${targets[@]}"; do
        [ -x "$bin/$t" ] || return 1
        case "$("$bin/$t" -runs=0 2>&1)" in *'inline 8-bit counters'*) ;; *) echo "fuzz: $t is not instrumented" >&2; return 1 ;; esac
    done
}
for attempt in 1 2; do
    if ! "${build[@]}" >.build/build.log 2>&1; then
        grep -E 'error:' .build/build.log >&2 || tail -40 .build/build.log >&2
        echo "fuzz: build failed (.build/build.log)" >&2
        exit 1
    fi
    instrumented && break
    if [ $attempt = 2 ]; then
        # A long run (make fuzz, FUZZING.md's figures) needs the counters. The smoke (FUZZ_SMOKE=1, make test) still
        # runs every target over its seeds and random inputs under AddressSanitizer, and says it went unguided.
        [ "${FUZZ_SMOKE:-0}" = 1 ] || exit 1
        echo "fuzz: WARNING: coverage counters missing after two builds; this smoke runs unguided (crashes still fail it)" >&2
        break
    fi
    # Build again from nothing (the checkouts and the learned corpus stay): touching a source was not enough.
    echo "fuzz: building again from scratch" >&2
    rm -rf .build/x86_64-unknown-linux-gnu .build/release .build/build.db .build/*.yaml
done
echo "fuzz: built in $((SECONDS - start)) s"
[ "$mode" = --build ] && exit 0
# Run copies, so a rebuild during a long run does not replace a running binary.
mkdir -p .build/fuzzers
for t in "${targets[@]}"; do cp "$bin/$t" ".build/fuzzers/$t"; done
bin=.build/fuzzers
# A trap is reported by libFuzzer and AddressSanitizer; Swift's own backtracer would only add noise to the log.
export SWIFT_BACKTRACE=enable=no
# Allocation stacks of 4 frames, not 30: Swift allocates often, and unwinding each cost about a sixth of the
# executions. A report still shows where the bad access happened; rerun the input with ASAN_OPTIONS= for more.
export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=4}

failed=()
for t in "${targets[@]}"; do
    mkdir -p ".build/corpus/$t" ".build/artifacts/$t" .build/logs
    args=(-artifact_prefix=".build/artifacts/$t/" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1)
    [ -n "${DICT[$t]:-}" ] && args+=(-dict="dict/${DICT[$t]}.dict")
    [ -n "${MAXLEN[$t]:-}" ] && args+=(-max_len="${MAXLEN[$t]}")
    log=".build/logs/$t.log"
    began=$SECONDS
    if [ "$mode" = --regress ]; then
        inputs=(corpus/"$t"/*)
        "$bin/$t" "${args[@]}" "${inputs[@]}" >"$log" 2>&1 && status=ok || status=FAILED
        echo "$t: $status, ${#inputs[@]} inputs"
    else
        if [ "$mode" = --time ]; then args+=(-max_total_time="$bound"); else args+=(-runs="$bound"); fi
        [ -n "${FUZZ_MAX_TIME:-}" ] && args+=(-max_total_time="$FUZZ_MAX_TIME")
        "$bin/$t" "${args[@]}" ".build/corpus/$t" "corpus/$t" >"$log" 2>&1 && status=ok || status=FAILED
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
        corpus=$(( $(find ".build/corpus/$t" -type f | wc -l) + $(find "corpus/$t" -type f | wc -l) ))
        echo "$t: $status, ${runs:-?} runs in $((SECONDS - began)) s, ${rate:-?} exec/s, ${cov:-cov: ?}, corpus $corpus files"
    fi
    if [ $status != ok ]; then
        failed+=("$t")
        grep -E -m5 'invariant:|Fatal error|ERROR: (libFuzzer|AddressSanitizer)|SUMMARY|Test unit written' "$log" >&2 || tail -20 "$log" >&2
    fi
done
echo "fuzz: ${#targets[@]} targets in $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (logs in Tests/Fuzz/.build/logs)" >&2
    exit 1
fi
