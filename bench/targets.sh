#!/usr/bin/env bash
# Measures chainwatch against the issue's targets, beside the direct baseline, tinyproxy and squid, REPEATS times
# (each repeat: the direct baseline in the same invocation), then prints medians (bench/targets-summary.py).
#
#   bench/targets.sh [--out DIR] [--repeats N] [--duration S] [--peers "chainwatch tinyproxy squid"] [--only "handshake rate bulk idle"]
#
# CPU split: the bench (client + builtin upstream) runs on CPU 0, the proxy under test on CPU 1 (taskset), so the
# proxy's CPU time and the client's do not compete. chainwatch runs with its default thread count.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="${CHAINWATCH_BENCH_BIN:-$ROOT/.build/release/chainwatch-bench}"
CHAINWATCH="${CHAINWATCH_BIN:-$ROOT/.build/release/chainwatch}"
OUT="$ROOT/bench/out/targets-$(date +%Y%m%d-%H%M%S)"; REPEATS=3; DURATION=5; PEERS="chainwatch tinyproxy squid"
ONLY="handshake rate bulk idle"; IDLE=1000; RATE=100
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift ;; --repeats) REPEATS="$2"; shift ;; --duration) DURATION="$2"; shift ;;
    --peers) PEERS="$2"; shift ;; --only) ONLY="$2"; shift ;; --idle-tunnels) IDLE="$2"; shift ;;
    *) echo "targets.sh: unknown argument $1" >&2; exit 2 ;;
  esac; shift
done
mkdir -p "$OUT"; WORK="$(mktemp -d /tmp/chainwatch-targets.XXXXXX)"; chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
# Wrappers: each proxy on CPU 1, started by the bench (--start-proxy) and stopped by its PID.
cat >"$WORK/chainwatch" <<W
#!/bin/sh
exec taskset -c 1 "$CHAINWATCH" "\$@"
W
cat >"$WORK/tinyproxy" <<'W'
#!/bin/sh
# args: PORT DIR
cat >"$2/tinyproxy.conf" <<CONF
Port $1
Listen 127.0.0.1
Timeout 600
MaxClients 4096
Allow 127.0.0.1
LogLevel Error
LogFile "$2/tinyproxy.log"
PidFile "$2/tinyproxy.pid"
CONF
exec taskset -c 1 /usr/bin/tinyproxy -d -c "$2/tinyproxy.conf"
W
cat >"$WORK/squid" <<'W'
#!/bin/sh
# args: PORT DIR
cat >"$2/squid.conf" <<CONF
http_port 127.0.0.1:$1
acl localnet src 127.0.0.1/32
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log $2/cache.log
pid_filename $2/squid.pid
coredump_dir $2
max_filedescriptors 16384
shutdown_lifetime 1 seconds
CONF
exec taskset -c 1 /usr/sbin/squid -N -f "$2/squid.conf"
W
chmod 755 "$WORK"/chainwatch "$WORK"/tinyproxy "$WORK"/squid
B="taskset -c 0 $BENCH"
proxy_opts() {  # proxy_opts PEER: sets P to the --start-proxy options for one peer
  case "$1" in
    chainwatch) P=(--start-proxy "$WORK/chainwatch" --proxy-name chainwatch --policy block,alert) ;;
    *) P=(--start-proxy "$WORK/$1" --proxy-name "$1" --proxy-args "{port} {dir}") ;;
  esac
}
run() {  # run NAME ARGS...: one bench invocation, JSON to $OUT/NAME.json
  local name="$1"; shift
  echo "== $name: $*" >&2
  # shellcheck disable=SC2086
  timeout 300 $B "$@" --json "$OUT/$name.json" -q >"$OUT/$name.txt" 2>&1 || echo "   (exit $?: see $OUT/$name.txt)" >&2
}
for r in $(seq 1 "$REPEATS"); do
  for peer in $PEERS; do
    proxy_opts "$peer"
    for s in $ONLY; do
      case "$s" in
        handshake) run "handshake-$peer-$r" handshake --direct "${P[@]}" --tls 1.2,1.3 -c 8 --duration "$DURATION" ;;
        rate) run "rate-$peer-$r" handshake --direct "${P[@]}" --tls 1.2,1.3 --rate "$RATE" -c 32 --duration "$DURATION" ;;
        bulk) run "bulk-$peer-$r" bulk --direct "${P[@]}" -c 1 --size 256M --duration "$DURATION" ;;
        idle) run "idle-$peer-$r" idle "${P[@]}" -c "$IDLE" --duration "$DURATION" ;;
      esac
    done
  done
done
python3 "$ROOT/bench/targets-summary.py" "$OUT" | tee "$OUT/summary.md"
echo "reports in $OUT" >&2
