#ifndef CHAINWATCH_COPENSSL_SHIM_H
#define CHAINWATCH_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
#include <openssl/bio.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
#include <openssl/ocsp.h>
#include <openssl/engine.h>
#include <openssl/dh.h>

// Macros do not import into Swift: each wrapper is named c_openssl_<exact C name>.
static inline long c_openssl_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
static inline long c_openssl_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline int c_openssl_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *c_openssl_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
static inline STACK_OF(X509) *c_openssl_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int c_openssl_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline void c_openssl_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
static inline void c_openssl_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }
static inline int c_openssl_sk_GENERAL_NAME_num(const STACK_OF(GENERAL_NAME) *sk) { return sk_GENERAL_NAME_num(sk); }
static inline GENERAL_NAME *c_openssl_sk_GENERAL_NAME_value(const STACK_OF(GENERAL_NAME) *sk, int i) { return sk_GENERAL_NAME_value(sk, i); }
static inline void c_openssl_GENERAL_NAMES_free(GENERAL_NAMES *names) { GENERAL_NAMES_free(names); }
static inline long c_openssl_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int v) { return SSL_CTX_set_min_proto_version(ctx, v); }
static inline long c_openssl_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int v) { return SSL_CTX_set_max_proto_version(ctx, v); }
static inline long c_openssl_SSL_set_max_proto_version(SSL *ssl, int v) { return SSL_set_max_proto_version(ssl, v); }
static inline long c_openssl_SSL_set_min_proto_version(SSL *ssl, int v) { return SSL_set_min_proto_version(ssl, v); }
static inline long c_openssl_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long m) { return SSL_CTX_set_session_cache_mode(ctx, m); }
static inline unsigned long c_openssl_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }
static inline int c_openssl_OPENSSL_VERSION(void) { return OPENSSL_VERSION; }
static inline long c_openssl_SSL_CTX_set_mode(SSL_CTX *ctx, long m) { return SSL_CTX_set_mode(ctx, m); }
static inline unsigned long c_openssl_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
static inline void c_openssl_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline long c_openssl_BIO_set_mem_eof_return(BIO *bio, int v) { return BIO_set_mem_eof_return(bio, v); }
static inline long c_openssl_SSL_set1_groups_list(SSL *ssl, const char *list) { return SSL_set1_groups_list(ssl, list); }
static inline long c_openssl_SSL_set1_sigalgs_list(SSL *ssl, const char *list) { return SSL_set1_sigalgs_list(ssl, list); }
static inline long c_openssl_SSL_set_tlsext_status_type(SSL *ssl, int type) { return SSL_set_tlsext_status_type(ssl, type); }
static inline long c_openssl_SSL_get_tlsext_status_ocsp_resp(SSL *ssl, const unsigned char **resp) { return SSL_get_tlsext_status_ocsp_resp(ssl, resp); }
static inline void c_openssl_SSL_set_msg_callback_arg(SSL *ssl, void *arg) { SSL_set_msg_callback_arg(ssl, arg); }
static inline int c_openssl_sk_SSL_CIPHER_num(const STACK_OF(SSL_CIPHER) *sk) { return sk_SSL_CIPHER_num(sk); }
static inline const SSL_CIPHER *c_openssl_sk_SSL_CIPHER_value(const STACK_OF(SSL_CIPHER) *sk, int i) { return sk_SSL_CIPHER_value(sk, i); }
static inline uint64_t c_openssl_SSL_OP_NO_ENCRYPT_THEN_MAC(void) { return SSL_OP_NO_ENCRYPT_THEN_MAC; }
static inline uint64_t c_openssl_SSL_OP_NO_EXTENDED_MASTER_SECRET(void) { return SSL_OP_NO_EXTENDED_MASTER_SECRET; }
static inline uint64_t c_openssl_SSL_OP_TLSEXT_PADDING(void) { return SSL_OP_TLSEXT_PADDING; }
static inline int c_openssl_SSL3_RT_HEADER(void) { return SSL3_RT_HEADER; }
// EC public keys decoded through OpenSSL's own built-in EC method instead of 3.0's provider decoders. In 3.0,
// d2i_X509 decodes a certificate's key eagerly, and by default through OSSL_DECODER_CTX_new_for_pkey, which builds a
// decoder context per key: about 170 us of a P-256 leaf's 200 us here, the largest single cost of a first contact
// (bench/RESULTS.md). X509_PUBKEY's decoding takes the legacy path instead when an ENGINE supplies the key type's
// EVP_PKEY_METHOD, so this registers one whose method for EVP_PKEY_EC is the library's own built-in one
// (EVP_PKEY_meth_find): the same code, the same checks (the point on its curve, explicit parameters refused by
// X509_verify_cert), no other implementation. It reaches every EC key operation of the process: each EVP_PKEY_CTX for
// an EC key (also one made by name, or for a provider's key) then uses that method, whose key generation knows
// OpenSSL's curve names (prime256v1, secp384r1) and not NIST's ("P-256" fails). libssl's handshakes are unaffected;
// nothing else in `chainwatch run` makes EC keys with OpenSSL. An SM2 key then reads as EC (EVP_PKEY_get_base_id).
// Call once, before other threads use OpenSSL. The engine stays registered for the process and must not be freed:
// the engine table keeps the pointer without a reference. Returns 1 when registered. `c_chainwatch_ec_engine` keeps
// the pointer where a leak checker finds it: OpenSSL's exit handler frees its engine tables, and LeakSanitizer then
// called the engine, which lives as long as the process by design, a leak (and failed every process's exit).
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static int c_chainwatch_ec_key_nids[] = { EVP_PKEY_EC };
static ENGINE *c_chainwatch_ec_engine = NULL;
static inline int c_chainwatch_ec_pkey_meths(ENGINE *engine, EVP_PKEY_METHOD **method, const int **nids, int nid) {
    (void)engine;
    if (method == NULL) { *nids = c_chainwatch_ec_key_nids; return 1; }
    *method = nid == EVP_PKEY_EC ? (EVP_PKEY_METHOD *)EVP_PKEY_meth_find(EVP_PKEY_EC) : NULL;
    return *method != NULL;
}
/* OpenSSL without its exit handler: the handler (OPENSSL_cleanup, registered by the first initialisation) frees the
 * library context's locks while threads that outlive `run` (a validation thread mid-job) may still use them. Must be
 * the process's first OpenSSL call to take effect; 1 on success. */
static inline int c_chainwatch_openssl_without_exit_cleanup(void) {
    return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

static inline int c_chainwatch_decode_ec_keys_builtin(void) {
    ENGINE *engine = ENGINE_new();
    if (engine == NULL) return 0;
    if (!ENGINE_set_id(engine, "chainwatch-builtin-ec") || !ENGINE_set_name(engine, "OpenSSL's built-in EC key method")
        || !ENGINE_set_pkey_meths(engine, c_chainwatch_ec_pkey_meths) || !ENGINE_register_pkey_meths(engine)) {
        ENGINE_free(engine);
        return 0;
    }
    c_chainwatch_ec_engine = engine;
    return 1;
}
#pragma clang diagnostic pop
#endif
