#!/usr/bin/env bash
# What a cold TLS 1.3 first contact cannot avoid, beside the floor relay, in one run. Timed alone on one core:
#   - the probe's cryptography, with the implementation chainwatch runs (`chainwatch-bench costs`: swift-crypto's
#     X25519 key share and agreement, the CertificateVerify's P-256 check as the probe makes it);
#   - the validator's, with Debian's OpenSSL 3.0 as chainwatch runs it: the new leaf's signature by its issuer (ECDSA
#     P-256 verification, `openssl speed`) and the new leaf's decoding (`d2i_X509`, a small C program), through
#     OpenSSL's built-in EC method as chainwatch registers it (BuiltinECKeys), and for comparison through 3.0's
#     provider decoders (the default, which the cold path's profiles found to be its largest single cost);
# and the floor relay's CPU per cold TLS 1.3 connection (bench/floor, `chainwatch-bench handshake
# --fresh-certificates`, as bench/cold.sh measures it). The bench's chains are P-256 throughout and its client offers
# x25519, so these are the operations of every cold.sh TLS 1.3 connection. Prints each repetition, the medians, their
# sum, and what the relaying (one floor) plus that sum comes to in floors, beside the 4x bound of bench/cold.sh.
#
#   bench/floor-costs.sh [--repeat 3] [--duration 3] [--concurrency 8] [--floor-ms MS]
#
# --floor-ms: take the floor from elsewhere (a cold.sh run) instead of measuring it. Needs openssl, cc, libssl-dev
# and a release build (swift build -c release). About 15 s per repetition.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=3 duration=3 concurrency=8 floor=""
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --concurrency) concurrency=$2; shift 2 ;;
        --floor-ms) floor=$2; shift 2 ;;
        *) echo "usage: $0 [--repeat N] [--duration S] [--concurrency C] [--floor-ms MS]" >&2; exit 2 ;;
    esac
done
bench=${CHAINWATCH_BENCH_BIN:-.build/release/chainwatch-bench}
[ -x "$bench" ] || { echo "$0: build first (swift build -c release)" >&2; exit 2; }
command -v cc >/dev/null || { echo "$0: needs a C compiler (apt-get install gcc)" >&2; exit 2; }
work=$(mktemp -d /tmp/chainwatch-floor-costs-XXXXXX)
floor_pid=""
trap '[ -n "$floor_pid" ] && kill "$floor_pid" 2>/dev/null; rm -rf "$work"' EXIT

# A P-256 leaf like the bench's (its own key, a subject and a SAN, signed by a P-256 issuer) and a CertificateVerify's
# worth of signed bytes (64 spaces, the context string, a zero, a SHA-256 transcript hash), signed by its key.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/ca.key" 2>/dev/null
openssl req -new -x509 -key "$work/ca.key" -subj "/CN=floor-costs issuer" -days 30 -out "$work/ca.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/leaf.key" 2>/dev/null
openssl req -new -key "$work/leaf.key" -subj "/CN=cold.example" -out "$work/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:cold.example\n' >"$work/ext"
openssl x509 -req -in "$work/leaf.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 30 \
    -extfile "$work/ext" -outform DER -out "$work/leaf.der" 2>/dev/null
{ printf '%64s' ''; printf 'TLS 1.3, server CertificateVerify\0'; head -c 32 /dev/urandom; } >"$work/signed"
openssl dgst -sha256 -sign "$work/leaf.key" -out "$work/signature" "$work/signed"

cat >"$work/decode.c" <<'C'
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/engine.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* As COpenSSL's shim (c_chainwatch_decode_ec_keys_builtin): an ENGINE whose EC key method is OpenSSL's own. */
static int ec_nids[] = { EVP_PKEY_EC };
static int ec_meths(ENGINE *e, EVP_PKEY_METHOD **method, const int **nids, int nid) {
    (void)e;
    if (method == NULL) { *nids = ec_nids; return 1; }
    *method = nid == EVP_PKEY_EC ? (EVP_PKEY_METHOD *)EVP_PKEY_meth_find(EVP_PKEY_EC) : NULL;
    return *method != NULL;
}
/* CPU microseconds per d2i_X509 (and X509_free) of the DER file argv[1], over argv[2] decodings; argv[3] "builtin":
 * with that engine registered, "provider": without (OpenSSL 3.0's default). */
int main(int argc, char **argv) {
    static unsigned char der[65536];
    if (argc != 4) return 2;
    if (argv[3][0] == 'b') {
        ENGINE *engine = ENGINE_new();
        if (engine == NULL || !ENGINE_set_id(engine, "floor-costs-builtin-ec") || !ENGINE_set_name(engine, "builtin EC")
            || !ENGINE_set_pkey_meths(engine, ec_meths) || !ENGINE_register_pkey_meths(engine)) return 1;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) return 1;
    long n = (long)fread(der, 1, sizeof der, f), count = atol(argv[2]);
    struct timespec a, z;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (long i = 0; i < count; i++) {
        const unsigned char *p = der;
        X509 *x = d2i_X509(NULL, &p, n);
        if (x == NULL) return 1;
        X509_free(x);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &z);
    printf("%.2f\n", ((z.tv_sec - a.tv_sec) * 1e9 + (z.tv_nsec - a.tv_nsec)) / 1e3 / count);
    return 0;
}
C
cc -O2 -o "$work/decode" "$work/decode.c" -lcrypto

. bench/floor/start.sh
[ -n "$floor" ] || floor_start "$work"

# One value per repetition in each file; a missing one fails the run (no median of nothing).
for i in $(seq "$repeat"); do
    "$bench" costs --certificate "$work/leaf.der" --signed "$work/signed" --signature "$work/signature" >"$work/probe"
    awk -v w="$work" '$1 == "x25519-key-share" { print $2 >> (w "/share.all") }
         $1 == "x25519-agreement" { print $2 >> (w "/agree.all") }
         $1 == "p256-certificate-verify" { print $2 >> (w "/cv.all") }' "$work/probe"
    # -mr: +F4:index:bits:sign/s:verify/s
    openssl speed -mr -seconds 2 ecdsap256 2>/dev/null | awk -F: '/^\+F4:/ { printf "%.2f\n", 1e6 / $5 }' >>"$work/leafsig.all"
    "$work/decode" "$work/leaf.der" 5000 builtin >>"$work/decode.all"
    "$work/decode" "$work/leaf.der" 5000 provider >>"$work/provider.all"
    if [ -n "$floor_pid" ]; then
        "$bench" handshake --fresh-certificates --tls 1.3 -c "$concurrency" --duration "$duration" \
            --proxy "127.0.0.1:$floor_port" --proxy-pid "$floor_pid" --proxy-name floor --json "$work/floor$i.json" \
            >"$work/floor$i.txt" 2>&1 || { cat "$work/floor$i.txt" >&2; exit 1; }
        python3 -c 'import json, sys
report = json.load(open(sys.argv[1]))
assert report["ok"], "the floor run failed"
print("%.4f" % [r["proxy"]["cpuSecondsPer1000Connections"] for r in report["runs"] if r["target"] != "direct"][0])' \
            "$work/floor$i.json" >>"$work/floor.all"
    else
        echo "$floor" >>"$work/floor.all"
    fi
    awk -v i="$i" -v s="$(tail -1 "$work/share.all")" -v a="$(tail -1 "$work/agree.all")" -v c="$(tail -1 "$work/cv.all")" \
        -v l="$(tail -1 "$work/leafsig.all")" -v d="$(tail -1 "$work/decode.all")" -v p="$(tail -1 "$work/provider.all")" \
        -v f="$(tail -1 "$work/floor.all")" 'BEGIN {
        printf "repetition %d: key share %.2f, agreement %.2f, CertificateVerify %.2f, leaf signature %.2f,", i, s, a, c, l
        printf " leaf decoding %.2f us (provider decoders %.2f); floor %.4f ms per connection:", d, p, f
        printf " %.2f floors without the decoding, %.2f with it\n", 1 + (s + a + c + l) / (f * 1000), 1 + (s + a + c + l + d) / (f * 1000)
    }'
done
for f in share agree cv leafsig decode provider floor; do
    [ "$(grep -c . "$work/$f.all")" = "$repeat" ] || { echo "$0: $f: not one value per repetition" >&2; exit 1; }
done

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
awk -v n="$repeat" -v s="$(median "$work/share.all")" -v a="$(median "$work/agree.all")" \
    -v c="$(median "$work/cv.all")" -v l="$(median "$work/leafsig.all")" -v d="$(median "$work/decode.all")" \
    -v p="$(median "$work/provider.all")" \
    -v floor="$(median "$work/floor.all")" -v measured="${floor_pid:+measured}" 'BEGIN {
    printf "medians of %d, us of one core: the probe (swift-crypto): X25519 key share %.2f, X25519 agreement %.2f,", n, s, a
    printf " CertificateVerify %.2f; the validator (OpenSSL 3.0): the leaf signature %.2f, the leaf decoding %.2f", c, l, d
    printf " (provider decoders %.2f)\n", p
    required = s + a + c + l
    printf "a cold TLS 1.3 first contact: the probe %.0f + the leaf signature %.0f = %.0f us;", s + a + c, l, required
    printf " with the leaf decoded once, %.0f us\n", required + d
    f = floor * 1000
    printf "floor relay (%s) %.0f us per connection, so 4x is %.0f us. The relaying (1 floor) and the operations", (measured == "" ? "given" : "measured"), f, 4 * f
    printf " above: %.2f floors without the decoding, %.2f with it\n", 1 + required / f, 1 + (required + d) / f
}'
