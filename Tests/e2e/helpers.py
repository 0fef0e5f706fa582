"""Small helpers for the end-to-end tests: ports, raw proxy clients, local servers, the test PKI, alert logs."""
import collections
import contextlib
import csv
import hashlib
import json
import os
import pathlib
import random
import re
import socket
import shutil
import socketserver
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _ephemeral_low():
    try:
        return int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_EPHEMERAL_LOW = _ephemeral_low()
_handed_out = collections.deque(maxlen=4096)
_port_draws = random.Random()   # its own generator: the tests' draws (interceptors forging at random) stay theirs


def free_port(host="127.0.0.1"):
    """A port that is free now, for a process the test starts to bind soon after. Picked below the kernel's ephemeral
    range, at random: a port the kernel handed out (bind to port 0) is in that range, where every outgoing
    connection of every worker also takes its local port, and one of those took a proxy's admin port between the
    pick and the bind (CI). Never the same port twice in one worker while it is among the last 4 096 handed out."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low, high = 10000, _EPHEMERAL_LOW - 1
    for _ in range(200 if high - low > 1000 else 0):
        port = _port_draws.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket(family) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _handed_out.append(port)
        return port
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_port(host, port, proc=None, timeout=10.0):
    deadline = time.monotonic() + timeout
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.socket(family) as s:
                s.settimeout(0.5)
                s.connect((host, port))
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port}")


def run_script(script, cwd, timeout, flags="-c"):
    """Runs a shell script with bash in a session of its own; every process it started is killed afterwards, whatever
    happened (a README's commands stop their processes by PID themselves: this is for a failure half-way). Returns
    (exit status, output text); a script still running after `timeout` seconds is killed and its status is None, with
    its output so far and the processes its session still had. The output goes to a file and the wait is for bash
    itself: a process the script left behind (a proxy started with `&` whose `kill` a failed command skipped) must
    not hold the result back until the timeout, as a pipe it inherited did."""
    import signal
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(["bash", flags, script], cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        status = None
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            ps = subprocess.run(["ps", "-eo", "pid,ppid,sid,etimes,stat,args"], capture_output=True, text=True).stdout
            young = [row for row in ps.splitlines()[1:] if int(row.split()[3]) <= timeout + 5]   # started meanwhile
            note = ("\n[timed out after %d s; processes started meanwhile (pid ppid sid age stat args):]\n%s"
                    % (timeout, "\n".join(young)))
        else:
            note = ""
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        log.seek(0)
        return status, log.read().decode(errors="replace") + note


def read_head(sock, limit=65536):
    """Reads an HTTP response head from a socket; returns (status, head_text, extra_bytes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
        assert len(data) < limit
    head, _, rest = data.partition(b"\r\n\r\n")
    text = head.decode("latin-1")
    status = int(text.split(" ", 2)[1]) if text.startswith("HTTP/") else 0
    return status, text, rest


def recv_until_closed(sock, data=b""):
    """Reads until the peer closes; returns `data` and everything read."""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def read_response(sock):
    """Reads a whole Connection: close response; returns (status, head, body)."""
    status, head, body = read_head(sock)
    return status, head, recv_until_closed(sock, body)


def connect_via(proxy_port, target, proxy_host="127.0.0.1", timeout=10, early=False, receive_buffer=None):
    """Opens a CONNECT tunnel; returns (socket, status, head), plus the upstream's first bytes if `early`
    (a server that speaks first may already have sent some with the proxy's answer). `receive_buffer`: SO_RCVBUF,
    set before the connect (a small window)."""
    family = socket.AF_INET6 if ":" in proxy_host else socket.AF_INET
    s = socket.socket(family)
    if receive_buffer is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    s.settimeout(timeout)
    s.connect((proxy_host, proxy_port))
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    status, head, rest = read_head(s)
    if early:
        return s, status, head, rest
    assert rest == b"", "proxy sent bytes after its CONNECT answer"
    return s, status, head


def raw_request(proxy_port, data, proxy_host="127.0.0.1", timeout=10):
    """Sends raw bytes to the proxy and reads its whole answer."""
    with socket.create_connection((proxy_host, proxy_port), timeout=timeout) as s:
        s.sendall(data)
        return read_response(s)


class TCPServer:
    """A threaded plain TCP server on loopback running `handler(conn)` per connection."""

    def __init__(self, handler, host="127.0.0.1", backlog=256):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.handler = handler
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            self.handler(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stopped = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def echo_handler(conn):
    """Echoes every byte; half-closes after the client's EOF."""
    while True:
        data = conn.recv(262144)
        if not data:
            conn.shutdown(socket.SHUT_WR)
            return
        conn.sendall(data)


def recv_exactly(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise EOFError(f"got {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


class BlobHTTPHandler(BaseHTTPRequestHandler):
    """GET /blob → the server's blob; POST/PUT /sha256 → hex SHA-256 of the body; GET /echo-headers → request headers."""
    protocol_version = "HTTP/1.1"
    blob = b""

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/blob":
            body = self.server.blob
        elif self.path == "/echo-headers":
            body = str(self.headers).encode()
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello ", b"chunked ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        else:
            body = b"hello from upstream\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _digest_body(self):
        h = hashlib.sha256()
        total = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data = self.rfile.read(size)
                h.update(data)
                total += len(data)
                self.rfile.readline()
        else:
            remaining = int(self.headers.get("Content-Length", "0"))
            while remaining:
                data = self.rfile.read(min(remaining, 1 << 20))
                h.update(data)
                total += len(data)
                remaining -= len(data)
        body = f"{h.hexdigest()} {total}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = _digest_body
    do_PUT = _digest_body


class HTTPServer:
    """A threaded HTTP (or HTTPS with `certfile`/`keyfile`) server on loopback."""

    def __init__(self, blob=b"", certfile=None, keyfile=None, host="127.0.0.1", tls=None, more_certs=(), sites=None):
        """`sites`: {server name: (fullchain, key)}, served to a hello naming it (a server with many sites); any
        other hello, one without SNI included, gets `certfile`."""
        self.server = ThreadingHTTPServer((host, 0), BlobHTTPHandler)
        self.server.daemon_threads = True
        self.server.blob = blob
        if certfile:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile, keyfile)
            # One certificate per key type (RSA, ECDSA): OpenSSL picks by the client's signature algorithms.
            for more_cert, more_key in more_certs:
                ctx.load_cert_chain(str(more_cert), str(more_key))
            if tls:
                version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[tls]
                ctx.minimum_version = ctx.maximum_version = version
            if sites:
                named = {}
                for name, (site_cert, site_key) in sites.items():
                    site = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    site.load_cert_chain(str(site_cert), str(site_key))
                    if tls:
                        site.minimum_version = site.maximum_version = version
                    named[name] = site

                def pick(sock, server_name, _):
                    if server_name in named:
                        sock.context = named[server_name]
                ctx.sni_callback = pick
            # The handshake runs in each connection's own thread, not in accept(): one client whose handshake
            # is held (a blocking proxy waiting for its verdict) must not stop the server accepting others.
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class OpenSSLServer:
    """`openssl s_server -www` on loopback with a given certificate chain and TLS version; stopped by PID.
    It serves one connection at a time. Without `-www` it ends at the end of its standard input: `keep_stdin` keeps
    a pipe open until `close`."""

    def __init__(self, cert, key, chain=None, tls="1.3", www=True, extra=(), keep_stdin=False):
        self.port = free_port()
        args = ["openssl", "s_server", "-accept", f"127.0.0.1:{self.port}", "-cert", str(cert), "-key", str(key),
                "-quiet", "-naccept", "1000000"]
        if chain:
            args += ["-cert_chain", str(chain)]
        if tls:
            args += [f"-tls{tls.replace('.', '_')}"]
        if www:
            args += ["-www"]
        args += list(extra)
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port("127.0.0.1", self.port, proc=self.proc)

    def close(self):
        if self.proc.stdin:
            self.proc.stdin.close()
        stop_process(self.proc)


def stop_process(proc, timeout=5):
    """Stops a process this test started, by its PID: SIGTERM, then SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_chain(directory, name="localhost"):
    """A root → intermediate → leaf chain made with the openssl CLI; returns paths (leaf, key, chain, root)."""
    d = str(directory)
    def run(*args):
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("openssl", "req", "-x509", *ec, "-keyout", f"{d}/root.key", "-out", f"{d}/root.pem", "-days", "3650",
        "-subj", "/CN=e2e Root", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", *ec, "-keyout", f"{d}/int.key", "-out", f"{d}/int.csr", "-subj", "/CN=e2e Intermediate")
    with open(f"{d}/int.ext", "w") as f:
        f.write("basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n")
    run("openssl", "x509", "-req", "-in", f"{d}/int.csr", "-CA", f"{d}/root.pem", "-CAkey", f"{d}/root.key",
        "-CAcreateserial", "-out", f"{d}/int.pem", "-days", "3650", "-extfile", f"{d}/int.ext")
    run("openssl", "req", *ec, "-keyout", f"{d}/leaf.key", "-out", f"{d}/leaf.csr", "-subj", f"/CN={name}")
    with open(f"{d}/leaf.ext", "w") as f:
        f.write(f"basicConstraints=CA:FALSE\nsubjectAltName=DNS:{name},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", f"{d}/leaf.csr", "-CA", f"{d}/int.pem", "-CAkey", f"{d}/int.key",
        "-CAcreateserial", "-out", f"{d}/leaf.pem", "-days", "3650", "-extfile", f"{d}/leaf.ext")
    with open(f"{d}/fullchain.pem", "w") as f:
        f.write(open(f"{d}/leaf.pem").read() + open(f"{d}/int.pem").read())
    return f"{d}/leaf.pem", f"{d}/leaf.key", f"{d}/int.pem", f"{d}/root.pem"


class PKI:
    """The test PKI made by Tests/pki/make-pki.sh: its directory (`pki / "genuine.pem"`) and its fingerprints as
    the openssl CLI computed them (`pki.fps["genuine-root"]["sha256"]`, uppercase hex)."""

    def __init__(self, directory):
        self.dir = directory
        self.fps = {}
        for line in (directory / "fingerprints.tsv").read_text().splitlines()[1:]:
            name, sha, spki, *_ = line.split("\t")
            self.fps[name] = {"sha256": sha, "spki": spki}

    def __truediv__(self, name):
        return self.dir / name

    def __str__(self):
        return str(self.dir)


def colon_hex(hexdigest):
    """`AB:CD:…`, the pin form of a hex fingerprint."""
    return ":".join(hexdigest[i:i + 2] for i in range(0, len(hexdigest), 2))


ECS_FIELDS = pathlib.Path(__file__).resolve().parent.parent / "ecs" / "fields.csv"
_ecs = None


def ecs_fields():
    """Field name -> (type, normalization) of the ECS release the lines follow (Tests/ecs/README.md)."""
    global _ecs
    if _ecs is None:
        with open(ECS_FIELDS, newline="") as f:
            _ecs = {r["Field"]: (r["Type"], r["Normalization"]) for r in csv.DictReader(f)}
    return _ecs


def _flatten(value, prefix=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flatten(inner, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, value


def ecs_problems(line):
    """What in one alert line is not ECS: a field outside `chainwatch.*` that the reference lacks, or a value of
    another type than the reference gives it (arrays only where it normalizes to array). Empty when it conforms."""
    problems = []
    fields = ecs_fields()
    for name, value in _flatten(line):
        if name.startswith("chainwatch."):
            continue
        if name not in fields:
            problems.append(f"{name}: not an ECS field")
            continue
        kind, normalization = fields[name]
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and "array" not in normalization:
            problems.append(f"{name}: an array, ECS has one value")
        for v in values:
            ok = {"keyword": isinstance(v, str), "constant_keyword": isinstance(v, str), "wildcard": isinstance(v, str),
                  "match_only_text": isinstance(v, str), "text": isinstance(v, str), "ip": isinstance(v, str),
                  "date": isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", v) is not None,
                  "long": isinstance(v, int) and not isinstance(v, bool), "boolean": isinstance(v, bool),
                  }.get(kind)
            if not ok:
                problems.append(f"{name}: {v!r} is not ECS type {kind}")
    if line.get("ecs", {}).get("version") != "9.4.0":
        problems.append(f"ecs.version: {line.get('ecs', {}).get('version')!r}, the reference copy is 9.4.0")
    return problems


def read_alert_lines(alert_log, port=None):
    """The alert log's lines as JSON objects, those about upstream `port` only when given. Every line read is
    checked against the ECS field reference: a line that is not ECS fails the test that reads it. Only whole lines
    (ended by a newline) are read, as `tail -f` shows them: a line being written as the test reads is left for the
    next read (seen once in CI: a read in the middle of a line, which failed as JSON)."""
    if not os.path.exists(alert_log):
        return []
    text = open(alert_log).read()
    lines = [json.loads(raw) for raw in text[:text.rfind("\n") + 1].splitlines() if raw.strip()]
    for line in lines:
        problems = ecs_problems(line)
        assert not problems, f"alert line is not ECS {line.get('ecs', {}).get('version')}: {problems}: {line}"
    return [l for l in lines if port is None or l.get("destination", {}).get("port") == port]


def wait_alert_lines(alert_log, port, count=1, timeout=3.0):
    """Polls the alert log (bounded) until it holds `count` lines about `port`; returns what it holds then."""
    deadline = time.monotonic() + timeout
    while True:
        lines = read_alert_lines(alert_log, port)
        if len(lines) >= count or time.monotonic() >= deadline:
            return lines
        time.sleep(0.05)


def curl_genuine(proxy, port, root, tls):
    """curl through `proxy` to https://genuine.test:`port`/ over exactly TLS `tls` ("1.2", "1.3"), trusting `root`."""
    return subprocess.run(["curl", "-sS", "--max-time", "8", "--tls-max", tls, "--tlsv" + tls, "--cacert", str(root),
                           "-x", proxy.url, f"https://genuine.test:{port}/"], capture_output=True, timeout=15)


def assert_no_alert_lines(proxy, port, settle=0.5):
    """After a moment for the alert writer: no line about upstream `port`."""
    time.sleep(settle)
    lines = read_alert_lines(proxy.alert_log, port)
    assert lines == [], lines


def start_own_anchor_proxy(start_proxy, tmp_path, pki, action, probe_timeout=3, extra=()):
    """A proxy whose every host gets `action` and trusts only the test PKI's genuine root (an anchor the operator
    names: quiet), genuine.test resolving to 127.0.0.1; `extra`: more `chainwatch run` arguments."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 genuine.test\n")
    policy = tmp_path / f"policy-{action}.yaml"
    policy.write_text(f"version: 1\ndefaults:\n  action: {action}\n  anchors: [{pki}/genuine-root.pem]\nrules: []\n")
    return start_proxy("--policy", str(policy), "--hosts", str(hosts), "--probe-timeout", str(probe_timeout),
                       "--grace", "1", *extra)


def block_everything(directory, name):
    """A hosts file mapping `name` to 127.0.0.1 and a policy blocking every host on the system roots: the setting of
    tests that aim a hostile server at the proxy under block. Returns (hosts, policy)."""
    hosts = directory / "hosts"
    hosts.write_text(f"127.0.0.1 {name}\n")
    policy = directory / "block.yaml"
    policy.write_text("version: 1\ndefaults:\n  action: block\n  anchors: [system]\nrules: []\n")
    return hosts, policy


@contextlib.contextmanager
def namespace_of_its_own(prefix):
    """A network namespace the test makes (loopback up) and deletes, for a command that adds nftables rules of its
    own; a skip with the reason on a machine that cannot (not root, no nft, no namespaces). CI runs as root with
    nftables (make test-deps)."""
    import pytest
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.skip("needs root and nftables (make test-deps installs nftables)")
    ns = f"{prefix}{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", ns], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"this machine cannot make network namespaces: {made.stderr.decode(errors='replace').strip()}")
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True, timeout=10)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def nft_tables(ns):
    """`nft list tables` in the namespace."""
    return subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "tables"], capture_output=True, text=True, timeout=10).stdout


def interrupted_once_its_table_is_made(ns, args, table, child_pattern):
    """Runs `args` in the namespace, waits (30 s at most) until nftables lists `table`, notes its children matching
    `child_pattern`, sends it SIGTERM. Returns (status, output, those children's PIDs)."""
    import signal
    proc = subprocess.Popen(["ip", "netns", "exec", ns, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and table not in nft_tables(ns):
            time.sleep(0.1)
        assert table in nft_tables(ns), f"{args[0]} never made its table {table}"
        # `ip netns exec` execs the command in place: proc.pid is the command's own PID.
        children = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", child_pattern], capture_output=True, text=True).stdout.split()
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        return proc.returncode, out, children
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def still_running(pids, seconds=12):
    """The PIDs still running (not exited, not zombies) after waiting up to `seconds` for them to end."""
    def alive():
        return [p for p in pids if os.path.exists(f"/proc/{p}") and "zombie" not in open(f"/proc/{p}/status").read()]
    deadline = time.monotonic() + seconds
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive()
