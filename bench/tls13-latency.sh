#!/usr/bin/env bash
# Block-mode latency of TLS 1.3 tunnels, with and without cached evidence, beside alert mode and a direct
# connection, in one run (open loop at a fixed rate, so latency is not hidden by a slower pace).
#   bench/tls13-latency.sh [--repeats N] [--duration S] [--rate R] [--out DIR]
# "cached": every session offers the same server name, so after the first one chainwatch has a fresh probe result
# and judges from it (no probe on the session's path). "fresh": every session offers a name never seen before
# (chainwatch-bench --fresh-names): chainwatch has no evidence and probes; under block it probes before the
# session's own handshake. Prints the median of the repeats per row; the raw tables stay in --out.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=3; duration=3; rate=100; out=$(mktemp -d /tmp/chainwatch-latency.XXXXXX)
while [ $# -gt 0 ]; do
    case "$1" in
        --repeats) repeats=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --out) out=$2; mkdir -p "$out"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
bench=.build/release/chainwatch-bench; proxy=.build/release/chainwatch
[ -x "$bench" ] && [ -x "$proxy" ] || { echo "build first: swift build -c release" >&2; exit 2; }
for r in $(seq 1 "$repeats"); do
    for evidence in cached fresh; do
        flags=(); [ "$evidence" = fresh ] && flags=(--fresh-names)
        timeout 300 "$bench" handshake --start-proxy "$proxy" --policy block,alert --tls 1.3 --direct --rate "$rate" -c 32 \
            --duration "$duration" --quiet "${flags[@]}" > "$out/$evidence-$r.txt"
    done
done
python3 - "$out" "$repeats" <<'PY'
import pathlib, statistics, sys
out, repeats = pathlib.Path(sys.argv[1]), int(sys.argv[2])
rows = {}
for evidence in ("cached", "fresh"):
    for r in range(1, repeats + 1):
        for line in (out / f"{evidence}-{r}.txt").read_text().splitlines():
            f = line.split()
            if len(f) < 18 or f[-17] != "handshake" or line.startswith("run"):
                continue
            name = " ".join(f[:-17]).split(" TLS")[0]
            key = ("direct" if name == "direct" else f"{name.split()[-1]}, {evidence}")
            if name == "direct" and evidence == "fresh":
                key = "direct (names fresh)"
            rows.setdefault(key, []).append((float(f[-11]), float(f[-9]), f[-4]))
print(f"| target | p50 ms | p99 ms | proxy CPU s / 1 000 conn | runs |")
print("|---|---|---|---|---|")
for key, values in rows.items():
    cpu = [float(v[2]) for v in values if v[2] != "-"]
    print(f"| {key} | {statistics.median(v[0] for v in values):.2f} | {statistics.median(v[1] for v in values):.2f} | "
          f"{statistics.median(cpu):.3f} |" if cpu else f"| {key} | {statistics.median(v[0] for v in values):.2f} | "
          f"{statistics.median(v[1] for v in values):.2f} | – |", len(values), "|")
PY
echo "raw tables: $out"
