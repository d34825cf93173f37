/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/2 client side of nook-egress.  When an upstream picks h2 by ALPN, proxy.c still
 * writes HTTP/1.1 (already checked, substituted and framed by it) into a socketpair; the thread
 * here reads it, makes each request one stream of its h2 connection (nghttp2's client session)
 * and writes the answer back as HTTP/1.1.  The mapping:
 *   request:  request line -> :method :scheme(https) :path, Host -> :authority, field names
 *             lower-cased, connection-specific fields (Connection, Keep-Alive, Proxy-Connection,
 *             Transfer-Encoding, Upgrade, TE but "trailers") dropped, a chunked body decoded
 *             into DATA frames as it arrives;
 *   answer:   :status -> status line, fields as they come (nghttp2 refuses connection-specific
 *             ones and CR/LF/NUL), a body without content-length sent chunked, 1xx heads and
 *             trailers dropped.
 * Requests come one at a time (proxy.c waits for an answer before the next), so one socketpair
 * is one h2 connection carrying its requests one stream after another; pooled, it serves the next
 * guest connection to the same host and destination.  A reset stream, a GOAWAY or a closed
 * connection ends the bridge: the socketpair closes and proxy.c answers the guest 502 with the
 * reason kept here.  Bodies are never buffered whole: answer DATA is written to the socketpair
 * as it is received (blocking, so a slow guest slows the upstream through h2 flow control), the
 * request body is read only while the stream can take it. */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/config.h"
#include "egress/h2up.h"
#include "egress/http1.h"
#include "egress/io.h"
#include "util/macro.h"

#define H2UP_IN_CAP (HTTP1_HEAD_MAX + IO_BUF)
#define H2UP_ANSWER_SECS 60 /* no frame for this long while a stream is open: give up */
#define H2UP_IDLE_SECS 300 /* idle: the pool closes us after 30 s anyway */
#define H2UP_WINDOW (1 << 20) /* answers are written on as they come: a large window costs nothing */
#define H2UP_HEAD_MAX ((size_t)64 * 1024)

struct egress_h2up {
        pthread_mutex_t lock;
        int refs;
        char reason[300];
};

typedef struct bridge {
        egress_h2up *u;
        SSL *ssl;
        int fd, sp; /* the upstream socket; our end of the socketpair */
        char host[EGRESS_HOST_MAX + 1];
        nghttp2_session *s;
        char *in; /* bytes from proxy.c: a head, then its body */
        size_t in_len;
        bool in_eof, done;
        /* the current request, stream 0 when there is none */
        int32_t stream;
        http1_framing req_fr;
        uint64_t req_left;
        bool req_open, drain; /* body bytes still to come; to drop (the stream ended first) */
        http1_dechunk dc;
        bool is_head;
        /* its answer */
        int status;
        char *head; /* "name: value\r\n"... */
        size_t head_len;
        bool has_length, answered, chunked;
} bridge;

/* The first reason wins (a GOAWAY, then the resets it causes). */
_printf_(2, 3) static void bridge_fail(bridge *b, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        pthread_mutex_lock(&b->u->lock);
        if (!b->u->reason[0])
                (void)vsnprintf(b->u->reason, sizeof(b->u->reason), fmt, ap);
        pthread_mutex_unlock(&b->u->lock);
        va_end(ap);
        b->done = true;
}

/* The whole of p to proxy.c (blocking: backpressure). */
static int sp_write(bridge *b, const void *p, size_t n) {
        const char *c = p;
        while (n > 0) {
                ssize_t k = send(b->sp, c, n, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return -EIO;
                c += k;
                n -= (size_t)k;
        }
        return 0;
}

/* ---- the request: HTTP/1.1 from proxy.c into a stream ------------------------------------------ */

static bool is_connection_specific(const http1_field *f) {
        static const char *const drop[] = { "Connection", "Keep-Alive", "Proxy-Connection",
                "Transfer-Encoding", "Upgrade", "Host" };
        for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
                if (http1_field_is(f, drop[i]))
                        return true;
        /* RFC 9113 8.2.2: TE may only say "trailers" */
        return http1_field_is(f, "TE") && !(f->value_len == 8 && memcmp(f->value, "trailers", 8) == 0);
}

/* Up to max body bytes of the current request out of b->in: their count (0: none yet), or
 * -EBADMSG; *ret_end at the body's end. */
static ssize_t take_body(bridge *b, uint8_t *buf, size_t max, bool *ret_end) {
        size_t got = 0, used = 0;
        if (b->req_fr == HTTP1_BODY_CHUNKED) {
                ssize_t k = http1_dechunk_feed(&b->dc, b->in, b->in_len, (char *)buf, max, &used);
                if (k < 0)
                        return k;
                got = (size_t)k;
                *ret_end = b->dc.state == HTTP1_DECHUNK_DONE;
        } else {
                got = b->in_len < max ? b->in_len : max;
                if (got > b->req_left)
                        got = (size_t)b->req_left;
                memcpy(buf, b->in, got);
                used = got;
                b->req_left -= got;
                *ret_end = b->req_left == 0;
        }
        memmove(b->in, b->in + used, b->in_len - used);
        b->in_len -= used;
        if (*ret_end)
                b->req_open = false;
        return (ssize_t)got;
}

static ssize_t req_body_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
        nghttp2_data_source *src, void *ud) {
        bridge *b = ud;
        bool end = false;
        ssize_t got = take_body(b, buf, length, &end);
        if (got < 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (end)
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (got == 0 && !end)
                return b->in_eof ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : NGHTTP2_ERR_DEFERRED;
        return got;
}

/* The upstream answered and closed the stream before the request body was all sent (an early
 * 401 or 413): the rest proxy.c writes is read and dropped, so the answer still reaches it. */
static void drain_body(bridge *b) {
        uint8_t scratch[IO_BUF];
        bool end = false;
        ssize_t k;
        do
                k = take_body(b, scratch, sizeof(scratch), &end);
        while (k > 0 && !end);
        if (k < 0)
                bridge_fail(b, "the request body for %s is not valid chunked framing", b->host);
        b->drain = !end;
}

static void nv_set(nghttp2_nv *nv, const char *name, size_t nn, const char *value, size_t vn) {
        *nv = (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, nn, vn, NGHTTP2_NV_FLAG_NONE };
}

/* The head h (in b->in, names lower-cased in place: nghttp2 copies them) as a new stream. */
static int submit_request(bridge *b, http1_head *h) {
        nghttp2_nv nv[HTTP1_HEADERS_MAX + 4];
        size_t n = 0;
        bool dup = false;
        const http1_field *host = http1_find(h, "Host", &dup);
        uint64_t len = 0;
        if (!host || dup || http1_request_framing(h, &b->req_fr, &len) < 0)
                return -EBADMSG;
        nv_set(&nv[n++], ":method", 7, h->method, h->method_len);
        nv_set(&nv[n++], ":scheme", 7, "https", 5);
        nv_set(&nv[n++], ":authority", 10, host->value, host->value_len);
        nv_set(&nv[n++], ":path", 5, h->target, h->target_len);
        for (size_t i = 0; i < h->n_fields; i++) {
                http1_field *f = &h->fields[i];
                if (is_connection_specific(f))
                        continue;
                for (size_t j = 0; j < f->name_len; j++)
                        if (f->name[j] >= 'A' && f->name[j] <= 'Z')
                                ((char *)f->name)[j] = (char)(f->name[j] + 32);
                nv_set(&nv[n++], f->name, f->name_len, f->value, f->value_len);
        }
        b->req_left = len;
        b->dc = (http1_dechunk){ 0 };
        b->req_open = b->req_fr != HTTP1_BODY_NONE;
        b->is_head = h->method_len == 4 && memcmp(h->method, "HEAD", 4) == 0;
        nghttp2_data_provider dp = { .read_callback = req_body_cb };
        int32_t id =
                nghttp2_submit_request(b->s, NULL, nv, n, b->req_fr == HTTP1_BODY_NONE ? NULL : &dp, NULL);
        if (id < 0)
                return -EIO;
        b->stream = id;
        b->status = 0;
        b->head_len = 0;
        b->has_length = b->answered = b->chunked = false;
        return 0;
}

/* A complete head in b->in starts the next stream. */
static int next_request(bridge *b) {
        http1_head h;
        int r = http1_parse_request(b->in, b->in_len, &h);
        if (r == 0 && b->in_len < H2UP_IN_CAP)
                return 0;
        if (r <= 0 || submit_request(b, &h) < 0) {
                bridge_fail(b, "the request to %s could not be put into an HTTP/2 stream", b->host);
                return -EBADMSG;
        }
        memmove(b->in, b->in + h.head_len, b->in_len - h.head_len);
        b->in_len -= h.head_len;
        return 0;
}

/* ---- the answer: a stream's frames into HTTP/1.1 for proxy.c ---------------------------------- */

static const char *status_phrase(int status) {
        switch (status) {
        case 200:
                return "OK";
        case 204:
                return "No Content";
        case 206:
                return "Partial Content";
        case 301:
                return "Moved Permanently";
        case 302:
                return "Found";
        case 304:
                return "Not Modified";
        case 400:
                return "Bad Request";
        case 401:
                return "Unauthorized";
        case 403:
                return "Forbidden";
        case 404:
                return "Not Found";
        case 500:
                return "Internal Server Error";
        case 502:
                return "Bad Gateway";
        case 503:
                return "Service Unavailable";
        default:
                return "Status";
        }
}

static int header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nn,
        const uint8_t *value, size_t vn, uint8_t flags, void *ud) {
        bridge *b = ud;
        if (f->hd.stream_id != b->stream || b->answered || f->hd.type != NGHTTP2_HEADERS)
                return 0; /* trailers are dropped */
        if (nn == 7 && memcmp(name, ":status", 7) == 0) {
                b->status = vn == 3 ? (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0') : 0;
                return 0;
        }
        if (nn > 0 && name[0] == ':')
                return 0;
        if (b->head_len + nn + vn + 4 > H2UP_HEAD_MAX) {
                bridge_fail(b, "the upstream %s sent an answer head over 64 KiB", b->host);
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        char *q = realloc(b->head, b->head_len + nn + vn + 5);
        if (!q)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        b->head = q;
        b->head_len += (size_t)sprintf(q + b->head_len, "%.*s: %.*s\r\n", (int)nn, (const char *)name,
                (int)vn, (const char *)value);
        b->has_length |= nn == 14 && memcmp(name, "content-length", 14) == 0;
        return 0;
}

/* The final head: its framing says where the body ends for proxy.c. */
static int write_answer_head(bridge *b, bool end_stream) {
        bool no_body = b->is_head || b->status == 204 || b->status == 304;
        const char *framing = "";
        if (!no_body && !b->has_length)
                framing = end_stream ? "Content-Length: 0\r\n" : "Transfer-Encoding: chunked\r\n";
        b->chunked = !no_body && !b->has_length && !end_stream;
        char *out = NULL;
        int n = asprintf(&out, "HTTP/1.1 %03d %s\r\n%.*s%s\r\n", b->status, status_phrase(b->status),
                (int)b->head_len, b->head ? b->head : "", framing);
        if (n < 0)
                return -ENOMEM;
        int r = sp_write(b, out, (size_t)n);
        free(out);
        b->answered = true;
        return r;
}

static int frame_recv_cb(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
        bridge *b = ud;
        if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.last_stream_id < b->stream)
                bridge_fail(b, "the upstream %s ended the HTTP/2 connection before answering (GOAWAY, %s)",
                        b->host, nghttp2_http2_strerror(f->goaway.error_code));
        if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != b->stream || b->answered)
                return 0;
        if (b->status >= 100 && b->status < 200) { /* interim: proxy.c answers 100-continue itself */
                b->status = 0;
                b->head_len = 0;
                b->has_length = false;
                return 0;
        }
        if (b->status < 200) {
                bridge_fail(b, "the upstream %s answered over HTTP/2 without a valid :status", b->host);
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        if (write_answer_head(b, f->hd.flags & NGHTTP2_FLAG_END_STREAM) < 0) {
                bridge_fail(b, "the request to %s was abandoned", b->host);
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        return 0;
}

/* proxy.c stopped reading (the guest went away or stalled for 30 s). */
static int data_abandoned(bridge *b) {
        bridge_fail(b, "the answer from %s was not read on", b->host);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int data_cb(
        nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
        bridge *b = ud;
        char line[24];
        if (id != b->stream || !b->answered || len == 0 || b->is_head)
                return 0;
        if (b->chunked) {
                int n = snprintf(line, sizeof(line), "%zx\r\n", len);
                if (sp_write(b, line, (size_t)n) < 0)
                        return data_abandoned(b);
        }
        if (sp_write(b, data, len) < 0 || (b->chunked && sp_write(b, "\r\n", 2) < 0))
                return data_abandoned(b);
        return 0;
}

static int stream_close_cb(nghttp2_session *s, int32_t id, uint32_t code, void *ud) {
        bridge *b = ud;
        if (id != b->stream)
                return 0;
        b->stream = 0;
        if (code != NGHTTP2_NO_ERROR || !b->answered) {
                bridge_fail(b, "the upstream %s reset the HTTP/2 stream %s (%s)", b->host,
                        b->answered ? "in the middle of the answer" : "before answering",
                        nghttp2_http2_strerror(code));
                return 0;
        }
        if (b->chunked && sp_write(b, "0\r\n\r\n", 5) < 0)
                b->done = true;
        b->drain = b->req_open;
        return 0;
}

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *ud) {
        bridge *b = ud;
        size_t put = 0;
        if (SSL_write_ex(b->ssl, data, len, &put) != 1) {
                ERR_clear_error();
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        return (ssize_t)put;
}

/* ---- the loop ------------------------------------------------------------------------------------ */

static int session_new(bridge *b) {
        nghttp2_session_callbacks *cb;
        if (nghttp2_session_callbacks_new(&cb) != 0)
                return -ENOMEM;
        nghttp2_session_callbacks_set_send_callback(cb, send_cb);
        nghttp2_session_callbacks_set_on_header_callback(cb, header_cb);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, frame_recv_cb);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, data_cb);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, stream_close_cb);
        int r = nghttp2_session_client_new(&b->s, cb, b);
        nghttp2_session_callbacks_del(cb);
        if (r != 0)
                return -ENOMEM;
        nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2UP_WINDOW } };
        if (nghttp2_submit_settings(b->s, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
                nghttp2_session_set_local_window_size(b->s, NGHTTP2_FLAG_NONE, 0, H2UP_WINDOW) != 0)
                return -EIO;
        return 0;
}

/* Bytes from proxy.c: a head starts a stream, body bytes wake a deferred one. */
static void sp_readable(bridge *b) {
        ssize_t k = read(b->sp, b->in + b->in_len, H2UP_IN_CAP - b->in_len);
        if (k <= 0) {
                b->in_eof = true;
                if (b->stream) /* proxy.c gave up on this request */
                        bridge_fail(b, "the request to %s was abandoned", b->host);
                b->done = true;
                return;
        }
        b->in_len += (size_t)k;
        if (b->stream)
                (void)nghttp2_session_resume_data(b->s, b->stream);
}

static void up_readable(bridge *b) {
        uint8_t buf[IO_BUF];
        size_t got = 0;
        if (SSL_read_ex(b->ssl, buf, sizeof(buf), &got) != 1) {
                ERR_clear_error();
                bridge_fail(b, "the upstream %s closed the HTTP/2 connection%s", b->host,
                        b->stream ? " before the answer was complete" : "");
                return;
        }
        if (nghttp2_session_mem_recv(b->s, buf, got) < 0)
                bridge_fail(b, "the upstream %s broke the HTTP/2 protocol", b->host);
}

static void bridge_step(bridge *b) {
        if (b->drain)
                drain_body(b);
        if (!b->stream && !b->drain && b->in_len > 0 && next_request(b) < 0)
                return;
        if (nghttp2_session_send(b->s) != 0) {
                bridge_fail(b, "cannot write to the upstream %s over HTTP/2", b->host);
                return;
        }
        if (!nghttp2_session_want_read(b->s) && !nghttp2_session_want_write(b->s)) {
                bridge_fail(b, "the upstream %s ended the HTTP/2 connection", b->host);
                return;
        }
        struct pollfd p[2] = { { .fd = b->sp, .events = b->in_len < H2UP_IN_CAP ? POLLIN : 0 },
                { .fd = b->fd, .events = POLLIN } };
        bool pending = SSL_has_pending(b->ssl) == 1; /* a record read but not yet returned */
        int n = poll(p, 2, pending ? 0 : (b->stream ? H2UP_ANSWER_SECS : H2UP_IDLE_SECS) * 1000);
        if (n < 0 && errno == EINTR)
                return;
        if (n <= 0 && !pending) {
                bridge_fail(b, "the upstream %s sent nothing over HTTP/2 for %d s", b->host,
                        b->stream ? H2UP_ANSWER_SECS : H2UP_IDLE_SECS);
                return;
        }
        if (p[0].revents)
                sp_readable(b);
        if (!b->done && (pending || p[1].revents))
                up_readable(b);
}

static void *bridge_thread(void *p) {
        bridge *b = p;
        if (!b->done && session_new(b) == 0)
                while (!b->done)
                        bridge_step(b);
        if (b->s) {
                (void)nghttp2_session_terminate_session(b->s, NGHTTP2_NO_ERROR);
                (void)nghttp2_session_send(b->s);
                nghttp2_session_del(b->s);
        }
        close(b->sp); /* proxy.c reads EOF: then the reason */
        (void)SSL_shutdown(b->ssl);
        SSL_free(b->ssl);
        ERR_clear_error();
        close(b->fd);
        egress_h2up_unref(b->u);
        free(b->in);
        free(b->head);
        free(b);
        return NULL;
}

int egress_h2up_start(SSL *ssl, int fd, const char *host, egress_h2up **ret, int *ret_fd) {
        int sv[2] = { -1, -1 };
        bridge *b = calloc(1, sizeof(*b));
        egress_h2up *u = calloc(1, sizeof(*u));
        char *in = malloc(H2UP_IN_CAP);
        if (!b || !u || !in || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                free(b);
                free(u);
                free(in);
                SSL_free(ssl);
                close(fd);
                return -ENOMEM;
        }
        pthread_mutex_init(&u->lock, NULL);
        u->refs = 2;
        *b = (bridge){ .u = u, .ssl = ssl, .fd = fd, .sp = sv[1], .in = in };
        (void)snprintf(b->host, sizeof(b->host), "%s", host);
        egress_set_timeouts(sv[1], 30);
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&t, &attr, bridge_thread, b);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                b->done = true;
                (void)bridge_thread(b); /* frees b, ssl, fd, sv[1] and one reference */
                egress_h2up_unref(u);
                close(sv[0]);
                return -r;
        }
        *ret = u;
        *ret_fd = sv[0];
        return 0;
}

void egress_h2up_reason(egress_h2up *u, char *buf, size_t len) {
        pthread_mutex_lock(&u->lock);
        (void)snprintf(buf, len, "%s", u->reason);
        pthread_mutex_unlock(&u->lock);
}

egress_h2up *egress_h2up_unref(egress_h2up *u) {
        if (!u)
                return NULL;
        pthread_mutex_lock(&u->lock);
        int left = --u->refs;
        pthread_mutex_unlock(&u->lock);
        if (left == 0) {
                pthread_mutex_destroy(&u->lock);
                free(u);
        }
        return NULL;
}
