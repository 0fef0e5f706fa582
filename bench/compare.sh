#!/usr/bin/env bash
# Runs the same bench scenarios against the direct baseline, the floor relay, chainwatch, tinyproxy
# and squid (the Debian packages), and prints each proxy's ratio to the direct baseline and to each peer.
#
#   bench/compare.sh [--install] [--duration S] [--concurrency C] [--peers "floor chainwatch tinyproxy squid"]
#                    [--scenarios "handshake bulk idle"] [--out DIR]
#
# Peers listen on 127.0.0.1 only, on free ports, with configs written to a temp dir, and are
# stopped by their PID. A peer that is not installed is skipped (with --install it is installed).
# floor is bench/floor/floor-relay.c, built here with cc: the least CPU a CONNECT relay spends.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH="${CHAINWATCH_BENCH_BIN:-$ROOT/.build/release/chainwatch-bench}"
CHAINWATCH="${CHAINWATCH_BIN:-$ROOT/.build/release/chainwatch}"
DURATION=3
CONCURRENCY=8
IDLE_TUNNELS=500
PEERS="floor chainwatch tinyproxy squid"
SCENARIOS="handshake bulk idle"
INSTALL=0
OUT="$ROOT/bench/out/$(date +%Y%m%d-%H%M%S)"
while [ $# -gt 0 ]; do
  case "$1" in
    --install) INSTALL=1 ;;
    --duration) DURATION="$2"; shift ;;
    --concurrency) CONCURRENCY="$2"; shift ;;
    --idle-tunnels) IDLE_TUNNELS="$2"; shift ;;
    --peers) PEERS="$2"; shift ;;
    --scenarios) SCENARIOS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$BENCH" ] || { echo "compare.sh: build the bench first: swift build -c release --product chainwatch-bench" >&2; exit 2; }
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/chainwatch-compare.XXXXXX)"
chmod 755 "$WORK"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]:-}"; do
    for _ in $(seq 1 50); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && sleep 0.1 || break; done
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

install_pkg() {
  local pkg="$1"
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' && return 0
  [ "$INSTALL" = 1 ] || return 1
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$pkg" >/dev/null
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() {  # wait_port PORT PID: at most 10 s
  for _ in $(seq 1 200); do
    kill -0 "$2" 2>/dev/null || return 1
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# start_peer NAME: sets PEER_PORT and PEER_PID, or returns 1 when the peer is unavailable.
start_peer() {
  local name="$1" dir="$WORK/$1"; mkdir -p "$dir"; chmod 777 "$dir"
  PEER_PORT="$(free_port)"
  case "$name" in
    floor)
      command -v cc >/dev/null || install_pkg gcc || { echo "compare.sh: skipping floor: no C compiler (use --install)" >&2; return 1; }
      cc -O2 -o "$dir/floor-relay" "$ROOT/bench/floor/floor-relay.c" || { echo "compare.sh: skipping floor: it did not compile" >&2; return 1; }
      "$dir/floor-relay" "$PEER_PORT" >"$dir/out.log" 2>&1 &
      ;;
    chainwatch)
      [ -x "$CHAINWATCH" ] || { echo "compare.sh: skipping chainwatch: $CHAINWATCH not built" >&2; return 1; }
      "$CHAINWATCH" run --listen "127.0.0.1:$PEER_PORT" >"$dir/out.log" 2>&1 &
      ;;
    tinyproxy)
      install_pkg tinyproxy || { echo "compare.sh: skipping tinyproxy: not installed (use --install)" >&2; return 1; }
      cat >"$dir/tinyproxy.conf" <<CONF
Port $PEER_PORT
Listen 127.0.0.1
Timeout 600
MaxClients 4096
Allow 127.0.0.1
LogLevel Error
LogFile "$dir/tinyproxy.log"
PidFile "$dir/tinyproxy.pid"
CONF
      /usr/bin/tinyproxy -d -c "$dir/tinyproxy.conf" >"$dir/out.log" 2>&1 &
      ;;
    squid)
      install_pkg squid || { echo "compare.sh: skipping squid: not installed (use --install)" >&2; return 1; }
      cat >"$dir/squid.conf" <<CONF
http_port 127.0.0.1:$PEER_PORT
acl localnet src 127.0.0.1/32
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log $dir/cache.log
pid_filename $dir/squid.pid
coredump_dir $dir
max_filedescriptors 16384
shutdown_lifetime 1 seconds
CONF
      /usr/sbin/squid -N -f "$dir/squid.conf" >"$dir/out.log" 2>&1 &
      ;;
    *) echo "compare.sh: unknown peer $name" >&2; return 1 ;;
  esac
  PEER_PID=$!
  PIDS+=("$PEER_PID")
  if ! wait_port "$PEER_PORT" "$PEER_PID"; then
    echo "compare.sh: $name did not start; its log:" >&2; tail -5 "$dir/out.log" "$dir"/*.log >&2 2>/dev/null || true
    return 1
  fi
}

stop_peer() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}

scenario_args() {
  case "$1" in
    handshake) echo "--tls 1.2,1.3 -c $CONCURRENCY --duration $DURATION" ;;
    bulk) echo "-c 1 --size 256M --duration $DURATION" ;;
    idle) echo "-c $IDLE_TUNNELS --duration $DURATION" ;;
    mixed) echo "-c $CONCURRENCY --long 2 --duration $DURATION" ;;
  esac
}

STATUS=0
REPORTS=()
for scenario in $SCENARIOS; do
  # shellcheck disable=SC2046
  "$BENCH" "$scenario" --direct $(scenario_args "$scenario") --json "$OUT/$scenario-direct.json" -q || STATUS=1
  REPORTS+=("$OUT/$scenario-direct.json")
  for peer in $PEERS; do
    start_peer "$peer" || continue
    # shellcheck disable=SC2046
    "$BENCH" "$scenario" --proxy "127.0.0.1:$PEER_PORT" --proxy-pid "$PEER_PID" --proxy-name "$peer" \
      $(scenario_args "$scenario") --json "$OUT/$scenario-$peer.json" -q || STATUS=1
    REPORTS+=("$OUT/$scenario-$peer.json")
    stop_peer "$PEER_PID"
  done
done
PICTURES=(--svg "$OUT/compare.svg")
if command -v rsvg-convert >/dev/null || install_pkg librsvg2-bin; then
  PICTURES+=(--png "$OUT/compare.png")
else
  echo "compare.sh: no compare.png: rsvg-convert is not installed (use --install)" >&2
fi
"$BENCH" plot "${REPORTS[@]}" "${PICTURES[@]}" > "$OUT/tables.txt"

python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    report = json.load(open(path))
    for run in report["runs"]:
        for kind in run["kinds"]:
            key = (report["scenario"], run.get("tls") or "-", kind["kind"])
            p = run.get("proxy") or {}
            rows.setdefault(key, {})[run["target"]] = {
                "conn/s": kind["perSecond"], "MB/s": kind["megabytesPerSecond"],
                "p50": (kind.get("latencyMicros") or {}).get("p50"), "p99": (kind.get("latencyMicros") or {}).get("p99"),
                "cpu/1k": p.get("cpuSecondsPer1000Connections"), "cpu/GiB": p.get("cpuSecondsPerGiB"),
                "KiB/tunnel": p.get("rssKiBPerIdleTunnel"), "failed": kind["failed"]}
def fmt(v):   # 1083, not 1.08e+03: three significant digits below 100, whole numbers above
    if v is None: return "-"
    if not isinstance(v, float): return str(v)
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
for (scenario, tls, kind), targets in rows.items():
    metric = {"handshake": "conn/s", "bulk": "MB/s", "idle": "KiB/tunnel"}[kind]
    print(f"\n== {scenario} [{kind}] TLS {tls}")
    print(f"{'target':<12} {metric:>11} {'p50 us':>9} {'p99 us':>9} {'cpu s/1k':>9} {'cpu s/GiB':>9} {'KiB/tun':>8} {'failed':>6}")
    for target, m in targets.items():
        print(f"{target:<12} {fmt(m[metric]):>11} {fmt(m['p50']):>9} {fmt(m['p99']):>9} {fmt(m['cpu/1k']):>9} {fmt(m['cpu/GiB']):>9} {fmt(m['KiB/tunnel']):>8} {m['failed']:>6}")
    base = targets.get("direct")
    names = [t for t in targets if t != "direct"]
    for a in names:
        parts = []
        if base and base[metric] and metric != "KiB/tunnel":
            parts.append(f"{metric} {targets[a][metric] / base[metric]:.2f}x direct")
        if base and base["p50"] and targets[a]["p50"]:
            parts.append(f"p50 {targets[a]['p50'] / base['p50']:.2f}x direct")
        for b in names:
            if b != a and targets[b][metric] and targets[a][metric] is not None:
                parts.append(f"{metric} {targets[a][metric] / targets[b][metric]:.2f}x {b}")
            if b != a and targets[b]["cpu/1k"] and targets[a]["cpu/1k"]:
                parts.append(f"cpu/1k {targets[a]['cpu/1k'] / targets[b]['cpu/1k']:.2f}x {b}")
        print(f"  {a}: " + ", ".join(parts))
PY
echo
echo "reports, tables, compare.svg and compare.png in $OUT"
exit $STATUS
