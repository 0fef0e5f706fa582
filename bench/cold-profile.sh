#!/usr/bin/env bash
# Where a cold first contact's CPU goes: chainwatch under `perf record` (stacks unwound with DWARF, so OpenSSL's and
# libc's frames keep their callers) while the bench runs cold sessions (`--fresh-certificates`: a name never offered
# and a leaf never seen every connection), then the samples sorted into the parts of the work, each with the share
# spent in the kernel. Start-up (the policy, the trust store) is left out. Shares of chainwatch's CPU, not seconds:
# perf's sampling costs the process CPU of its own; bench/cold.sh gives the seconds.
#
#   bench/cold-profile.sh [--tls 1.3] [--duration 4] [--concurrency 8] [--out DIR]
#
# A sample counts in the first part, in the table's order, that any frame of its stack names: the probe's steps
# before the probe's other work, the validation before the tunnel, the tunnel before the event loop; a sample whose
# stack could not be unwound that far counts as "other". Needs perf (apt-get install linux-perf) allowed to record
# (root, or a lower kernel.perf_event_paranoid) and a release build (swift build -c release). Exit status: 0 with the
# table, 1 when perf or the bench failed (their output says why), 2 for a usage error or a missing tool.
set -euo pipefail
cd "$(dirname "$0")/.."
tls=1.3 duration=4 concurrency=8 out=""
while [ $# -gt 0 ]; do
    case $1 in
        --tls) tls=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --concurrency) concurrency=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--tls 1.2|1.3] [--duration S] [--concurrency C] [--out DIR]" >&2; exit 2 ;;
    esac
done
bench=${CHAINWATCH_BENCH_BIN:-.build/release/chainwatch-bench}
chainwatch=${CHAINWATCH_BIN:-.build/release/chainwatch}
[ -x "$bench" ] && [ -x "$chainwatch" ] || { echo "$0: build first (swift build -c release)" >&2; exit 2; }
command -v perf >/dev/null || { echo "$0: needs perf (apt-get install linux-perf)" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/chainwatch-cold-profile-XXXXXX)}
mkdir -p "$out"
chainwatch=$(realpath "$chainwatch")
# perf_event_paranoid (Debian's default keeps non-root users out) or a container's seccomp can forbid recording.
perf record -q -o "$out/preflight.data" -- true >"$out/preflight.log" 2>&1 || {
    echo "$0: perf cannot record here (root, or a lower kernel.perf_event_paranoid, is needed):" >&2
    tail -3 "$out/preflight.log" >&2; exit 1; }
rm -f "$out/preflight.data"

# The bench starts this and stops it by its PID: perf, which then stops chainwatch (perf record ends its workload).
# No build-id collection (-B): it reads the whole file after the workload ends, and the bench kills what is still
# running 5 s after asking it to stop.
cat >"$out/proxy.sh" <<EOF
#!/bin/sh
exec perf record -B -F 1500 --call-graph dwarf,16384 -o "$out/perf.data" -- "$chainwatch" "\$@"
EOF
chmod +x "$out/proxy.sh"
"$bench" handshake --fresh-certificates --tls "$tls" -c "$concurrency" --duration "$duration" \
    --start-proxy "$out/proxy.sh" --start-timeout 30 --policy alert --json "$out/bench.json" >"$out/bench.txt" 2>&1 || {
    echo "$0: the bench run failed ($out/bench.txt):" >&2; tail -5 "$out/bench.txt" >&2; exit 1; }
perf script -i "$out/perf.data" -F ip,sym,dso >"$out/stacks.txt" 2>"$out/perf-script.log" || {
    echo "$0: perf script failed ($out/perf-script.log):" >&2; tail -5 "$out/perf-script.log" >&2; exit 1; }

python3 - "$out" "$tls" <<'EOF'
import collections, json, sys
out, tls = sys.argv[1], sys.argv[2]
# (part, frame names that put a sample in it), first match wins.
parts = [
    ("start-up (left out)", ["chainwatch_main", "PolicyReloader"]),
    ("probe: its hello (mirrored, key shares)", ["HelloMirror", "ProbeClientV11clientHello"]),
    ("probe: ServerHello (key agreement, schedule)", ["ProbeClientV11serverHello"]),
    ("probe: encrypted flight (Certificate, CertificateVerify, Finished)", ["EncryptedFlightV4read"]),
    ("probe: its Finished and close_notify", ["clientFinish"]),
    ("probe: records, sockets, the rest", ["ProbeClient", "ProbeHandshake", "Prober"]),
    ("validation: path (X509_verify_cert)", ["X509_verify_cert"]),
    ("validation: decoding, facts", ["PathValidatorO6decode"]),
    ("validation: the rest, the hand-off", ["ValidationQueue", "InspectorC5judge"]),
    ("tunnel: accept", ["acceptOne"]),
    ("tunnel: the rest (CONNECT, relay, inspection)", ["ProxyConnection", "ChainwatchProxy0B10Connection", "TunnelInspection"]),
    ("event loop (epoll_wait, inbox)", ["ChainwatchEventLoop", "epoll_wait"]),
]
counts, kernel = collections.Counter(), collections.Counter()
for block in open(f"{out}/stacks.txt").read().split("\n\n"):
    # Each frame: "address symbol (object)"; the parts match symbols only, the kernel is told by its object.
    frames = [line.strip().split(None, 1)[1:] or [""] for line in block.strip().split("\n") if line.strip()]
    if not frames:
        continue
    frames = [frame[0].rsplit(" (", 1) for frame in frames]
    names = [frame[0] for frame in frames]
    part = next((name for name, keys in parts if any(k in n for n in names for k in keys)), "other")
    counts[part] += 1
    if frames[0][-1] == "[kernel.kallsyms])":
        kernel[part] += 1
steady = sum(counts.values()) - counts[parts[0][0]]
if steady <= 0:
    sys.exit("no samples outside start-up: did the bench run? see " + out)
report = json.load(open(f"{out}/bench.json"))
run = next(r for r in report["runs"] if r["target"] != "direct")
done = sum(k["completed"] for k in run["kinds"])
print(f"cold TLS {tls}: {done} sessions, {steady} samples outside start-up (raw: {out})")
print(f"{'part':70s} {'share':>6s} {'kernel':>7s}")
for name, _ in parts[1:] + [("other", [])]:
    print(f"{name:70s} {100 * counts[name] / steady:5.1f}% {100 * kernel[name] / steady:6.1f}%")
print(f"{'all':70s} {100.0:5.1f}% {100 * (sum(kernel.values()) - kernel[parts[0][0]]) / steady:6.1f}%")
if not sum(kernel.values()):
    print("warning: no sample was in the kernel: perf recorded user space only (kernel.perf_event_paranoid?), so "
          "the kernel column says nothing", file=sys.stderr)
EOF
