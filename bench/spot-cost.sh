#!/usr/bin/env bash
# What spot checks cost at a given rate (issue 25): the upstream TLS connections chainwatch adds beyond one per session
# (its probes, spot checks and their spare connections), and its CPU per 1 000 connections, with spot checks off
# (`--spot-check-rate 0`) and at the default rate (or --rate R), one after the other in each repetition:
# - busy: a closed loop of 8 sessions (hundreds of tunnels a second to one upstream), each run beside a direct
#   baseline in the same bench invocation; warm TLS 1.3 (one name, the probe cached after the first tunnel);
# - steady: an open loop of 5 and of 1 session a second (20 and 30 s), where a check is a larger share.
# Clean verdicts (`--policy alert`, the bench's root as the rule's anchor). Prints one line per run and the medians.
#
#   bench/spot-cost.sh [--repeat 3] [--duration 5] [--rate R] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=3 duration=5 rate="" out=""
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--repeat N] [--duration S] [--rate R] [--out DIR]" >&2; exit 2 ;;
    esac
done
bench=${CHAINWATCH_BENCH_BIN:-.build/release/chainwatch-bench}
chainwatch=${CHAINWATCH_BIN:-.build/release/chainwatch}
[ -x "$bench" ] && [ -x "$chainwatch" ] || { echo "$0: build first (make build)" >&2; exit 2; }
if [ -z "$rate" ]; then
    rate=$("$chainwatch" run --help | python3 -c 'import re,sys; print(re.search(r"--spot-check-rate <[^>]*>.*?\(default: ([0-9.]+)\)", sys.stdin.read(), re.S).group(1))')
fi
out=${out:-$(mktemp -d /tmp/chainwatch-spot-cost-XXXXXX)}
mkdir -p "$out"
echo "spot-cost: rate $rate against 0, $repeat repetitions, raw runs in $out"

run() {   # name rate extra-bench-args...
    local name=$1 r=$2; shift 2
    "$bench" handshake --start-proxy "$chainwatch" --policy alert --tls 1.3 \
        --proxy-args "run --listen {listen} --alert-log {dir}/alerts.jsonl --policy {policy} --spot-check-rate $r" \
        --json "$out/$name.json" "$@" > "$out/$name.txt" 2>&1 || { echo "spot-cost: $name failed (see $out/$name.txt)" >&2; tail -5 "$out/$name.txt" >&2; exit 1; }
}

for i in $(seq 1 "$repeat"); do
    for r in 0 "$rate"; do
        run "busy-$r-$i" "$r" --direct -c 8 --duration "$duration"
    done
done
for r in 0 "$rate"; do
    run "steady5-$r" "$r" --rate 5 -c 8 --duration 20
    run "steady1-$r" "$r" --rate 1 -c 8 --duration 30
done

python3 - "$out" "$rate" <<'PY'
import json, statistics, sys, glob, os
out, rate = sys.argv[1], sys.argv[2]
def proxied(path):
    runs = json.load(open(path))["runs"]
    return [r for r in runs if r["target"] != "direct"][0], [r for r in runs if r["target"] == "direct"]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(path)[:-5]
    kind, r = name.split("-")[0], name.split("-")[1]
    run, direct = proxied(path)
    started = sum(k["started"] for k in run["kinds"])
    extra = run["upstreamConnections"] - started
    cpu = run["proxy"]["cpuSecondsPer1000Connections"]
    conn = run["kinds"][0]["perSecond"]
    base = direct[0]["kinds"][0]["perSecond"] if direct else None
    print(f"{name:>16}: {started} sessions, {extra} more upstream TLS connections ({100 * extra / max(started, 1):.2f} %), "
          f"CPU {cpu} s/1k conn, {conn} conn/s" + (f" (direct {base})" if base else ""))
    rows.setdefault((kind, r), []).append((extra, started, cpu))
print()
for (kind, r), values in sorted(rows.items()):
    extra = statistics.median(100 * e / max(s, 1) for e, s, _ in values)
    cpu = statistics.median(c for _, _, c in values)
    print(f"median {kind:>8} rate {r:>4}: upstream +{extra:.2f} %, CPU {cpu:.3f} s/1k conn ({len(values)} runs)")
PY
