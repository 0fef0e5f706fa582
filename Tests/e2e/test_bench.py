"""End-to-end tests of chainwatch-bench itself, in a short mode (each run a second or two).

What they prove: counts add up (started = completed + failed + cut off, bytes = transfers x size),
a corrupted byte is detected and reported as a failure (exit 1 with a message), and runs end within
their bound. Servers listen on 127.0.0.1 only; every process a test starts is stopped by its PID;
every wait is bounded.

Environment: CHAINWATCH_BENCH_BIN (required) is the release bench binary; CHAINWATCH_BIN is the
chainwatch proxy for the proxied tests (`make test` sets both). Tests through tinyproxy run when
tinyproxy is installed (bench/compare.sh --install installs it).
"""
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from helpers import interrupted_once_its_table_is_made, namespace_of_its_own, nft_tables, still_running

BENCH = os.environ.get("CHAINWATCH_BENCH_BIN", "")
CHAINWATCH = os.environ.get("CHAINWATCH_BIN", "")
RUN_LIMIT = 60  # seconds: no bench run in this file may take longer


@pytest.fixture(scope="session", autouse=True)
def bench_binary():
    assert BENCH, "set CHAINWATCH_BENCH_BIN to the release chainwatch-bench binary"
    assert os.access(BENCH, os.X_OK), f"CHAINWATCH_BENCH_BIN={BENCH} is not executable"


def bench(*args, tmp_path=None):
    """Runs the bench with a JSON report; returns (exit code, report or None, stderr, seconds)."""
    report_path = os.path.join(tmp_path or tempfile.mkdtemp(), "report.json")
    started = time.monotonic()
    proc = subprocess.run([BENCH, *args, "--json", report_path, "--quiet"], capture_output=True, text=True, timeout=RUN_LIMIT)
    seconds = time.monotonic() - started
    report = None
    if os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    return proc.returncode, report, proc.stdout + proc.stderr, seconds


def kinds(report):
    return [(run, kind) for run in report["runs"] for kind in run["kinds"]]


def assert_counts_add_up(report):
    for run, kind in kinds(report):
        assert kind["countsAddUp"], (run["label"], kind)
        assert kind["started"] == kind["completed"] + kind["failed"] + kind["cutOff"], (run["label"], kind)


# Direct: the bench against its own upstream, no proxy.

def test_handshake_count_is_exact_for_both_tls_versions(tmp_path):
    code, report, output, _ = bench("handshake", "--direct", "--count", "60", "-c", "4", "--tls", "1.2,1.3", tmp_path=tmp_path)
    assert code == 0, output
    assert [run["tls"] for run in report["runs"]] == ["1.2", "1.3"]
    for run, kind in kinds(report):
        assert (kind["started"], kind["completed"], kind["failed"], kind["cutOff"]) == (60, 60, 0, 0), run["label"]
        assert kind["verifiedBytes"] == 60 * 1024
        assert kind["latencyMicros"]["count"] == 60
        assert kind["latencyMicros"]["p50"] <= kind["latencyMicros"]["p99"] <= kind["latencyMicros"]["max"]
    assert report["ok"]


def test_resume_resumes_sessions(tmp_path):
    code, report, output, _ = bench("handshake", "--direct", "--count", "20", "-c", "1", "--tls", "1.2,1.3", "--resume", tmp_path=tmp_path)
    assert code == 0, output
    for run, kind in kinds(report):
        assert kind["resumed"] >= 18, (run["label"], kind["resumed"])  # all but the first on the lane


@pytest.mark.parametrize("direction", [[], ["--upload"]], ids=["download", "upload"])
def test_bulk_byte_count_is_exact(tmp_path, direction):
    code, report, output, _ = bench("bulk", "--direct", "--count", "3", "-c", "2", "--size", "3M", *direction, tmp_path=tmp_path)
    assert code == 0, output
    ((run, kind),) = kinds(report)
    assert (kind["completed"], kind["failed"], kind["cutOff"]) == (3, 0, 0)
    assert kind["verifiedBytes"] == 3 * 3 * 1024 * 1024
    assert_counts_add_up(report)


def test_idle_holds_every_tunnel(tmp_path):
    code, report, output, _ = bench("idle", "--direct", "-c", "50", "--duration", "1", tmp_path=tmp_path)
    assert code == 0, output
    (run,) = report["runs"]
    assert run["idleTunnelsHeld"] == 50
    assert run["kinds"][0]["completed"] == 50


def test_mixed_runs_short_and_long_sessions(tmp_path):
    code, report, output, _ = bench("mixed", "--direct", "-c", "2", "--long", "1", "--size", "8M", "--duration", "1", tmp_path=tmp_path)
    assert code == 0, output
    (run,) = report["runs"]
    by_kind = {k["kind"]: k for k in run["kinds"]}
    assert by_kind["handshake"]["completed"] > 0
    assert by_kind["bulk"]["verifiedBytes"] > 0
    assert_counts_add_up(report)


# Corruption: the builtin upstream flips one byte; the bench must notice and fail.

@pytest.mark.parametrize("scenario,extra,message", [
    ("handshake", ["--count", "5"], "corrupted response body: byte at offset 512"),
    ("bulk", ["--count", "2", "--size", "1M"], "corrupted stream: byte at offset 524288"),
    ("bulk", ["--count", "2", "--size", "1M", "--upload"], "upstream rejected the upload: BAD 524288"),
], ids=["handshake-body", "bulk-download", "bulk-upload"])
def test_corrupted_byte_is_detected(tmp_path, scenario, extra, message):
    code, report, output, _ = bench(scenario, "--direct", "-c", "1", "--fault-inject", "corrupt", *extra, tmp_path=tmp_path)
    assert code == 1, output
    assert message in output
    assert "FAILED" in output
    assert report is not None and not report["ok"]
    for run, kind in kinds(report):
        assert kind["failed"] > 0
        assert kind["completed"] == 0
    assert_counts_add_up(report)


# Bounds: runs end within --duration plus the grace period (plus setup).

@pytest.mark.parametrize("scenario,extra", [
    ("handshake", ["-c", "4"]),
    ("bulk", ["-c", "2", "--size", "4G"]),   # a transfer far longer than the bound: cut off, bytes still counted
    ("idle", ["-c", "20"]),
], ids=["handshake", "bulk-cut-off", "idle"])
def test_duration_bound_is_kept(tmp_path, scenario, extra):
    code, report, output, seconds = bench(scenario, "--direct", "--duration", "1", "--grace", "1", *extra, tmp_path=tmp_path)
    assert code == 0, output
    assert seconds < 1 + 1 + 4, f"took {seconds:.1f}s"
    for run in report["runs"]:
        assert run["elapsedSeconds"] < 1 + 1 + 0.5
    assert_counts_add_up(report)
    if scenario == "bulk":
        ((run, kind),) = kinds(report)
        assert kind["cutOff"] == 2 and kind["completed"] == 0 and kind["verifiedBytes"] > 0


def test_failing_run_ends_early_and_says_why(tmp_path):
    # A proxy address where nothing listens: every connect fails, the run stops after --max-failures.
    port = free_port()
    code, report, output, seconds = bench("handshake", "--proxy", f"127.0.0.1:{port}", "--duration", "30",
                                          "--max-failures", "5", tmp_path=tmp_path)
    assert code == 1, output
    assert seconds < 10
    assert "Connection refused" in output
    assert_counts_add_up(report)


def test_rate_is_an_open_loop(tmp_path):
    # --rate: arrivals on a schedule; 2 s at 40/s is 80 sessions, whatever -c says: give or take the last one, and a
    # few more when the run's end is noticed late on a busy machine (the arrivals due by then have started). A closed
    # loop at -c 4 would start hundreds.
    code, report, output, _ = bench("handshake", "--direct", "--rate", "40", "-c", "4", "--duration", "2", tmp_path=tmp_path)
    assert code == 0, output
    (run, kind), = kinds(report)
    assert "@40/s" in run["label"]
    assert 76 <= kind["started"] <= 84, kind
    assert kind["failed"] == 0 and kind["latencyMicros"]["p50"] > 0
    assert_counts_add_up(report)


def test_svg_and_plot(tmp_path):
    svg = tmp_path / "out.svg"
    code, report, output, _ = bench("handshake", "--direct", "--count", "20", "--svg", str(svg), tmp_path=tmp_path)
    assert code == 0, output
    text = svg.read_text()
    assert text.startswith("<svg") and "polyline" in text and "conn/s" in text
    combined = tmp_path / "combined.svg"
    proc = subprocess.run([BENCH, "plot", str(tmp_path / "report.json"), "--svg", str(combined)], capture_output=True, text=True, timeout=RUN_LIMIT)
    assert proc.returncode == 0, proc.stderr
    assert "direct TLS 1.3" in proc.stdout and combined.exists()


# Through a proxy.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def wait_listening(port, proc, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "proxy exited early"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listening on 127.0.0.1:{port}")


@pytest.fixture
def tinyproxy(tmp_path):
    exe = shutil.which("tinyproxy") or ("/usr/bin/tinyproxy" if os.access("/usr/bin/tinyproxy", os.X_OK) else None)
    if not exe:
        pytest.skip("tinyproxy is not installed (bench/compare.sh --install, or apt-get install tinyproxy)")
    port = free_port()
    conf = tmp_path / "tinyproxy.conf"
    conf.write_text(f"Port {port}\nListen 127.0.0.1\nTimeout 60\nMaxClients 500\nAllow 127.0.0.1\nLogLevel Error\n"
                    f"LogFile \"{tmp_path}/tinyproxy.log\"\nPidFile \"{tmp_path}/tinyproxy.pid\"\n")
    proc = subprocess.Popen([exe, "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        yield port, proc.pid
    finally:
        stop(proc)


def test_through_tinyproxy_counts_and_proxy_usage(tmp_path, tinyproxy):
    port, pid = tinyproxy
    code, report, output, _ = bench("handshake", "--direct", "--proxy", f"127.0.0.1:{port}", "--proxy-pid", str(pid),
                                    "--proxy-name", "tinyproxy", "--count", "40", "-c", "4", tmp_path=tmp_path)
    assert code == 0, output
    direct, proxied = report["runs"]
    assert direct["target"] == "direct" and proxied["target"] == "tinyproxy"
    assert proxied["kinds"][0]["completed"] == 40
    usage = proxied["proxy"]
    assert usage["pid"] == pid and usage["rssKiBAfter"] > 0 and usage["cpuSeconds"] >= 0
    assert "ratio tinyproxy TLS 1.3 / direct TLS 1.3" in output


def test_corruption_is_detected_through_tinyproxy(tmp_path, tinyproxy):
    port, pid = tinyproxy
    code, report, output, _ = bench("bulk", "--proxy", f"127.0.0.1:{port}", "--count", "1", "--size", "1M",
                                    "--fault-inject", "corrupt", tmp_path=tmp_path)
    assert code == 1 and "corrupted stream: byte at offset 524288" in output, output


@pytest.fixture
def chainwatch_bin():
    if not CHAINWATCH:
        pytest.skip("CHAINWATCH_BIN is not set (make test sets it to .build/release/chainwatch)")
    assert os.access(CHAINWATCH, os.X_OK), f"CHAINWATCH_BIN={CHAINWATCH} is not executable"
    return CHAINWATCH


@pytest.mark.parametrize("scenario,extra", [
    ("handshake", ["--count", "40", "-c", "4", "--tls", "1.2,1.3"]),
    ("bulk", ["--count", "2", "--size", "8M"]),
    ("idle", ["-c", "50", "--duration", "1"]),
], ids=["handshake", "bulk", "idle"])
def test_through_chainwatch(tmp_path, chainwatch_bin, scenario, extra):
    code, report, output, _ = bench(scenario, "--direct", "--start-proxy", chainwatch_bin, *extra, tmp_path=tmp_path)
    assert code == 0, output
    proxied = [run for run in report["runs"] if run["target"] != "direct"]
    assert proxied and all(run["proxy"] and run["proxy"]["rssKiBAfter"] > 0 for run in proxied)
    assert_counts_add_up(report)


@pytest.mark.parametrize("scenario,extra", [
    ("handshake", ["--count", "40", "-c", "4", "--tls", "1.3"]),
    ("bulk", ["--count", "2", "--size", "8M"]),
], ids=["handshake", "bulk"])
def test_through_chainwatch_by_connect_and_by_socks(tmp_path, chainwatch_bin, scenario, extra):
    """--via connect,socks: one proxy start, measured through its HTTP listener and its SOCKS 5 listener in turn,
    every session's bytes checked both ways."""
    code, report, output, _ = bench(scenario, "--start-proxy", chainwatch_bin, "--via", "connect,socks", *extra, tmp_path=tmp_path)
    assert code == 0, output
    assert [run["target"] for run in report["runs"]] == ["chainwatch", "chainwatch socks5"], report["runs"]
    for run in report["runs"]:
        (kind,) = run["kinds"]
        assert kind["failed"] == 0 and kind["completed"] == kind["started"] > 0, run
    assert_counts_add_up(report)


@pytest.mark.parametrize("scenario,extra", [
    ("handshake", ["--count", "40", "-c", "4", "--tls", "1.2,1.3"]),
    ("bulk", ["--count", "2", "--size", "8M"]),
], ids=["handshake", "bulk"])
def test_through_chainwatch_by_connect_and_transparently(tmp_path, chainwatch_bin, scenario, extra):
    """--via connect,transparent, in a network namespace the test made: the same proxy start measured through its
    HTTP listener and then with no proxy setting, the bench's own nftables rule redirecting its sessions (from
    127.0.0.3) to a --transparent listener. Its counter must show every session's connection redirected (else some
    reached the upstream straight, and the run would measure nothing of chainwatch); the table is gone afterwards."""
    with namespace_of_its_own("cwbench") as ns:
        report_path = tmp_path / "report.json"
        proc = subprocess.run(["ip", "netns", "exec", ns, BENCH, scenario, "--start-proxy", chainwatch_bin, "--policy", "alert",
                               "--via", "connect,transparent", *extra, "--json", str(report_path), "--quiet"],
                              capture_output=True, text=True, timeout=RUN_LIMIT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads(report_path.read_text())
        targets = sorted({run["target"] for run in report["runs"]})
        assert targets == ["chainwatch", "chainwatch transparent"], report["runs"]
        for run in report["runs"]:
            (kind,) = run["kinds"]
            assert kind["failed"] == 0 and kind["completed"] == kind["started"] > 0, run
            if run["target"] == "chainwatch transparent":
                assert run["redirected"] == kind["started"], run
            else:
                assert run.get("redirected") is None, run
        assert_counts_add_up(report)
        assert "chainwatch_bench" not in nft_tables(ns)


def test_via_transparent_interrupted_leaves_no_table_and_no_proxy(tmp_path, chainwatch_bin):
    """SIGTERM during a transparent run: the bench deletes its nftables table and stops its proxy, then dies of the
    signal. Before, both stayed behind."""
    with namespace_of_its_own("cwbsig") as ns:
        args = [BENCH, "handshake", "--start-proxy", chainwatch_bin, "--via", "transparent", "--tls", "1.3", "-c", "2", "--duration", "20", "--quiet"]
        status, out, proxies = interrupted_once_its_table_is_made(ns, args, "chainwatch_bench", "chainwatch run")
        assert status == -signal.SIGTERM, (status, out)
        assert "chainwatch_bench" not in nft_tables(ns)
        assert proxies and not still_running(proxies), proxies


def children_of(pid):
    """PIDs whose parent is `pid`, with their command lines."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found[int(entry)] = f.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_a_bench_interrupted_stops_its_proxy_and_removes_its_directory(tmp_path, chainwatch_bin):
    """SIGTERM to the bench alone (a supervisor's or a CI runner's, not the terminal's Ctrl-C to the whole group)
    during a run through a proxy it started: the proxy is stopped by its PID, the bench's temporary directory (the
    bench CA's key is in it) removed, and the bench says so before it dies of the signal. Before, the proxy ran on
    under init, holding its listener and admin port, and the directory stayed (an operator review)."""
    proc = subprocess.Popen([BENCH, "handshake", "--start-proxy", chainwatch_bin, "--policy", "alert", "--tls", "1.3",
                             "-c", "1", "--duration", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    proxies, directory = [], None
    try:
        deadline = time.monotonic() + 20
        while not proxies and time.monotonic() < deadline and proc.poll() is None:
            children = children_of(proc.pid)
            proxies = [pid for pid, argv in children.items() if b"run" in argv]
            for argv in children.values():
                if b"--alert-log" in argv:
                    directory = os.path.dirname(argv[argv.index(b"--alert-log") + 1].decode())
            time.sleep(0.1)
        assert proxies and directory and os.path.isdir(directory), (proxies, directory)
        time.sleep(1.0)   # a run under way
        os.kill(proc.pid, signal.SIGTERM)   # the bench only
        _, err = proc.communicate(timeout=20)
    finally:
        stop(proc)
        for pid in proxies:
            if still_running([pid], seconds=0):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, err[-2000:])
    assert "interrupted: stopping what it started" in err, err[-2000:]
    assert not still_running(proxies, seconds=2), proxies
    assert not os.path.exists(directory), directory


def test_via_transparent_is_refused_against_a_running_proxy(tmp_path):
    code, _, output, _ = bench("handshake", "--proxy", "127.0.0.1:9", "--via", "transparent", "--count", "1", tmp_path=tmp_path)
    assert code == 2 and "transparent needs --start-proxy" in output, output


def test_corruption_is_detected_through_chainwatch(tmp_path, chainwatch_bin):
    code, report, output, _ = bench("bulk", "--start-proxy", chainwatch_bin, "--count", "1", "--size", "1M",
                                    "--fault-inject", "corrupt", tmp_path=tmp_path)
    assert code == 1 and "corrupted stream: byte at offset 524288" in output, output


def test_bulk_cut_off_by_the_duration_does_not_kill_the_bench_with_sigpipe(tmp_path, chainwatch_bin):
    """Bulk transfers cut off at the duration's end close their sockets while the bench's own upstream still writes
    into the proxy, which then closes that side: the next write got EPIPE, and SIGPIPE killed the bench silently,
    before its table (exit 141 from a shell, about one run in four; bench/README's commands then left their proxy
    running). The bench ignores SIGPIPE (seen in /proc while it runs), and repeated cut-off runs all exit 0."""
    port = free_port()
    proxy = subprocess.Popen([chainwatch_bin, "run", "--listen", f"127.0.0.1:{port}", "--admin", "off",
                              "--alert-log", str(tmp_path / "alerts.jsonl")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proxy)
        args = [BENCH, "bulk", "--proxy", f"127.0.0.1:{port}", "-c", "2", "--size", "8M", "--quiet"]
        watched = subprocess.Popen(args + ["--duration", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ignored, deadline = 0, time.monotonic() + 2
        while time.monotonic() < deadline and not ignored & (1 << (signal.SIGPIPE - 1)):
            try:
                with open(f"/proc/{watched.pid}/status") as f:
                    ignored = int(re.search(r"SigIgn:\s*([0-9a-f]+)", f.read()).group(1), 16)
            except (FileNotFoundError, AttributeError):
                break
            time.sleep(0.02)
        assert watched.wait(timeout=RUN_LIMIT) == 0
        assert ignored & (1 << (signal.SIGPIPE - 1)), f"SigIgn {ignored:x}: SIGPIPE not ignored"
        codes = [subprocess.run(args + ["--duration", "0.5"], capture_output=True, timeout=RUN_LIMIT).returncode
                 for _ in range(6)]
        assert codes == [0] * 6, codes
    finally:
        stop(proxy)


# The pictures and bench/README's commands.

def test_pictures_draw_one_metric_per_panel_and_a_png(tmp_path):
    """An idle run draws its memory per idle tunnel (it drew nothing before); a handshake run its latency on a log
    axis and conn/s and CPU per connection each in a panel of its own; the PNG is a real PNG of the same size."""
    assert CHAINWATCH, "set CHAINWATCH_BIN"
    idle_svg, idle_png = tmp_path / "idle.svg", tmp_path / "idle.png"
    code, report, output, _ = bench("idle", "--direct", "--start-proxy", CHAINWATCH, "-c", "20", "--duration", "1",
                                    "--svg", str(idle_svg), "--png", str(idle_png), tmp_path=tmp_path)
    assert code == 0, output
    text = idle_svg.read_text()
    assert "Proxy memory per idle tunnel (KiB)" in text, text
    per_tunnel = report["runs"][-1]["proxy"]["rssKiBPerIdleTunnel"]
    assert f"{per_tunnel:.1f} KiB" in text, (per_tunnel, text)
    png = idle_png.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:16]
    width = int.from_bytes(png[16:20], "big")
    assert f'width="{width}"' in text, (width, text[:200])

    hs_svg = tmp_path / "hs.svg"
    code, report, output, _ = bench("handshake", "--direct", "--start-proxy", CHAINWATCH, "--count", "40", "-c", "2",
                                    "--svg", str(hs_svg), tmp_path=tmp_path)
    assert code == 0, output
    text = hs_svg.read_text()
    titles = re.findall(r'font-size="14">([^<]*)</text>', text)
    assert titles == ["Session latency (connect to body read), ms by percentile (log scale)",
                      "Connections per second (conn/s)", "Proxy CPU per connection (µs)"], titles
    # Decade ticks on the latency axis: at least two powers of ten labelled.
    assert len(re.findall(r'text-anchor="end">(?:0\.0*1|1|10|100|1000)</text>', text)) >= 2, text


def test_png_without_rsvg_convert_is_a_clear_error(tmp_path):
    code, _, output, _ = bench("handshake", "--direct", "--count", "5", tmp_path=tmp_path)
    assert code == 0, output
    env = dict(os.environ, PATH=str(tmp_path))   # no rsvg-convert (and no env) on this PATH
    proc = subprocess.run([BENCH, "plot", str(tmp_path / "report.json"), "--png", str(tmp_path / "x.png")],
                          capture_output=True, text=True, timeout=RUN_LIMIT, env=env)
    assert proc.returncode == 2 and "rsvg-convert" in proc.stderr and "librsvg2-bin" in proc.stderr, proc.stderr


def test_bench_readme_commands_run_as_written_beside_another_chainwatch(tmp_path):
    """bench/README.md's first block, run with bash as written except: durations, sizes and client counts made
    small, the binaries' directory, the port, and no compare.sh, cold.sh, fairness.sh, spot-cost.sh, floor-costs.sh or
    cold-profile.sh (runs of their own, tested apart). Another
    chainwatch runs meanwhile (as on a machine where one is deployed): the commands must not pick it up."""
    assert CHAINWATCH, "set CHAINWATCH_BIN"
    from pathlib import Path
    from helpers import run_script
    readme = (Path(__file__).resolve().parents[2] / "bench" / "README.md").read_text()
    block = re.search(r"```\n(.*?)```", readme, re.S).group(1)
    bindir = os.path.dirname(CHAINWATCH)
    port = free_port()
    script = (block.replace("swift build -c release\n", "")
                   .replace(".build/release", bindir)
                   .replace("--duration 10", "--duration 1").replace("-c 2000", "-c 20").replace("--size 256M", "--size 8M")
                   .replace("3190", str(port)))
    script = "\n".join(l for l in script.splitlines() if not l.startswith(("bench/compare.sh", "bench/cold.sh", "bench/fairness.sh", "bench/spot-cost.sh",
                                                                          "bench/floor-costs.sh", "bench/cold-profile.sh")))
    assert "pidof" not in script and "$P" in script   # the PID of the proxy it started, whatever else runs
    other_port = free_port()
    other = subprocess.Popen([CHAINWATCH, "run", "--listen", f"127.0.0.1:{other_port}", "--admin", "off",
                              "--alert-log", str(tmp_path / "other.jsonl")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        returncode, out = run_script(script, tmp_path, timeout=180, flags="-ec")
    finally:
        stop(other)
    assert returncode == 0, out[-4000:]
    assert out.count("result: ok") >= 5, out[-4000:]
    for name in ["h.svg", "h.png", "all.svg", "all.png", "b.json", "i.json"]:
        assert (tmp_path / name).stat().st_size > 0, name
    assert (tmp_path / "all.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_measures_the_floor_relay_and_it_relays_correctly(tmp_path):
    """compare.sh builds bench/floor/floor-relay.c and measures it beside the direct runs: no session through it
    fails, and the bench verified its bytes (handshake and body, the 256 MiB download, cut off at 1 s if it must; idle
    tunnels pinged at both ends). And the relay answers what is not a numeric CONNECT with 400, and a refused upstream
    with 502."""
    assert BENCH and CHAINWATCH, "set CHAINWATCH_BENCH_BIN and CHAINWATCH_BIN"
    from pathlib import Path
    from helpers import run_script
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    script = (f"CHAINWATCH_BENCH_BIN={BENCH} CHAINWATCH_BIN={CHAINWATCH} {root}/bench/compare.sh --peers floor "
              f"--scenarios 'handshake bulk idle' --duration 1 --idle-tunnels 50 --out {out}")
    code, text = run_script(script, tmp_path, timeout=180)
    assert code == 0, text[-3000:]
    for scenario in ["handshake", "bulk", "idle"]:
        report = json.loads((out / f"{scenario}-floor.json").read_text())
        for run in report["runs"]:
            assert run["target"] == "floor" and run["ok"], run
            for kind in run["kinds"]:
                # A 256 MiB transfer (compare.sh's size) may be cut off by the 1 s duration on a slow machine (under
                # AddressSanitizer none completed): the bytes it got through still had to be verified.
                assert kind["failed"] == 0 and (kind["completed"] > 0 or kind["verifiedBytes"] > 0), kind
                assert kind["verifiedBytes"] > 0 or scenario == "idle", kind
    assert "floor: " in text and "x direct" in text, text[-2000:]

    relay = tmp_path / "floor-relay"
    subprocess.run(["cc", "-O2", "-o", str(relay), str(root / "bench" / "floor" / "floor-relay.c")], check=True, timeout=60)
    port, closed = free_port(), free_port()
    proc = subprocess.Popen([str(relay), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        for request, status in [(b"GET http://127.0.0.1/ HTTP/1.1\r\n\r\n", b"400"),
                                (b"CONNECT example.test:443 HTTP/1.1\r\n\r\n", b"400"),
                                (b"CONNECT 127.0.0.1:" + str(closed).encode() + b" HTTP/1.1\r\n\r\n", b"502"),
                                (b"X" * 9000, b"400")]:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(request)
                assert s.recv(100).startswith(b"HTTP/1.1 " + status), request[:40]
    finally:
        stop(proc)


def test_fresh_certificates_give_every_first_contact_a_chain_of_its_own(tmp_path, chainwatch_bin):
    """--fresh-certificates (issue 14's cold scenario): each fresh name gets its own leaf from the builtin upstream,
    valid under the bench's root (the direct client verifies it; chainwatch with the bench root as anchor finds
    nothing), and a different leaf per name (chainwatch flagging every tunnel shows each line's own leaf, serial and
    subject, matching the name offered)."""
    def run(policy):
        log = tmp_path / f"{policy}.jsonl"
        args = f"run --listen {{listen}} --admin off --alert-log {log} --policy {{policy}}"
        code, report, output, _ = bench("handshake", "--direct", "--start-proxy", chainwatch_bin, "--proxy-args", args,
                                        "--policy", policy, "--fresh-certificates", "--count", "24", "-c", "4",
                                        "--tls", "1.2,1.3", tmp_path=tmp_path)
        assert code == 0, output
        assert [r["kinds"][0]["completed"] for r in report["runs"]] == [24, 24, 24, 24], output
        return [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []

    assert run("alert") == [], "the minted chains validate under the bench root: nothing to report"
    lines = run("flagged")
    assert len(lines) == 48, len(lines)
    tls12 = [l for l in lines if l["tls"]["version"] == "1.2"]
    assert len(tls12) == 24
    for line in lines:
        name = line["tls"]["client"]["server_name"]
        assert name.endswith(".fresh.bench.test")
        assert line["tls"]["server"]["x509"]["alternative_names"] == [name], line["tls"]["server"]
        assert line["tls"]["server"]["subject"].startswith(f"CN={name},"), line["tls"]["server"]
    assert len({l["tls"]["server"]["hash"]["sha256"] for l in lines}) == 48, "one leaf per name"
    assert len({l["tls"]["server"]["x509"]["serial_number"] for l in lines}) == 48


def test_cold_script_compares_chainwatch_with_the_floor_on_first_contacts(tmp_path):
    """bench/cold.sh as documented, made short: both proxies measured beside a direct run, every session a first
    contact that succeeded, and the ratio printed per TLS version from those reports."""
    assert BENCH and CHAINWATCH, "set CHAINWATCH_BENCH_BIN and CHAINWATCH_BIN"
    from pathlib import Path
    from helpers import run_script
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "cold"
    code, text = run_script(f"CHAINWATCH_BENCH_BIN={BENCH} CHAINWATCH_BIN={CHAINWATCH} {root}/bench/cold.sh "
                            f"--repeat 1 --duration 0.5 --concurrency 2 --out {out}", tmp_path, timeout=180)
    assert code == 0, text[-3000:]
    for name in ["floor1", "chainwatch1"]:
        report = json.loads((out / f"{name}.json").read_text())
        assert report["ok"], name
        targets = {(run["target"], run["tls"]) for run in report["runs"]}
        assert {("direct", "1.2"), ("direct", "1.3")} <= targets and len(targets) == 4, targets
        for run in report["runs"]:
            assert all(kind["failed"] == 0 and kind["completed"] > 0 for kind in run["kinds"]), run["label"]
    for tls in ["1.2", "1.3"]:
        assert re.search(rf"TLS {re.escape(tls)}: floor \d+\.\d+ +chainwatch \d+\.\d+ +ratio \d+\.\d+", text), text


def test_cold_profile_sorts_a_cold_first_contacts_samples_into_its_parts(tmp_path):
    """bench/cold-profile.sh as documented, one short run: every part of the table printed, the shares adding up to
    the whole, the probe's and the validator's steps each seen (a cold TLS 1.3 session runs all of them), the kernel's
    share within each part's, and no chainwatch left running (perf stops the proxy it recorded)."""
    assert BENCH and CHAINWATCH, "set CHAINWATCH_BENCH_BIN and CHAINWATCH_BIN"
    from pathlib import Path
    from helpers import run_script
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "profile"
    # The leftover check runs in the script's own session (run_script kills what a session left when it returns) and
    # finds the run's processes, perf and the chainwatch it started, by a mark in the environment they inherit.
    mark = f"CHAINWATCH_TEST_MARK={os.getpid()}-{time.time_ns()}"
    code, text = run_script(f"env {mark} CHAINWATCH_BENCH_BIN={BENCH} CHAINWATCH_BIN={CHAINWATCH} "
                            f"{root}/bench/cold-profile.sh --duration 1 --out {out}; status=$?; sleep 1; "
                            f"echo left: $(grep -lasF {mark} /proc/[0-9]*/environ | wc -l); exit $status",
                            tmp_path, timeout=240)
    assert code == 0, text[-3000:]
    assert "left: 0" in text, text[-3000:]
    head = re.search(r"cold TLS 1\.3: (\d+) sessions, (\d+) samples outside start-up", text)
    assert head and int(head.group(1)) > 0 and int(head.group(2)) >= 100, text
    rows = dict((name.strip(), (float(share), float(kernel)))
                for name, share, kernel in re.findall(r"^(\S.*?)\s+(\d+\.\d)% +(\d+\.\d)%$", text, re.M))
    assert len(rows) == 13 and rows["all"][0] == 100.0, text   # eleven parts, "other" and "all"
    parts = {name: value for name, value in rows.items() if name != "all"}
    assert abs(sum(share for share, _ in parts.values()) - 100) <= 0.8, text
    assert abs(sum(kernel for _, kernel in parts.values()) - rows["all"][1]) <= 0.8, text
    assert rows["all"][1] > 0 and parts["event loop (epoll_wait, inbox)"][1] > 0, text   # kernel frames told apart
    for name in ["probe: ServerHello (key agreement, schedule)",
                 "probe: encrypted flight (Certificate, CertificateVerify, Finished)",
                 "validation: path (X509_verify_cert)", "validation: decoding, facts", "tunnel: accept"]:
        assert parts[name][0] > 0, (name, text)
    code, text = run_script(f"{root}/bench/cold-profile.sh --bogus", tmp_path, timeout=30)
    assert code == 2 and "usage:" in text, text


def test_floor_costs_script_times_each_required_operation_and_adds_them_up(tmp_path):
    """bench/floor-costs.sh as documented, one short repetition: each operation timed with a figure a real one can
    have (the validator's P-256 verification slower than OpenSSL's P-256 signing, which a misread `openssl speed` line
    would give), the floor relay measured in the same run, the floors printed are those of the figures printed, the
    medians of one repetition are its figures, and its temporary directory is removed."""
    assert BENCH, "set CHAINWATCH_BENCH_BIN"
    from pathlib import Path
    from helpers import run_script
    root = Path(__file__).resolve().parents[2]
    before = set(Path("/tmp").glob("chainwatch-floor-costs-*"))
    code, text = run_script(f"CHAINWATCH_BENCH_BIN={BENCH} {root}/bench/floor-costs.sh --repeat 1 --duration 1",
                            tmp_path, timeout=180)
    assert code == 0, text[-3000:]
    number = r"(\d+\.\d+)"
    rep = re.search(rf"repetition 1: key share {number}, agreement {number}, CertificateVerify {number}, leaf signature "
                    rf"{number}, leaf decoding {number} us \(provider decoders {number}\); floor {number} ms per connection: "
                    rf"{number} floors without the decoding, {number} with it", text)
    assert rep, text
    share, agree, verify, leaf, decode, provider, floor, without, with_decoding = map(float, rep.groups())
    assert 3 <= share < 10_000 and 10 <= agree < 10_000 and 10 <= verify < 10_000, rep.groups()
    assert 10 <= leaf < 10_000 and 3 <= decode < 10_000 and 0.005 <= floor < 10, rep.groups()
    # The built-in EC method decodes the leaf as chainwatch does; 3.0's provider decoders cost several times more.
    assert provider > 2 * decode, rep.groups()
    required = share + agree + verify + leaf
    assert abs(without - (1 + required / (floor * 1000))) <= 0.01, text
    assert abs(with_decoding - (1 + (required + decode) / (floor * 1000))) <= 0.01, text
    speed = subprocess.run(["openssl", "speed", "-mr", "-seconds", "1", "ecdsap256"], capture_output=True, text=True)
    signing = [1e6 / float(l.split(":")[3]) for l in speed.stdout.splitlines() if l.startswith("+F4:")]
    assert signing and leaf > signing[0], (leaf, signing, speed.stdout)
    medians = re.search(rf"X25519 key share {number}, X25519 agreement {number}, CertificateVerify {number}; the "
                        rf"validator \(OpenSSL 3\.0\): the leaf signature {number}, the leaf decoding {number} \(provider "
                        rf"decoders {number}\)", text)
    assert medians and [float(v) for v in medians.groups()] == [share, agree, verify, leaf, decode, provider], text
    total = re.search(r"the probe (\d+) \+ the leaf signature (\d+) = (\d+) us; with the leaf decoded once, (\d+) us",
                      text)
    assert total, text
    assert abs(int(total.group(3)) - required) <= 1 and abs(int(total.group(4)) - (required + decode)) <= 1, text
    assert re.search(r"floor relay \(measured\) \d+ us per connection", text), text
    assert set(Path("/tmp").glob("chainwatch-floor-costs-*")) <= before
    code, text = run_script(f"{root}/bench/floor-costs.sh --bogus", tmp_path, timeout=30)
    assert code == 2 and "usage:" in text, text


def test_costs_times_the_probe_crypto_only_on_a_signature_that_verifies(tmp_path):
    """chainwatch-bench costs on a P-256 leaf and a signature its key made: three figures; on other signed bytes it
    refuses to time (exit 1), since a failing check takes another path; --count 0 is a usage error."""
    assert BENCH, "set CHAINWATCH_BENCH_BIN"
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "leaf.key")
    openssl("req", "-new", "-x509", "-key", "leaf.key", "-subj", "/CN=costs.test", "-days", "2", "-outform", "DER",
            "-out", "leaf.der")
    (tmp_path / "signed").write_bytes(b" " * 64 + b"TLS 1.3, server CertificateVerify\0" + os.urandom(32))
    (tmp_path / "other").write_bytes(os.urandom(130))
    openssl("dgst", "-sha256", "-sign", "leaf.key", "-out", "signature", "signed")
    def costs(signed, *extra):
        return subprocess.run([BENCH, "costs", "--certificate", "leaf.der", "--signed", signed, "--signature",
                               "signature", "--count", "50", *extra], cwd=tmp_path, capture_output=True, text=True,
                              timeout=RUN_LIMIT)
    proc = costs("signed")
    assert proc.returncode == 0, proc.stderr
    figures = dict(line.split() for line in proc.stdout.splitlines())
    assert set(figures) == {"x25519-key-share", "x25519-agreement", "p256-certificate-verify"}, proc.stdout
    assert all(float(v) > 1 for v in figures.values()), figures
    proc = costs("other")
    assert proc.returncode == 1 and "does not verify" in proc.stderr and proc.stdout == "", (proc.stdout, proc.stderr)
    proc = costs("signed", "--count", "0")
    assert proc.returncode == 64 and "--count must be at least 1" in proc.stderr, proc.stderr


def test_fairness_script_measures_warm_sessions_beside_a_storm_on_one_loop(tmp_path):
    """bench/fairness.sh as documented, made short, with --compare (the same binary twice): each run's warm sessions
    (through the proxy and direct) all succeeded while the storm of first contacts ran, and the medians are printed."""
    assert BENCH and CHAINWATCH, "set CHAINWATCH_BENCH_BIN and CHAINWATCH_BIN"
    from pathlib import Path
    from helpers import run_script
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "fairness"
    code, text = run_script(f"CHAINWATCH_BENCH_BIN={BENCH} CHAINWATCH_BIN={CHAINWATCH} {root}/bench/fairness.sh "
                            f"--repeat 1 --duration 1 --rate 20 --compare {CHAINWATCH} --out {out}", tmp_path, timeout=120)
    assert code == 0, text[-3000:]
    for name in ["chainwatch1", "compare1"]:
        warm = json.loads((out / f"{name}-warm.json").read_text())
        assert warm["ok"] and {run["target"] for run in warm["runs"]} == {"direct", "proxy"}, name
        storm = json.loads((out / f"{name}-storm.json").read_text())
        assert storm["runs"][0]["kinds"][0]["completed"] > 0, name
        assert re.search(rf"{name[:-1]} median: warm p50 \d+\.\d+ ms, p99 \d+\.\d+ ms; 200 p50", text), text
    assert subprocess.run(["pgrep", "-f", str(out)], capture_output=True).stdout == b""   # every proxy stopped


def test_alert_storm_writes_one_line_per_flagged_first_contact_and_none_for_clean_ones(tmp_path, chainwatch_bin):
    """The alert storm: `--policy alert,flagged --fresh-certificates`, every session a chain never seen. Under flagged
    each completed session's tunnel wrote its own alert line (a fresh chain each time: nothing rendered earlier to
    reuse), counted in the proxy's alert log per run; under alert (the bench root anchors the rule) none did."""
    code, report, output, _ = bench("handshake", "--start-proxy", chainwatch_bin, "--policy", "alert,flagged",
                                    "--fresh-certificates", "--tls", "1.2,1.3", "--count", "60", "-c", "4",
                                    tmp_path=tmp_path)
    assert code == 0, output
    runs = {(run["policy"], run["tls"]): run for run in report["runs"]}
    assert set(runs) == {(p, t) for p in ["alert", "flagged"] for t in ["1.2", "1.3"]}, set(runs)
    for (policy, tls), run in runs.items():
        completed = sum(kind["completed"] for kind in run["kinds"])
        started = sum(kind["started"] for kind in run["kinds"])
        assert completed == 60, run["label"]
        if policy == "flagged":
            assert completed <= run["alertLines"] <= started, run
        else:
            assert run["alertLines"] == 0, run
    assert "alert lines chainwatch flagged TLS 1.3: 60 for 60 sessions completed" in output, output


def test_fresh_certificates_need_the_builtin_upstream(tmp_path):
    code, _, output, _ = bench("handshake", "--direct", "--start-upstream", "nginx", "--fresh-certificates",
                               "--count", "1", tmp_path=tmp_path)
    assert code == 2 and "--fresh-certificates needs the builtin upstream" in output, output
