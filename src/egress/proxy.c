/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "egress/audit.h"
#include "egress/h2up.h"
#include "egress/http1.h"
#include "egress/io.h"
#include "egress/proxy.h"
#include "egress/subst.h"
#include "isolate/net.h"
#include "util/macro.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

#define IDLE_SECS 60
#define IO_SECS 30
#define CONNECT_SECS 10

typedef struct conn {
        const egress_ctx *ctx;
        bool https;
        struct sockaddr_storage dst;
        socklen_t dst_len;
        unsigned dst_port;
        char dst_text[INET6_ADDRSTRLEN];
        const char *sni;
        char verified_host[EGRESS_HOST_MAX + 1];
        egress_io guest, up;
        const char *proto; /* for the audit: http/1.1, or h2 for a stream bridged from h2.c */
        bool up_open;
        char up_host[EGRESS_HOST_MAX + 1];
        egress_h2up *up_h2; /* the upstream chose h2: c->up is the bridge's socketpair (h2up.c) */
} conn;

typedef struct req {
        char method[64];
        char host[EGRESS_HOST_MAX + 1];
        char *target;
        char log_path[512];
        http1_framing framing;
        uint64_t length;
        bool is_head, close_after, expect_continue, body_subst, out_chunked, websocket;
        subst_action head_act[256], body_act[256];
        egress_audit_rec audit;
        char reason[1024];
} req;

/* ---- replies and audit -------------------------------------------------------------------- */

static void reply(conn *c, req *q, int status, const char *phrase, const char *body) {
        char head[256];
        int n = snprintf(head, sizeof(head),
                "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                "Connection: close\r\n\r\n",
                status, phrase, strlen(body));
        if (egress_io_put(&c->guest, head, (size_t)n) == 0)
                (void)egress_io_write(&c->guest, body, strlen(body));
        q->audit.status = status;
        q->audit.bytes_down += (uint64_t)n + strlen(body);
}

/* Writes the audit line for q: the reason without its "nook egress: " prefix. */
static void audit_req(req *q, const char *decision) {
        q->audit.decision = decision;
        q->audit.method = q->method[0] ? q->method : NULL;
        q->audit.host = q->host[0] ? q->host : NULL;
        q->audit.path = q->log_path[0] ? q->log_path : NULL;
        q->audit.reason = q->reason[0] ? q->reason : NULL;
        egress_audit(&q->audit);
}

/* Refuses q with status and a one-line body "nook egress: <reason>". */
static void refuse(conn *c, req *q, int status, const char *phrase, const char *decision) {
        char body[1100];
        (void)snprintf(body, sizeof(body), "nook egress: %s\n", q->reason);
        reply(c, q, status, phrase, body);
        audit_req(q, decision);
}

/* The path for the log, without the query, with every placeholder replaced by its secret's
 * name in brackets (an unknown one by "[placeholder]"). */
static void log_path_set(const egress_config *cfg, req *q) {
        size_t n = strcspn(q->target, "?"), o = 0;
        for (size_t i = 0; i < n && o + 1 < sizeof(q->log_path);) {
                if (egress_is_placeholder(q->target + i, n - i)) {
                        ssize_t k = subst_match_at(cfg, q->target + i, n - i);
                        int w = snprintf(q->log_path + o, sizeof(q->log_path) - o, "[%s]",
                                k >= 0 ? cfg->secrets[k].name : "placeholder");
                        o = w > 0 && (size_t)w < sizeof(q->log_path) - o ? o + (size_t)w
                                                                         : sizeof(q->log_path) - 1;
                        i += EGRESS_PH_LEN;
                        continue;
                }
                q->log_path[o++] = q->target[i++];
        }
        q->log_path[o] = 0;
}

/* ---- the original destination ------------------------------------------------------------- */

static void dst_describe(conn *c) {
        const void *a = c->dst.ss_family == AF_INET6
                ? (const void *)&((struct sockaddr_in6 *)&c->dst)->sin6_addr
                : (const void *)&((struct sockaddr_in *)&c->dst)->sin_addr;
        c->dst_port = ntohs(c->dst.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&c->dst)->sin6_port
                                                         : ((struct sockaddr_in *)&c->dst)->sin_port);
        (void)inet_ntop(c->dst.ss_family, a, c->dst_text, sizeof(c->dst_text));
}

static int original_dst(conn *c, int fd) {
        struct sockaddr_storage local = { 0 };
        socklen_t len = sizeof(local);
        if (getsockname(fd, (struct sockaddr *)&local, &len) < 0)
                return -errno;
        c->dst_len = sizeof(c->dst);
        int r = local.ss_family == AF_INET6
                ? getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &c->dst, &c->dst_len)
                : getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->dst, &c->dst_len);
        if (r < 0)
                return -errno;
        dst_describe(c);
        return 0;
}

static const void *dst_addr(const conn *c) {
        return c->dst.ss_family == AF_INET6
                ? (const void *)&((const struct sockaddr_in6 *)&c->dst)->sin6_addr
                : (const void *)&((const struct sockaddr_in *)&c->dst)->sin_addr;
}

/* An address this host owns can be bound to; a remote one cannot (EADDRNOTAVAIL). */
static bool dst_is_local(const conn *c) {
        struct sockaddr_storage a = c->dst;
        if (a.ss_family == AF_INET6)
                ((struct sockaddr_in6 *)&a)->sin6_port = 0;
        else
                ((struct sockaddr_in *)&a)->sin_port = 0;
        int fd = socket(a.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return true;
        int r = bind(fd, (struct sockaddr *)&a, c->dst_len);
        close(fd);
        return r == 0;
}

static bool host_resolves_to_dst(const conn *c, const char *host) {
        struct addrinfo hints = { .ai_family = c->dst.ss_family, .ai_socktype = SOCK_STREAM }, *res = NULL;
        if (getaddrinfo(host, NULL, &hints, &res) != 0)
                return false;
        bool found = false;
        size_t alen = c->dst.ss_family == AF_INET6 ? 16 : 4;
        for (struct addrinfo *i = res; i && !found; i = i->ai_next) {
                const void *a = i->ai_family == AF_INET6
                        ? (const void *)&((struct sockaddr_in6 *)i->ai_addr)->sin6_addr
                        : (const void *)&((struct sockaddr_in *)i->ai_addr)->sin_addr;
                found = i->ai_family == c->dst.ss_family && memcmp(a, dst_addr(c), alen) == 0;
        }
        freeaddrinfo(res);
        return found;
}

/* The floor of docs/design/network.md, and the host's own resolution of the name must contain
 * the address the guest connected to (else a guest could send a listed Host to any address). */
static int check_destination(conn *c, req *q) {
        if (strcasecmp(c->verified_host, q->host) == 0)
                return 0;
        if (!net_addr_is_public(c->dst.ss_family, dst_addr(c)) || dst_is_local(c)) {
                (void)snprintf(q->reason, sizeof(q->reason),
                        "refused: %s is not a public address (private, loopback, metadata and host addresses "
                        "are never reached through the gateway)",
                        c->dst_text);
                return -EPERM;
        }
        if (!host_resolves_to_dst(c, q->host)) {
                (void)snprintf(q->reason, sizeof(q->reason),
                        "refused: '%s' does not resolve to %s, the address the connection was made to",
                        q->host, c->dst_text);
                return -EPERM;
        }
        (void)snprintf(c->verified_host, sizeof(c->verified_host), "%s", q->host);
        return 0;
}

/* ---- the request head ---------------------------------------------------------------------- */

/* Reads a head into c->guest's buffer.  1: parsed into h; 0: the guest closed between
 * requests; < 0: malformed (-EBADMSG), too large (-E2BIG) or an I/O error. */
static int read_request_head(conn *c, http1_head *h) {
        for (;;) {
                int r = http1_parse_request(c->guest.buf + c->guest.start, c->guest.end - c->guest.start, h);
                if (r != 0)
                        return r > 0 ? 1 : r;
                ssize_t n = egress_io_fill(&c->guest);
                if (n == -ENOBUFS)
                        return -E2BIG;
                if (n < 0)
                        return (int)n;
                if (n == 0) /* EOF: clean between requests, a reset inside one */
                        return c->guest.end == c->guest.start ? 0 : -ECONNRESET;
        }
}

/* Host: "name" or "name:port", lower-cased into q->host.  The port, if any, must be the one the
 * guest connected to. */
static int parse_host(conn *c, const http1_head *h, req *q) {
        bool dup;
        const http1_field *f = http1_find(h, "Host", &dup);
        nook_error e;
        if (!f || dup || f->value_len == 0 || f->value_len > EGRESS_HOST_MAX + 6) {
                (void)snprintf(
                        q->reason, sizeof(q->reason), "refused: the request needs exactly one Host header");
                return -EBADMSG;
        }
        const char *colon = memchr(f->value, ':', f->value_len);
        size_t hn = colon ? (size_t)(colon - f->value) : f->value_len;
        // cppcheck-suppress knownConditionTrueFalse ; "Host: :80" has hn == 0
        if (hn == 0 || hn > EGRESS_HOST_MAX) {
                (void)snprintf(q->reason, sizeof(q->reason),
                        "refused: the Host header has no host name or a too long one");
                return -EBADMSG;
        }
        for (size_t i = 0; i < hn; i++)
                q->host[i] =
                        (char)((f->value[i] >= 'A' && f->value[i] <= 'Z') ? f->value[i] + 32 : f->value[i]);
        q->host[hn] = 0;
        if (q->host[hn - 1] == '.')
                q->host[hn - 1] = 0;
        if (q->host[0] == '*' || egress_host_pattern_check(q->host, &e) < 0) {
                q->host[0] = 0;
                (void)snprintf(q->reason, sizeof(q->reason), "refused: the Host header is not a host name");
                return -EBADMSG;
        }
        if (colon) {
                char port[8];
                size_t pn = f->value_len - hn - 1;
                (void)snprintf(port, sizeof(port), "%u", c->dst_port);
                if (pn != strlen(port) || memcmp(colon + 1, port, pn) != 0) {
                        (void)snprintf(q->reason, sizeof(q->reason),
                                "refused: the Host header's port differs from the port connected to (%u)",
                                c->dst_port);
                        return -EPERM;
                }
        }
        return 0;
}

/* Method, target, Host and framing out of h, before h's buffer moves. */
static int read_request_fields(conn *c, const http1_head *h, req *q) {
        if (h->method_len >= sizeof(q->method) || h->target_len == 0 || h->target[0] != '/') {
                (void)snprintf(q->reason, sizeof(q->reason),
                        "refused: only origin-form requests ('GET /path HTTP/1.1') go through the gateway");
                return -EBADMSG;
        }
        memcpy(q->method, h->method, h->method_len);
        q->method[h->method_len] = 0;
        q->target = strndup(h->target, h->target_len);
        if (!q->target)
                return -ENOMEM;
        log_path_set(c->ctx->cfg, q);
        int r = parse_host(c, h, q);
        if (r < 0)
                return r;
        if (http1_request_framing(h, &q->framing, &q->length) < 0) {
                (void)snprintf(q->reason, sizeof(q->reason),
                        "refused: ambiguous body length (Content-Length with Transfer-Encoding, several lengths, "
                        "or a coding other than chunked)");
                return -EBADMSG;
        }
        const http1_field *conn_f = http1_find(h, "Connection", NULL);
        bool ka = conn_f && http1_value_has_token(conn_f->value, conn_f->value_len, "keep-alive");
        bool cl = conn_f && http1_value_has_token(conn_f->value, conn_f->value_len, "close");
        q->close_after = cl || (h->minor == 0 && !ka);
        const http1_field *ex = http1_find(h, "Expect", NULL);
        q->expect_continue = ex && http1_value_has_token(ex->value, ex->value_len, "100-continue");
        q->is_head = strcmp(q->method, "HEAD") == 0;
        const http1_field *up_f = http1_find(h, "Upgrade", NULL);
        q->websocket = up_f && conn_f && http1_value_has_token(up_f->value, up_f->value_len, "websocket") &&
                http1_value_has_token(conn_f->value, conn_f->value_len, "upgrade") &&
                q->framing == HTTP1_BODY_NONE;
        if (strcmp(q->method, "CONNECT") == 0) {
                (void)snprintf(
                        q->reason, sizeof(q->reason), "refused: CONNECT is not supported by the gateway");
                return -EBADMSG;
        }
        return 0;
}

/* SNI = Host (port 443), the destination check, then the rules. */
static int check_request(conn *c, req *q) {
        const egress_config *cfg = c->ctx->cfg;
        if (c->https && strcasecmp(c->sni, q->host) != 0) {
                (void)snprintf(q->reason, sizeof(q->reason),
                        "refused: the Host '%s' differs from the TLS server name '%s'", q->host, c->sni);
                return -EPERM;
        }
        int r = check_destination(c, q);
        if (r < 0)
                return r;
        if (cfg->n_rules == 0)
                return 0;
        for (size_t i = 0; i < cfg->n_rules; i++)
                if (egress_rule_match(cfg->rules[i], q->method, c->https, q->host, c->dst_port, q->target)) {
                        q->audit.rule = cfg->rules[i]->text;
                        return 0;
                }
        char port[8] = "";
        if (c->dst_port != (c->https ? 443u : 80u))
                (void)snprintf(port, sizeof(port), ":%u", c->dst_port);
        (void)snprintf(q->reason, sizeof(q->reason), "denied %.64s %s://%.253s%.8s%.400s (%s)", q->method,
                c->https ? "https" : "http", q->host, port, q->log_path,
                egress_target_is_normal(q->target)
                        ? "no --allow-http rule matches"
                        : "the path has '.', '..' or encoded '/', '.', '\\' segments");
        return -EACCES;
}

/* Per secret: head and body actions for this request.  Substitution only over TLS to one of the
 * secret's hosts (SNI, Host and destination already agree here). */
static void plan_secrets(conn *c, req *q) {
        const egress_config *cfg = c->ctx->cfg;
        q->body_subst = false;
        for (size_t i = 0; i < cfg->n_secrets && i < ELEMENTSOF(q->head_act); i++) {
                bool ok = c->https && strcasecmp(c->sni, q->host) == 0 && cfg->secrets[i].value &&
                        egress_secret_allows_host(&cfg->secrets[i], q->host);
                q->head_act[i] = ok ? SUBST_REPLACE : SUBST_BLOCK;
                q->body_act[i] = !ok ? SUBST_BLOCK : cfg->secrets[i].body ? SUBST_REPLACE : SUBST_KEEP;
                if (ok && cfg->secrets[i].body)
                        q->body_subst = true;
        }
}

static void reason_blocked(conn *c, req *q, size_t k) {
        const egress_secret *s = &c->ctx->cfg->secrets[k];
        if (!s->value) {
                (void)snprintf(q->reason, sizeof(q->reason),
                        "blocked: the value of secret %s was not kept across the restart of this sandbox "
                        "(secret values are never stored); create the sandbox again with %s in the "
                        "environment (--secret %s@HOST) to use it",
                        s->name, s->name, s->name);
                return;
        }
        (void)snprintf(q->reason, sizeof(q->reason),
                "blocked: the placeholder of secret %s goes only to its hosts over HTTPS (%s%s), not to %s://%s",
                s->name, s->hosts[0], s->n_hosts > 1 ? ", ..." : "", c->https ? "https" : "http", q->host);
}

/* ---- forwarding ---------------------------------------------------------------------------- */

static bool is_hop_by_hop(const http1_field *f, bool reframe, bool websocket) {
        if (websocket && http1_field_is(f, "Upgrade"))
                return false;
        static const char *const hop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Upgrade",
                "Expect", "Proxy-Authorization", "Trailer" };
        for (size_t i = 0; i < ELEMENTSOF(hop); i++)
                if (http1_field_is(f, hop[i]))
                        return true;
        return reframe && (http1_field_is(f, "Content-Length") || http1_field_is(f, "Transfer-Encoding"));
}

/* The head sent upstream, before substitution: request line, end-to-end fields, and
 * "Transfer-Encoding: chunked" when the body may change length. */
static char *build_upstream_head(const http1_head *h, req *q, size_t *ret_len) {
        bool reframe = q->body_subst && q->framing != HTTP1_BODY_NONE;
        size_t cap = h->head_len + 128;
        char *out = malloc(cap);
        if (!out)
                return NULL;
        size_t o = (size_t)snprintf(out, cap, "%s %s HTTP/1.1\r\n", q->method, q->target);
        for (size_t i = 0; i < h->n_fields && o < cap; i++) {
                const http1_field *f = &h->fields[i];
                if (is_hop_by_hop(f, reframe, q->websocket))
                        continue;
                o += (size_t)snprintf(out + o, cap - o, "%.*s: %.*s\r\n", (int)f->name_len, f->name,
                        (int)f->value_len, f->value);
        }
        if (o < cap)
                o += (size_t)snprintf(
                        out + o, cap - o, "%s\r\n", reframe ? "Transfer-Encoding: chunked\r\n" : "");
        if (o >= cap) {
                free(out);
                return NULL;
        }
        q->out_chunked = reframe || q->framing == HTTP1_BODY_CHUNKED;
        *ret_len = o;
        return out;
}

static void upstream_close(conn *c) {
        if (c->up_open)
                egress_io_done(&c->up);
        c->up_h2 = egress_h2up_unref(c->up_h2);
        c->up_open = false;
        c->up_host[0] = 0;
}

static int connect_dst(conn *c) {
        int fd = socket(c->dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&c->dst, c->dst_len) < 0 && errno != EINPROGRESS) {
                int e = errno;
                close(fd);
                return -e;
        }
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (poll(&p, 1, CONNECT_SECS * 1000) <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
                soerr) {
                close(fd);
                return soerr ? -soerr : -ETIMEDOUT;
        }
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
                close(fd);
                return -errno;
        }
        egress_set_timeouts(fd, IO_SECS);
        egress_set_nodelay(fd);
        return fd;
}

/* An idle kept-alive upstream that is readable has closed (or sent bytes nobody asked for):
 * it is not reused. */
static bool upstream_stale(const conn *c) {
        struct pollfd p = { .fd = c->up.fd, .events = POLLIN };
        if (egress_io_has_pending(&c->up))
                return true;
        return poll(&p, 1, 0) != 0;
}

/* ---- idle upstream connections, shared between guest connections ----------------------------- */

#define POOL_MAX 8
#define POOL_IDLE_SECS 30

typedef struct pooled {
        egress_io io;
        egress_h2up *h2;
        struct sockaddr_storage dst;
        time_t since;
        socklen_t dst_len;
        bool used, https;
        char host[EGRESS_HOST_MAX + 1];
} pooled;

static pooled pool[POOL_MAX];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* h2_ok: an h2 upstream will do (not for a WebSocket upgrade, which needs HTTP/1.1). */
static bool pool_key_is(const pooled *p, const conn *c, const char *host, bool h2_ok) {
        return p->used && p->https == c->https && strcmp(p->host, host) == 0 && p->dst_len == c->dst_len &&
                memcmp(&p->dst, &c->dst, c->dst_len) == 0 && (h2_ok || !p->h2);
}

/* A reusable upstream goes to the pool (the oldest entry makes room); c no longer owns it. */
static void upstream_release(conn *c) {
        if (!c->up_open || c->up.eof || upstream_stale(c)) {
                upstream_close(c);
                return;
        }
        pooled old = { 0 };
        pthread_mutex_lock(&pool_lock);
        size_t slot = 0;
        for (size_t i = 0; i < POOL_MAX; i++) {
                if (!pool[i].used) {
                        slot = i;
                        break;
                }
                if (pool[i].since < pool[slot].since)
                        slot = i;
        }
        old = pool[slot];
        pool[slot] = (pooled){ .used = true,
                .https = c->https,
                .io = c->up,
                .h2 = c->up_h2,
                .dst = c->dst,
                .dst_len = c->dst_len,
                .since = time(NULL) };
        (void)snprintf(pool[slot].host, sizeof(pool[slot].host), "%s", c->up_host);
        pthread_mutex_unlock(&pool_lock);
        if (old.used) {
                egress_io_done(&old.io);
                egress_h2up_unref(old.h2);
        }
        c->up_open = false;
        c->up_h2 = NULL;
        c->up_host[0] = 0;
}

/* An idle upstream for host at c's destination, if the pool has a live one. */
static bool pool_take(conn *c, const char *host, bool h2_ok) {
        bool found = false;
        pthread_mutex_lock(&pool_lock);
        for (size_t i = 0; i < POOL_MAX && !found; i++)
                if (pool_key_is(&pool[i], c, host, h2_ok)) {
                        c->up = pool[i].io;
                        c->up_h2 = pool[i].h2;
                        pool[i].used = false;
                        found = true;
                }
        pthread_mutex_unlock(&pool_lock);
        if (!found)
                return false;
        c->up_open = true;
        (void)snprintf(c->up_host, sizeof(c->up_host), "%s", host);
        if (upstream_stale(c)) {
                upstream_close(c);
                return false;
        }
        return true;
}

size_t egress_pool_prune(void) {
        time_t now = time(NULL);
        size_t closed = 0;
        for (size_t i = 0; i < POOL_MAX; i++) {
                pooled old = { 0 };
                pthread_mutex_lock(&pool_lock);
                if (pool[i].used && now - pool[i].since >= POOL_IDLE_SECS) {
                        old = pool[i];
                        pool[i].used = false;
                }
                pthread_mutex_unlock(&pool_lock);
                if (old.used) {
                        egress_io_done(&old.io);
                        egress_h2up_unref(old.h2);
                        closed++;
                }
        }
        return closed;
}

/* The upstream for q->host at the verified original destination; reused while the host stays
 * the same. */
static int upstream_open(conn *c, req *q) {
        if (c->up_open && strcmp(c->up_host, q->host) == 0 && !c->up.eof && !(q->websocket && c->up_h2) &&
                !upstream_stale(c))
                return 0;
        upstream_release(c);
        if (pool_take(c, q->host, !q->websocket))
                return 0;
        int fd = connect_dst(c);
        if (fd < 0) {
                (void)snprintf(q->reason, sizeof(q->reason), "cannot connect to %s (%s:%u): %s", q->host,
                        c->dst_text, c->dst_port, strerror(-fd));
                return fd;
        }
        SSL *ssl = c->https ? egress_tls_upstream_ssl(c->ctx->tls, fd, q->host, !q->websocket) : NULL;
        if (c->https && (!ssl || SSL_connect(ssl) != 1)) {
                char why[300];
                egress_tls_describe_error(ssl, why, sizeof(why));
                (void)snprintf(q->reason, sizeof(q->reason), "upstream TLS failed for %s: %s", q->host, why);
                SSL_free(ssl);
                close(fd);
                return -EPROTO;
        }
        if (ssl && egress_tls_alpn_is_h2(ssl)) {
                int r = egress_h2up_start(ssl, fd, q->host, &c->up_h2, &fd); /* takes ssl and fd */
                if (r < 0) {
                        (void)snprintf(q->reason, sizeof(q->reason), "cannot start HTTP/2 to %s: %s",
                                q->host, strerror(-r));
                        return -EPROTO;
                }
                ssl = NULL;
        }
        if (egress_io_init(&c->up, fd, ssl, IO_BUF + HTTP1_HEAD_MAX) < 0) {
                SSL_free(ssl);
                close(fd);
                c->up_h2 = egress_h2up_unref(c->up_h2);
                return -ENOMEM;
        }
        (void)egress_io_bulk(&c->up); /* failing, it stays a record per syscall */
        c->up_open = true;
        (void)snprintf(c->up_host, sizeof(c->up_host), "%s", q->host);
        return 0;
}

/* ---- bodies -------------------------------------------------------------------------------- */

typedef struct body_out {
        egress_io *io;
        bool chunked;
        int err;
} body_out;

static int body_emit(void *ud, const char *p, size_t n) {
        body_out *o = ud;
        char line[24];
        if (n == 0)
                return 0;
        if (!o->chunked)
                return egress_io_write(o->io, p, n) < 0 ? -EIO : 0;
        int k = snprintf(line, sizeof(line), "%zx\r\n", n);
        if (egress_io_put(o->io, line, (size_t)k) < 0 || egress_io_put(o->io, p, n) < 0 ||
                egress_io_write(o->io, "\r\n", 2) < 0)
                return -EIO;
        return 0;
}

/* n bytes from src through the substitution stream, from src's buffer, what has arrived
 * gathered (up to IO_BATCH) as for downloads (copy_span). */
static int relay_span(
        egress_io *src, uint64_t n, subst_stream *st, body_out *o, uint64_t *count, size_t *ret_blocked) {
        while (n > 0) {
                ssize_t k = egress_io_gather(src, IO_BATCH);
                if (k <= 0)
                        return k == 0 ? -ECONNRESET : (int)k;
                size_t m = (uint64_t)k < n ? (size_t)k : (size_t)n;
                *count += m;
                n -= m;
                int r = subst_stream_feed(st, src->buf + src->start, m, false, body_emit, o, ret_blocked);
                egress_io_consume(src, m);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The request body, decoded from its framing, substituted, and re-encoded (chunked when the
 * output is chunked, else the same bytes under the same Content-Length). */
static int relay_request_body(conn *c, req *q, size_t *ret_blocked) {
        subst_stream st = { .c = c->ctx->cfg, .act = q->body_act };
        body_out o = { .io = &c->up, .chunked = q->out_chunked };
        int r = 0;
        if (q->framing == HTTP1_BODY_LENGTH)
                r = relay_span(&c->guest, q->length, &st, &o, &q->audit.bytes_up, ret_blocked);
        else if (q->framing == HTTP1_BODY_CHUNKED)
                for (;;) {
                        char line[256];
                        uint64_t size;
                        r = egress_io_read_line(&c->guest, line, sizeof(line));
                        if (r < 0 || http1_parse_chunk_size(line, (size_t)r, &size) < 0)
                                return -EBADMSG;
                        q->audit.bytes_up += (uint64_t)r + 2;
                        if (size == 0)
                                break;
                        r = relay_span(&c->guest, size, &st, &o, &q->audit.bytes_up, ret_blocked);
                        if (r < 0 || egress_io_read_line(&c->guest, line, sizeof(line)) != 0)
                                return r < 0 ? r : -EBADMSG;
                }
        if (r < 0)
                return r;
        r = subst_stream_feed(&st, "", 0, true, body_emit, &o, ret_blocked);
        if (r < 0)
                return r;
        if (q->framing == HTTP1_BODY_CHUNKED) {
                /* trailers are dropped: the chunk sizes already said everything */
                char line[1024];
                int i = 0;
                for (; i < 64; i++) {
                        int n = egress_io_read_line(&c->guest, line, sizeof(line));
                        if (n < 0)
                                return -EBADMSG;
                        if (n == 0)
                                break;
                }
                if (i == 64)
                        return -EBADMSG;
        }
        if (q->out_chunked && egress_io_write(&c->up, "0\r\n\r\n", 5) < 0)
                return -EIO;
        return 0;
}

static int guest_emit(void *ud, const char *p, size_t n) {
        return egress_io_write(ud, p, n);
}

/* Before the relay may wait on the upstream, what the guest was given with egress_io_put (a
 * head, chunk lines) goes out: a streamed answer's head must not wait for its first bytes. */
static int flush_before_wait(conn *c) {
        return egress_io_has_pending(&c->up) ? 0 : egress_io_flush(&c->guest);
}

/* n bytes from the upstream to the guest, an echoed secret value masked.  Straight from the
 * upstream's buffer, what has arrived gathered (up to IO_BATCH) into one write: with bulk
 * streams one read and one write syscall move four TLS records. */
static int copy_span(conn *c, uint64_t n, uint64_t *count) {
        redact_stream rs = { .c = c->ctx->cfg };
        int r = 0;
        while (n > 0 && r >= 0) {
                ssize_t k = flush_before_wait(c) < 0 ? -EIO : egress_io_gather(&c->up, IO_BATCH);
                if (k <= 0) {
                        r = k == 0 ? -ECONNRESET : (int)k;
                        break;
                }
                size_t m = (uint64_t)k < n ? (size_t)k : (size_t)n;
                *count += m;
                n -= m;
                r = redact_stream_feed(&rs, c->up.buf + c->up.start, m, n == 0, guest_emit, &c->guest);
                egress_io_consume(&c->up, m);
        }
        redact_stream_done(&rs);
        if (r >= 0) /* the head when the body is empty */
                r = egress_io_flush(&c->guest);
        return r < 0 ? (r == -ENOMEM ? r : -EIO) : 0;
}

/* A chunk's size line or a trailer: what the guest gets is masked (an extension or a trailer may
 * echo a secret too); line keeps what came, for the parse. */
static int copy_line(conn *c, char *line, size_t max, uint64_t *count) {
        char out[1024];
        int n = flush_before_wait(c) < 0 ? -EIO : egress_io_read_line(&c->up, line, max - 2);
        if (n < 0)
                return n;
        if ((size_t)n + 2 > sizeof(out))
                return -EBADMSG;
        memcpy(out, line, (size_t)n);
        memcpy(out + n, "\r\n", 2);
        redact_buffer(c->ctx->cfg, out, (size_t)n);
        if (egress_io_put(&c->guest, out, (size_t)n + 2) < 0) /* sent with the next data */
                return -EIO;
        *count += (uint64_t)n + 2;
        return n;
}

static int copy_chunked(conn *c, uint64_t *count) {
        char line[1024];
        for (;;) {
                uint64_t size;
                int n = copy_line(c, line, sizeof(line), count);
                if (n < 0 || http1_parse_chunk_size(line, (size_t)n, &size) < 0)
                        return -EBADMSG;
                if (size == 0)
                        break;
                int r = copy_span(c, size, count);
                if (r < 0)
                        return r;
                if (copy_line(c, line, sizeof(line), count) != 0)
                        return -EBADMSG;
        }
        for (int i = 0; i < 64; i++) {
                int n = copy_line(c, line, sizeof(line), count);
                if (n <= 0)
                        return n < 0 || egress_io_flush(&c->guest) < 0 ? -EBADMSG : 0;
        }
        return -EBADMSG;
}

static int copy_until_close(conn *c, uint64_t *count) {
        redact_stream rs = { .c = c->ctx->cfg };
        int r;
        for (;;) {
                ssize_t k = flush_before_wait(c) < 0 ? -EIO : egress_io_gather(&c->up, IO_BATCH);
                r = redact_stream_feed(
                        &rs, c->up.buf + c->up.start, k > 0 ? (size_t)k : 0, k <= 0, guest_emit, &c->guest);
                if (k <= 0 || r < 0)
                        break;
                egress_io_consume(&c->up, (size_t)k);
                *count += (uint64_t)k;
        }
        redact_stream_done(&rs);
        if (r >= 0)
                r = egress_io_flush(&c->guest);
        return r < 0 ? -EIO : 0;
}

/* ---- WebSocket ----------------------------------------------------------------------------- */

/* Bytes already buffered on one side go first (the upstream's masked, as in ws_relay). */
static int ws_flush(const egress_config *cfg, egress_io *from, egress_io *to, uint64_t *count) {
        size_t n = from->end - from->start;
        if (n == 0)
                return 0;
        if (cfg)
                redact_buffer(cfg, from->buf + from->start, n);
        if (egress_io_write(to, from->buf + from->start, n) < 0)
                return -EIO;
        from->start = from->end;
        *count += n;
        return 0;
}

static bool io_readable(const egress_io *io, short revents) {
        return egress_io_has_pending(io) || (revents & (POLLIN | POLLHUP | POLLERR));
}

/* After a 101: frames both ways, unexamined (the checks were made on the upgrade request), until
 * a side closes or both stay quiet for IDLE_SECS.  What the upstream sends is masked as a body is
 * (a server's frames are not XOR-masked: an echoed value is there as it was sent), read by read:
 * nothing is held back, as a message must not wait for the next, so a value split between two
 * reads, or compressed (permessage-deflate), passes (docs/design/egress-gateway.md). */
static int ws_relay(conn *c, req *q) {
        char buf[IO_BUF];
        if (ws_flush(NULL, &c->guest, &c->up, &q->audit.bytes_up) < 0 ||
                ws_flush(c->ctx->cfg, &c->up, &c->guest, &q->audit.bytes_down) < 0)
                return 0;
        for (;;) {
                struct pollfd p[2] = { { .fd = c->guest.fd, .events = POLLIN },
                        { .fd = c->up.fd, .events = POLLIN } };
                bool pending = io_readable(&c->guest, 0) || io_readable(&c->up, 0);
                if (!pending && poll(p, 2, IDLE_SECS * 1000) <= 0)
                        return 0;
                egress_io *side[2] = { &c->guest, &c->up };
                for (int i = 0; i < 2; i++) {
                        if (!io_readable(side[i], p[i].revents))
                                continue;
                        ssize_t n = egress_io_read(side[i], buf, sizeof(buf));
                        if (n > 0 && i == 1)
                                redact_buffer(c->ctx->cfg, buf, (size_t)n);
                        if (n <= 0 || egress_io_write(side[1 - i], buf, (size_t)n) < 0)
                                return 0;
                        if (i == 0)
                                q->audit.bytes_up += (uint64_t)n;
                        else
                                q->audit.bytes_down += (uint64_t)n;
                }
        }
}

/* ---- the response -------------------------------------------------------------------------- */

static int read_response_head(conn *c, http1_head *h) {
        for (;;) {
                int r = http1_parse_response(c->up.buf + c->up.start, c->up.end - c->up.start, h);
                if (r != 0)
                        return r > 0 ? 0 : r;
                ssize_t n = egress_io_fill(&c->up);
                if (n <= 0)
                        return n == 0 ? -ECONNRESET : (int)n;
        }
}

/* Relays interim 1xx heads and the final head and body.  *ret_close_up: the upstream connection
 * cannot be reused; *ret_close_guest: nor the guest's (a body that ends at close). */
static int relay_response(conn *c, req *q, bool *ret_close_up, bool *ret_close_guest) {
        http1_head h;
        for (;;) {
                int r = read_response_head(c, &h);
                if (r < 0)
                        return r;
                if (h.status == 101 && !q->websocket) {
                        (void)snprintf(
                                q->reason, sizeof(q->reason), "the upstream switched protocols unasked");
                        return -EPROTO;
                }
                /* masked in place: the head is consumed right after; it goes with the body's
                 * first bytes (flushed below when there is no body) */
                redact_buffer(c->ctx->cfg, c->up.buf + c->up.start, h.head_len);
                if (egress_io_put(&c->guest, c->up.buf + c->up.start, h.head_len) < 0)
                        return -EIO;
                q->audit.bytes_down += h.head_len;
                q->audit.status = h.status;
                if (h.status == 101) {
                        egress_io_consume(&c->up, h.head_len);
                        if (egress_io_flush(&c->guest) < 0)
                                return -EIO;
                        *ret_close_up = *ret_close_guest = true;
                        q->audit.proto = "ws";
                        return ws_relay(c, q);
                }
                if (h.status >= 200)
                        break;
                egress_io_consume(&c->up, h.head_len);
                if (egress_io_flush(&c->guest) < 0) /* a 1xx is for now */
                        return -EIO;
        }
        http1_framing fr;
        uint64_t len;
        const http1_field *cf = http1_find(&h, "Connection", NULL);
        *ret_close_up = (cf && http1_value_has_token(cf->value, cf->value_len, "close")) || h.minor == 0;
        int r = http1_response_framing(&h, q->is_head, &fr, &len);
        egress_io_consume(&c->up, h.head_len);
        if (r < 0)
                return -EBADMSG;
        *ret_close_guest = fr == HTTP1_BODY_UNTIL_CLOSE;
        switch (fr) {
        case HTTP1_BODY_NONE:
                return egress_io_flush(&c->guest) < 0 ? -EIO : 0;
        case HTTP1_BODY_LENGTH:
                return copy_span(c, len, &q->audit.bytes_down);
        case HTTP1_BODY_CHUNKED:
                return copy_chunked(c, &q->audit.bytes_down);
        case HTTP1_BODY_UNTIL_CLOSE:
                *ret_close_up = true;
                return copy_until_close(c, &q->audit.bytes_down);
        default:
                return -EBADMSG;
        }
}

/* ---- one request --------------------------------------------------------------------------- */

/* Substitutes the head (a placeholder that must not go here blocks), sends it, then the body. */
static int send_request(conn *c, req *q, const http1_head *h) {
        size_t raw_len = 0, out_len = 0, blocked = 0;
        bool changed = false;
        _cleanup_free_ char *raw = build_upstream_head(h, q, &raw_len);
        char *out = NULL;
        if (!raw)
                return -ENOMEM;
        int r = subst_buffer(c->ctx->cfg, q->head_act, raw, raw_len, &out, &out_len, &blocked, &changed);
        if (r == -EPERM) {
                reason_blocked(c, q, blocked);
                return r;
        }
        if (r < 0)
                return r;
        q->audit.bytes_up += h->head_len;
        egress_io_consume(&c->guest, h->head_len);
        r = upstream_open(c, q);
        if (r < 0) {
                explicit_bzero(out, out_len);
                free(out);
                return -EPROTO; /* q->reason says why */
        }
        r = egress_io_write(&c->up, out, out_len);
        explicit_bzero(out, out_len);
        free(out);
        if (r < 0)
                return r == -EIO ? -ECONNABORTED : r;
        if (q->expect_continue && q->framing != HTTP1_BODY_NONE &&
                egress_io_write(&c->guest, "HTTP/1.1 100 Continue\r\n\r\n", 25) < 0)
                return -EIO;
        r = relay_request_body(c, q, &blocked);
        if (r == -EPERM)
                reason_blocked(c, q, blocked);
        return r;
}

/* Any placeholder in the raw head that may not go here: checked before anything is sent. */
static int check_head_placeholders(conn *c, req *q, const http1_head *h) {
        size_t len = 0, blocked = 0;
        bool changed = false;
        char *out = NULL;
        int r = subst_buffer(c->ctx->cfg, q->head_act, c->guest.buf + c->guest.start, h->head_len, &out,
                &len, &blocked, &changed);
        if (out) {
                explicit_bzero(out, len);
                free(out);
        }
        if (r == -EPERM)
                reason_blocked(c, q, blocked);
        return r;
}

/* Why the HTTP/2 bridge of c's upstream ended, into q->reason; false if it has not. */
static bool h2up_failed(conn *c, req *q) {
        egress_h2up_reason(c->up_h2, q->reason, sizeof(q->reason));
        return q->reason[0] != 0;
}

/* One request: returns 1 to keep the guest connection for another, 0 to close it. */
static int handle_request(conn *c, req *q, const http1_head *h) {
        int r = read_request_fields(c, h, q);
        if (r == -ENOMEM)
                return 0;
        if (r < 0) {
                refuse(c, q, r == -EPERM ? 403 : 400, r == -EPERM ? "Forbidden" : "Bad Request",
                        r == -EPERM ? "deny" : "error");
                return 0;
        }
        plan_secrets(c, q);
        r = check_head_placeholders(c, q, h);
        if (r == 0 && check_request(c, q) < 0) {
                refuse(c, q, 403, "Forbidden", "deny");
                return 0;
        }
        if (r == 0)
                r = send_request(c, q, h);
        if (r == -EPERM) {
                upstream_close(c);
                refuse(c, q, 403, "Forbidden", "block");
                return 0;
        }
        if (r == -EPROTO) {
                refuse(c, q, 502, "Bad Gateway", "error");
                return 0;
        }
        if (r < 0 && c->up_h2 && h2up_failed(c, q)) { /* the h2 bridge ended while the request went */
                upstream_close(c);
                refuse(c, q, 502, "Bad Gateway", "error");
                return 0;
        }
        if (r < 0) {
                upstream_close(c);
                (void)snprintf(q->reason, sizeof(q->reason), "the request failed: %s", strerror(-r));
                audit_req(q, "error");
                return 0;
        }
        bool close_up = false, close_guest = false;
        r = relay_response(c, q, &close_up, &close_guest);
        if (r < 0 && c->up_h2 && !q->reason[0]) /* why the h2 bridge ended, if it did */
                (void)h2up_failed(c, q);
        if (r < 0 || close_up)
                upstream_close(c);
        if (r < 0) {
                if (!q->reason[0])
                        (void)snprintf(q->reason, sizeof(q->reason), "relaying the response failed: %s",
                                strerror(-r));
                if (q->audit.status == 0)
                        refuse(c, q, 502, "Bad Gateway", "error");
                else
                        audit_req(q, "error");
                return 0;
        }
        audit_req(q, "allow");
        return !(q->close_after || close_guest);
}

/* ---- the connection ------------------------------------------------------------------------ */

static void audit_conn(const char *host, const char *reason) {
        egress_audit_rec a = { .host = host, .decision = "error", .reason = reason, .proto = "http/1.1" };
        egress_audit(&a);
}

/* Port 443 must start with a TLS handshake record (0x16), and the handshake must name a host. */
static int guest_tls(conn *c, int fd) {
        unsigned char first = 0;
        ssize_t n;
        do
                n = recv(fd, &first, 1, MSG_PEEK);
        while (n < 0 && errno == EINTR);
        if (n != 1 || first != 0x16) {
                audit_conn(NULL,
                        n == 1 ? "refused: the connection to port 443 does not start with TLS"
                               : "the guest closed before TLS");
                return -EPROTO;
        }
        c->guest.ssl = egress_tls_guest_ssl(c->ctx->tls, fd);
        if (!c->guest.ssl || SSL_accept(c->guest.ssl) != 1) {
                char why[300], reason[400];
                egress_tls_describe_error(NULL, why, sizeof(why));
                (void)snprintf(reason, sizeof(reason),
                        "refused: the TLS handshake with the guest failed (it must name a host by SNI): %s",
                        why);
                audit_conn(NULL, reason);
                return -EPROTO;
        }
        c->sni = egress_tls_sni(c->guest.ssl);
        return c->sni ? 0 : -EPROTO;
}

static void conn_loop(conn *c) {
        for (;;) {
                http1_head h;
                req q = { .audit.proto = c->proto };
                egress_set_timeouts(c->guest.fd, IDLE_SECS);
                int r = read_request_head(c, &h);
                if (r == 0)
                        return;
                egress_set_timeouts(c->guest.fd, IO_SECS);
                if (r < 0) {
                        if (r == -EBADMSG || r == -E2BIG) {
                                (void)snprintf(q.reason, sizeof(q.reason), "refused: %s",
                                        r == -E2BIG ? "the request head is larger than 64 KiB"
                                                    : "a malformed HTTP/1.1 request head");
                                refuse(c, &q, r == -E2BIG ? 431 : 400,
                                        r == -E2BIG ? "Request Header Fields Too Large" : "Bad Request",
                                        "error");
                        }
                        return;
                }
                r = handle_request(c, &q, &h);
                free(q.target);
                if (r <= 0)
                        return;
        }
}

/* After a refusal the guest may still be sending: closing with unread bytes would reset the
 * connection and the guest could lose the answer.  So: close_notify, FIN, then read and drop
 * what comes for up to a second (at most 1 MiB). */
static void guest_close_gracefully(conn *c) {
        char buf[IO_BUF];
        if (c->guest.ssl)
                (void)SSL_shutdown(c->guest.ssl);
        ERR_clear_error();
        (void)shutdown(c->guest.fd, SHUT_WR);
        egress_set_timeouts(c->guest.fd, 1);
        for (size_t total = 0; total < (1u << 20);) {
                ssize_t n = read(c->guest.fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                total += (size_t)n;
        }
}

void egress_conn_run(const egress_ctx *ctx, int fd, bool https) {
        conn c = { .ctx = ctx, .https = https, .proto = "http/1.1" };
        egress_set_timeouts(fd, IO_SECS);
        egress_set_nodelay(fd);
        if (egress_io_init(&c.guest, fd, NULL, IO_BUF + HTTP1_HEAD_MAX) < 0) {
                close(fd);
                return;
        }
        if (original_dst(&c, fd) < 0)
                audit_conn(NULL,
                        "refused: no original destination (the connection did not come through the redirect)");
        else if (https && guest_tls(&c, fd) == 0 && egress_tls_alpn_is_h2(c.guest.ssl)) {
                (void)egress_io_bulk(&c.guest); /* failing, it stays a record per syscall */
                egress_h2_serve(ctx, &c.guest, c.sni, &c.dst, c.dst_len);
        } else if (!https || (c.guest.ssl && c.sni)) { /* plain HTTP, or TLS with a server name */
                (void)egress_io_bulk(&c.guest); /* failing, it stays a record per syscall */
                conn_loop(&c);
        }
        upstream_release(&c);
        guest_close_gracefully(&c);
        egress_io_done(&c.guest);
}

void egress_conn_run_bridged(const egress_ctx *ctx, int fd, const char *sni,
        const struct sockaddr_storage *dst, socklen_t dst_len) {
        conn c = { .ctx = ctx, .https = true, .proto = "h2", .sni = sni, .dst = *dst, .dst_len = dst_len };
        if (egress_io_init(&c.guest, fd, NULL, IO_BUF + HTTP1_HEAD_MAX) < 0) {
                close(fd);
                return;
        }
        egress_set_timeouts(fd, IO_SECS);
        dst_describe(&c);
        conn_loop(&c);
        upstream_release(&c);
        egress_io_done(&c.guest);
}
