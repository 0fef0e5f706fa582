"""A TLS interceptor for the adversary tests: a TCP server on 127.0.0.1 that reads each connection's ClientHello,
decides from it (and from how many connections came before) which backend gets the connection, and then splices the
bytes both ways unchanged (the ClientHello included). It never terminates TLS itself: the backends are real TLS
servers (`openssl s_server`), one presenting the genuine chain, one presenting a forged chain (an attacker CA's
certificates with the genuine subjects). So the chain a connection sees depends only on the interceptor's choice.

What it detects, and how (what a real interceptor that wants to spare a detection probe would do):

* `fingerprint` / `is_openssl_default`: the ClientHello bytes are parsed (records reassembled, GREASE ignored) and the
  offer's library-fixed features are compared with OpenSSL 3.0's *defaults*: the TLS 1.3 cipher suites in OpenSSL's
  order, the default supported_groups list, a single x25519 key share, and the default signature_algorithms list
  (its SHA-1/SHA-224 schemes aside: the security level adds or removes those).
  Applications rarely change these (curl, `openssl s_client` and a probe that only sets SNI, ALPN, a cipher string or
  ticket options all keep them), so a hello with all four unchanged is "an OpenSSL program using library defaults",
  such as `openssl s_client` with no options or a detection probe built on OpenSSL. The values are hard-coded from
  OpenSSL 3.0 (ssl/t1_lib.c, ssl/ssl_ciph.c; 3.2 added brainpool signature schemes, so a newer OpenSSL is not
  "default" here), not learnt from the program under test.
* `ja4`: the JA4 fingerprint (FoxIO's specification) of a hello, recorded for every connection so tests can compare
  what a probe offered on the wire with what the client offered.

Policies (the `choose(index, hello) -> name` callable given to `Interceptor`):
* `spare_openssl_defaults`: the backend named "genuine" for a default-OpenSSL hello, "forger" for everything else;
* `BehaveThenForge`: "genuine" until the test calls `forge_from(n)`, then "forger" for connection `n` and later
  (whatever they are): the test picks `n` once the first tunnel and its probe have been seen.

Bounded everywhere: a ClientHello must arrive whole within `hello_timeout` seconds and 64 KiB; each spliced
connection ends when either side closes or stays silent for `idle_timeout` seconds. `close()` stops the listener and
shuts every open socket down; threads are daemons and end with their sockets.
"""
import hashlib
import socket
import struct
import threading
import time

import hello_compare

GREASE = {0x0a0a + 0x1010 * i for i in range(16)}

# OpenSSL 3.0 client defaults.
OPENSSL_TLS13_SUITES = [0x1302, 0x1303, 0x1301]   # TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_GCM_SHA256
OPENSSL_GROUPS = [0x001d, 0x0017, 0x001e, 0x0019, 0x0018,   # x25519, P-256, x448, P-521, P-384
                  0x0100, 0x0101, 0x0102, 0x0103, 0x0104]   # ffdhe2048 .. ffdhe8192
OPENSSL_KEY_SHARES = [0x001d]
OPENSSL_SIGALGS = [0x0403, 0x0503, 0x0603,                  # ecdsa_secp256r1_sha256, _secp384r1_sha384, _secp521r1_sha512
                   0x0807, 0x0808,                          # ed25519, ed448
                   0x0809, 0x080a, 0x080b,                  # rsa_pss_pss_sha256 .. sha512
                   0x0804, 0x0805, 0x0806,                  # rsa_pss_rsae_sha256 .. sha512
                   0x0401, 0x0501, 0x0601,                  # rsa_pkcs1_sha256 .. sha512
                   0x0303, 0x0301, 0x0302, 0x0402, 0x0502, 0x0602]   # SHA-224 schemes, DSA
# Legacy (SHA-1, SHA-224) schemes that the security level adds or removes (SECLEVEL=0 adds the SHA-1 ones): not
# compared, so the recogniser sees through a program's security level.
LEGACY_SIGALGS = {0x0201, 0x0202, 0x0203, 0x0301, 0x0302, 0x0303}


class ClientHello:
    """The parts of a ClientHello a fingerprint reads, GREASE values removed (lists keep the client's order)."""

    def __init__(self, body):
        r = _Reader(body)
        self.legacy_version = r.u16()
        r.take(32)
        r.take(r.u8())
        self.cipher_suites = [c for c in _u16s(r.take(r.u16())) if c not in GREASE]
        r.take(r.u8())
        self.extensions = []            # types, in order, GREASE removed
        self.server_name = None
        self.alpn = []
        self.versions = []
        self.groups = []
        self.key_shares = []
        self.sigalgs = []
        if r.left():
            ext = _Reader(r.take(r.u16()))
            while ext.left():
                etype, data = ext.u16(), ext.take(ext.u16())
                if etype in GREASE:
                    continue
                self.extensions.append(etype)
                d = _Reader(data)
                if etype == 0 and data:                              # server_name
                    names = _Reader(d.take(d.u16()))
                    if names.u8() == 0:
                        self.server_name = names.take(names.u16()).decode("ascii", "replace")
                elif etype == 10:                                    # supported_groups
                    self.groups = [g for g in _u16s(d.take(d.u16())) if g not in GREASE]
                elif etype == 13:                                    # signature_algorithms
                    self.sigalgs = [s for s in _u16s(d.take(d.u16())) if s not in GREASE]
                elif etype == 16:                                    # ALPN
                    names = _Reader(d.take(d.u16()))
                    while names.left():
                        self.alpn.append(names.take(names.u8()).decode("ascii", "replace"))
                elif etype == 43:                                    # supported_versions
                    self.versions = [v for v in _u16s(d.take(d.u8())) if v not in GREASE]
                elif etype == 51:                                    # key_share
                    shares = _Reader(d.take(d.u16()))
                    while shares.left():
                        group = shares.u16()
                        shares.take(shares.u16())
                        if group not in GREASE:
                            self.key_shares.append(group)

    @property
    def tls13_suites(self):
        return [c for c in self.cipher_suites if c >> 8 == 0x13]

    def is_openssl_default(self):
        """Whether the offer keeps every OpenSSL 3.0 default a fingerprint can see through application settings."""
        return (self.tls13_suites == OPENSSL_TLS13_SUITES and self.groups == OPENSSL_GROUPS
                and self.key_shares == OPENSSL_KEY_SHARES
                and [s for s in self.sigalgs if s not in LEGACY_SIGALGS] == [s for s in OPENSSL_SIGALGS if s not in LEGACY_SIGALGS])

    def ja4(self):
        """JA4 (https://github.com/FoxIO-LLC/ja4, TCP): `t13d1516h2_8daaf6152771_e5627efa2ab1`."""
        top = max(self.versions or [self.legacy_version])
        version = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3"}.get(top, "00")
        alpn = "00"
        if self.alpn and self.alpn[0]:
            first = self.alpn[0]
            alpn = first[0] + first[-1] if first[0].isalnum() and first[-1].isalnum() else \
                first.encode()[:1].hex()[0] + first.encode()[-1:].hex()[-1]
        a = "t%s%s%02d%02d%s" % (version, "d" if 0 in self.extensions else "i", min(len(self.cipher_suites), 99),
                                 min(len(self.extensions), 99), alpn)

        def h(text):
            return hashlib.sha256(text.encode()).hexdigest()[:12] if text else "000000000000"
        b = h(",".join("%04x" % c for c in sorted(self.cipher_suites)))
        exts = ",".join("%04x" % e for e in sorted(e for e in self.extensions if e not in (0x0000, 0x0010)))
        sigs = ",".join("%04x" % s for s in self.sigalgs)
        c = h(exts + ("_" + sigs if sigs else ""))
        return f"{a}_{b}_{c}"


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def left(self):
        return len(self.data) - self.pos

    def take(self, n):
        if n > self.left():
            raise ValueError("truncated ClientHello")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack("!H", self.take(2))[0]


def _u16s(data):
    return [struct.unpack("!H", data[i:i + 2])[0] for i in range(0, len(data) - 1, 2)]


def read_client_hello(sock, timeout=5.0, limit=65536):
    """Reads records from `sock` until one whole ClientHello handshake message is in; returns (raw_bytes, hello).
    `raw_bytes` is everything read (to be forwarded unchanged). Raises ValueError/OSError on anything else."""
    sock.settimeout(timeout)
    raw = b""
    handshake = b""
    pos = 0
    while True:
        while len(raw) - pos < 5 or len(raw) - pos < 5 + struct.unpack("!H", raw[pos + 3:pos + 5])[0]:
            if len(raw) > limit:
                raise ValueError("ClientHello larger than %d bytes" % limit)
            chunk = sock.recv(16384)
            if not chunk:
                raise ValueError("connection closed before a whole ClientHello")
            raw += chunk
        if raw[pos] != 0x16:
            raise ValueError("not a TLS handshake record")
        length = struct.unpack("!H", raw[pos + 3:pos + 5])[0]
        handshake += raw[pos + 5:pos + 5 + length]
        pos += 5 + length
        if len(handshake) >= 4:
            if handshake[0] != 1:
                raise ValueError("first handshake message is not a ClientHello")
            size = int.from_bytes(handshake[1:4], "big")
            if len(handshake) >= 4 + size:
                hello = ClientHello(handshake[4:4 + size])
                hello.message = handshake[:4 + size]        # the whole message, for field-by-field comparisons
                hello.record_version = struct.unpack("!H", raw[1:3])[0]   # of the first record
                hello.raw = hello_compare.Hello(hello.message)
                return raw, hello


def spare_openssl_defaults(index, hello):
    """Genuine for what looks like an OpenSSL program with library defaults (a probe), forged for the rest."""
    return "genuine" if hello.is_openssl_default() else "forger"


class BehaveThenForge:
    """Genuine until `forge_from(n)` is called, then forged for every connection numbered `n` or later (probe or not):
    an interceptor that behaves until the detector has taken and cached its look, and forges afterwards."""

    def __init__(self):
        self.first_forged = None

    def forge_from(self, n):
        self.first_forged = n

    def __call__(self, index, hello):
        return "forger" if self.first_forged is not None and index >= self.first_forged else "genuine"


def pump(src, dst, idle_timeout=None):
    """Copies src → dst until EOF, an error or `idle_timeout` seconds of silence; passes the EOF on as a half-close."""
    src.settimeout(idle_timeout)
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class LoopbackInterceptor:
    """The frame of the tests' own interceptors: a listener on 127.0.0.1 (`port`) whose every connection runs
    `handle(client)` on a daemon thread; `track(sock)` registers a socket that `close()` closes with the listener."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sockets = set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.track(client)
            threading.Thread(target=self.handle, args=(client,), daemon=True).start()

    def track(self, sock):
        with self.lock:
            self.sockets.add(sock)
        return sock

    def handle(self, client):
        raise NotImplementedError

    def close(self):
        self.listener.close()
        with self.lock:
            for sock in self.sockets:
                try:
                    sock.close()
                except OSError:
                    pass


class Interceptor:
    """The interceptor itself. `backends` maps a name to a 127.0.0.1 port; `choose(index, hello)` names the backend
    for the connection numbered `index` (from 0, in accept order). `connections` lists what it saw:
    dicts with index, ja4, openssl_default, backend, sni, and hello_delay (seconds from the accept to the whole
    hello: what an interceptor that times connections reads). With `time_answers`, also answer_delay: seconds from
    the server's first bytes (a HelloRetryRequest, or its flight) to the client's next (its second hello, or its
    Finished), the first of each read and passed on before the bytes are spliced."""

    def __init__(self, backends, choose, hello_timeout=5.0, idle_timeout=15.0, time_answers=False):
        self.time_answers = time_answers
        self.backends = dict(backends)
        self.choose = choose
        self.hello_timeout = hello_timeout
        self.idle_timeout = idle_timeout
        self.connections = []
        self.errors = []
        self._lock = threading.Lock()
        self._open = set()
        self._count = 0
        self._stopped = False
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self._stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            accepted = time.monotonic()
            with self._lock:
                index = self._count
                self._count += 1
                self._open.add(conn)
            threading.Thread(target=self._handle, args=(conn, index, accepted), daemon=True).start()

    def _handle(self, conn, index, accepted):
        upstream = None
        try:
            raw, hello = read_client_hello(conn, self.hello_timeout)
            hello_delay = time.monotonic() - accepted
            backend = self.choose(index, hello)
            record = {"index": index, "ja4": hello.ja4(), "openssl_default": hello.is_openssl_default(),
                      "backend": backend, "sni": hello.server_name, "hello_delay": hello_delay}
            with self._lock:
                self.connections.append(record)
            upstream = socket.create_connection(("127.0.0.1", self.backends[backend]), timeout=self.hello_timeout)
            with self._lock:
                self._open.add(upstream)
            upstream.sendall(raw)
            if self.time_answers:
                upstream.settimeout(self.hello_timeout)
                conn.settimeout(self.hello_timeout)
                answer = upstream.recv(65536)
                if not answer:
                    return
                answered = time.monotonic()
                conn.sendall(answer)
                reply = conn.recv(65536)
                if not reply:
                    return
                with self._lock:
                    record["answer_delay"] = time.monotonic() - answered
                upstream.sendall(reply)
                upstream.settimeout(None)
                conn.settimeout(None)
            down = threading.Thread(target=self._pump, args=(upstream, conn), daemon=True)
            down.start()
            self._pump(conn, upstream)
            down.join(self.idle_timeout + 1)
        except (OSError, ValueError) as e:
            with self._lock:
                self.errors.append((index, repr(e)))
        finally:
            for s in (conn, upstream):
                if s is not None:
                    with self._lock:
                        self._open.discard(s)
                    s.close()

    def _pump(self, src, dst):
        pump(src, dst, self.idle_timeout)

    def close(self):
        self._stopped = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self._lock:
            sockets = list(self._open)
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
