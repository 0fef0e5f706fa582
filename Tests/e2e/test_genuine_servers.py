"""No false alarm for any stack: every client of test_probe_is_the_client's CLIENTS (Debian's headless chromium; Chrome,
Edge, Firefox, Safari macOS and iOS through curl_cffi; curl, Python `ssl`, `openssl s_client`, `gnutls-cli`) gets its
page through chainwatch under block, with no alert line, from every kind of genuine TLS 1.3 server, and again on a
second fetch judged against the cached probe (record by record).

Servers (all on loopback, all presenting the genuine chain of make-pki.sh, stopped by PID or closed at teardown):

1. nginx (Debian nginx-light) with `http2`, so the browsers' ALPN takes h2; GET /blob answers PAGE.
2. tlslite-ng (PyPI), a TLS 1.3 server that compresses its Certificate (RFC 8879) with the client's first offered
   algorithm it supports (zlib, brotli, zstd); it records what it sent, and the test fails if a browser's handshake
   (the probe's or the tunnel's) went uncompressed.
3. `openssl s_server -groups P-384`: no client sends a P-384 key share, so every handshake takes a HelloRetryRequest;
   the server's `-trace` output shows the HRR (its ServerHello random is the RFC 8446 HRR constant), checked per fetch.
4. `openssl s_server` with an ECDSA leaf (`-cert`) and an RSA leaf (`-dcert`), same subject and intermediate.
5. `openssl s_server` as it comes: one connection at a time (under block the probe and the
   tunnel go together; when the server takes the tunnel's first, the tunnel gives it up for the probe and comes again).

The s_server servers answer their `-www` status page; nginx serves /blob as text/plain (chromium --dump-dom never
returns on a download). A client that fails against a server directly (without the proxy) would be a client/server
incompatibility, not chainwatch's, to exclude with its reason: no pair does, none is excluded.

Run alone: make e2e ARGS="-k genuine_servers".
"""
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from helpers import OpenSSLServer, free_port, read_alert_lines, stop_process, wait_for_port
from test_probe_is_the_client import CLIENTS
from test_tls13_adversary import PAGE, closing, rsa_leaf, start  # noqa: F401 (fixtures)
from test_tls13_adversary import STATUS_PAGE as ADVERSARY_STATUS_PAGE, curl, expect_caught, s_server

# The `-www` status page of s_server begins with its command line (STATUS_PAGE of test_tls13_adversary, "<HTML><BODY",
# is not what chromium --dump-dom gives back: its DOM adds a <head>).
STATUS_PAGE = b"s_server -accept 127.0.0.1:"
BROWSERS = {"chromium", "chrome", "edge", "firefox", "safari", "safari_ios"}
# The HelloRetryRequest's ServerHello.random (RFC 8446 4.1.3) as `openssl s_server -trace` prints it.
HRR_RANDOM = b"random_bytes (len=28): E59A6111BE1D8C021E65B891C2A211167ABB8C5E079E09E2C8A8339C"


def fetch_twice(start_proxy, tmp_path, pki, client, port, page, after_each=None):
    """Under block: first contact (probe, then tunnel), then a second fetch against the cached probe. Each gets
    `page` and leaves no alert line about `port`. `after_each(fetch)`: a server-side check after each fetch."""
    proxy = start(start_proxy, tmp_path, pki, "block")
    for fetch in ("first contact", "against the cached probe"):
        ran = CLIENTS[client](proxy, port)
        if page not in ran.stdout:
            time.sleep(0.3)
            pytest.fail(f"{client}, {fetch}: no page through a genuine server; alert lines "
                        f"{summary(read_alert_lines(proxy.alert_log, port))}; client {ran}; proxy log:\n{proxy.output()}")
        time.sleep(0.5)
        lines = read_alert_lines(proxy.alert_log, port)
        assert lines == [], (f"{client}, {fetch}: alert line(s) about a genuine server: {summary(lines)}; "
                             f"proxy log:\n{proxy.output()}")
        if after_each:
            after_each(fetch)
    return proxy


def summary(lines):
    return [(l["event"]["action"], l["event"]["reason"], l.get("chainwatch", {}).get("detail")) for l in lines]


# 1. nginx with HTTP/2.

class Nginx:
    """nginx on 127.0.0.1 (TLS 1.3 only, http2), its own prefix directory, stopped by its master's PID."""

    def __init__(self, directory, fullchain, key, page):
        self.port = free_port()
        self.dir = directory
        (directory / "html").mkdir(parents=True)
        (directory / "html" / "blob").write_bytes(page)
        user = "user root;\n" if os.geteuid() == 0 else ""   # workers read html/ under pytest's 0700 tmp
        (directory / "nginx.conf").write_text(f"""{user}daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {directory}/access.log;
    client_body_temp_path {directory}/body; proxy_temp_path {directory}/proxy; fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi; scgi_temp_path {directory}/scgi;
    server {{
        listen 127.0.0.1:{self.port} ssl http2;
        server_name genuine.test;
        ssl_certificate {fullchain};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.3;
        root {directory}/html;
        default_type text/plain;   # not a download: chromium --dump-dom waits forever on one
    }}
}}
""")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-c", str(directory / "nginx.conf"), "-p", str(directory),
                                      "-e", str(directory / "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port("127.0.0.1", self.port, proc=self.proc)

    def access_log(self):
        path = self.dir / "access.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self):
        stop_process(self.proc)


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_nginx_http2(start_proxy, tmp_path, pki, closing, client):
    server = closing(Nginx(tmp_path / "nginx", pki / "genuine.fullchain.pem", pki / "genuine.key", PAGE))

    def took_h2_if_browser(fetch):
        # The browsers offer h2 first: nginx's access log shows the request line's protocol.
        if client in BROWSERS:
            requests = [l for l in server.access_log().splitlines() if "/blob" in l]
            assert requests and "HTTP/2.0" in requests[-1], f"{client}, {fetch}: not HTTP/2: {requests}"

    fetch_twice(start_proxy, tmp_path, pki, client, server.port, PAGE, took_h2_if_browser)


# 2. Certificate compression (RFC 8879), tlslite-ng.

class CompressingServer:
    """A TLS 1.3 HTTPS server of tlslite-ng on 127.0.0.1 (a thread per connection) that compresses the Certificate
    with the first algorithm of the client's compress_certificate it supports (zlib, brotli, zstd); `sent` lists,
    per connection that sent a hello, the algorithm used (None: the Certificate went uncompressed, or was never
    sent)."""

    def __init__(self, fullchain, key, page):
        # Imported here, not skipped when missing: make test-deps installs tlslite-ng, brotli and zstandard.
        from tlslite import HandshakeSettings, X509CertChain, parsePEMKey
        self.chain = X509CertChain()
        self.chain.parsePemList(open(fullchain).read())
        self.key = parsePEMKey(open(key).read(), private=True)
        self.settings = HandshakeSettings()
        self.settings.minVersion = self.settings.maxVersion = (3, 4)
        self.settings.certificate_compression_send = ["zlib", "brotli", "zstd"]
        self.page = page
        self.sent, self.errors = [], []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, sock):
        from tlslite import TLSConnection
        sock.settimeout(10)
        try:
            hello = sock.recv(1, socket.MSG_PEEK)
        except OSError:
            hello = b""
        if not hello:   # closed before a hello (chainwatch opens the tunnel's connection early): not a handshake
            sock.close()
            return
        tls = TLSConnection(sock)
        try:
            tls.handshakeServer(certChain=self.chain, privateKey=self.key, settings=self.settings,
                                alpn=[bytearray(b"http/1.1")])
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = tls.read(max=4096)
                if not chunk:
                    return
                request += bytes(chunk)
            tls.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(self.page), self.page))
            tls.close()
        except Exception as e:   # a probe the proxy closes, a client that leaves: kept for the failure message
            with self.lock:
                self.errors.append(repr(e))
        finally:
            # Set when the Certificate message is made (None before, and when it went uncompressed); kept for every
            # connection, a probe's too (chainwatch's probe may close before its own Finished).
            with self.lock:
                self.sent.append(tls.server_cert_compression_algo)
            sock.close()

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_certificate_compressing_server(start_proxy, tmp_path, pki, closing, client):
    server = closing(CompressingServer(pki / "genuine.fullchain.pem", pki / "genuine.key", PAGE))
    handshakes = []

    def compressed_for_browsers(fetch):
        time.sleep(0.2)   # the connection's thread records it as it ends
        with server.lock:
            new = server.sent[len(handshakes):]
        handshakes.extend(new)
        # First contact: the probe's and the tunnel's handshakes; then the tunnel's. More may come: chromium's own
        # connections (/favicon.ico), a fresh probe when a flight differed from the probe's, a spot check.
        expected = 2 if fetch == "first contact" else 1
        assert len(new) >= expected, f"{client}, {fetch}: {len(new)} handshakes, expected {expected}; {server.errors}"
        if client in BROWSERS:
            assert None not in new, f"{client}, {fetch}: the Certificate went uncompressed: {new}"

    fetch_twice(start_proxy, tmp_path, pki, client, server.port, PAGE, compressed_for_browsers)


# 3. HelloRetryRequest: the server's only group is P-384, which no client sends a key share for.

class TracingSServer(OpenSSLServer):
    """`openssl s_server -tls1_3 -www -trace` whose output goes to a file (OpenSSLServer discards it)."""

    def __init__(self, directory, cert, key, chain, extra=()):
        self.port = free_port()
        self.trace = directory / f"s_server-{self.port}.trace"
        self.out = open(self.trace, "wb")
        self.proc = subprocess.Popen(
            ["openssl", "s_server", "-accept", f"127.0.0.1:{self.port}", "-cert", str(cert), "-key", str(key),
             "-cert_chain", str(chain), "-tls1_3", "-www", "-naccept", "1000000", "-trace", *extra],
            stdin=subprocess.DEVNULL, stdout=self.out, stderr=subprocess.STDOUT)
        wait_for_port("127.0.0.1", self.port, proc=self.proc)

    def hello_retry_requests(self):
        self.out.flush()
        return self.trace.read_bytes().count(HRR_RANDOM)

    def close(self):
        super().close()
        self.out.close()


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_hello_retry_request_server(start_proxy, tmp_path, pki, closing, client):
    server = closing(TracingSServer(tmp_path, pki / "genuine.pem", pki / "genuine.key", pki / "genuine.chain.pem",
                                    extra=["-groups", "P-384"]))
    seen = [0]

    def took_hrr(fetch):
        time.sleep(0.2)   # s_server writes its trace as it goes
        count = server.hello_retry_requests()
        assert count > seen[0], f"{client}, {fetch}: no HelloRetryRequest in the server's trace"
        seen[0] = count

    fetch_twice(start_proxy, tmp_path, pki, client, server.port, STATUS_PAGE, took_hrr)


# One client of each signature_algorithms family (BoringSSL's Chrome, NSS's Firefox, Safari's, OpenSSL's curl): the
# server picks its certificate by that list, and nothing else of the hello matters to these two servers. (The whole
# matrix, all clients against all five servers, took two minutes of `make test`; it passed.)
FAMILIES = ["chrome", "curl", "firefox", "safari"]


# 4. RSA and ECDSA leaves on one server.

@pytest.mark.parametrize("client", FAMILIES)
def test_rsa_and_ecdsa_server(start_proxy, tmp_path, pki, rsa_leaf, closing, client):
    rsa_cert, rsa_key, _ = rsa_leaf
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls="1.3",
                                   extra=["-dcert", rsa_cert, "-dkey", rsa_key, "-dcert_chain", pki / "genuine.chain.pem"]))
    fetch_twice(start_proxy, tmp_path, pki, client, server.port, STATUS_PAGE)


# 5. One connection at a time.

@pytest.mark.parametrize("client", FAMILIES)
def test_one_connection_at_a_time_server(start_proxy, tmp_path, pki, closing, client):
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls="1.3"))
    fetch_twice(start_proxy, tmp_path, pki, client, server.port, STATUS_PAGE)


# 6. Groups swift-crypto does not have. A server that accepts only ffdhe2048 or X448 asks every OpenSSL client (which
# offers both, with an X25519 key share only) to retry with it; the probe performs them with OpenSSL's libcrypto
# (`KeyAgreement`). Before, it could not: under block every client was refused (`probe_failed`), under alert each
# connection wrote a line (an adversarial review, 2026-11-28). Browsers offer neither: they fail against such a server
# directly, so they are not among the clients here.
OPENSSL_CLIENTS = ["curl", "python", "s_client"]


@pytest.mark.parametrize("group", ["ffdhe2048", "X448"])
@pytest.mark.parametrize("client", OPENSSL_CLIENTS)
def test_a_finite_field_or_x448_server(start_proxy, tmp_path, pki, closing, client, group):
    server = closing(OpenSSLServer(pki / "genuine.pem", pki / "genuine.key", chain=pki / "genuine.chain.pem", tls="1.3",
                                   extra=["-groups", group]))
    fetch_twice(start_proxy, tmp_path, pki, client, server.port, STATUS_PAGE)


@pytest.mark.parametrize("group", ["ffdhe2048", "X448"])
def test_a_forging_server_on_a_finite_field_group_or_x448_is_still_blocked(start_proxy, tmp_path, pki, closing, group):
    """The probe finishes the handshake with such a server and reads its chain: a forged one is caught."""
    server = closing(s_server(pki, "attacker", extra=["-groups", group]))
    proxy = start(start_proxy, tmp_path, pki, "block")
    ran = curl(proxy, server.port)
    expect_caught(proxy, server.port, ran, ADVERSARY_STATUS_PAGE)
