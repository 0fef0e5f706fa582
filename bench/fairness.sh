#!/usr/bin/env bash
# One event loop shared by a storm of first contacts and a client whose verdicts are cached: what the storm costs
# the others. chainwatch runs with one loop (`--threads 1`, the built-in policy); one bench drives a storm of cold
# first contacts through it (`--fresh-certificates`: a chain never seen per session, so each is validated), and a
# second bench, started once the storm runs, makes paced warm sessions (one name and chain: a cached verdict) through
# the same proxy, beside a direct baseline in the same invocation (under the same storm). Prints the warm sessions'
# latency (p50, p99) and time to `200` (the loop's answer to CONNECT), the direct p50, and the storm's conn/s, per
# run and as medians.
#
#   bench/fairness.sh [--repeat 3] [--tls 1.2] [--duration 5] [--rate 40] [--compare OTHER_CHAINWATCH] [--out DIR]
#
# With --compare, each repetition runs OTHER_CHAINWATCH too (alternating, same load), e.g. a build from before a
# change. Needs a release build (swift build -c release).
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=3 tls=1.2 duration=5 rate=40 compare="" out=""
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --tls) tls=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --compare) compare=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--repeat N] [--tls 1.2|1.3] [--duration S] [--rate R] [--compare CHAINWATCH] [--out DIR]" >&2; exit 2 ;;
    esac
done
bench=${CHAINWATCH_BENCH_BIN:-.build/release/chainwatch-bench}
chainwatch=${CHAINWATCH_BIN:-.build/release/chainwatch}
[ -x "$bench" ] && [ -x "$chainwatch" ] || { echo "$0: build first (swift build -c release)" >&2; exit 2; }
[ -z "$compare" ] || [ -x "$compare" ] || { echo "$0: --compare $compare is not an executable" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/chainwatch-fairness-XXXXXX)}
mkdir -p "$out"

proxy_pid="" storm_pid=""
stop() { for p in $storm_pid $proxy_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; proxy_pid="" storm_pid=""; }
trap stop EXIT

# One run: NAME, the chainwatch executable, the repetition.
run() {
    local name=$1 executable=$2 i=$3 port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$executable" run --listen "127.0.0.1:$port" --threads 1 --admin off --alert-log "$out/$name$i-alerts.jsonl" \
        2>"$out/$name$i-proxy.log" &
    proxy_pid=$!
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
    # The storm outlasts the warm client's two runs (direct, then through the proxy) with a second to spare each side.
    "$bench" handshake --proxy "127.0.0.1:$port" --fresh-certificates --tls "$tls" -c 8 --duration $((2 * duration + 4)) \
        --max-failures 1000 -q --json "$out/$name$i-storm.json" >"$out/$name$i-storm.txt" 2>&1 &
    storm_pid=$!
    sleep 1
    "$bench" handshake --direct --proxy "127.0.0.1:$port" --tls "$tls" --rate "$rate" -c 8 --duration "$duration" -q \
        --json "$out/$name$i-warm.json" >"$out/$name$i-warm.txt" 2>&1
    wait "$storm_pid"
    storm_pid=""
    stop
}

names=(chainwatch)
[ -n "$compare" ] && names+=(compare)
for i in $(seq "$repeat"); do
    run chainwatch "$chainwatch" "$i"
    [ -z "$compare" ] || run compare "$compare" "$i"
done

python3 - "$out" "$repeat" "$tls" "${names[@]}" <<'EOF'
import json, statistics, sys
out, repeat, tls, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
print(f"one loop, a storm of TLS {tls} first contacts beside paced warm sessions (runs in {out}):")
for name in names:
    rows = []
    for i in range(1, repeat + 1):
        warm = json.load(open(f"{out}/{name}{i}-warm.json"))
        storm = json.load(open(f"{out}/{name}{i}-storm.json"))
        assert warm["ok"], f"{name}{i}: a warm session failed"
        runs = {r["target"]: r["kinds"][0] for r in warm["runs"]}
        proxy, direct = runs["proxy"], runs["direct"]
        s = storm["runs"][0]["kinds"][0]
        rows.append((proxy["latencyMicros"]["p50"] / 1000, proxy["latencyMicros"]["p99"] / 1000,
                     proxy["connect200Micros"]["p50"] / 1000, proxy["connect200Micros"]["p99"] / 1000,
                     direct["latencyMicros"]["p50"] / 1000, s["perSecond"], s["failed"]))
        r = rows[-1]
        print(f"  {name} #{i}: warm p50 {r[0]:.2f} ms, p99 {r[1]:.2f} ms; 200 p50 {r[2]:.2f} ms, p99 {r[3]:.2f} ms;"
              f" direct p50 {r[4]:.2f} ms; storm {r[5]:.0f} conn/s ({r[6]} failed)")
    m = [statistics.median(c) for c in zip(*rows)]
    print(f"  {name} median: warm p50 {m[0]:.2f} ms, p99 {m[1]:.2f} ms; 200 p50 {m[2]:.2f} ms, p99 {m[3]:.2f} ms;"
          f" direct p50 {m[4]:.2f} ms; storm {m[5]:.0f} conn/s")
EOF
