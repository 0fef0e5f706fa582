"""Shared fixtures for the end-to-end tests: the real chainwatch binary, real TLS servers, real clients.

Every server listens on 127.0.0.1 (or ::1); every process started here is stopped by its PID at teardown.
"""
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from helpers import PKI, free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("CHAINWATCH_BIN", str(ROOT / ".build/release/chainwatch"))


class Proxy:
    """A running chainwatch process."""

    def __init__(self, args, tmp, listen_host="127.0.0.1", max_files=None, env=None, max_file_bytes=None,
                 default_admin=False):
        self.port = free_port(listen_host)
        # No admin listener unless the test names one (or asks for the default, 127.0.0.1:9128): the suite runs on
        # several workers at once (pytest-xdist), and proxies sharing the default address would answer for each other.
        if not default_admin and not any(a == "--admin" or a.startswith("--admin=") for a in args):
            args = [*args, "--admin", "off"]
        self.host = listen_host
        self.log_path = pathlib.Path(tmp) / f"chainwatch-{self.port}.log"
        bracketed = f"[{listen_host}]" if ":" in listen_host else listen_host
        if "--alert-log" not in args:
            self.alert_log = pathlib.Path(tmp) / f"alerts-{self.port}.jsonl"
            args = [*args, "--alert-log", str(self.alert_log)]
        self.args = [BIN, "run", "--listen", f"{bracketed}:{self.port}", "--log-level", "info", *args]
        self.log = open(self.log_path, "wb")
        limit = None
        if max_files is not None or max_file_bytes is not None:
            import resource
            def limit():
                if max_files is not None:   # RLIMIT_NOFILE for the proxy alone, to run it out of descriptors
                    resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))
                if max_file_bytes is not None:   # RLIMIT_FSIZE: a file that fills up, a full disk for one process
                    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
        env = None if env is None else {**os.environ, **env}
        if max_file_bytes is not None and os.environ.get("CHAINWATCH_SANITIZER") == "thread":
            # ThreadSanitizer's runtime writes a marker file into $TMPDIR at start and maps it over the shadow of
            # read-only memory; under an RLIMIT_FSIZE below its size (about 230 KB here) the write is cut short and
            # the process dies of SIGBUS before main. With no usable $TMPDIR the runtime skips that mapping.
            env = {**(env or os.environ), "TMPDIR": str(pathlib.Path(tmp) / "no-tmpdir-under-tsan")}
        # The listen port was free when picked, but another worker's process may take it before this one binds (the
        # suite runs on several workers): then a fresh port, twice at most. Any other early exit fails with its output.
        for attempt in range(3):
            self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=limit, env=env)
            try:
                self._wait_until_listening()
                self._wait_for_admin()
                break
            except Exception as error:
                self.stop()
                output = self.output()
                if attempt < 2 and f"bind {bracketed}:{self.port} failed: Address already in use" in output:
                    old = self.port
                    self.port = free_port(listen_host)
                    self.args = [a.replace(f"{bracketed}:{old}", f"{bracketed}:{self.port}") if a == f"{bracketed}:{old}" else a
                                 for a in self.args]
                    self.log = open(self.log_path, "ab")
                    continue
                raise RuntimeError(f"{error}; chainwatch said: {output[-1500:]}") from error

    def _wait_for_admin(self, timeout=10.0):
        """The admin listener starts after the proxy port (on its own thread): when the test named one, wait until it
        accepts too, so a test's first admin request does not race it (it lost once under ThreadSanitizer)."""
        args = self.args
        values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--admin"]
        values += [a.split("=", 1)[1] for a in args if a.startswith("--admin=")]
        if not values or values[-1] == "off" or values[-1].endswith(":0"):
            return
        host, _, port = values[-1].rpartition(":")
        host = host.strip("[]")
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                return   # the test sees the exit (an admin address in use is a start-up error some tests expect)
            try:
                with socket.create_connection((host, int(port)), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"chainwatch's admin listener not up on {values[-1]}")
                time.sleep(0.02)

    def _wait_until_listening(self, timeout=10.0):
        """Connects until the proxy answers, then half-closes and waits for the proxy to close that connection, so
        it has left the proxy's count (it is accepted when its FIN arrives): a test that counts connections
        (--max-connections) starts from zero."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        bracketed = f"[{self.host}]" if ":" in self.host else self.host
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chainwatch exited with {self.proc.returncode} before listening on {self.port}")
            # Only the proxy's own word that it listens there counts: another worker's process that took the port
            # first would answer the connect below (seen in CI: the proxy had failed to bind, the test then talked to
            # a stranger).
            if f"listening on {bracketed}:{self.port}" not in self.output():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"chainwatch not listening on {self.host}:{self.port}")
                time.sleep(0.05)
                continue
            try:
                with socket.socket(family) as s:
                    s.settimeout(max(0.1, deadline - time.monotonic()))
                    s.connect((self.host, self.port))
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(4096):
                        pass
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"chainwatch not listening on {self.host}:{self.port}")
                time.sleep(0.05)

    @property
    def url(self):
        bracketed = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{bracketed}:{self.port}"

    @property
    def pid(self):
        return self.proc.pid

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_kib(self):
        for line in open(f"/proc/{self.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def output(self):
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def start_proxy(tmp_path):
    started = []

    def start(*args, listen_host="127.0.0.1", env=None, default_admin=False):
        p = Proxy(list(args), tmp_path, listen_host=listen_host, env=env, default_admin=default_admin)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    """Tests/pki/make-pki.sh's PKI, made once per pytest process (once per xdist worker) for every file. Nothing writes
    into it (tests write their own files under tmp_path). Defined here: a fixture a test file imports from another is
    made again for each file that imports it, which cost about 5 s in each of 24 files."""
    d = tmp_path_factory.mktemp("pki")
    subprocess.run(["bash", str(ROOT / "Tests/pki/make-pki.sh"), str(d)], check=True, capture_output=True)
    return PKI(d)


@pytest.fixture(scope="session")
def session_tmp():
    with tempfile.TemporaryDirectory(prefix="chainwatch-e2e-") as d:
        yield pathlib.Path(d)
