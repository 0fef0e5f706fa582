#!/usr/bin/env bash
# What a cold TLS 1.3 first contact cannot avoid, measured on this machine at OpenSSL's own speed (its assembly, one
# core): the probe's X25519 key generation and agreement, the server's CertificateVerify (ECDSA P-256), the leaf's
# signature by its intermediate (ECDSA P-256), and Debian's OpenSSL 3.0 decoding the new leaf (d2i_X509, the cost
# the cold path's profiles found behind the chain's validation). The bench's chains are P-256 throughout and its
# client offers x25519, so these are the operations of every `bench/cold.sh` TLS 1.3 connection. Prints each cost in
# microseconds (median of the repetitions), their sum, and, given the floor relay's CPU per connection from
# bench/cold.sh, what the relaying plus that sum is in floors, beside the 4x bound.
#
#   bench/floor-costs.sh [--repeat 5] [--floor-ms 0.139]
#
# Needs openssl, cc and libssl-dev (the build's own dependencies). Takes about 10 s per repetition.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=5 floor=""
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --floor-ms) floor=$2; shift 2 ;;
        *) echo "usage: $0 [--repeat N] [--floor-ms MS]" >&2; exit 2 ;;
    esac
done
command -v cc >/dev/null || { echo "$0: needs a C compiler (apt-get install gcc)" >&2; exit 2; }
work=$(mktemp -d /tmp/chainwatch-floor-costs-XXXXXX)
trap 'rm -rf "$work"' EXIT

# A P-256 leaf like the bench's: its own key, a subject and a SAN, signed by a P-256 issuer.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/ca.key" 2>/dev/null
openssl req -new -x509 -key "$work/ca.key" -subj "/CN=floor-costs issuer" -days 30 -out "$work/ca.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/leaf.key" 2>/dev/null
openssl req -new -key "$work/leaf.key" -subj "/CN=cold.example" -out "$work/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:cold.example\n' >"$work/ext"
openssl x509 -req -in "$work/leaf.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 30 \
    -extfile "$work/ext" -outform DER -out "$work/leaf.der" 2>/dev/null

cat >"$work/costs.c" <<'C'
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* CPU microseconds per operation over argv[3] of them: "decode FILE", d2i_X509 (and X509_free) of a DER file;
 * "keygen -", an X25519 key pair's generation (EVP_PKEY_keygen), the probe's first step. */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
int main(int argc, char **argv) {
    static unsigned char der[65536];
    if (argc != 4) return 2;
    long count = atol(argv[3]), n = 0;
    int decode = argv[1][0] == 'd';
    if (decode) {
        FILE *f = fopen(argv[2], "rb");
        if (f == NULL) return 1;
        n = (long)fread(der, 1, sizeof der, f);
    }
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, NULL);
    if (ctx == NULL || EVP_PKEY_keygen_init(ctx) <= 0) return 1;
    double start = now();
    for (long i = 0; i < count; i++) {
        if (decode) {
            const unsigned char *p = der;
            X509 *x = d2i_X509(NULL, &p, n);
            if (x == NULL) return 1;
            X509_free(x);
        } else {
            EVP_PKEY *key = NULL;
            if (EVP_PKEY_keygen(ctx, &key) <= 0) return 1;
            EVP_PKEY_free(key);
        }
    }
    printf("%.2f\n", (now() - start) / count);
    return 0;
}
C
cc -O2 -o "$work/costs" "$work/costs.c" -lcrypto

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
: >"$work/agree"; : >"$work/keygen"; : >"$work/verify"; : >"$work/decode"
for _ in $(seq "$repeat"); do
    speed=$(openssl speed -mr -seconds 2 ecdsap256 ecdhx25519 2>/dev/null)
    # -mr lines: +F4:index:bits:sign/s:verify/s (ECDSA), +F5:index:bits:derive/s:seconds per derive (ECDH)
    awk -F: '/^\+F4:/ { printf "%.2f\n", 1e6 / $5 }' <<<"$speed" >>"$work/verify"
    awk -F: '/^\+F5:/ { printf "%.2f\n", 1e6 / $4 }' <<<"$speed" >>"$work/agree"
    "$work/costs" keygen - 20000 >>"$work/keygen"
    "$work/costs" decode "$work/leaf.der" 5000 >>"$work/decode"
done
k=$(median <"$work/keygen") a=$(median <"$work/agree") v=$(median <"$work/verify") d=$(median <"$work/decode")
echo "per operation, median of $repeat, us of one core: X25519 key generation $k, X25519 agreement $a," \
    "ECDSA P-256 verification $v, d2i_X509 of a P-256 leaf $d"
awk -v k="$k" -v a="$a" -v v="$v" -v d="$d" -v floor="$floor" 'BEGIN {
    crypto = k + a + 2 * v
    printf "a cold TLS 1.3 first contact: the key exchange %.0f + the CertificateVerify and the leaf signature %.0f", k + a, 2 * v
    printf " = %.0f us; with OpenSSL 3.0 decoding the leaf once, %.0f us\n", crypto, crypto + d
    if (floor != "") {
        f = floor * 1000
        printf "floor relay %.0f us per connection, so 4x is %.0f us. The relaying (1 floor) and the operations above:", f, 4 * f
        printf " %.2f floors without the decoding, %.2f with it\n", 1 + crypto / f, 1 + (crypto + d) / f
    }
}'
