#!/usr/bin/env bash
# What an alert line costs the proxy, in instructions: chainwatch under callgrind, the bench's handshake scenario with
# the clean policy (`alert`: the bench root anchors the rule, no finding) and the flagged one (every tunnel
# `untrusted_chain` from the verdict cache, one alert line each), at two connection counts. The difference between
# the counts, divided by the connections between them, is the cost per connection without start-up; flagged minus
# clean is the alert's. Instructions, not seconds: the same for the same binary and inputs whatever else the machine
# runs, so this can be measured on a busy machine (the bench's CPU seconds cannot).
#
#   bench/alert-cost-callgrind.sh [--tls 1.3] [--counts "240 640"] [--binary .build/release/chainwatch] [--cold]
#
# --cold: every connection offers a name never offered before and meets a leaf never seen (`--fresh-certificates`),
# clean policy only: a first contact's cost (TLS 1.3: the probe's whole handshake and the chain's validation).
#
# CHAINWATCH_ARGS: more options for chainwatch (`--spot-check-rate 0`: spot checks are full handshakes at random
# times, so a run with them is not repeatable to the instruction).
#
# Needs valgrind (apt-get install valgrind). valgrind 3.19 cannot read the Swift toolchain's debug information, so
# the binary is copied without it (objcopy --strip-debug; the symbol table stays, so the profiles name functions).
# Each run takes about a minute; the callgrind files stay in the printed directory for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/.."
tls=1.3 counts="240 640" binary=.build/release/chainwatch bench=.build/release/chainwatch-bench cold=""
while [ $# -gt 0 ]; do
    case $1 in
        --tls) tls=$2; shift 2 ;;
        --counts) counts=$2; shift 2 ;;
        --binary) binary=$2; shift 2 ;;
        --cold) cold=1; shift ;;
        *) echo "usage: $0 [--tls 1.2|1.3] [--counts \"LOW HIGH\"] [--binary PATH] [--cold]" >&2; exit 2 ;;
    esac
done
read -r low high <<<"$counts"
policies=alert,flagged
[ -n "$cold" ] && policies=alert
[ -n "${high:-}" ] && [ "$high" -gt "$low" ] || { echo "$0: --counts needs two counts, the second larger" >&2; exit 2; }
for tool in valgrind objcopy; do command -v $tool >/dev/null || { echo "$0: $tool is not installed" >&2; exit 2; }; done
[ -x "$binary" ] && [ -x "$bench" ] || { echo "$0: build first (swift build -c release)" >&2; exit 2; }

out=$(mktemp -d /tmp/chainwatch-callgrind-XXXXXX)
objcopy --strip-debug "$binary" "$out/chainwatch"
# The bench starts this wrapper as the proxy; the wrapper execs valgrind, so the bench's PID is the proxy's.
cat >"$out/proxy.sh" <<EOF
#!/bin/sh
exec valgrind -q --tool=callgrind --callgrind-out-file="$out/callgrind.\$CG_TAG.%p" "$out/chainwatch" "\$@" ${CHAINWATCH_ARGS:-}
EOF
chmod +x "$out/proxy.sh"
for n in $low $high; do
    # One bench run starts the proxy twice, clean then flagged: the lower PID is the clean one.
    CG_TAG=$n "$bench" handshake --tls "$tls" --count "$n" --concurrency 4 --start-proxy "$out/proxy.sh" \
        --start-timeout 120 --timeout 60 ${cold:+--fresh-certificates} --policy "$policies" -q \
        >"$out/bench.$n.txt" 2>&1 \
        || { echo "$0: the bench failed; see $out/bench.$n.txt" >&2; exit 1; }
done
total() { sed -n 's/^summary: //p' "$1"; }
per_connection() {   # $1: 1 for the clean run, 2 for the flagged one
    local a b
    a=$out/$(ls "$out" | grep "^callgrind\.$low\." | sort -t. -k3 -n | sed -n "${1}p")
    b=$out/$(ls "$out" | grep "^callgrind\.$high\." | sort -t. -k3 -n | sed -n "${1}p")
    echo $(( ($(total "$b") - $(total "$a")) / (high - low) ))
}
clean=$(per_connection 1)
if [ -n "$cold" ]; then
    echo "TLS $tls cold (a new name and leaf every connection), instructions per connection (runs of $low and $high, 4 clients): $clean"
    echo "profiles: $out"
    exit 0
fi
flagged=$(per_connection 2)
echo "TLS $tls, instructions per connection (runs of $low and $high connections, 4 clients):"
echo "  clean   $clean"
echo "  flagged $flagged"
echo "  alert   $((flagged - clean)) ($(awk -v f="$flagged" -v c="$clean" 'BEGIN { printf "%.2f", f / c }')x the clean connection)"
echo "profiles: $out"
