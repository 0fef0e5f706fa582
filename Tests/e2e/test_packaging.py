"""Packaging and service management: `make install` with PREFIX and DESTDIR (binaries, manual pages, a systemd unit
with its paths filled in, the default policy kept when one is there, logrotate), the unit's sandbox as
`systemd-analyze security` rates it, and the sd_notify protocol a Type=notify unit relies on (readiness, watchdog
keep-alives, reloading, stopping), spoken to a socket of the test's own."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import BIN, ROOT, Proxy
from helpers import free_port


def make_install(destdir):
    """`make install` into `destdir`, with the commit the binary under test was built with (its `--version`): the
    install's build step then leaves that binary as it is. With another commit (a tree committed to since the build,
    or a binary built by plain `swift build`) it would relink it while other tests run it, which fails their starts
    with "Text file busy"."""
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=30).stdout
    commit = re.search(r"\(commit ([0-9A-Za-z-]+)\)", version)
    built = commit.group(1) if commit else ""   # none: a build without one
    return subprocess.run(["make", "-C", str(ROOT), "install", f"DESTDIR={destdir}", "PREFIX=/usr", f"CHAINWATCH_COMMIT={built}"],
                          capture_output=True, timeout=900)


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    stage = tmp_path_factory.mktemp("stage")
    r = make_install(stage)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return stage


def test_make_install_puts_every_part_in_place(staged):
    expected = {"usr/bin/chainwatch": 0o755, "usr/bin/chainwatch-bench": 0o755, "usr/share/man/man1/chainwatch.1": 0o644,
                "usr/share/man/man1/chainwatch-bench.1": 0o644, "usr/lib/systemd/system/chainwatch.service": 0o644,
                "etc/chainwatch/policy.yaml": 0o644, "etc/logrotate.d/chainwatch": 0o644,
                "usr/share/doc/chainwatch/policy-reference.md": 0o644, "usr/share/doc/chainwatch/README.md": 0o644}
    for path, mode in expected.items():
        assert (staged / path).is_file(), path
        assert (staged / path).stat().st_mode & 0o777 == mode, path
    version = subprocess.run([str(staged / "usr/bin/chainwatch"), "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.strip()
    unit = (staged / "usr/lib/systemd/system/chainwatch.service").read_text()
    assert "ExecStart=/usr/bin/chainwatch run " in unit and "--policy /etc/chainwatch/policy.yaml" in unit
    assert "@" not in unit.split("ExecStart=")[1].splitlines()[0], "a placeholder left in ExecStart"
    check = subprocess.run([str(staged / "usr/bin/chainwatch"), "policy", "check", str(staged / "etc/chainwatch/policy.yaml")],
                           capture_output=True)
    assert check.returncode == 0, check.stderr


def test_the_manual_pages_render_without_warnings_with_defaults_and_sections(staged):
    """Issue 27: the pages made by swift-argument-parser's plugin dropped every default `--help` shows, drew 11
    warnings from `man --warnings`, and had no FILES, SIGNALS, EXAMPLES or SEE ALSO."""
    env = {**os.environ, "MANPAGER": "cat", "MANWIDTH": "80"}
    for name in ("chainwatch", "chainwatch-bench"):
        page = subprocess.run(["man", "--warnings", "-l", str(staged / f"usr/share/man/man1/{name}.1")], capture_output=True,
                              text=True, env=env)
        assert page.returncode == 0 and page.stderr == "", (name, page.stderr)
        for section in ("NAME", "SYNOPSIS", "COMMANDS", "EXAMPLES", "SEE ALSO"):
            assert f"\n{section}\n" in page.stdout, (name, section)
        if name == "chainwatch":
            text = " ".join(page.stdout.split()).replace("- ", "-")   # lines joined, hyphenation off
            for needle in ("--listen", "--admin", "--access-log", "--half-closed-timeout", "chainwatch ctl", "\nFILES\n",
                           "\nSIGNALS\n", "(default: 127.0.0.1:3128)", "(default: 127.0.0.1:9128)", "(default: 10000)",
                           "policy-reference.md"):
                assert needle in (page.stdout if needle.startswith("\n") else text), needle


def test_a_second_install_keeps_the_operators_policy(staged):
    policy = staged / "etc/chainwatch/policy.yaml"
    policy.write_text(policy.read_text() + "\n# the operator's edit\n")
    r = make_install(staged)
    assert r.returncode == 0
    assert policy.read_text().endswith("# the operator's edit\n")


def test_systemd_rates_the_unit_ok(staged):
    """The shipped unit was rated 8.3 EXPOSED; sandboxed, it must rate OK (below 2.0) or better."""
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(staged / "usr/lib/systemd/system/chainwatch.service")],
                       capture_output=True, text=True)
    match = re.search(r"Overall exposure level for chainwatch.service: ([0-9.]+) (\w+)", r.stdout)
    assert match, r.stdout[-2000:] + r.stderr
    assert float(match.group(1)) < 2.0 and match.group(2) in ("OK", "SAFE"), match.group(0)


class NotifySocket:
    """A datagram socket standing in for systemd's $NOTIFY_SOCKET."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path if not path.startswith("@") else "\0" + path[1:])
        self.sock.settimeout(5)
        self.path = path

    def next(self):
        return self.sock.recv(4096).decode()

    def until(self, needle, timeout=5):
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            message = self.next()
            seen.append(message)
            if needle in message.split("\n"):
                return seen
        raise AssertionError(f"no {needle} in {seen}")


@pytest.mark.parametrize("abstract", [False, True])
def test_sd_notify_ready_watchdog_reloading_stopping(tmp_path, abstract):
    path = f"@chainwatch-test-{os.getpid()}-{free_port()}" if abstract else str(tmp_path / "notify.sock")
    notify = NotifySocket(path)
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\ndefaults:\n  action: alert\n")
    p = Proxy(["--policy", str(policy), "--admin", "off"], tmp_path, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "3000000"})
    try:
        first = notify.next()
        assert first.startswith("READY=1\n") and f"STATUS=listening on 127.0.0.1:{p.port}" in first
        assert f"MAINPID={p.pid}" in first
        started = time.monotonic()
        notify.until("WATCHDOG=1")
        notify.until("WATCHDOG=1")
        assert time.monotonic() - started < 4, "keep-alives come every second"
        p.proc.send_signal(signal.SIGHUP)
        seen = notify.until("RELOADING=1")
        assert any(m.startswith("READY=1") for m in notify.until("READY=1")), seen
        p.proc.send_signal(signal.SIGTERM)
        notify.until("STOPPING=1")
        assert p.proc.wait(10) == 0
    finally:
        p.stop()
        notify.sock.close()

