/* SPDX-License-Identifier: Apache-2.0 */
/* See registry.h.  The protocol follows the OCI distribution spec and Docker's token auth spec
 * (https://distribution.github.io/distribution/spec/auth/token/): a 401 carries
 * "WWW-Authenticate: Bearer realm=...,service=...,scope=..."; we fetch a token from the realm
 * (with Basic credentials when we have some) and repeat the request with it. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "nook.h"
#include "image/digest.h"
#include "image/manifest.h"
#include "image/ref.h"
#include "image/registry.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/str.h"

#define DEFAULT_STALL_MS 30000u
#define DEFAULT_RETRIES 3u
#define AUTH_FILE_MAX (1024u * 1024u)

static const char manifest_accept[] =
        "Accept: " MT_OCI_INDEX ", " MT_DOCKER_LIST ", " MT_OCI_MANIFEST ", " MT_DOCKER_MANIFEST;

struct registry {
        char *name; /* as the user wrote it, for messages */
        char *base; /* "https://host[:port]" */
        char *repository;
        char *basic; /* "user:password" or NULL; never printed */
        char *ca_file;
        bool insecure;
        long stall_secs;
        unsigned retries;
        pthread_mutex_t lock;
        char *auth_header; /* "Authorization: ..." once known; guarded by lock */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
        (void)curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- credentials ----------------------------------------------------------------------------- */

static char *b64_decode(const char *s) {
        size_t len = strlen(s);
        if (len == 0 || len % 4 != 0 || len > 8192)
                return NULL;
        unsigned char *out = malloc(len / 4 * 3 + 1);
        if (!out)
                return NULL;
        int n = EVP_DecodeBlock(out, (const unsigned char *)s, (int)len);
        if (n < 0) {
                free(out);
                return NULL;
        }
        /* EVP_DecodeBlock counts the padding as zero bytes */
        for (size_t i = len; i > 0 && s[i - 1] == '='; i--)
                n--;
        out[n] = 0;
        if (strlen((char *)out) != (size_t)n || !strchr((char *)out, ':')) {
                explicit_bzero(out, (size_t)n);
                free(out);
                return NULL;
        }
        return (char *)out;
}

static char *auth_file_path(const char *explicit_path) {
        if (explicit_path)
                return strdup(explicit_path);
        const char *e = secure_getenv("REGISTRY_AUTH_FILE");
        if (!isempty(e))
                return strdup(e);
        const char *home = secure_getenv("HOME");
        if (isempty(home))
                return NULL;
        return strprintf("%s/.docker/config.json", home);
}

/* "user:password" for the registry from a docker config.json ({"auths": {KEY: {"auth": b64}}});
 * NULL when the file or the entry is missing.  credHelpers and credsStore are not consulted. */
static char *auth_file_lookup(const char *path, const char *registry_name) {
        _cleanup_close_ int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY) : -1;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        nook_error ignored = {};
        if (fd < 0 || fd_read_to_end(fd, AUTH_FILE_MAX, &text, &len, &ignored) < 0)
                return NULL;
        json_t *o = json_loadb(text, len, 0, NULL);
        explicit_bzero(text, len);
        if (!o)
                return NULL;
        json_t *auths = json_object_get(o, "auths");
        bool hub = streq(registry_name, IMAGE_DEFAULT_REGISTRY);
        _cleanup_free_ char *k1 = strprintf("https://%s", registry_name),
                            *k2 = strprintf("http://%s", registry_name);
        const char *keys[] = { registry_name, k1, k2, hub ? "https://index.docker.io/v1/" : NULL,
                hub ? "index.docker.io" : NULL, hub ? IMAGE_DOCKER_HUB_API_HOST : NULL };
        char *found = NULL;
        for (size_t i = 0; json_is_object(auths) && !found && i < ELEMENTSOF(keys); i++) {
                json_t *e = keys[i] ? json_object_get(auths, keys[i]) : NULL;
                if (!json_is_object(e))
                        continue;
                const char *a = json_string_value(json_object_get(e, "auth"));
                const char *u = json_string_value(json_object_get(e, "username"));
                const char *p = json_string_value(json_object_get(e, "password"));
                if (!isempty(a))
                        found = b64_decode(a);
                else if (!isempty(u) && p)
                        found = strprintf("%s:%s", u, p);
        }
        json_decref(o);
        return found;
}

/* ---- construction ---------------------------------------------------------------------------- */

registry *registry_free(registry *reg) {
        if (!reg)
                return NULL;
        free(reg->name);
        free(reg->base);
        free(reg->repository);
        if (reg->basic)
                explicit_bzero(reg->basic, strlen(reg->basic));
        free(reg->basic);
        free(reg->ca_file);
        if (reg->auth_header)
                explicit_bzero(reg->auth_header, strlen(reg->auth_header));
        free(reg->auth_header);
        pthread_mutex_destroy(&reg->lock);
        free(reg);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(registry *, registry_free);

int registry_new(const image_ref *ref, const registry_opts *o, registry **ret, nook_error *err) {
        _cleanup_(registry_freep) registry *reg = calloc(1, sizeof(*reg));
        if (!reg)
                return nook_err_oom(err);
        pthread_mutex_init(&reg->lock, NULL);
        (void)pthread_once(&curl_once, curl_init_once);
        for (const char *const *h = o->insecure; h && *h; h++)
                if (streq(*h, ref->registry) || streq(*h, image_ref_api_host(ref)))
                        reg->insecure = true;
        reg->name = strdup(ref->registry);
        reg->base = strprintf("%s://%s", reg->insecure ? "http" : "https", image_ref_api_host(ref));
        reg->repository = strdup(ref->repository);
        if (!reg->name || !reg->base || !reg->repository)
                return nook_err_oom(err);
        if (o->ca_file && !(reg->ca_file = strdup(o->ca_file)))
                return nook_err_oom(err);
        uint64_t stall = o->stall_timeout_ms ? o->stall_timeout_ms : DEFAULT_STALL_MS;
        reg->stall_secs = (long)((stall + 999) / 1000);
        reg->retries = o->retries ? o->retries : DEFAULT_RETRIES;
        if (o->username) {
                reg->basic = strprintf("%s:%s", o->username, o->password ? o->password : "");
                if (!reg->basic)
                        return nook_err_oom(err);
        } else {
                _cleanup_free_ char *path = auth_file_path(o->auth_file);
                reg->basic = auth_file_lookup(path, ref->registry);
        }
        *ret = TAKE_PTR(reg);
        return 0;
}

/* ---- one HTTP exchange ----------------------------------------------------------------------- */

typedef struct xfer {
        /* sink: memory (fd < 0) or a file */
        char *buf;
        size_t len, cap, max;
        int fd;
        image_hasher *hasher;
        uint64_t limit; /* 0: no limit */
        uint64_t got;
        bool too_big, write_failed;
        registry_progress_fn progress;
        void *userdata;
        /* answer */
        long status;
        char content_type[256];
        char www_auth[1024];
} xfer;

static size_t on_data(char *p, size_t size, size_t n, void *userdata) {
        xfer *x = userdata;
        size_t len = size * n;
        if (x->status >= 300 || x->status == 0) {
                /* an error page: keep a little of it in memory, never in the blob */
                return len;
        }
        if ((x->limit && x->got + len > x->limit) || (x->fd < 0 && x->len + len > x->max)) {
                x->too_big = true;
                return 0;
        }
        if (x->hasher)
                image_hasher_update(x->hasher, p, len);
        if (x->fd >= 0) {
                if (fd_write_all(x->fd, p, len) < 0) {
                        x->write_failed = true;
                        return 0;
                }
        } else {
                if (x->len + len + 1 > x->cap) {
                        size_t cap = (x->len + len + 1) * 2;
                        char *b = realloc(x->buf, cap);
                        if (!b) {
                                x->write_failed = true;
                                return 0;
                        }
                        x->buf = b;
                        x->cap = cap;
                }
                memcpy(x->buf + x->len, p, len);
                x->len += len;
                x->buf[x->len] = 0;
        }
        x->got += len;
        if (x->progress)
                x->progress(x->userdata, x->got);
        return len;
}

static void header_value(const char *line, size_t len, const char *name, char *out, size_t outsz) {
        size_t nl = strlen(name);
        if (len <= nl || strncasecmp(line, name, nl) != 0)
                return;
        const char *v = line + nl;
        size_t vl = len - nl;
        while (vl && (*v == ' ' || *v == '\t'))
                v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
                vl--;
        (void)snprintf(out, outsz, "%.*s", (int)(vl < outsz ? vl : outsz - 1), v);
}

static size_t on_header(char *p, size_t size, size_t n, void *userdata) {
        xfer *x = userdata;
        size_t len = size * n;
        if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
                /* a new response (after a redirect): forget the previous one's headers */
                const char *sp = memchr(p, ' ', len);
                x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
                x->content_type[0] = 0;
                x->www_auth[0] = 0;
        }
        header_value(p, len, "content-type:", x->content_type, sizeof(x->content_type));
        header_value(p, len, "www-authenticate:", x->www_auth, sizeof(x->www_auth));
        return len;
}

static void xfer_reset(xfer *x) {
        x->len = 0;
        x->got = 0;
        x->too_big = x->write_failed = false;
        x->status = 0;
        x->content_type[0] = x->www_auth[0] = 0;
        if (x->buf)
                x->buf[0] = 0;
}

static void curl_cleanupp(CURL **c) {
        if (*c)
                curl_easy_cleanup(*c);
}
static void slist_freep(struct curl_slist **l) {
        if (*l)
                curl_slist_free_all(*l);
}

/* Performs one GET; returns the CURLcode.  auth: a full "Authorization: ..." header or NULL. */
static CURLcode perform(
        registry *reg, const char *url, const char *accept, const char *auth, xfer *x, char *errbuf) {
        errbuf[0] = 0; /* read by every caller's error message, even when curl never started */
        _cleanup_(curl_cleanupp) CURL *c = curl_easy_init();
        _cleanup_(slist_freep) struct curl_slist *h = NULL;
        if (!c)
                return CURLE_OUT_OF_MEMORY;
        if (accept)
                h = curl_slist_append(h, accept);
        if (auth) {
                struct curl_slist *h2 = curl_slist_append(h, auth);
                if (!h2)
                        return CURLE_OUT_OF_MEMORY;
                h = h2;
        }
        errbuf[0] = 0;
        (void)curl_easy_setopt(c, CURLOPT_URL, url);
        (void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        (void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        (void)curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
        (void)curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        (void)curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
        (void)curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        /* blobs are often redirected to a CDN; curl drops our Authorization header when the
         * redirect leaves the host (CVE-2018-1000007) */
        (void)curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
        (void)curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
        (void)curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, reg->insecure ? "http,https" : "https");
        (void)curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, reg->insecure ? "http,https" : "https");
        (void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, reg->stall_secs);
        (void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        (void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, reg->stall_secs);
        (void)curl_easy_setopt(c, CURLOPT_USERAGENT, "nook/" NOOK_VERSION);
        (void)curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "identity");
        if (reg->ca_file) {
                /* CAINFO alone would replace the system store; with OpenSSL, CAPATH adds it back */
                (void)curl_easy_setopt(c, CURLOPT_CAINFO, reg->ca_file);
                (void)curl_easy_setopt(c, CURLOPT_CAPATH, "/etc/ssl/certs");
        }
        CURLcode rc = curl_easy_perform(c);
        (void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
        return rc;
}

/* ---- auth -------------------------------------------------------------------------------------- */

/* Value of key="value" (or key=value) in a challenge, into out. */
static bool challenge_param(const char *ch, const char *key, char *out, size_t outsz) {
        size_t kl = strlen(key);
        for (const char *p = ch; (p = strcasestr(p, key)); p += kl) {
                if (p != ch && p[-1] != ' ' && p[-1] != ',')
                        continue;
                if (p[kl] != '=')
                        continue;
                const char *v = p + kl + 1;
                size_t vl;
                if (*v == '"') {
                        v++;
                        const char *e = strchr(v, '"');
                        if (!e)
                                return false;
                        vl = (size_t)(e - v);
                } else
                        vl = strcspn(v, ", ");
                if (vl >= outsz)
                        return false;
                memcpy(out, v, vl);
                out[vl] = 0;
                return true;
        }
        return false;
}

static int need_credentials(registry *reg, nook_error *err) {
        return nook_err_set(err, NOOK_E_REFUSED, "Registry '%s' refused access to '%s' (401 Unauthorized)%s",
                reg->name, reg->repository,
                reg->basic
                        ? ": the credentials were not accepted"
                        : ": it needs credentials; log in with 'docker login', set REGISTRY_AUTH_FILE, or pass --creds");
}

/* A TLS handshake answered in plain HTTP: OpenSSL reads the "HTTP/1.1 400" reply as a record
 * header and says "wrong version number" (3.0) or "packet length too long" / "record layer
 * failure" (3.2+).  The registry is then plain HTTP, which the user must opt into. */
static bool plain_http_answer(const registry *reg, CURLcode rc, const char *errbuf) {
        if (reg->insecure || rc != CURLE_SSL_CONNECT_ERROR || !errbuf)
                return false;
        return strstr(errbuf, "wrong version number") || strstr(errbuf, "packet length too long") ||
                strstr(errbuf, "record layer failure");
}

static int plain_http_error(const registry *reg, nook_error *err) {
        return nook_err_set(err, NOOK_E_REFUSED,
                "Registry %s speaks plain HTTP, not HTTPS; if you trust it, pass --insecure-registry %s "
                "or set NOOK_INSECURE_REGISTRIES=%s",
                reg->name, reg->name, reg->name);
}

/* "Authorization: Basic BASE64(user:password)"; NULL when out of memory. The encoded
 * credentials are wiped from the scratch buffer (the header itself is the caller's to wipe). */
static char *basic_auth_header(const char *basic) {
        size_t bl = strlen(basic);
        _cleanup_free_ char *b64 = malloc(4 * ((bl + 2) / 3) + 1);
        if (!b64)
                return NULL;
        (void)EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)basic, (int)bl);
        char *hdr = strprintf("Authorization: Basic %s", b64);
        explicit_bzero(b64, strlen(b64));
        return hdr;
}

static int fetch_token(registry *reg, const char *challenge, char **ret_header, nook_error *err) {
        char realm[512], service[256] = "", scope[512] = "";
        if (!challenge_param(challenge, "realm", realm, sizeof(realm)))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Registry '%s' sent a Bearer challenge without a realm", reg->name);
        if (!startswith(realm, "https://") && !(reg->insecure && startswith(realm, "http://")))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Registry '%s' sent a token realm '%.200s' that is not https: refusing to send credentials there",
                        reg->name, realm);
        (void)challenge_param(challenge, "service", service, sizeof(service));
        if (!challenge_param(challenge, "scope", scope, sizeof(scope)))
                (void)snprintf(scope, sizeof(scope), "repository:%s:pull", reg->repository);
        _cleanup_(curl_cleanupp) CURL *c = curl_easy_init();
        if (!c)
                return nook_err_oom(err);
        _cleanup_free_ char *esvc = curl_easy_escape(c, service, 0), *escope = curl_easy_escape(c, scope, 0);
        _cleanup_free_ char *url = strprintf("%s%sservice=%s&scope=%s", realm,
                strchr(realm, '?') ? "&" : "?", esvc ? esvc : "", escope ? escope : "");
        _cleanup_free_ char *basic_hdr = NULL;
        if (!url || !esvc || !escope)
                return nook_err_oom(err);
        if (reg->basic && !(basic_hdr = basic_auth_header(reg->basic)))
                return nook_err_oom(err);
        xfer x = { .fd = -1, .max = 256 * 1024 };
        char errbuf[CURL_ERROR_SIZE];
        CURLcode rc = perform(reg, url, NULL, basic_hdr, &x, errbuf);
        if (basic_hdr)
                explicit_bzero(basic_hdr, strlen(basic_hdr));
        _cleanup_free_ char *body = x.buf;
        if (plain_http_answer(reg, rc, errbuf))
                return plain_http_error(reg, err);
        if (rc != CURLE_OK)
                return nook_err_set(err, rc == CURLE_OPERATION_TIMEDOUT ? NOOK_E_TIMEOUT : NOOK_E_IO,
                        "Cannot get a token for registry '%s': %s", reg->name,
                        errbuf[0] ? errbuf : curl_easy_strerror(rc));
        if (x.status == 401 || x.status == 403)
                return need_credentials(reg, err);
        if (x.status != 200)
                return nook_err_set(err, NOOK_E_IO, "Registry '%s': its token service answered HTTP %ld",
                        reg->name, x.status);
        json_t *o = json_loadb(body ? body : "", x.len, 0, NULL);
        const char *tok = o ? json_string_value(json_object_get(o, "token")) : NULL;
        if (isempty(tok) && o)
                tok = json_string_value(json_object_get(o, "access_token"));
        if (isempty(tok) || strpbrk(tok, "\r\n")) {
                json_decref(o);
                return nook_err_set(
                        err, NOOK_E_IO, "Registry '%s': its token service sent no usable token", reg->name);
        }
        *ret_header = strprintf("Authorization: Bearer %s", tok);
        json_decref(o);
        if (body)
                explicit_bzero(body, x.len);
        return *ret_header ? 0 : nook_err_oom(err);
}

/* After a 401: work out the Authorization header from the challenge.  1 when the request
 * should be repeated, or an error. */
static int authenticate(registry *reg, const char *challenge, const char *tried, nook_error *err) {
        _cleanup_free_ char *hdr = NULL;
        int r;
        pthread_mutex_lock(&reg->lock);
        /* another thread may have fetched a fresh token meanwhile */
        if (reg->auth_header && (!tried || !streq(reg->auth_header, tried))) {
                pthread_mutex_unlock(&reg->lock);
                return 1;
        }
        pthread_mutex_unlock(&reg->lock);
        if (strncasecmp(challenge, "Bearer ", 7) == 0) {
                r = fetch_token(reg, challenge + 7, &hdr, err);
                if (r < 0)
                        return r;
        } else if (strncasecmp(challenge, "Basic", 5) == 0 && reg->basic && !tried) {
                hdr = basic_auth_header(reg->basic);
                if (!hdr)
                        return nook_err_oom(err);
        } else
                return need_credentials(reg, err);
        if (tried && streq(hdr, tried))
                return need_credentials(reg, err);
        pthread_mutex_lock(&reg->lock);
        if (reg->auth_header)
                explicit_bzero(reg->auth_header, strlen(reg->auth_header));
        free(reg->auth_header);
        reg->auth_header = TAKE_PTR(hdr);
        pthread_mutex_unlock(&reg->lock);
        return 1;
}

static char *auth_snapshot(registry *reg) {
        pthread_mutex_lock(&reg->lock);
        char *a = reg->auth_header ? strdup(reg->auth_header) : NULL;
        pthread_mutex_unlock(&reg->lock);
        return a;
}

static void free_secret(char **p) {
        if (*p) {
                explicit_bzero(*p, strlen(*p));
                free(*p);
        }
}

static bool transient(CURLcode rc) {
        /* resets and refused connections: worth another try after a pause */
        return rc == CURLE_COULDNT_CONNECT || rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR ||
                rc == CURLE_PARTIAL_FILE || rc == CURLE_GOT_NOTHING || rc == CURLE_HTTP2 ||
                rc == CURLE_HTTP2_STREAM;
}

static void backoff(unsigned attempt) {
        /* 250 ms, 500 ms, 1 s, 2 s ... capped at 4 s, plus up to 25% jitter */
        unsigned ms = 250u << (attempt < 4 ? attempt : 4);
        ms += (unsigned)(getpid() + (int)time(NULL)) % (ms / 4 + 1);
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* GET path (relative to /v2/<repo>/) with auth, retries and backoff.  what names the object
 * in messages.  On success x holds a 200 answer. */
static int request(registry *reg, const char *path, const char *accept, const char *what, xfer *x,
        int (*rewind_sink)(xfer *x), nook_error *err) {
        _cleanup_free_ char *url = strprintf("%s/v2/%s/%s", reg->base, reg->repository, path);
        char errbuf[CURL_ERROR_SIZE];
        unsigned attempt = 0, auth_rounds = 0;
        if (!url)
                return nook_err_oom(err);
        for (;;) {
                __attribute__((cleanup(free_secret))) char *auth = auth_snapshot(reg);
                xfer_reset(x);
                if (rewind_sink && rewind_sink(x) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot rewind the download of %s", what);
                CURLcode rc = perform(reg, url, accept, auth, x, errbuf);
                if (x->too_big)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Registry '%s' sent more bytes than declared for %s: refusing it", reg->name,
                                what);
                if (x->write_failed)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot store %s", what);
                if (rc == CURLE_OPERATION_TIMEDOUT)
                        return nook_err_set(err, NOOK_E_TIMEOUT,
                                "Registry '%s' stalled while sending %s (no data for %ld s): %s", reg->name,
                                what, reg->stall_secs, errbuf[0] ? errbuf : curl_easy_strerror(rc));
                if (plain_http_answer(reg, rc, errbuf))
                        return plain_http_error(reg, err);
                if (rc != CURLE_OK && !(transient(rc) && attempt < reg->retries))
                        return nook_err_set(err, NOOK_E_IO, "Cannot fetch %s from registry '%s': %s", what,
                                reg->name, errbuf[0] ? errbuf : curl_easy_strerror(rc));
                if (rc == CURLE_OK && x->status == 401 && auth_rounds < 2) {
                        auth_rounds++;
                        int r = authenticate(reg, x->www_auth, auth, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (rc == CURLE_OK && x->status == 200)
                        return 0;
                if (rc == CURLE_OK && x->status == 401)
                        return need_credentials(reg, err);
                bool retry = rc != CURLE_OK || x->status == 429 || x->status >= 500;
                if (retry && attempt < reg->retries) {
                        backoff(attempt++);
                        continue;
                }
                if (x->status == 404)
                        return nook_err_set(
                                err, NOOK_E_NOT_FOUND, "Registry '%s' has no %s", reg->name, what);
                if (x->status == 403)
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "Registry '%s' denied access to %s (403 Forbidden)", reg->name, what);
                return nook_err_set(err, NOOK_E_IO, "Registry '%s' answered HTTP %ld for %s", reg->name,
                        x->status, what);
        }
}

/* ---- manifests and blobs ---------------------------------------------------------------------- */

int registry_get_manifest(registry *reg, const char *reference, char **ret_body, size_t *ret_len,
        char **ret_content_type, nook_error *err) {
        _cleanup_free_ char *path = strprintf("manifests/%s", reference);
        _cleanup_free_ char *what = strprintf("manifest '%s:%s'", reg->repository, reference);
        xfer x = { .fd = -1, .max = IMAGE_DOC_MAX };
        if (!path || !what)
                return nook_err_oom(err);
        int r = request(reg, path, manifest_accept, what, &x, NULL, err);
        _cleanup_free_ char *body = x.buf;
        if (r < 0)
                return r;
        if (!body && !(body = strdup("")))
                return nook_err_oom(err);
        if (image_digest_valid(reference)) {
                char got[IMAGE_DIGEST_LEN + 1];
                if ((r = image_digest_buf(body, x.len, got, err)) < 0)
                        return r;
                if (!streq(got, reference))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Digest mismatch for manifest %s from registry '%s': got %s", reference,
                                reg->name, got);
        }
        char *ct = x.content_type[0] ? strdup(x.content_type) : NULL;
        if (x.content_type[0] && !ct)
                return nook_err_oom(err);
        *ret_body = TAKE_PTR(body);
        *ret_len = x.len;
        *ret_content_type = ct;
        return 0;
}

static int rewind_fd(xfer *x) {
        image_hasher_free(x->hasher);
        x->hasher = image_hasher_new();
        if (!x->hasher) {
                errno = ENOMEM;
                return -1;
        }
        if (x->fd >= 0 && (ftruncate(x->fd, 0) < 0 || lseek(x->fd, 0, SEEK_SET) < 0))
                return -1;
        return 0;
}

static int verify(registry *reg, xfer *x, const char *digest, uint64_t size, nook_error *err) {
        char got[IMAGE_DIGEST_LEN + 1];
        if (x->got != size)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Blob %s from registry '%s' is %llu bytes, the manifest says %llu (truncated or wrong): discarded",
                        digest, reg->name, (unsigned long long)x->got, (unsigned long long)size);
        image_hasher_final(x->hasher, got);
        if (!streq(got, digest))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Digest mismatch for blob %s from registry '%s' (got %s): discarded", digest,
                        reg->name, got);
        return 0;
}

int registry_get_blob(registry *reg, const char *digest, uint64_t size, int fd,
        registry_progress_fn progress, void *userdata, nook_error *err) {
        _cleanup_free_ char *path = strprintf("blobs/%s", digest), *what = strprintf("blob %s", digest);
        xfer x = { .fd = fd, .limit = size, .progress = progress, .userdata = userdata };
        if (!path || !what)
                return nook_err_oom(err);
        int r = request(reg, path, NULL, what, &x, rewind_fd, err);
        if (r >= 0)
                r = verify(reg, &x, digest, size, err);
        image_hasher_free(x.hasher);
        return r;
}

int registry_get_blob_mem(registry *reg, const char *digest, uint64_t size, char **ret, nook_error *err) {
        _cleanup_free_ char *path = strprintf("blobs/%s", digest), *what = strprintf("blob %s", digest);
        if (size > IMAGE_DOC_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Blob %s is larger than %u bytes", digest, IMAGE_DOC_MAX);
        xfer x = { .fd = -1, .limit = size, .max = IMAGE_DOC_MAX };
        if (!path || !what)
                return nook_err_oom(err);
        int r = request(reg, path, NULL, what, &x, rewind_fd, err);
        if (r >= 0)
                r = verify(reg, &x, digest, size, err);
        image_hasher_free(x.hasher);
        if (r < 0) {
                free(x.buf);
                return r;
        }
        *ret = x.buf ? x.buf : strdup("");
        return *ret ? 0 : nook_err_oom(err);
}
