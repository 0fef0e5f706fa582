#!/usr/bin/env python3
"""Independent reading of the first ClientHello of each `*.c2s.bin` here, and its JA4 fingerprint.

Written from FoxIO's JA4 specification (github.com/FoxIO-LLC/ja4, technical_details/JA4.md), not from the Swift
code, so the tests can compare the two. Prints, per fixture, the facts the tests assert and `ja4=...`.
Run from this folder: `python3 ja4.py`.
"""
import glob
import hashlib
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def grease(v):
    return v & 0x0F0F == 0x0A0A and (v >> 8) == (v & 0xFF)


def first_client_hello(stream):
    """The first handshake message (type 1) reassembled from the stream's handshake records."""
    payload, i = b"", 0
    while i + 5 <= len(stream):
        ctype, length = stream[i], struct.unpack(">H", stream[i + 3:i + 5])[0]
        if ctype == 22:
            payload += stream[i + 5:i + 5 + length]
        i += 5 + length
        if len(payload) >= 4 and len(payload) >= 4 + int.from_bytes(payload[1:4], "big"):
            break
    assert payload[0] == 1
    return payload[4:4 + int.from_bytes(payload[1:4], "big")]


def u16s(b):
    return [struct.unpack(">H", b[j:j + 2])[0] for j in range(0, len(b), 2)]


def parse(body):
    pos = 2 + 32
    pos += 1 + body[pos]
    n = struct.unpack(">H", body[pos:pos + 2])[0]
    ciphers = u16s(body[pos + 2:pos + 2 + n])
    pos += 2 + n
    pos += 1 + body[pos]
    hello = dict(legacy=struct.unpack(">H", body[0:2])[0], ciphers=ciphers, exts=[], groups=[], shares=[],
                 sigalgs=[], versions=[], alpn=[])
    end = pos + 2 + struct.unpack(">H", body[pos:pos + 2])[0]
    pos += 2
    while pos < end:
        etype, elen = struct.unpack(">HH", body[pos:pos + 4])
        data = body[pos + 4:pos + 4 + elen]
        pos += 4 + elen
        hello["exts"].append(etype)
        if etype == 10:
            hello["groups"] = u16s(data[2:])
        elif etype == 13:
            hello["sigalgs"] = u16s(data[2:])
        elif etype == 43:
            hello["versions"] = u16s(data[1:])
        elif etype == 51:
            j = 2
            while j < len(data):
                group, klen = struct.unpack(">HH", data[j:j + 4])
                hello["shares"].append(group)
                j += 4 + klen
        elif etype == 16:
            j = 2
            while j < len(data):
                hello["alpn"].append(data[j + 1:j + 1 + data[j]])
                j += 1 + data[j]
    return hello


def ja4(h):
    ciphers = [c for c in h["ciphers"] if not grease(c)]
    exts = [e for e in h["exts"] if not grease(e)]
    versions = [v for v in h["versions"] if not grease(v)]
    version = max(versions) if versions else h["legacy"]
    version = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3", 0x0002: "s2",
               0xFEFF: "d1", 0xFEFD: "d2", 0xFEFC: "d3"}.get(version, "00")
    sni = "d" if 0 in exts else "i"
    alpn = "00"
    if h["alpn"] and h["alpn"][0]:
        first = h["alpn"][0]
        if chr(first[0]).isalnum() and chr(first[-1]).isalnum() and first[0] < 128 and first[-1] < 128:
            alpn = chr(first[0]) + chr(first[-1])
        else:
            hexed = first.hex()
            alpn = hexed[0] + hexed[-1]
    a = f"t{version}{sni}{min(len(ciphers), 99):02d}{min(len(exts), 99):02d}{alpn}"
    sorted_ciphers = ",".join(f"{c:04x}" for c in sorted(ciphers))
    b = hashlib.sha256(sorted_ciphers.encode()).hexdigest()[:12] if ciphers else "000000000000"
    kept = sorted(e for e in exts if e not in (0x0000, 0x0010))
    text = ",".join(f"{e:04x}" for e in kept)
    sigalgs = [s for s in h["sigalgs"] if not grease(s)]
    if sigalgs:
        text += "_" + ",".join(f"{s:04x}" for s in sigalgs)
    c = hashlib.sha256(text.encode()).hexdigest()[:12] if kept else "000000000000"
    return f"{a}_{b}_{c}"


def hexlist(values):
    return "[" + ", ".join(f"0x{v:04X}" for v in values) + "]"


if __name__ == "__main__":
    for path in sorted(glob.glob(os.path.join(HERE, "*.c2s.bin"))):
        with open(path, "rb") as f:
            h = parse(first_client_hello(f.read()))
        print(os.path.basename(path))
        for key in ("ciphers", "exts", "groups", "shares", "sigalgs", "versions"):
            print(f"  {key}: {hexlist(h[key])}")
        print(f"  alpn: {h['alpn']}")
        print(f"  ja4={ja4(h)}")
