"""Numeric options that become milliseconds or bounds: a value that is not a number, infinite, past its range or zero
is refused at start with a message naming the option (`nan` or `inf` once stopped `chainwatch run` and the bench
with SIGILL: "Double value cannot be converted to Int"; `--idle-timeout 0` closed every tunnel at its first pause,
`--max-connections 0` answered every client 503)."""
import subprocess

import pytest

from conftest import BIN
from helpers import free_port
from test_bench import BENCH


@pytest.mark.parametrize("option,value", [
    ("--probe-timeout", "nan"), ("--connect-timeout", "inf"), ("--request-timeout", "1e300"),
    ("--idle-timeout", "0"), ("--half-closed-timeout", "-1"), ("--grace", "inf"), ("--max-connections", "0"),
])
def test_run_refuses_a_value_it_cannot_use(option, value):
    proc = subprocess.run([BIN, "run", f"{option}={value}"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 64, (proc.returncode, proc.stderr)
    assert option in proc.stderr and "must be" in proc.stderr, proc.stderr


@pytest.mark.parametrize("option,value", [("--duration", "nan"), ("--duration", "inf"), ("--timeout", "0"),
                                          ("--grace", "nan"), ("--start-timeout", "1e300"), ("--rate", "inf")])
def test_the_bench_refuses_a_value_it_cannot_use(option, value):
    proc = subprocess.run([BENCH, "handshake", "--direct", f"{option}={value}"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert option in proc.stderr and "must be" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args,message", [
    (["handshake", "--direct", "--count", "50", "--json", "/nonexistent/report.json"], "--json /nonexistent/report.json: no folder /nonexistent"),
    (["handshake", "--direct", "--count", "50", "--svg", "/tmp"], "--svg /tmp: is a folder"),
    (["bulk", "--direct", "--count", "1", "--size", "0"], "--size must be more than 0 bytes for bulk"),
    (["plot", "/nonexistent/report.json"], "/nonexistent/report.json: "),
    # A --proxy-pid that is no process measured nothing, silently; --count was ignored by idle (5 s all the same).
    (["handshake", "--proxy", "127.0.0.1:9", "--proxy-pid", "999999999", "--count", "1"], "--proxy-pid 999999999: no such process"),
    (["handshake", "--direct", "--proxy-pid", "1", "--count", "1"], "--proxy-pid goes with --proxy"),
    (["idle", "--direct", "--count", "5"], "--count is not for idle"),
])
def test_the_bench_says_at_once_what_it_cannot_do(args, message):
    """A report file that cannot be written is said before the run (it was said after it, with the measurement lost
    and a raw NSError); a bulk run of 0 bytes is refused; a missing report to plot is named."""
    proc = subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert message in proc.stderr and "Error Domain" not in proc.stderr, proc.stderr
    assert "result:" not in proc.stdout, proc.stdout   # nothing was run


def test_run_refuses_options_that_would_do_nothing_or_the_wrong_thing(tmp_path, pki):
    """--socks-credentials without a SOCKS listener, and a --ca that is a server's own certificate (no CA), were
    accepted silently."""
    proc = subprocess.run([BIN, "run", "--admin", "off", "--socks-credentials", "/dev/null"], capture_output=True,
                          text=True, timeout=10)
    assert proc.returncode == 64 and "--socks-credentials needs a --socks listener" in proc.stderr, proc.stderr
    proc = subprocess.run([BIN, "run", "--listen", "127.0.0.1:1", "--admin", "off", "--ca", str(pki / "genuine.pem"),
                           "--alert-log", str(tmp_path / "a.jsonl")], capture_output=True, text=True, timeout=10)
    assert proc.returncode != 0 and "not a CA certificate" in proc.stderr and "--ca" in proc.stderr, proc.stderr


def test_run_refuses_one_file_for_both_logs(tmp_path):
    """--alert-log and --access-log naming one file (here through another path to it) mixed access lines into the
    findings a SIEM reads from the alert log."""
    log = tmp_path / "chainwatch.jsonl"
    proc = subprocess.run([BIN, "run", "--listen", "127.0.0.1:1", "--admin", "off", "--alert-log", str(log),
                           "--access-log", str(tmp_path / "." / "chainwatch.jsonl")], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 1 and "is the alert log's file: give it a file of its own" in proc.stderr, proc.stderr
    # Both on standard output: two writers on one pipe, whose writes over PIPE_BUF can interleave mid-line.
    proc = subprocess.run([BIN, "run", "--listen", f"127.0.0.1:{free_port()}", "--admin", "off", "--alert-log", "-",
                           "--access-log", "-"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 1 and "is the alert log's file (standard output)" in proc.stderr, proc.stderr

