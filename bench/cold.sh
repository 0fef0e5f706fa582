#!/usr/bin/env bash
# Cold first contacts, side by side: every session offers a name never offered before and meets a leaf certificate
# never seen (`--fresh-certificates`), through the floor relay (bench/floor) and through chainwatch, each run beside a
# direct baseline in the same bench invocation. Prints the proxies' CPU seconds per 1 000 connections per TLS version,
# the median of the repetitions, and the ratio chainwatch / floor (issue 14's goals: 2.5 for TLS 1.2, 4 for TLS 1.3).
#
#   bench/cold.sh [--repeat 3] [--duration 3] [--concurrency 8] [--out DIR]
#
# chainwatch is started by the bench with `--policy alert`: the bench's own root is the rule's anchor, so these chains
# pass and no alert line is written (what is measured is the first contact, not the alert). Needs cc for the floor
# relay and a release build (swift build -c release).
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=3 duration=3 concurrency=8 out=""
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --concurrency) concurrency=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--repeat N] [--duration S] [--concurrency C] [--out DIR]" >&2; exit 2 ;;
    esac
done
bench=${CHAINWATCH_BENCH_BIN:-.build/release/chainwatch-bench}
chainwatch=${CHAINWATCH_BIN:-.build/release/chainwatch}
[ -x "$bench" ] && [ -x "$chainwatch" ] || { echo "$0: build first (swift build -c release)" >&2; exit 2; }
command -v cc >/dev/null || { echo "$0: needs a C compiler for the floor relay (apt-get install gcc)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/chainwatch-cold-XXXXXX)}
mkdir -p "$out"
. bench/floor/start.sh
floor_pid=""
trap '[ -n "$floor_pid" ] && kill "$floor_pid" 2>/dev/null; true' EXIT
floor_start "$out"

common=(handshake --direct --fresh-certificates --tls 1.2,1.3 -c "$concurrency" --duration "$duration")
for i in $(seq "$repeat"); do
    "$bench" "${common[@]}" --proxy "127.0.0.1:$floor_port" --proxy-pid "$floor_pid" --proxy-name floor \
        --json "$out/floor$i.json" >"$out/floor$i.txt" 2>&1
    "$bench" "${common[@]}" --start-proxy "$chainwatch" --policy alert \
        --json "$out/chainwatch$i.json" >"$out/chainwatch$i.txt" 2>&1
done

python3 - "$out" "$repeat" <<'EOF'
import json, statistics, sys
out, repeat = sys.argv[1], int(sys.argv[2])
def per_thousand(name, tls):
    values = []
    for i in range(1, repeat + 1):
        report = json.load(open(f"{out}/{name}{i}.json"))
        assert report["ok"], f"{name}{i}: the run failed"
        values += [run["proxy"]["cpuSecondsPer1000Connections"] for run in report["runs"]
                   if run["target"] != "direct" and run["tls"] == tls]
    return values
goals = {"1.2": 2.5, "1.3": 4.0}
print(f"cold first contacts, proxy CPU s / 1 000 connections, median of {repeat} (runs in {out}):")
for tls in ["1.2", "1.3"]:
    floor, chainwatch = per_thousand("floor", tls), per_thousand("chainwatch", tls)
    f, c = statistics.median(floor), statistics.median(chainwatch)
    print(f"  TLS {tls}: floor {f:.3f}  chainwatch {c:.3f}  ratio {c / f:.2f} (goal {goals[tls]})"
          f"  runs: floor {' '.join(f'{v:.3f}' for v in floor)}; chainwatch {' '.join(f'{v:.3f}' for v in chainwatch)}")
EOF
