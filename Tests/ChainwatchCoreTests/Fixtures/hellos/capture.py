#!/usr/bin/env python3
"""Captures real clients' first ClientHello handshake messages on loopback (see README.md).

Usage: capture.py OUTDIR            every fixture
       capture.py OUTDIR NAME...    only those
Each fixture file holds one handshake message: type 1, 3-byte length, body (records stripped, reassembled).
"""
import os, socket, ssl, subprocess, sys, tempfile, threading, time

def read_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed after %d of %d bytes" % (len(data), n))
        data += chunk
    return data

def read_record(conn):
    header = read_exact(conn, 5)
    return header, read_exact(conn, int.from_bytes(header[3:5], "big"))

def read_hello(conn):
    """Reassembles the first handshake message from as many handshake records as it spans."""
    handshake, raw = b"", b""
    while True:
        header, body = read_record(conn)
        raw += header + body
        if header[0] != 22:
            raise ValueError("record type %d before the ClientHello" % header[0])
        handshake += body
        if len(handshake) >= 4:
            if handshake[0] != 1:
                raise ValueError("handshake type %d, not ClientHello" % handshake[0])
            need = 4 + int.from_bytes(handshake[1:4], "big")
            if len(handshake) >= need:
                return handshake[:need], raw

def listen():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    return server, server.getsockname()[1]

def capture(client):
    """Runs client(port) in a thread against a listener that reads one ClientHello and closes."""
    server, port = listen()
    result = {}
    def serve():
        conn, _ = server.accept()
        with conn:
            result["hello"], _ = read_hello(conn)
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        client(port)
    except Exception:
        pass  # the listener closes after the hello: every client fails, as it should
    thread.join(timeout=10)
    server.close()
    return result["hello"]

def impersonate(target):
    def client(port):
        from curl_cffi import requests
        requests.get("https://localhost:%d/" % port, impersonate=target, verify=False, timeout=5)
    return client

def run(*argv):
    def client(port):
        args = [a.replace("PORT", str(port)) for a in argv]
        subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    return client

def python_ssl(port):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port)) as sock:
        with context.wrap_socket(sock, server_hostname="localhost"):
            pass

def resumed(target):
    """The second hello of a curl_cffi Session whose first request completed against `openssl s_server -tls1_3`:
    a relay between the client and s_server records the first handshake message of the second connection."""
    def make():
        workdir = tempfile.mkdtemp()
        key, cert = os.path.join(workdir, "key.pem"), os.path.join(workdir, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probe = socket.socket(); probe.bind(("127.0.0.1", 0)); upstream_port = probe.getsockname()[1]; probe.close()
        s_server = subprocess.Popen(["openssl", "s_server", "-tls1_3", "-www", "-accept", str(upstream_port),
                                     "-cert", cert, "-key", key, "-num_tickets", "2"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        relay, port = listen()
        relay.listen(4)
        hellos = []
        def pipe(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            for s in (src, dst):
                try: s.shutdown(socket.SHUT_RDWR)
                except OSError: pass
        def accept_loop():
            while True:
                try:
                    conn, _ = relay.accept()
                except OSError:
                    return
                up = socket.create_connection(("127.0.0.1", upstream_port))
                hello, raw = read_hello(conn)
                hellos.append(hello)
                up.sendall(raw)
                threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
                threading.Thread(target=pipe, args=(up, conn), daemon=True).start()
        threading.Thread(target=accept_loop, daemon=True).start()
        try:
            from curl_cffi import requests
            with requests.Session(impersonate=target, verify=False, timeout=5) as session:
                session.get("https://localhost:%d/" % port, headers={"Connection": "close"})
                time.sleep(0.3)
                session.get("https://localhost:%d/" % port, headers={"Connection": "close"})
        finally:
            relay.close()
            s_server.kill()
        if len(hellos) < 2:
            raise RuntimeError("only %d hellos" % len(hellos))
        return hellos[1]
    return make

CHROME, EDGE, FIREFOX, SAFARI, SAFARI_IOS = "chrome152", "edge101", "firefox155", "safari270", "safari270_ios"

FIXTURES = {
    "chrome-1": impersonate(CHROME),
    "chrome-2": impersonate(CHROME),
    "chrome-3": impersonate(CHROME),
    "edge": impersonate(EDGE),
    "edge-2": impersonate(EDGE),
    "firefox": impersonate(FIREFOX),
    "firefox-2": impersonate(FIREFOX),
    "safari": impersonate(SAFARI),
    "safari-2": impersonate(SAFARI),
    "safari-ios": impersonate(SAFARI_IOS),
    "curl": run("curl", "-k", "-s", "--max-time", "5", "https://localhost:PORT/"),
    "python-ssl": python_ssl,
    "openssl": run("openssl", "s_client", "-connect", "127.0.0.1:PORT", "-servername", "localhost"),
    "gnutls": run("gnutls-cli", "--insecure", "--port", "PORT", "localhost"),
}
RESUMED = {"chrome-resumed": resumed(CHROME)}

def main():
    outdir, names = sys.argv[1], sys.argv[2:]
    for name in names or list(FIXTURES) + list(RESUMED):
        hello = capture(FIXTURES[name]) if name in FIXTURES else RESUMED[name]()
        with open(os.path.join(outdir, name + ".bin"), "wb") as f:
            f.write(hello)
        print("%-16s %5d bytes" % (name, len(hello)))

if __name__ == "__main__":
    main()
