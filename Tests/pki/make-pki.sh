#!/usr/bin/env bash
# Makes chainwatch's test PKI with the openssl CLI (OpenSSL 3.0 or later).
#
#   Tests/pki/make-pki.sh OUTDIR          # writes OUTDIR; does nothing if OUTDIR is already complete
#   Tests/pki/make-pki.sh --force OUTDIR  # regenerates OUTDIR from scratch
#
# Deterministic names, subjects, serials and validity dates; keys and signatures are fresh on each
# generation (ECDSA is randomised), so fingerprints change when the PKI is regenerated: fingerprints.tsv
# records them, computed by the openssl CLI, for the tests to compare against.
#
# Keys are EC P-256 except where RSA is the point (weak-rsa1024). Validity 2020-01-01..2040-01-01 except
# `expired` (2020-01-01..2021-01-01). Dates need `openssl ca -startdate/-enddate`: OpenSSL 3.0's
# `x509 -req` has no -not_before/-not_after and faketime is not installed.
#
# For every server certificate NAME the directory holds:
#   NAME.key            private key (PEM, unencrypted)
#   NAME.pem            the leaf certificate
#   NAME.chain.pem      the certificates a server sends after the leaf (intermediate(s) only):
#                         openssl s_server -cert NAME.pem -key NAME.key -cert_chain NAME.chain.pem
#   NAME.fullchain.pem  leaf followed by the chain: nginx `ssl_certificate`
# CAs are CA.key + CA.pem. See README.md in OUTDIR (written by this script) for the list.
set -euo pipefail

force=no
if [[ "${1:-}" == "--force" ]]; then force=yes; shift; fi
out=${1:?usage: make-pki.sh [--force] OUTDIR}

if [[ -f "$out/.complete" && $force == no ]]; then
    echo "make-pki: $out is complete; use --force to regenerate" >&2
    exit 0
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Remove only what this script writes, so a half-written directory from an interrupted run is redone.
rm -f "$out"/*.key "$out"/*.pem "$out"/fingerprints.tsv "$out"/README.md "$out"/.complete

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

START=20200101000000Z
END=20400101000000Z

cat > "$work/ca.cnf" <<'CNF'
[ ca ]
default_ca = issuer

[ issuer ]
dir             = $ENV::CA_DIR
database        = $dir/index.txt
new_certs_dir   = $dir/new
serial          = $dir/serial
default_md      = sha256
policy          = policy_any
unique_subject  = no
copy_extensions = none
email_in_dn     = no
name_opt        = ca_default
cert_opt        = ca_default

# Field order of issued subjects follows this section.
[ policy_any ]
organizationName = optional
commonName       = supplied

[ v3_root ]
basicConstraints     = critical, CA:TRUE
keyUsage             = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[ v3_intermediate ]
basicConstraints       = critical, CA:TRUE, pathlen:0
keyUsage               = critical, keyCertSign, cRLSign
subjectKeyIdentifier   = hash
authorityKeyIdentifier = keyid:always

[ v3_leaf ]
basicConstraints       = critical, CA:FALSE
keyUsage               = critical, digitalSignature, keyEncipherment
extendedKeyUsage       = serverAuth
subjectAltName         = $ENV::SAN
subjectKeyIdentifier   = hash
authorityKeyIdentifier = keyid:always
CNF

# ca_state NAME FIRST_SERIAL: a fresh `openssl ca` database for issuer NAME.
ca_state() {
    mkdir -p "$work/$1/new"
    : > "$work/$1/index.txt"
    echo "$2" > "$work/$1/serial"
}

ec_key()  { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$out/$1.key" 2>/dev/null; }
rsa_key() { openssl genpkey -algorithm RSA -pkeyopt "rsa_keygen_bits:$2" -out "$out/$1.key" 2>/dev/null; }

# sign ISSUER NAME SUBJECT EXTENSIONS [START END [MD]]: NAME.key -> NAME.pem, signed by ISSUER
# (ISSUER == NAME: self-signed root).
sign() {
    openssl req -new -key "$out/$2.key" -subj "$3" -out "$work/$2.csr" 2>/dev/null
    issue "$1" "$2" "${@:4}"
}

# issue ISSUER NAME EXTENSIONS [START END [MD]]: the signing half of `sign`, from the request it left in $work/NAME.csr.
issue() {
    local issuer=$1 name=$2 ext=$3 start=${4:-$START} end=${5:-$END} md=${6:-sha256}
    local signer=(-cert "$out/$issuer.pem" -keyfile "$out/$issuer.key")
    if [[ $issuer == "$name" ]]; then signer=(-selfsign -keyfile "$out/$name.key"); ca_state "$name" 01; fi
    CA_DIR="$work/$issuer" SAN="${SAN:-DNS:unused.invalid}" openssl ca -batch -notext -config "$work/ca.cnf" \
        "${signer[@]}" -in "$work/$name.csr" -out "$out/$name.pem" \
        -extensions "$ext" -startdate "$start" -enddate "$end" -md "$md" 2>"$work/$name.err" \
        || { cat "$work/$name.err" >&2; exit 1; }
}

# der NAME: sets der_len (bytes of NAME.pem's DER) and tbs_len (bytes of its TBSCertificate, header included).
der() {
    sed '/-----/d' "$out/$1.pem" | base64 -d > "$work/der"
    der_len=$(wc -c < "$work/der")
    local b
    read -ra b < <(od -An -tu1 -j4 -N4 "$work/der")
    case ${b[1]} in
        129) tbs_len=$((3 + b[2])) ;;
        130) tbs_len=$((4 + b[2] * 256 + b[3])) ;;
        *)   tbs_len=$((2 + b[1])) ;;
    esac
}

# Tries (signatures, ~30 ms each) `sign_matched` makes per certificate before it fails. An ECDSA P-256 signature's DER
# is 72, 71 or 70 bytes with odds ~1/4, 1/2, 1/4: a few tries. ~1 in 512 is 69 bytes: matching a genuine certificate
# with such a signature takes ~512 tries (~15 s), and 2000 tries miss 2% of the time, so ~1 run in 8000 fails (loudly).
MAKE_PKI_MATCH_TRIES=${MAKE_PKI_MATCH_TRIES:-2000}

# sign_matched GENUINE ISSUER NAME SUBJECT EXTENSIONS [ISSUER_SERIAL]: a new NAME.key, and NAME.pem signed like `sign`
# (ISSUER's `openssl ca` database reset to ISSUER_SERIAL before each try, so NAME gets the same serial every time), re-signed
# until its DER is exactly as long as GENUINE.pem's. ECDSA signatures are randomised, so their DER length varies: a new
# signature changes the length. A TBSCertificate of another length (a key encoded otherwise) takes a new key instead.
# Fails the script, removing NAME.pem, after MAKE_PKI_MATCH_TRIES tries: never a chain whose lengths silently differ.
sign_matched() {
    local genuine=$1 issuer=$2 name=$3 subject=$4 ext=$5 serial=${6:-} want want_tbs try csr=new
    der "$genuine"; want=$der_len; want_tbs=$tbs_len
    ec_key "$name"
    for ((try = 1; try <= MAKE_PKI_MATCH_TRIES; try++)); do
        if [[ -n $serial ]]; then ca_state "$issuer" "$serial"; fi
        if [[ $csr == new ]]; then sign "$issuer" "$name" "$subject" "$ext"; csr=made; else issue "$issuer" "$name" "$ext"; fi
        der "$name"
        if [[ $der_len == "$want" ]]; then return 0; fi
        # Same TBSCertificate length: only the signature's differs, and the next one may fix it. Otherwise a new key.
        if [[ $tbs_len != "$want_tbs" ]]; then ec_key "$name"; csr=new; fi
    done
    rm -f "$out/$name.pem"
    echo "make-pki: FAILED: $name.pem: no DER length of $want bytes (that of $genuine.pem) in $MAKE_PKI_MATCH_TRIES tries" \
         "(last: $der_len bytes, TBSCertificate $tbs_len bytes, $genuine's $want_tbs)" >&2
    exit 1
}

# server NAME ISSUER_CHAIN...: writes NAME.chain.pem and NAME.fullchain.pem.
bundle() {
    local name=$1; shift
    : > "$out/$name.chain.pem"
    for c in "$@"; do cat "$out/$c.pem" >> "$out/$name.chain.pem"; done
    cat "$out/$name.pem" "$out/$name.chain.pem" > "$out/$name.fullchain.pem"
}

O="/O=Chainwatch Test"

# genuine: root -> intermediate -> genuine.test
ec_key genuine-root;         sign genuine-root genuine-root "$O/CN=Chainwatch Test Root" v3_root
ca_state genuine-root 1000
ec_key genuine-intermediate; sign genuine-root genuine-intermediate "$O/CN=Chainwatch Test Intermediate" v3_intermediate
ca_state genuine-intermediate 2000
SAN="DNS:genuine.test,IP:127.0.0.1" ec_key genuine
SAN="DNS:genuine.test,IP:127.0.0.1" sign genuine-intermediate genuine "$O/CN=genuine.test" v3_leaf
bundle genuine genuine-intermediate

# rekeyed: new key, same subject and SANs, same intermediate.
ec_key rekeyed
SAN="DNS:genuine.test,IP:127.0.0.1" sign genuine-intermediate rekeyed "$O/CN=genuine.test" v3_leaf
bundle rekeyed genuine-intermediate

# otherhost: other.test under the genuine intermediate.
ec_key otherhost
SAN="DNS:other.test" sign genuine-intermediate otherhost "$O/CN=other.test" v3_leaf
bundle otherhost genuine-intermediate

# expired: genuine.test, valid only during 2020.
ec_key expired
SAN="DNS:genuine.test,IP:127.0.0.1" sign genuine-intermediate expired "$O/CN=genuine.test" v3_leaf 20200101000000Z 20210101000000Z
bundle expired genuine-intermediate

# weak-rsa1024: RSA 1024 leaf; weak-sha1: P-256 leaf signed ecdsa-with-SHA1. Both under the genuine intermediate.
rsa_key weak-rsa1024 1024
SAN="DNS:genuine.test,IP:127.0.0.1" sign genuine-intermediate weak-rsa1024 "$O/CN=genuine.test" v3_leaf
bundle weak-rsa1024 genuine-intermediate
ec_key weak-sha1
SAN="DNS:genuine.test,IP:127.0.0.1" sign genuine-intermediate weak-sha1 "$O/CN=genuine.test" v3_leaf "$START" "$END" sha1
bundle weak-sha1 genuine-intermediate

# other-intermediate: a second intermediate under the genuine root, and a genuine.test leaf under it.
ca_state genuine-root 1100
ec_key genuine-intermediate-b
sign genuine-root genuine-intermediate-b "$O/CN=Chainwatch Test Intermediate B" v3_intermediate
ca_state genuine-intermediate-b 3000
ec_key other-intermediate
SAN="DNS:genuine.test,IP:127.0.0.1" sign genuine-intermediate-b other-intermediate "$O/CN=genuine.test" v3_leaf
bundle other-intermediate genuine-intermediate-b

# attacker: subjects and serials identical to the genuine ones, other keys (an interception CA).
ec_key attacker-root;         sign attacker-root attacker-root "$O/CN=Chainwatch Test Root" v3_root
ca_state attacker-root 1000
ec_key attacker-intermediate; sign attacker-root attacker-intermediate "$O/CN=Chainwatch Test Intermediate" v3_intermediate
ca_state attacker-intermediate 2000
ec_key attacker
SAN="DNS:genuine.test,IP:127.0.0.1" sign attacker-intermediate attacker "$O/CN=genuine.test" v3_leaf
bundle attacker attacker-intermediate

# matched: the attacker chain again (subjects, serials, validity, extensions and key types of the genuine chain, other
# keys), each certificate's DER exactly as long as the genuine one's: a TLS 1.3 forged flight record-for-record the genuine
# one's length. Issuers first: the root, then the intermediate it signs, then the leaf.
sign_matched genuine-root matched-root matched-root "$O/CN=Chainwatch Test Root" v3_root
sign_matched genuine-intermediate matched-root matched-intermediate "$O/CN=Chainwatch Test Intermediate" v3_intermediate 1000
SAN="DNS:genuine.test,IP:127.0.0.1" sign_matched genuine matched-intermediate matched "$O/CN=genuine.test" v3_leaf 2000
bundle matched matched-intermediate

# selfsigned: a private CA that directly signs the server's leaf (trusted only through that CA).
ec_key private-ca; sign private-ca private-ca "$O/CN=Chainwatch Private CA" v3_root
ca_state private-ca 4000
ec_key selfsigned
SAN="DNS:private.test" sign private-ca selfsigned "$O/CN=private.test" v3_leaf
bundle selfsigned private-ca

# Every certificate's fingerprints as the openssl CLI computes them (uppercase hex, no colons).
{
    printf 'name\tsha256\tspki_sha256\tserial\tsubject\tissuer\n'
    for pem in "$out"/*.pem; do
        name=$(basename "$pem" .pem)
        [[ $name == *.chain || $name == *.fullchain ]] && continue
        fp=$(openssl x509 -in "$pem" -noout -fingerprint -sha256 | sed 's/.*=//; s/://g')
        spki=$(openssl x509 -in "$pem" -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum | cut -d' ' -f1 | tr a-f A-F)
        serial=$(openssl x509 -in "$pem" -noout -serial | sed 's/.*=//')
        subject=$(openssl x509 -in "$pem" -noout -subject -nameopt RFC2253 | sed 's/^subject=//')
        issuer=$(openssl x509 -in "$pem" -noout -issuer -nameopt RFC2253 | sed 's/^issuer=//')
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$fp" "$spki" "$serial" "$subject" "$issuer"
    done
} > "$out/fingerprints.tsv"

cat > "$out/README.md" <<'MD'
# chainwatch test PKI (generated by Tests/pki/make-pki.sh; do not edit by hand)

| name | what | key | issuer |
|---|---|---|---|
| genuine-root | "Chainwatch Test Root" | P-256 | self |
| genuine-intermediate | "Chainwatch Test Intermediate" | P-256 | genuine-root |
| genuine-intermediate-b | "Chainwatch Test Intermediate B" | P-256 | genuine-root |
| attacker-root / attacker-intermediate | same subjects and serials as the genuine ones, other keys | P-256 | attacker-root |
| matched-root / matched-intermediate | same subjects and serials as the genuine ones, other keys, each DER as long as the genuine one's | P-256 | matched-root |
| private-ca | "Chainwatch Private CA" | P-256 | self |
| genuine | genuine.test, IP 127.0.0.1 | P-256 | genuine-intermediate |
| rekeyed | genuine.test, new key, same subject | P-256 | genuine-intermediate |
| otherhost | other.test | P-256 | genuine-intermediate |
| expired | genuine.test, valid 2020-01-01..2021-01-01 | P-256 | genuine-intermediate |
| weak-rsa1024 | genuine.test | RSA 1024 | genuine-intermediate |
| weak-sha1 | genuine.test, signed ecdsa-with-SHA1 | P-256 | genuine-intermediate |
| other-intermediate | genuine.test | P-256 | genuine-intermediate-b |
| attacker | genuine.test | P-256 | attacker-intermediate |
| matched | genuine.test; the attacker chain with the genuine DER lengths: a TLS 1.3 forged flight record-for-record the genuine one's length | P-256 | matched-intermediate |
| selfsigned | private.test | P-256 | private-ca |

Validity 2020-01-01T00:00:00Z..2040-01-01T00:00:00Z unless stated.
Servers: `NAME.key`, `NAME.pem` (leaf), `NAME.chain.pem` (what follows the leaf: `openssl s_server -cert_chain`),
`NAME.fullchain.pem` (leaf + chain: nginx `ssl_certificate`). CAs: `CA.key`, `CA.pem`.
`fingerprints.tsv`: SHA-256 of each certificate's DER and of its SubjectPublicKeyInfo, serial, RFC 2253 subject
and issuer, as printed by the openssl CLI.
MD

touch "$out/.complete"
echo "make-pki: wrote $out" >&2
