/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* What the CA child sends (ca_from_child), in this order. */
enum { SEED_PEM, SEED_CA, SEED_CA_KEY, SEED_LEAF_KEY, SEED_N };
#define SEED_MAX ((size_t)64 * 1024)

struct egress_tls {
        /* From the CA child until the first connection decodes them (seed_decode): DER of the CA
         * certificate and the two keys (wiped when decoded), the CA as PEM, extraCaPem. */
        unsigned char *seed[SEED_N];
        size_t seed_len[SEED_N];
        char *extra_ca_pem;
        EVP_PKEY *ca_key, *leaf_key;
        X509 *ca;
        SSL_CTX *server, *client;
        pthread_mutex_t lock, ctx_lock;
        bool ctx_ready;
        STACK_OF(X509) * extra_cas;
        leaf cache[LEAF_CACHE_MAX];
        size_t n_cache, next_evict;
};

static void seed_wipe(egress_tls *t, size_t from) {
        for (size_t i = from; i < SEED_N; i++) {
                if (t->seed[i])
                        explicit_bzero(t->seed[i], t->seed_len[i]);
                free(t->seed[i]);
                t->seed[i] = NULL;
                t->seed_len[i] = 0;
        }
}

egress_tls *egress_tls_free(egress_tls *t) {
        if (!t)
                return NULL;
        seed_wipe(t, 0);
        free(t->extra_ca_pem);
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

/* OpenSSL's three TLS 1.3 suites, AES-128-GCM first (its default puts AES-256-GCM first): the
 * gateway decrypts and encrypts every byte it relays, and AES-128 does 10 rounds where AES-256
 * does 14.  Towards the guest our order wins (SSL_OP_CIPHER_SERVER_PREFERENCE; the guest runs
 * on the same CPU, so what is fast here is fast there); the upstream picks from our list by its
 * own rules. */
#define TLS13_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

static int make_server_ctx(egress_tls *t, nook_error *err) {
        t->server = SSL_CTX_new(TLS_server_method());
        if (!t->server || SSL_CTX_set_min_proto_version(t->server, TLS1_2_VERSION) != 1)
                return ssl_fail(err, "Cannot make the guest-facing TLS context");
        SSL_CTX_set_tlsext_servername_callback(t->server, sni_cb);
        SSL_CTX_set_tlsext_servername_arg(t->server, t);
        SSL_CTX_set_alpn_select_cb(t->server, alpn_cb, t);
        SSL_CTX_set_options(t->server,
                SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
        SSL_CTX_set_mode(t->server, SSL_MODE_RELEASE_BUFFERS);
        if (SSL_CTX_set_ciphersuites(t->server, TLS13_SUITES) != 1)
                return ssl_fail(err, "Cannot set the TLS 1.3 cipher suites");
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
        if (SSL_CTX_set_ciphersuites(t->client, TLS13_SUITES) != 1)
                return ssl_fail(err, "Cannot set the TLS 1.3 cipher suites");
        if (SSL_CTX_set_alpn_protos(t->client, (const unsigned char *)"\x08http/1.1", 9) != 0)
                return ssl_fail(err, "Cannot set ALPN");
        return 0;
}

static int pem_of(X509 *cert, char **ret, nook_error *err) {
        BIO *bio = BIO_new(BIO_s_mem());
        char *data;
        if (!bio || PEM_write_bio_X509(bio, cert) != 1) {
                BIO_free(bio);
                return ssl_fail(err, "Cannot write the CA certificate");
        }
        long n = BIO_get_mem_data(bio, &data);
        *ret = strndup(data, (size_t)n);
        BIO_free(bio);
        return *ret ? 0 : nook_err_oom(err);
}

/* ---- the CA, made by a short-lived child ------------------------------------------------------
 * Making two keys and signing a certificate touches megabytes of libcrypto (code, tables, its
 * default library context) that an idle gateway would keep resident, shared or not.  A child
 * does it and exits; this process gets the CA certificate (PEM and DER) and the two keys (DER)
 * through a pipe and decodes them on the first connection (seed_decode): until then it has not
 * called into libcrypto at all.  The child also parses extraCaPem, so a bad one still fails the
 * start.  The keys only cross a pipe between the two processes of this gateway. */

static int write_full(int fd, const void *p, size_t n) {
        const char *c = p;
        while (n > 0) {
                ssize_t r = write(fd, c, n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return -1;
                c += r;
                n -= (size_t)r;
        }
        return 0;
}

static int seed_put(int fd, const void *p, int n) {
        uint32_t len = n > 0 ? (uint32_t)n : 0;
        return n <= 0 || write_full(fd, &len, sizeof(len)) < 0 || write_full(fd, p, len) < 0 ? -1 : 0;
}

/* In the child: 'K' and the SEED_N fields (u32 length, bytes), or 'E' and a message. */
_Noreturn static void ca_child(int fd, const char *sandbox, const char *extra_ca_pem) {
        egress_tls c = { 0 };
        nook_error err = {};
        unsigned char *der[SEED_N] = { 0 };
        int len[SEED_N] = { 0 };
        char *pem = NULL;
        int r = make_ca(&c, sandbox, &err);
        if (r >= 0 && extra_ca_pem)
                r = parse_extra_cas(&c, extra_ca_pem, &err);
        if (r >= 0)
                r = pem_of(c.ca, &pem, &err);
        if (r >= 0) {
                len[SEED_PEM] = (int)strlen(pem);
                len[SEED_CA] = i2d_X509(c.ca, &der[SEED_CA]);
                len[SEED_CA_KEY] = i2d_PrivateKey(c.ca_key, &der[SEED_CA_KEY]);
                len[SEED_LEAF_KEY] = i2d_PrivateKey(c.leaf_key, &der[SEED_LEAF_KEY]);
                der[SEED_PEM] = (unsigned char *)pem;
                for (size_t i = 0; i < SEED_N && r >= 0; i++)
                        if (len[i] <= 0)
                                r = ssl_fail(&err, "Cannot encode the egress CA");
        }
        if (r < 0) {
                (void)write_full(fd, "E", 1);
                (void)seed_put(fd, err.msg, (int)strlen(err.msg));
                _exit(1);
        }
        int w = write_full(fd, "K", 1);
        for (size_t i = 0; i < SEED_N && w >= 0; i++)
                w = seed_put(fd, der[i], len[i]);
        _exit(w < 0 ? 1 : 0);
}

/* The child's answer: fields into t->seed, or its error into err. */
static int seed_parse(egress_tls *t, const unsigned char *buf, size_t n, nook_error *err) {
        size_t at = 1;
        size_t fields = n > 0 && buf[0] == 'K' ? SEED_N : 1;
        for (size_t i = 0; i < fields; i++) {
                uint32_t len;
                if (n - at < sizeof(len))
                        return -EBADMSG;
                memcpy(&len, buf + at, sizeof(len));
                at += sizeof(len);
                if (n - at < len)
                        return -EBADMSG;
                if (buf[0] == 'E')
                        return nook_err_set(err, NOOK_E_INVALID, "%.*s", (int)len, (const char *)buf + at);
                t->seed[i] = malloc((size_t)len + 1);
                if (!t->seed[i])
                        return nook_err_oom(err);
                memcpy(t->seed[i], buf + at, len);
                t->seed[i][len] = 0;
                t->seed_len[i] = len;
                at += len;
        }
        return n > 0 && buf[0] == 'K' ? 0 : -EBADMSG;
}

static int ca_from_child(egress_tls *t, const char *sandbox, const char *extra_ca_pem, nook_error *err) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make a pipe for the egress CA");
        pid_t pid = fork();
        if (pid < 0) {
                close(p[0]);
                close(p[1]);
                return nook_err_errno(err, NOOK_E_IO, "Cannot fork the process that makes the egress CA");
        }
        if (pid == 0) {
                close(p[0]);
                ca_child(p[1], sandbox, extra_ca_pem);
        }
        close(p[1]);
        _cleanup_free_ unsigned char *buf = malloc(SEED_MAX);
        size_t n = 0;
        ssize_t k = 0;
        while (buf && n < SEED_MAX &&
                ((k = read(p[0], buf + n, SEED_MAX - n)) > 0 || (k < 0 && errno == EINTR)))
                n += k > 0 ? (size_t)k : 0;
        close(p[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        int r = buf ? seed_parse(t, buf, n, err) : nook_err_oom(err);
        if (buf)
                explicit_bzero(buf, n);
        if (r == -EBADMSG)
                return nook_err_set(err, NOOK_E_INTERNAL,
                        "the process making the egress CA ended without one (wait status %d)", status);
        return r;
}

/* On the first connection: the CA and keys from their DER, extraCaPem parsed. */
static int seed_decode(egress_tls *t, nook_error *err) {
        const unsigned char *p = t->seed[SEED_CA];
        t->ca = d2i_X509(NULL, &p, (long)t->seed_len[SEED_CA]);
        p = t->seed[SEED_CA_KEY];
        t->ca_key = d2i_AutoPrivateKey(NULL, &p, (long)t->seed_len[SEED_CA_KEY]);
        p = t->seed[SEED_LEAF_KEY];
        t->leaf_key = d2i_AutoPrivateKey(NULL, &p, (long)t->seed_len[SEED_LEAF_KEY]);
        seed_wipe(t, SEED_CA);
        if (!t->ca || !t->ca_key || !t->leaf_key)
                return ssl_fail(err, "Cannot decode the egress CA");
        return t->extra_ca_pem ? parse_extra_cas(t, t->extra_ca_pem, err) : 0;
}

/* ---- the CA kept across restarts ----------------------------------------------------------------
 * The supervisor starts a new gateway when one dies (supervisor/egress.c), and the guest must go
 * on trusting it: its bundle holds this CA, and a process in the guest may have read the bundle
 * long ago.  So the first gateway hands the supervisor its seed (the CA child's answer, byte for
 * byte) in a sealed memfd, which the supervisor only holds and passes to each successor; a
 * successor decodes that instead of making a CA.  The keys never enter the supervisor's memory;
 * the memfd is as reachable as the supervisor's own memory, which holds the secrets' values. */

int egress_tls_seed_memfd(const egress_tls *t, int *ret_fd, nook_error *err) {
        if (!t->seed[SEED_CA])
                return nook_err_set(err, NOOK_E_INTERNAL, "the egress CA's keys are decoded already");
        _cleanup_close_ int fd = memfd_create("nook-egress-ca", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make a memfd for the egress CA");
        int w = write_full(fd, "K", 1);
        for (size_t i = 0; i < SEED_N && w >= 0; i++)
                w = seed_put(fd, t->seed[i], (int)t->seed_len[i]);
        if (w < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write the egress CA to its memfd");
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot seal the egress CA's memfd");
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* A predecessor's seed (egress_tls_seed_memfd) instead of a new CA. */
static int seed_from_fd(egress_tls *t, int fd, nook_error *err) {
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 1 || (size_t)st.st_size > SEED_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the CA handed over with the configuration is no gateway's");
        size_t len = (size_t)st.st_size;
        _cleanup_free_ unsigned char *buf = malloc(len);
        if (!buf)
                return nook_err_oom(err);
        ssize_t n = pread(fd, buf, len, 0);
        int r = n == (ssize_t)len ? seed_parse(t, buf, len, err) : -EBADMSG;
        explicit_bzero(buf, len);
        if (r == -EBADMSG)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the CA handed over with the configuration is no gateway's");
        return r;
}

int egress_tls_new(
        const char *sandbox, const char *extra_ca_pem, int seed_fd, egress_tls **ret, nook_error *err) {
        _cleanup_(egress_tls_freep) egress_tls *t = calloc(1, sizeof(*t));
        if (!t)
                return nook_err_oom(err);
        pthread_mutex_init(&t->lock, NULL);
        pthread_mutex_init(&t->ctx_lock, NULL);
        if (extra_ca_pem && !(t->extra_ca_pem = strdup(extra_ca_pem)))
                return nook_err_oom(err);
        int r = seed_fd >= 0 ? seed_from_fd(t, seed_fd, err) : ca_from_child(t, sandbox, extra_ca_pem, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

int egress_tls_ca_pem(egress_tls *t, char **ret, nook_error *err) {
        *ret = strdup((const char *)t->seed[SEED_PEM]);
        return *ret ? 0 : nook_err_oom(err);
}

/* The two contexts are made on the first connection: OpenSSL's method and cipher caches they
 * fill are most of an idle gateway's private memory. */
static bool ensure_ctx(egress_tls *t) {
        nook_error err;
        pthread_mutex_lock(&t->ctx_lock);
        if (!t->ctx_ready) {
                if ((!t->ca && seed_decode(t, &err) < 0) || make_server_ctx(t, &err) < 0 ||
                        make_client_ctx(t, &err) < 0) {
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
