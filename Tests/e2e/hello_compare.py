"""Compares a probe's ClientHello with the client's, field by field, independently of chainwatch's own code.

A probe must send the client's hello byte for byte except what each connection of that client draws afresh: the
random, the legacy session id (same length), each key share's value (same group, same length), GREASE values (RFC 8701;
drawn as BoringSSL draws them: each place its own value, the GREASE group one value in supported_groups and
key_share, the two GREASE extension types distinct; values the client happened to repeat are not repeated on
purpose), the GREASE ECH payload (same cipher suite and enc length; the payload's length kept, or, for a BoringSSL
hello, one of BoringSSL's four), the extension order for stacks that permute it (Chrome's BoringSSL), and, for a
resumed client, the pre_shared_key/early_data it would not send on a fresh connection (and the padding that follows).

`differences(client, probe)` returns a list of human-readable differences (empty: the probe is the client); it also
reports a per-connection part that *repeats* the client's value, which an interceptor could match.
"""
import struct

GREASE = {0x0a0a + 0x1010 * i for i in range(16)}
PSK, EARLY_DATA, PADDING, SESSION_TICKET, KEY_SHARE, ECH = 41, 42, 21, 35, 51, 0xfe0d
# Extensions whose bodies are lists of 16-bit values that may hold GREASE: (type, length-prefix bytes).
U16_LISTS = {10: 2, 13: 2, 43: 1, 27: 1}
TRUST_ANCHORS = 0xca34   # Chrome sends its trust anchor IDs in a fresh order per connection
BORINGSSL_ECH_PAYLOADS = {144, 176, 208, 240}   # BoringSSL draws its ECH GREASE payload length per connection


class Hello:
    """A ClientHello handshake message (header included), split into its fields, extension bodies raw."""

    def __init__(self, message):
        if message[0] != 1:
            raise ValueError("not a ClientHello")
        body = message[4:4 + int.from_bytes(message[1:4], "big")]
        self.message = bytes(message)
        p = 0
        self.legacy_version = body[p:p + 2]; p += 2
        self.random = body[p:p + 32]; p += 32
        n = body[p]; self.session_id = body[p + 1:p + 1 + n]; p += 1 + n
        n = struct.unpack("!H", body[p:p + 2])[0]
        self.suites = [struct.unpack("!H", body[i:i + 2])[0] for i in range(p + 2, p + 2 + n, 2)]; p += 2 + n
        n = body[p]; self.compression = body[p + 1:p + 1 + n]; p += 1 + n
        self.extensions = []
        if p < len(body):
            end = p + 2 + struct.unpack("!H", body[p:p + 2])[0]; p += 2
            while p < end:
                t, n = struct.unpack("!HH", body[p:p + 4])
                self.extensions.append((t, body[p + 4:p + 4 + n])); p += 4 + n

    def ext(self, t):
        return next((d for et, d in self.extensions if et == t), None)

    def key_shares(self):
        d = self.ext(KEY_SHARE)
        out = []
        if d is None:
            return out
        p = 2
        while p < len(d):
            g, n = struct.unpack("!HH", d[p:p + 4])
            out.append((g, d[p + 4:p + 4 + n])); p += 4 + n
        return out


def _u16s(data, prefix):
    n = int.from_bytes(data[:prefix], "big")
    return [struct.unpack("!H", data[i:i + 2])[0] for i in range(prefix, prefix + n, 2)]


def _anchor_ids(data):
    ids, p = [], 2
    while p < len(data):
        ids.append(data[p + 1:p + 1 + data[p]]); p += 1 + data[p]
    return sorted(ids)


def differences(client_bytes, probe_bytes, permutes=False):
    """`permutes`: the client's stack draws its extension order per connection (Chrome since 110; the test names
    which clients do, rather than guessing it from the bytes)."""
    c, p = Hello(client_bytes), Hello(probe_bytes)
    out = []
    grease_pairs = []   # (client value, probe value) at the same position

    def same(what, a, b):
        if a != b:
            out.append(f"{what}: client {a!r} probe {b!r}")

    def fresh(what, a, b):
        if len(a) != len(b):
            out.append(f"{what}: length {len(a)} in the client, {len(b)} in the probe")
        elif a and a == b:
            out.append(f"{what}: the probe repeats the client's value")

    def u16_list(what, a, b):
        if len(a) != len(b):
            return out.append(f"{what}: {len(a)} values in the client, {len(b)} in the probe")
        for x, y in zip(a, b):
            if x in GREASE or y in GREASE:
                if not (x in GREASE and y in GREASE):
                    out.append(f"{what}: GREASE {x:#06x} against {y:#06x}")
                grease_pairs.append((x, y))
            elif x != y:
                out.append(f"{what}: {[hex(v) for v in a]} against {[hex(v) for v in b]}")
                return

    same("legacy_version", c.legacy_version, p.legacy_version)
    fresh("random", c.random, p.random)
    fresh("legacy_session_id", c.session_id, p.session_id)
    u16_list("cipher_suites", c.suites, p.suites)
    same("compression_methods", c.compression, p.compression)

    client_exts = [(t, d) for t, d in c.extensions if t not in (PSK, EARLY_DATA)]
    probe_exts = p.extensions
    if any(t in (PSK, EARLY_DATA) for t, _ in probe_exts):
        out.append("the probe offers pre_shared_key or early_data")
    resumed = len(client_exts) != len(c.extensions)
    if resumed:   # padding depends on the length the dropped extensions had
        client_exts = [(t, d) for t, d in client_exts if t != PADDING]
        probe_exts = [(t, d) for t, d in probe_exts if t != PADDING]
    ctypes = [t for t, _ in client_exts]
    ptypes = [t for t, _ in probe_exts]
    canon = lambda ts: [("G" if t in GREASE else t) for t in ts]
    if permutes:
        if sorted(map(str, canon(ctypes))) != sorted(map(str, canon(ptypes))):
            out.append(f"extension set: client {canon(ctypes)} probe {canon(ptypes)}")
        elif len(ctypes) > 4 and canon(ctypes) == canon(ptypes):
            out.append("extension order: the probe repeats the order of a client that permutes it per connection")
    elif canon(ctypes) != canon(ptypes):
        out.append(f"extension order: client {canon(ctypes)} probe {canon(ptypes)}")

    # Align extensions: by type; GREASE extensions in order of appearance.
    cg = [(t, d) for t, d in client_exts if t in GREASE]
    pg = [(t, d) for t, d in probe_exts if t in GREASE]
    for (ct, cd), (pt, pd) in zip(cg, pg):
        grease_pairs.append((ct, pt))
        same("GREASE extension body", cd, pd)
    pmap = {t: d for t, d in probe_exts if t not in GREASE}
    for t, cd in client_exts:
        if t in GREASE or t not in pmap:
            continue
        pd = pmap[t]
        if t == KEY_SHARE:
            cs, ps = c.key_shares(), p.key_shares()
            u16_list("key_share groups", [g for g, _ in cs], [g for g, _ in ps])
            for (g, cv), (_, pv) in zip(cs, ps):
                if g in GREASE:
                    same("GREASE key share body", cv, pv)
                else:
                    fresh(f"key share {g:#06x}", cv, pv)
            _hybrid_equality(cs, ps, out)
        elif t == ECH:
            _ech(cd, pd, _boringssl_shaped(c), out)
        elif t in U16_LISTS:
            u16_list(f"extension {t}", _u16s(cd, U16_LISTS[t]), _u16s(pd, U16_LISTS[t]))
        elif t == TRUST_ANCHORS and permutes:
            same("trust anchor IDs", _anchor_ids(cd), _anchor_ids(pd))
        elif t == SESSION_TICKET and resumed:
            same("session_ticket", b"", pd)
        else:
            same(f"extension {t} body", cd, pd)

    # GREASE, by BoringSSL's rules: the GREASE group one value in supported_groups and key_share, the GREASE
    # extension types distinct, and drawn (not every value the client's: each place matches by chance 1 in 16).
    groups = [v for v in _u16s(p.ext(10), 2) if v in GREASE] if p.ext(10) is not None else []
    share_groups = [g for g, _ in p.key_shares() if g in GREASE]
    if groups and share_groups and groups[:len(share_groups)] != share_groups[:len(groups)]:
        out.append(f"GREASE group: {groups} in supported_groups, {share_groups} in key_share")
    if len(pg) != len({t for t, _ in pg}):
        out.append("GREASE extension types repeat")
    if grease_pairs and all(x == y for x, y in grease_pairs):
        out.append("GREASE: the probe repeats every GREASE value of the client")
    return out


def _boringssl_shaped(hello):
    """A GREASE extension first and another last (before padding and pre_shared_key), as BoringSSL writes them."""
    types = [t for t, _ in hello.extensions if t not in (PADDING, PSK)]
    return len(types) > 2 and types[0] in GREASE and types[-1] in GREASE


def _ech(cd, pd, boringssl, out):
    """An outer ECH GREASE extension: type, cipher suite and enc length kept; enc and payload fresh; the payload's
    length kept, or drawn from BoringSSL's four for a BoringSSL hello that sent one of them."""
    def parts(d):
        if not d or d[0] != 0 or len(d) < 8:
            return None
        enc_len = struct.unpack("!H", d[6:8])[0]
        enc = d[8:8 + enc_len]
        payload = d[10 + enc_len:]
        return d[1:5], enc, payload
    a, b = parts(cd), parts(pd)
    if a is None or b is None:
        if cd != pd:
            out.append("ECH: an extension that is not outer GREASE differs")
        return
    if a[0] != b[0] or len(a[1]) != len(b[1]):
        out.append("ECH GREASE: cipher suite or enc length differs")
    drawn = boringssl and len(a[2]) in BORINGSSL_ECH_PAYLOADS
    if len(a[2]) != len(b[2]) and not (drawn and len(b[2]) in BORINGSSL_ECH_PAYLOADS):
        out.append(f"ECH GREASE: payload length {len(a[2])} in the client, {len(b[2])} in the probe")
    if a[1] == b[1] or a[2] == b[2]:
        out.append("ECH GREASE: the probe repeats the client's enc or payload")


def _hybrid_equality(client_shares, probe_shares, out):
    """X25519MLKEM768's X25519 half equals the separate x25519 share in the probe exactly when it does in the client."""
    def equal(shares):
        d = dict(shares)
        return 0x11ec in d and 0x001d in d and d[0x11ec][-32:] == d[0x001d]
    if equal(client_shares) != equal(probe_shares):
        out.append("X25519MLKEM768: whether its X25519 half equals the x25519 share differs from the client")
