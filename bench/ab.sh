#!/usr/bin/env bash
# Two chainwatch builds side by side in one run: the handshake bench (block and alert, TLS 1.2 and 1.3) and the bulk
# bench, alternating A and B so drift on a shared machine hits both alike. Prints medians of the repeats.
#   bench/ab.sh A_BINARY B_BINARY [--repeats N] [--duration S]
# For example: git worktree add /tmp/base <commit> && (cd /tmp/base && swift build -c release), then
#   bench/ab.sh /tmp/base/.build/release/chainwatch .build/release/chainwatch
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/ab.sh A_BINARY B_BINARY [--repeats N] [--duration S]" >&2; exit 2; }
a=$1; b=$2; shift 2
repeats=5; duration=3
while [ $# -gt 0 ]; do
    case "$1" in
        --repeats) repeats=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
bench=.build/release/chainwatch-bench
[ -x "$bench" ] || { echo "build first: swift build -c release" >&2; exit 2; }
out=$(mktemp -d /tmp/chainwatch-ab.XXXXXX)
for r in $(seq 1 "$repeats"); do
    for side in A B; do
        bin=$a; [ $side = B ] && bin=$b
        timeout 300 "$bench" handshake --start-proxy "$bin" --proxy-name "$side" --policy block,alert --tls 1.2,1.3 \
            --duration "$duration" --quiet >> "$out/handshake.txt"
        timeout 300 "$bench" bulk --start-proxy "$bin" --proxy-name "$side" --policy alert -c 1 --size 256M \
            --duration "$duration" --quiet >> "$out/bulk.txt"
    done
done
python3 - "$out" <<'PY'
import pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for kind in ("handshake", "bulk"):
    for line in (out / f"{kind}.txt").read_text().splitlines():
        f = line.split()
        if len(f) < 18 or f[-17] != kind or f[0] not in ("A", "B"):
            continue
        name = " ".join(f[:-17])
        rows.setdefault((kind, name[2:], f[0]), []).append(f)
med = lambda values: statistics.median(float(v) for v in values if v != "-")
print("| run | side | conn/s | MB/s | p50 ms | proxy CPU s / 1 000 conn | proxy CPU s / GiB | runs |")
print("|---|---|---|---|---|---|---|---|")
for (kind, name, side), fs in sorted(rows.items()):
    cpu_conn = med(f[-4] for f in fs) if kind == "handshake" else None
    cpu_gib = med(f[-3] for f in fs) if kind == "bulk" else None
    print(f"| {kind} {name} | {side} | {med(f[-13] for f in fs):.1f} | {med(f[-12] for f in fs):.1f} | {med(f[-11] for f in fs):.2f} | "
          f"{'%.3f' % cpu_conn if cpu_conn is not None else '–'} | {'%.3f' % cpu_gib if cpu_gib is not None else '–'} | {len(fs)} |")
PY
echo "raw tables: $out"
