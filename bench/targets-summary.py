#!/usr/bin/env python3
"""Medians over the repeated runs of bench/targets.sh, and each of the issue's targets: met or not, with the ratio.

   bench/targets-summary.py OUT_DIR   (the directory of JSON reports targets.sh wrote)
"""
import glob, json, os, re, statistics, sys

out = sys.argv[1]
rows = {}    # (scenario, label) -> metric -> [values]
deltas = {}  # (scenario, label) -> metric -> [proxied - direct, same invocation]
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    scenario = re.match(r"([a-z]+)-", os.path.basename(path)).group(1)
    report = json.load(open(path))
    direct = {}
    for run in report["runs"]:
        k = run["kinds"][0]
        lat = k.get("latencyMicros") or {}
        p = run.get("proxy") or {}
        label = re.sub(r" @\d+/s", "", run["label"])
        m = {"conn/s": k["perSecond"], "MB/s": k["megabytesPerSecond"], "p50": lat.get("p50"), "p99": lat.get("p99"),
             "cpu/1k": p.get("cpuSecondsPer1000Connections"), "cpu/GiB": p.get("cpuSecondsPerGiB"),
             "KiB/tun": p.get("rssKiBPerIdleTunnel"), "RSS": p.get("rssKiBPeak"), "failed": k["failed"]}
        if run["target"] == "direct":
            direct[run.get("tls")] = m
        else:
            d = direct.get(run.get("tls"))
            if d:
                for metric in ("p50", "p99"):
                    if m[metric] is not None and d[metric] is not None:
                        deltas.setdefault((scenario, label), {}).setdefault(metric, []).append(m[metric] - d[metric])
        for metric, v in m.items():
            if v is not None:
                rows.setdefault((scenario, label), {}).setdefault(metric, []).append(v)

def med(key, metric):
    v = rows.get(key, {}).get(metric)
    return statistics.median(v) if v else None

def dmed(key, metric):
    v = deltas.get(key, {}).get(metric)
    return statistics.median(v) if v else None

def f(v, nd=2):
    return "–" if v is None else (f"{v:,.{nd}f}" if isinstance(v, float) else f"{v:,}")

print("### Medians\n")
for scenario, cols in (("handshake", ["conn/s", "p50", "p99", "cpu/1k"]), ("rate", ["conn/s", "p50", "p99", "cpu/1k"]),
                       ("bulk", ["MB/s", "cpu/GiB"]), ("idle", ["KiB/tun", "RSS"])):
    keys = sorted((k for k in rows if k[0] == scenario), key=lambda k: (k[1].split(" TLS ")[-1] if "TLS" in k[1] else "", k[1]))
    if not keys:
        continue
    names = {"p50": "p50 ms", "p99": "p99 ms", "cpu/1k": "proxy CPU s / 1 000 conn", "cpu/GiB": "proxy CPU s / GiB",
             "KiB/tun": "proxy RSS KiB / idle tunnel", "RSS": "proxy RSS peak KiB"}
    extra = ["p50 − direct ms", "p99 − direct ms"] if scenario in ("handshake", "rate") else []
    print(f"{scenario}{' (open loop, 100 conn/s)' if scenario == 'rate' else ''}:\n")
    print("| run | n | " + " | ".join(names.get(c, c) for c in cols + extra) + " |")
    print("|---|---|" + "---|" * (len(cols) + len(extra)))
    for k in keys:
        n = len(rows[k].get(cols[0], []))
        cells = []
        for c in cols:
            v = med(k, c)
            cells.append(f(v / 1000 if c in ("p50", "p99") and v is not None else v, 3 if c.startswith("cpu") else (2 if c in ("p50", "p99") else 1)))
        for c in ("p50", "p99")[:len(extra)]:
            v = dmed(k, c)
            cells.append(f(v / 1000 if v is not None else None, 2))
        print(f"| {k[1]} | {n} | " + " | ".join(cells) + " |")
    print()

print("### Targets\n")
def best(scenario, metric, tls, lower=True):
    vals = [(med((scenario, f"{p} TLS {tls}" if tls else p), metric), p) for p in ("tinyproxy", "squid")]
    vals = [v for v in vals if v[0] is not None]
    if not vals:
        return None, None
    return (min if lower else max)(vals)
def verdict(ok):
    return "**met**" if ok else "**not met**"
for tls in ("1.2", "1.3"):
    b, who = best("handshake", "cpu/1k", tls)
    for action in ("alert", "block"):
        c = med(("handshake", f"chainwatch {action} TLS {tls}"), "cpu/1k")
        if b and c:
            print(f"- CPU per proxied TLS {tls} connection ({action}) ≤ ½ best peer: {c:.3f} vs {who} {b:.3f} ms → ratio {c / b:.2f} {verdict(c / b <= 0.5)}")
b, who = best("bulk", "cpu/GiB", None)
for action in ("alert", "block"):
    c = med(("bulk", f"chainwatch {action}"), "cpu/GiB")
    if b and c:
        print(f"- bulk CPU per GiB ({action}) ≤ ½ best peer: {c:.3f} vs {who} {b:.3f} s → ratio {c / b:.2f} {verdict(c / b <= 0.5)}")
bt, whot = best("bulk", "MB/s", None, lower=False)
for action in ("alert", "block"):
    c = med(("bulk", f"chainwatch {action}"), "MB/s")
    if bt and c:
        print(f"- bulk throughput ({action}) ≥ best peer: {c:.0f} vs {whot} {bt:.0f} MB/s → ratio {c / bt:.2f} {verdict(c >= bt)}")
for action in ("alert", "block"):
    d = dmed(("rate", f"chainwatch {action} TLS 1.3"), "p50")
    if d is not None:
        print(f"- p50 at 100 TLS 1.3 conn/s within 0.5 ms of direct ({action}): +{d / 1000:.2f} ms {verdict(d <= 500)}")
for action in ("alert", "block"):
    v = med(("idle", f"chainwatch {action}"), "KiB/tun")
    if v is not None:
        print(f"- idle tunnel ≤ 8 KiB ({action}): {v:.2f} KiB {verdict(v <= 8)}")
for tls in ("1.2", "1.3"):
    b99 = rows.get(("rate", f"chainwatch block TLS {tls}"), {}).get("p99")
    a99 = rows.get(("rate", f"chainwatch alert TLS {tls}"), {}).get("p99")
    db = dmed(("rate", f"chainwatch block TLS {tls}"), "p99")
    if b99 and a99:
        diff = statistics.median(b99) - statistics.median(a99)
        print(f"- block (cached verdict) adds < 1 ms at p99, 100 conn/s, TLS {tls}: block − alert p99 = {diff / 1000:+.2f} ms"
              f" (block − direct {db / 1000:+.2f} ms) {verdict(diff < 1000)}")
for tls in ("1.2", "1.3"):
    b, who = best("handshake", "conn/s", tls, lower=False)
    for action in ("alert", "block"):
        c = med(("handshake", f"chainwatch {action} TLS {tls}"), "conn/s")
        if b and c:
            print(f"- handshake rate TLS {tls} ({action}) ≥ best peer: {c:.0f} vs {who} {b:.0f} conn/s → ratio {c / b:.2f} {verdict(c >= b)}")
