#!/usr/bin/env python3
"""Capture real TLS handshakes as raw byte streams for the TLSObserver tests.

Run from this folder: `python3 capture.py`. It overwrites every *.bin and *.pem here.

1. Makes two small PKIs with the openssl CLI (keys stay in a temporary folder):
   RSA 2048 root -> intermediate -> leaf, and ECDSA P-256 root -> intermediate -> leaf.
2. Runs handshakes between two in-memory Python `ssl` endpoints (MemoryBIO pairs),
   recording every byte each side wrote: `<name>.c2s.bin` (client to server) and
   `<name>.s2c.bin` (server to client).
3. Runs one handshake between `openssl s_client` and `openssl s_server` through a
   recording TCP relay on 127.0.0.1, to get a real HelloRetryRequest (the client's
   first key share is X25519, the server only accepts P-256).
"""
import os
import select
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(tmp, kind):
    """Root, intermediate and leaf of one key type; returns the paths of key and chain files."""
    newkey = ["-newkey", "rsa:2048"] if kind == "rsa" else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    ca_ext = os.path.join(tmp, "ca.ext")
    with open(ca_ext, "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n")
    leaf_ext = os.path.join(tmp, f"{kind}-leaf.ext")
    with open(leaf_ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n"
                f"subjectAltName=DNS:{kind}.chainwatch.test,DNS:tls13.chainwatch.test,DNS:hrr.chainwatch.test\n")
    name = kind.upper()
    openssl("req", "-x509", *newkey, "-nodes", "-sha256", "-days", "3650",
            "-subj", f"/O=chainwatch tests/CN=Chainwatch Test {name} Root",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", f"{kind}-root.key", "-out", f"{kind}-root.pem", cwd=tmp)
    for child, parent, ext, subject in [
        ("intermediate", "root", ca_ext, f"Chainwatch Test {name} Intermediate"),
        ("leaf", "intermediate", leaf_ext, f"{kind}.chainwatch.test"),
    ]:
        openssl("req", "-new", *newkey, "-nodes", "-subj", f"/O=chainwatch tests/CN={subject}",
                "-keyout", f"{kind}-{child}.key", "-out", f"{kind}-{child}.csr", cwd=tmp)
        openssl("x509", "-req", "-sha256", "-days", "3650", "-in", f"{kind}-{child}.csr",
                "-CA", f"{kind}-{parent}.pem", "-CAkey", f"{kind}-{parent}.key", "-CAcreateserial",
                "-extfile", ext, "-out", f"{kind}-{child}.pem", cwd=tmp)
    chain = os.path.join(tmp, f"{kind}-chain.pem")
    with open(chain, "w") as out:
        for part in ("leaf", "intermediate"):
            with open(os.path.join(tmp, f"{kind}-{part}.pem")) as f:
                out.write(f.read())
    for part in ("root", "intermediate", "leaf"):
        with open(os.path.join(tmp, f"{kind}-{part}.pem")) as f, open(os.path.join(HERE, f"{kind}-{part}.pem"), "w") as out:
            out.write(f.read())
    return os.path.join(tmp, f"{kind}-leaf.key"), chain, os.path.join(tmp, f"{kind}-root.pem")


def pump(client, server, c_in, c_out, s_in, s_out, c2s, s2c):
    """Moves bytes between the two MemoryBIO pairs, recording them, until neither side writes."""
    moved = True
    while moved:
        moved = False
        data = c_out.read()
        if data:
            c2s.extend(data); s_in.write(data); moved = True
        data = s_out.read()
        if data:
            s2c.extend(data); c_in.write(data); moved = True
        for endpoint in (client, server):
            try:
                endpoint.do_handshake()
            except ssl.SSLWantReadError:
                pass
        moved = moved or c_out.pending > 0 or s_out.pending > 0


def memory_handshake(name, client_ctx, server_ctx, sni, session=None):
    """One full handshake plus one request and response; writes the two .bin files, returns the client session."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False, server_hostname=sni, session=session)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    c2s, s2c = bytearray(), bytearray()
    pump(client, server, c_in, c_out, s_in, s_out, c2s, s2c)
    client.write(b"GET / HTTP/1.1\r\nHost: " + sni.encode() + b"\r\n\r\n")
    pump(client, server, c_in, c_out, s_in, s_out, c2s, s2c)
    server.read(4096)
    server.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    pump(client, server, c_in, c_out, s_in, s_out, c2s, s2c)
    client.read(4096)
    with open(os.path.join(HERE, f"{name}.c2s.bin"), "wb") as f:
        f.write(c2s)
    with open(os.path.join(HERE, f"{name}.s2c.bin"), "wb") as f:
        f.write(s2c)
    print(f"{name}: {client.version()} {client.cipher()[0]} alpn={client.selected_alpn_protocol()} "
          f"reused={client.session_reused} c2s={len(c2s)} s2c={len(s2c)}")
    return client.session


def contexts(key, chain, root, version, ciphers=None):
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(chain, key)
    server.set_alpn_protocols(["h2", "http/1.1"])
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(root)
    client.set_alpn_protocols(["h2", "http/1.1"])
    client.maximum_version = version
    if ciphers:
        client.set_ciphers(ciphers)
    return client, server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def relay_handshake(name, key, chain, root):
    """openssl s_client -> recording relay -> openssl s_server; writes the two .bin files."""
    server_port, relay_port = free_port(), free_port()
    server = subprocess.Popen(
        ["openssl", "s_server", "-accept", str(server_port), "-naccept", "1", "-key", key, "-cert", chain,
         "-tls1_3", "-groups", "P-256", "-alpn", "h2", "-quiet"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        listener = socket.create_server(("127.0.0.1", relay_port))
        time.sleep(0.5)
        client = subprocess.Popen(
            ["openssl", "s_client", "-connect", f"127.0.0.1:{relay_port}", "-servername", "hrr.chainwatch.test",
             "-tls1_3", "-groups", "X25519:P-256", "-alpn", "h2,http/1.1", "-CAfile", root, "-quiet"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            downstream, _ = listener.accept()
            upstream = socket.create_connection(("127.0.0.1", server_port))
            recorded = {downstream: bytearray(), upstream: bytearray()}
            other = {downstream: upstream, upstream: downstream}
            deadline = time.time() + 3
            while time.time() < deadline:
                readable, _, _ = select.select([downstream, upstream], [], [], 0.2)
                for sock in readable:
                    data = sock.recv(65536)
                    if data:
                        recorded[sock].extend(data)
                        other[sock].sendall(data)
            client.stdin.close()
            downstream.close(); upstream.close(); listener.close()
        finally:
            client.kill(); client.wait()
    finally:
        server.kill(); server.wait()
    with open(os.path.join(HERE, f"{name}.c2s.bin"), "wb") as f:
        f.write(recorded[downstream])
    with open(os.path.join(HERE, f"{name}.s2c.bin"), "wb") as f:
        f.write(recorded[upstream])
    print(f"{name}: c2s={len(recorded[downstream])} s2c={len(recorded[upstream])}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        rsa = make_pki(tmp, "rsa")
        ecdsa = make_pki(tmp, "ecdsa")

        client, server = contexts(*rsa, ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-GCM-SHA256")
        session = memory_handshake("tls12-rsa", client, server, "rsa.chainwatch.test")
        memory_handshake("tls12-rsa-resumed", client, server, "rsa.chainwatch.test", session=session)

        client, server = contexts(*ecdsa, ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES256-GCM-SHA384")
        memory_handshake("tls12-ecdsa", client, server, "ecdsa.chainwatch.test")

        client, server = contexts(*rsa, ssl.TLSVersion.TLSv1_3)
        memory_handshake("tls13-rsa", client, server, "tls13.chainwatch.test")

        relay_handshake("tls13-hrr", *rsa)


if __name__ == "__main__":
    sys.exit(main())
