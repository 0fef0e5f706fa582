#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora under corpus/<target>/ (see FUZZING.md, "Seeds").

- TLS: the captured handshakes of Tests/ChainwatchCoreTests/Fixtures/tls (real OpenSSL and Python ssl stacks).
- HTTP requests: what curl 7.88 sends to a proxy (absolute-form GET, HEAD, POST with a length, a chunked upload,
  CONNECT, two requests on one connection), recorded by a listener on 127.0.0.1 that plays the proxy.
- HTTP responses and bodies: what nginx and Python's http.server (the e2e tests' upstream handler) answer, read
  whole from a socket on 127.0.0.1.
- Policies: policies/ and the PolicyFile test fixtures, plus the private-CA example with its PEM inline.
- Hosts: Debian's default /etc/hosts and the README walkthrough's line.

Each seed carries the header its fuzzer reads first (option bytes, a chunk-size seed); see each target's main.swift.
Run from anywhere: python3 Tests/Fuzz/make-corpus.py. Needs curl and nginx (make test-deps installs them).
"""
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CORPUS = os.path.join(HERE, "corpus")
TLS = os.path.join(ROOT, "Tests/ChainwatchCoreTests/Fixtures/tls")
HANDSHAKES = ["tls12-rsa", "tls12-rsa-resumed", "tls12-ecdsa", "tls13-rsa", "tls13-hrr"]

# The header most seeds carry: chunks of up to 64 bytes, a fixed split seed.
CHUNKS = bytes([63, 0x12, 0x34])

sys.path.insert(0, os.path.join(ROOT, "Tests/e2e"))
from helpers import BlobHTTPHandler  # noqa: E402  (the e2e upstream, standard library only)


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def records(stream):
    """The TLS records of a stream, whole."""
    out, i = [], 0
    while i + 5 <= len(stream):
        n = 5 + (stream[i + 3] << 8 | stream[i + 4])
        out.append(stream[i:i + n])
        i += n
    return out


def frame(from_server, data):
    assert len(data) < 0x8000
    return bytes([(0x80 if from_server else 0) | len(data) >> 8, len(data) & 0xFF]) + data


def tls_seeds():
    for name in HANDSHAKES:
        c2s = read(os.path.join(TLS, name + ".c2s.bin"))
        s2c = read(os.path.join(TLS, name + ".s2c.bin"))
        # TLSObserver: the client's stream with a client's limit; the server's tracked, with the server limit.
        write("FuzzTLSObserver", name + ".c2s", bytes([0]) + CHUNKS + c2s)
        write("FuzzTLSObserver", name + ".s2c", bytes([0b011]) + CHUNKS + s2c)
        # HandshakeWatch: each direction whole, client first; and record by record, taking turns.
        write("FuzzHandshakeWatch", name + ".whole", CHUNKS + frame(False, c2s) + frame(True, s2c))
        c, s = records(c2s), records(s2c)
        turns = b""
        for i in range(max(len(c), len(s))):
            if i < len(c):
                turns += frame(False, c[i])
            if i < len(s):
                turns += frame(True, s[i])
        write("FuzzHandshakeWatch", name + ".turns", CHUNKS + turns)


def listen():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock, sock.getsockname()[1]


def curl_requests():
    """What curl sends a proxy, recorded by a listener that answers like one."""
    cases = {
        "curl-get": ["http://example.test/path?q=1"],
        "curl-head": ["-I", "http://example.test/"],
        "curl-post-length": ["-d", "a=1&b=two", "http://example.test/form"],
        "curl-post-chunked": ["-H", "Transfer-Encoding: chunked", "--data-binary", "@-", "http://example.test/upload"],
        "curl-connect": ["-p", "-k", "--max-time", "2", "https://genuine.test:8443/"],
        "curl-keepalive": ["http://example.test/one", "http://example.test/two"],
    }
    for name, args in cases.items():
        sock, port = listen()
        got = bytearray()

        def serve():
            conn, _ = sock.accept()
            conn.settimeout(1.5)
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    got.extend(data)
                    if data.startswith(b"CONNECT"):
                        conn.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                        break
                    if got.endswith(b"\r\n\r\n") or got.endswith(b"0\r\n\r\n") or b"a=1&b=two" in got:
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            except socket.timeout:
                pass
            conn.close()

        t = threading.Thread(target=serve)
        t.start()
        subprocess.run(["curl", "-s", "-o", "/dev/null", "-x", f"http://127.0.0.1:{port}"] + args,
                       input=b"chunk one\nchunk two\n", stdout=subprocess.DEVNULL, timeout=10)
        t.join()
        sock.close()
        # The CONNECT's TLS bytes after the head are not HTTP: keep the head.
        data = bytes(got)
        if name == "curl-connect":
            data = data[:data.index(b"\r\n\r\n") + 4]
        write("FuzzRequestHead", name, bytes([0]) + CHUNKS + data)


class Handler(BlobHTTPHandler):
    """The e2e tests' upstream (Tests/e2e/helpers.py: a length, or a chunked body at /chunked), plus HTTP/1.0 until
    close at /close."""

    def do_GET(self):
        if self.path != "/close":
            return super().do_GET()
        self.protocol_version = "HTTP/1.0"
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"until the server closes\n")
        self.close_connection = True


def fetch(port, request):
    """The whole answer to `request` (the server closes: the last request says Connection: close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        out = b""
        while True:
            data = s.recv(65536)
            if not data:
                return out
            out += data


def responses():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    close = b"Connection: close\r\n\r\n"
    python = {
        "python-length": b"GET / HTTP/1.1\r\nHost: x\r\n" + close,
        "python-chunked": b"GET /chunked HTTP/1.1\r\nHost: x\r\n" + close,
        "python-until-close": b"GET /close HTTP/1.1\r\nHost: x\r\n" + close,
        "python-two": b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /chunked HTTP/1.1\r\nHost: x\r\n" + close,
    }
    got = {name: fetch(port, req) for name, req in python.items()}
    server.shutdown()

    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    with tempfile.TemporaryDirectory() as d:
        sock, nport = listen()
        sock.close()
        os.makedirs(os.path.join(d, "www"))
        with open(os.path.join(d, "www", "index.html"), "w") as f:
            f.write("<p>nginx page</p>\n")
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(f"""daemon off; pid {d}/nginx.pid; error_log {d}/error.log;
events {{}}
http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};
  uwsgi_temp_path {d}; scgi_temp_path {d};
  server {{ listen 127.0.0.1:{nport}; root {d}/www;
    location /moved {{ return 301 /index.html; }}
    location /empty {{ return 204; }} }} }}
""")
        proc = subprocess.Popen([nginx, "-c", os.path.join(d, "nginx.conf"), "-p", d],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):
                try:
                    socket.create_connection(("127.0.0.1", nport), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            got["nginx-page"] = fetch(nport, b"GET /index.html HTTP/1.1\r\nHost: x\r\n" + close)
            got["nginx-head"] = fetch(nport, b"HEAD /index.html HTTP/1.1\r\nHost: x\r\n" + close)
            got["nginx-404"] = fetch(nport, b"GET /missing HTTP/1.1\r\nHost: x\r\n" + close)
            got["nginx-301"] = fetch(nport, b"GET /moved HTTP/1.1\r\nHost: x\r\n" + close)
            got["nginx-204"] = fetch(nport, b"GET /empty HTTP/1.1\r\nHost: x\r\n" + close)
            modified = got["nginx-page"].split(b"Last-Modified: ")[1].split(b"\r\n")[0]
            got["nginx-304"] = fetch(nport, b"GET /index.html HTTP/1.1\r\nHost: x\r\n"
                                     b"If-Modified-Since: " + modified + b"\r\n" + close)
        finally:
            proc.terminate()
            proc.wait()

    for name, data in got.items():
        assert data.startswith(b"HTTP/1."), (name, data[:40])
        method = 1 if "head" in name else 0   # options bits 2-3: GET, HEAD
        write("FuzzResponseHead", name, bytes([method << 2]) + CHUNKS + data)
        # BodyScanner: the body after the first head, with its framing.
        body = data[data.index(b"\r\n\r\n") + 4:]
        head = data[:data.index(b"\r\n\r\n")].lower()
        if b"transfer-encoding: chunked" in head:
            write("FuzzBodyScanner", name, bytes([0]) + CHUNKS + body)
        elif b"content-length:" in head and "head" not in name:
            n = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            write("FuzzBodyScanner", name, bytes([128 | 2]) + CHUNKS + n.to_bytes(2, "big") + body)
        elif "head" not in name:
            write("FuzzBodyScanner", name, bytes([64]) + CHUNKS + body)


def policies():
    sources = [os.path.join(ROOT, "policies")]
    sources += [os.path.join(ROOT, "Tests/ChainwatchPolicyFileTests/Fixtures")]
    for top in sources:
        for folder, _, files in os.walk(top):
            for f in sorted(files):
                if f.endswith(".yaml"):
                    write("FuzzPolicyLoader", os.path.relpath(os.path.join(folder, f), ROOT).replace("/", "_"),
                          read(os.path.join(folder, f)))
    # The private-CA example with its anchor inline (the fuzzer's policy path has no files beside it).
    text = read(os.path.join(ROOT, "policies/examples/self-signed-own-ca.yaml")).decode()
    pem = read(os.path.join(ROOT, "policies/examples/ca/example-private-ca.pem")).decode()
    inline = "|\n" + "".join("        " + line + "\n" for line in pem.strip().splitlines())
    assert "ca/example-private-ca.pem" in text
    text = text.replace("[ca/example-private-ca.pem]", "\n      - " + inline.rstrip("\n"))
    write("FuzzPolicyLoader", "inline-pem.yaml", text.encode())


def hosts():
    debian = b"""127.0.0.1\tlocalhost
127.0.1.1\tdebian.example.test\tdebian

# The following lines are desirable for IPv6 capable hosts
::1     localhost ip6-localhost ip6-loopback
ff02::1 ip6-allnodes
ff02::2 ip6-allrouters
"""
    write("FuzzHostsFile", "debian", debian)
    write("FuzzHostsFile", "walkthrough", b"127.0.0.1 genuine.test\n")


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    tls_seeds()
    curl_requests()
    responses()
    policies()
    hosts()
    for target in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, target))
        size = sum(os.path.getsize(os.path.join(CORPUS, target, f)) for f in files)
        print(f"{target}: {len(files)} seeds, {size} bytes")


if __name__ == "__main__":
    sys.exit(main())
