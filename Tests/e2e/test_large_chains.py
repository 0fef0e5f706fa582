"""Chains real servers send that are large: a 75 KB leaf (badssl's 1000-sans kind, which curl accepts) and a 210 KB
one (10000-sans). Both are genuine (genuine.test under the test PKI's intermediate) and must raise nothing, over TLS 1.2
(read in the tunnel, up to 224 KiB) and TLS 1.3 (read by the probe, up to 512 KiB), under block and alert. A
Certificate message over the passive limit is its own reason, oversized_handshake, never untrusted_chain."""
import socket
import ssl
import subprocess
import time

import pytest

from helpers import HTTPServer, assert_no_alert_lines, curl_genuine, read_alert_lines, start_own_anchor_proxy
from test_tls13_adversary import closing, pki  # noqa: F401 (fixtures)


def big_leaf(pki, directory, names):
    """genuine.test with `names` extra DNS names, signed by the genuine intermediate; returns (fullchain, key)."""
    key, csr, cert = directory / f"big{names}.key", directory / f"big{names}.csr", directory / f"big{names}.pem"
    ext = directory / f"big{names}.ext"
    sans = ",".join(["DNS:genuine.test"] + [f"DNS:host{i:05d}.genuine.test" for i in range(names)])
    ext.write_text(f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
                   f"subjectAltName={sans}\n")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    subprocess.run(["openssl", "req", "-new", "-key", str(key), "-subj", "/O=Chainwatch Test/CN=genuine.test",
                    "-out", str(csr)], check=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(pki / "genuine-intermediate.pem"), "-CAkey",
                    str(pki / "genuine-intermediate.key"), "-set_serial", str(70000 + names), "-days", "30",
                    "-extfile", str(ext), "-out", str(cert)], check=True, capture_output=True)
    full = directory / f"big{names}.fullchain.pem"
    full.write_text(cert.read_text() + (pki / "genuine-intermediate.pem").read_text())
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "DER"], check=True, capture_output=True).stdout
    return full, key, len(der)


@pytest.fixture(scope="module")
def leaves(pki, tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    made = {"75k": big_leaf(pki, d, 3100), "210k": big_leaf(pki, d, 8700), "240k": big_leaf(pki, d, 10000)}
    sizes = {k: v[2] for k, v in made.items()}
    assert 70_000 < sizes["75k"] < 80_000 and 200_000 < sizes["210k"] < 220_000 and 235_000 < sizes["240k"], sizes
    return made


def start(start_proxy, tmp_path, pki, action):
    return start_own_anchor_proxy(start_proxy, tmp_path, pki, action, probe_timeout=5)


def server_bytes_through(proxy, port, tls, want, timeout=10):
    """A TLS client (Python's ssl over memory BIOs) through the proxy that counts the server's raw bytes until
    `want` arrived or the connection ends. OpenSSL's client refuses a Certificate over 100 KiB itself; the count is
    what tells whether chainwatch passed the server's flight."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)
    try:
        sock.sendall(f"CONNECT genuine.test:{port} HTTP/1.1\r\nHost: genuine.test:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 200"), head
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ctx.maximum_version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[tls]
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls_obj = ctx.wrap_bio(incoming, outgoing, server_hostname="genuine.test")
        received = 0
        deadline = time.monotonic() + timeout
        while received < want and time.monotonic() < deadline:
            try:
                tls_obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                pass   # the client's own 100 KiB limit, once the Certificate is in: keep counting the bytes
            data = outgoing.read()
            if data:
                sock.sendall(data)
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += len(chunk)
            incoming.write(chunk)
        return received
    finally:
        sock.close()


@pytest.mark.parametrize("size", ["75k", "210k"])
@pytest.mark.parametrize("tls", ["1.2", "1.3"])
@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_large_genuine_chain_reaches_the_client_and_raises_nothing(start_proxy, tmp_path, pki, leaves, closing, size,
                                                                     tls, action):
    full, key, length = leaves[size]
    server = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls=tls))
    proxy = start(start_proxy, tmp_path, pki, action)
    assert server_bytes_through(proxy, server.port, tls, want=length) >= length   # under block: after a passing verdict
    if size == "75k":   # within curl's own limit: the whole exchange, validated by curl too
        r = curl_genuine(proxy, server.port, pki / "genuine-root.pem", tls)
        assert r.returncode == 0 and r.stdout == b"hello from upstream\n", r.stderr
    assert_no_alert_lines(proxy, server.port)


@pytest.mark.parametrize("action", ["block", "alert"])
def test_a_certificate_over_the_passive_limit_is_oversized_handshake(start_proxy, tmp_path, pki, leaves, closing, action):
    full, key, size = leaves["240k"]
    server = closing(HTTPServer(certfile=str(full), keyfile=str(key), tls="1.2"))
    proxy = start(start_proxy, tmp_path, pki, action)
    received = server_bytes_through(proxy, server.port, "1.2", want=size)
    lines = []
    deadline = time.monotonic() + 3
    while not lines and time.monotonic() < deadline:
        lines = read_alert_lines(proxy.alert_log, server.port)
        time.sleep(0.05)
    assert [(l["event"]["reason"], l["event"]["action"]) for l in lines] == [("oversized_handshake", action)]
    if action == "block":
        assert received < size   # fails closed: the chain could not be judged
    else:
        assert received >= size
