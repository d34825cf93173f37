/* SPDX-License-Identifier: Apache-2.0 */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nook.h"
#include "egress/rules.h"
#include "egress/tls.h"
#include "util/error.h"
#include "util/macro.h"

#define LEAF_CACHE_MAX 128
#define LEAF_VALIDITY_SECS (24L * 3600)
#define CA_VALIDITY_SECS (365L * 24 * 3600)

typedef struct leaf {
        char *name;
        X509 *cert;
        time_t not_after;
} leaf;

struct egress_tls {
        EVP_PKEY *ca_key, *leaf_key;
        X509 *ca;
        SSL_CTX *server, *client;
        pthread_mutex_t lock, ctx_lock;
        bool ctx_ready;
        STACK_OF(X509) * extra_cas;
        leaf cache[LEAF_CACHE_MAX];
        size_t n_cache, next_evict;
};

egress_tls *egress_tls_free(egress_tls *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_cache; i++) {
                free(t->cache[i].name);
                X509_free(t->cache[i].cert);
        }
        sk_X509_pop_free(t->extra_cas, X509_free);
        SSL_CTX_free(t->server);
        SSL_CTX_free(t->client);
        X509_free(t->ca);
        EVP_PKEY_free(t->ca_key);
        EVP_PKEY_free(t->leaf_key);
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->ctx_lock);
        free(t);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(egress_tls *, egress_tls_free);

static int ssl_fail(nook_error *err, const char *what) {
        char buf[256] = "unknown error";
        unsigned long e = ERR_get_error();
        if (e)
                ERR_error_string_n(e, buf, sizeof(buf));
        ERR_clear_error();
        return nook_err_set(err, NOOK_E_INTERNAL, "%s: %s", what, buf);
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext)
                return -1;
        int r = X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
        return r == 1 ? 0 : -1;
}

/* A certificate skeleton: random serial, validity [now-1h, now+secs], subject CN. */
static X509 *cert_new(const char *cn, EVP_PKEY *key, long secs) {
        X509 *c = X509_new();
        unsigned char serial[16];
        if (!c || RAND_bytes(serial, sizeof(serial)) != 1)
                goto fail;
        serial[0] &= 0x7f;
        BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
        if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c))) {
                BN_free(bn);
                goto fail;
        }
        BN_free(bn);
        if (X509_set_version(c, 2) != 1 || !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
                !X509_gmtime_adj(X509_getm_notAfter(c), secs) || X509_set_pubkey(c, key) != 1)
                goto fail;
        X509_NAME *name = X509_get_subject_name(c);
        if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) != 1)
                goto fail;
        return c;
fail:
        X509_free(c);
        return NULL;
}

static int make_ca(egress_tls *t, const char *sandbox, nook_error *err) {
        char cn[128];
        t->ca_key = EVP_EC_gen("P-256");
        t->leaf_key = EVP_EC_gen("P-256");
        if (!t->ca_key || !t->leaf_key)
                return ssl_fail(err, "Cannot make the egress CA key");
        (void)snprintf(cn, sizeof(cn), "nook egress CA for %.64s", sandbox);
        t->ca = cert_new(cn, t->ca_key, CA_VALIDITY_SECS);
        if (!t->ca || X509_set_issuer_name(t->ca, X509_get_subject_name(t->ca)) != 1 ||
                add_ext(t->ca, t->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
                add_ext(t->ca, t->ca, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
                add_ext(t->ca, t->ca, NID_subject_key_identifier, "hash") < 0 ||
                X509_sign(t->ca, t->ca_key, EVP_sha256()) <= 0)
                return ssl_fail(err, "Cannot make the egress CA certificate");
        return 0;
}

static X509 *make_leaf(egress_tls *t, const char *name) {
        char san[EGRESS_HOST_MAX + 8];
        (void)snprintf(san, sizeof(san), "DNS:%s", name);
        X509 *c = cert_new(name, t->leaf_key, LEAF_VALIDITY_SECS);
        if (!c || X509_set_issuer_name(c, X509_get_subject_name(t->ca)) != 1 ||
                add_ext(c, t->ca, NID_subject_alt_name, san) < 0 ||
                add_ext(c, t->ca, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
                add_ext(c, t->ca, NID_key_usage, "critical,digitalSignature") < 0 ||
                add_ext(c, t->ca, NID_ext_key_usage, "serverAuth") < 0 ||
                add_ext(c, t->ca, NID_authority_key_identifier, "keyid") < 0 ||
                X509_sign(c, t->ca_key, EVP_sha256()) <= 0) {
                X509_free(c);
                return NULL;
        }
        return c;
}

/* The cached leaf for name, made when missing or within an hour of expiry.  Returns a new
 * reference. */
static X509 *leaf_get(egress_tls *t, const char *name) {
        time_t now = time(NULL);
        X509 *c = NULL;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->n_cache; i++)
                if (strcmp(t->cache[i].name, name) == 0 && t->cache[i].not_after > now + 3600) {
                        c = t->cache[i].cert;
                        X509_up_ref(c);
                        break;
                }
        pthread_mutex_unlock(&t->lock);
        if (c)
                return c;
        c = make_leaf(t, name);
        char *dup = c ? strdup(name) : NULL;
        if (!dup)
                return c;
        pthread_mutex_lock(&t->lock);
        size_t slot = t->n_cache < LEAF_CACHE_MAX ? t->n_cache++ : t->next_evict++ % LEAF_CACHE_MAX;
        if (slot < t->n_cache && t->cache[slot].name) {
                free(t->cache[slot].name);
                X509_free(t->cache[slot].cert);
        }
        X509_up_ref(c);
        t->cache[slot] = (leaf){ .name = dup, .cert = c, .not_after = now + LEAF_VALIDITY_SECS };
        pthread_mutex_unlock(&t->lock);
        return c;
}

/* The guest must name a host (SNI), a valid one; the leaf is made for exactly that name. */
static int sni_cb(SSL *ssl, int *alert, void *arg) {
        egress_tls *t = arg;
        const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
        nook_error e;
        if (!name || name[0] == '*' || egress_host_pattern_check(name, &e) < 0) {
                *alert = SSL_AD_UNRECOGNIZED_NAME;
                return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        X509 *c = leaf_get(t, name);
        if (!c || SSL_use_certificate(ssl, c) != 1 || SSL_use_PrivateKey(ssl, t->leaf_key) != 1 ||
                SSL_add1_chain_cert(ssl, t->ca) != 1) {
                X509_free(c);
                *alert = SSL_AD_INTERNAL_ERROR;
                return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        X509_free(c);
        return SSL_TLSEXT_ERR_OK;
}

static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
        unsigned inlen, void *arg) {
        static const unsigned char protos[] = "\x02h2\x08http/1.1";
        unsigned char *sel;
        if (SSL_select_next_proto(&sel, outlen, protos, sizeof(protos) - 1, in, inlen) !=
                OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_NOACK;
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
}

static int make_server_ctx(egress_tls *t, nook_error *err) {
        t->server = SSL_CTX_new(TLS_server_method());
        if (!t->server || SSL_CTX_set_min_proto_version(t->server, TLS1_2_VERSION) != 1)
                return ssl_fail(err, "Cannot make the guest-facing TLS context");
        SSL_CTX_set_tlsext_servername_callback(t->server, sni_cb);
        SSL_CTX_set_tlsext_servername_arg(t->server, t);
        SSL_CTX_set_alpn_select_cb(t->server, alpn_cb, t);
        SSL_CTX_set_options(t->server, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
        SSL_CTX_set_mode(t->server, SSL_MODE_RELEASE_BUFFERS);
        return 0;
}

/* extraCaPem parsed at start (a bad one is an error then), added to the store later. */
static int parse_extra_cas(egress_tls *t, const char *pem, nook_error *err) {
        BIO *bio = BIO_new_mem_buf(pem, -1);
        t->extra_cas = sk_X509_new_null();
        if (!bio || !t->extra_cas) {
                BIO_free(bio);
                return nook_err_oom(err);
        }
        for (;;) {
                X509 *c = PEM_read_bio_X509(bio, NULL, NULL, NULL);
                if (!c)
                        break;
                if (sk_X509_push(t->extra_cas, c) <= 0) {
                        X509_free(c);
                        BIO_free(bio);
                        return nook_err_oom(err);
                }
        }
        BIO_free(bio);
        ERR_clear_error();
        if (sk_X509_num(t->extra_cas) == 0)
                return nook_err_set(err, NOOK_E_INVALID, "'extraCaPem' holds no PEM certificate");
        return 0;
}

static int make_client_ctx(egress_tls *t, nook_error *err) {
        t->client = SSL_CTX_new(TLS_client_method());
        if (!t->client || SSL_CTX_set_min_proto_version(t->client, TLS1_2_VERSION) != 1)
                return ssl_fail(err, "Cannot make the upstream TLS context");
        /* The hashed directory is read per lookup; the bundle file would be parsed whole into
         * memory now (~1 MiB), in every idle gateway.  SSL_CERT_DIR/SSL_CERT_FILE are honoured. */
        const char *dir = getenv(X509_get_default_cert_dir_env());
        const char *file = getenv(X509_get_default_cert_file_env());
        if (SSL_CTX_load_verify_dir(t->client, dir ? dir : X509_get_default_cert_dir()) != 1 ||
                (file && SSL_CTX_load_verify_file(t->client, file) != 1))
                return ssl_fail(err, "Cannot load the host's CA store");
        X509_STORE *store = SSL_CTX_get_cert_store(t->client);
        for (int i = 0; t->extra_cas && i < sk_X509_num(t->extra_cas); i++)
                if (X509_STORE_add_cert(store, sk_X509_value(t->extra_cas, i)) != 1)
                        return ssl_fail(err, "Cannot add a certificate of extraCaPem");
        SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_mode(t->client, SSL_MODE_RELEASE_BUFFERS);
        if (SSL_CTX_set_alpn_protos(t->client, (const unsigned char *)"\x08http/1.1", 9) != 0)
                return ssl_fail(err, "Cannot set ALPN");
        return 0;
}

int egress_tls_new(const char *sandbox, const char *extra_ca_pem, egress_tls **ret, nook_error *err) {
        _cleanup_(egress_tls_freep) egress_tls *t = calloc(1, sizeof(*t));
        if (!t)
                return nook_err_oom(err);
        pthread_mutex_init(&t->lock, NULL);
        pthread_mutex_init(&t->ctx_lock, NULL);
        int r = make_ca(t, sandbox, err);
        if (r >= 0 && extra_ca_pem)
                r = parse_extra_cas(t, extra_ca_pem, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

int egress_tls_ca_pem(egress_tls *t, char **ret, nook_error *err) {
        BIO *bio = BIO_new(BIO_s_mem());
        char *data;
        if (!bio || PEM_write_bio_X509(bio, t->ca) != 1) {
                BIO_free(bio);
                return ssl_fail(err, "Cannot write the CA certificate");
        }
        long n = BIO_get_mem_data(bio, &data);
        *ret = strndup(data, (size_t)n);
        BIO_free(bio);
        return *ret ? 0 : nook_err_oom(err);
}

/* The two contexts are made on the first connection: OpenSSL's method and cipher caches they
 * fill are most of an idle gateway's private memory. */
static bool ensure_ctx(egress_tls *t) {
        nook_error err;
        pthread_mutex_lock(&t->ctx_lock);
        if (!t->ctx_ready) {
                if (make_server_ctx(t, &err) < 0 || make_client_ctx(t, &err) < 0) {
                        fprintf(stderr, "nook-egress: %s\n", err.msg);
                        SSL_CTX_free(t->server);
                        SSL_CTX_free(t->client);
                        t->server = t->client = NULL;
                } else
                        t->ctx_ready = true;
        }
        bool ready = t->ctx_ready;
        pthread_mutex_unlock(&t->ctx_lock);
        return ready;
}

SSL *egress_tls_guest_ssl(egress_tls *t, int fd) {
        if (!ensure_ctx(t))
                return NULL;
        SSL *s = SSL_new(t->server);
        if (s && SSL_set_fd(s, fd) != 1) {
                SSL_free(s);
                return NULL;
        }
        return s;
}

SSL *egress_tls_upstream_ssl(egress_tls *t, int fd, const char *host, bool offer_h2) {
        static const unsigned char h2_first[] = "\x02h2\x08http/1.1";
        if (!ensure_ctx(t))
                return NULL;
        SSL *s = SSL_new(t->client);
        if (!s)
                return NULL;
        if (SSL_set_fd(s, fd) != 1 || SSL_set_tlsext_host_name(s, host) != 1 ||
                SSL_set1_host(s, host) != 1 ||
                (offer_h2 && SSL_set_alpn_protos(s, h2_first, sizeof(h2_first) - 1) != 0)) {
                SSL_free(s);
                return NULL;
        }
        return s;
}

bool egress_tls_alpn_is_h2(SSL *ssl) {
        const unsigned char *p = NULL;
        unsigned n = 0;
        SSL_get0_alpn_selected(ssl, &p, &n);
        return n == 2 && memcmp(p, "h2", 2) == 0;
}

const char *egress_tls_sni(SSL *ssl) {
        return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
}

void egress_tls_describe_error(SSL *ssl, char *buf, size_t len) {
        long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
        unsigned long e = ERR_peek_last_error();
        char ebuf[256] = "";
        if (e)
                ERR_error_string_n(e, ebuf, sizeof(ebuf));
        ERR_clear_error();
        if (v != X509_V_OK)
                (void)snprintf(buf, len, "certificate verify failed: %s", X509_verify_cert_error_string(v));
        else
                (void)snprintf(buf, len, "%s", e ? ebuf : "the connection closed during the handshake");
}
