/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/2 front of nook-egress.  A guest that picks h2 by ALPN talks HTTP/2 to this thread;
 * each stream becomes one HTTP/1.1 request written into a socketpair whose other end is served
 * by egress_conn_run_bridged on its own thread: the same checks (Host = :authority = SNI, the
 * original destination, rules, placeholders), substitution, upstream and audit as HTTP/1.1.
 * The answer comes back as HTTP/1.1 and is turned into HEADERS and DATA frames here.  Bodies
 * stream both ways; nghttp2 does the framing, HPACK and flow control.
 *
 * Throughput (docs/design/egress.md): the guest's TLS stream is bulk (egress_io_bulk: records
 * written through a buffer, sent once per nghttp2_session_send), a DATA frame and its 9-byte
 * header fill exactly one TLS record, a worker's answer is read up to H2_RBUF_MAX at once and
 * taken from its buffer by offsets (decoded from chunked by http1_dechunk_feed straight into
 * nghttp2's frame), and both windows are large so a bulk upload is not held to 64 KiB a round
 * trip. */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "egress/http1.h"
#include "egress/io.h"
#include "egress/proxy.h"

#define H2_IDLE_SECS 60L
#define H2_MAX_STREAMS 64
#define H2_RBUF_MAX ((size_t)256 * 1024) /* answer bytes held per stream before its socket is left unread */
#define H2_HEAD_MAX ((size_t)64 * 1024)
/* Our receive windows (stream and connection): DATA from the guest is written on to its worker
 * as it comes, so credit costs no memory here; 64 KiB (the default) would hold an upload to
 * 64 KiB per round trip. */
#define H2_WINDOW (1 << 20)
#define H2_CONN_WINDOW (16 << 20)
/* A DATA frame whose payload and 9-byte header fill one TLS record (2^14 bytes of plaintext):
 * a 16 KiB payload would cost a second record of 9 bytes per frame. */
#define H2_DATA_PAYLOAD (16384 - 9)

typedef struct h2_stream {
        int32_t id;
        int fd; /* our end of the socketpair, -1 before the request is complete */
        char method[64], authority[EGRESS_HOST_MAX + 8];
        char *path;
        char *hdr; /* the request's other fields, "name: value\r\n"... */
        size_t hdr_len;
        bool bad, req_body, head_done, eof, is_head;
        char *rbuf; /* the worker's answer: [rstart, rend) not yet turned into frames */
        size_t rstart, rend;
        http1_framing fr;
        uint64_t left; /* LENGTH: body bytes still to come */
        http1_dechunk dc; /* CHUNKED */
        struct h2_stream *next;
} h2_stream;

typedef struct h2_conn {
        const egress_ctx *ctx;
        egress_io *guest; /* bulk: frames go out once per nghttp2_session_send */
        const char *sni;
        const struct sockaddr_storage *dst;
        socklen_t dst_len;
        nghttp2_session *s;
        h2_stream *streams;
        size_t n_streams;
} h2_conn;

typedef struct worker_arg {
        const egress_ctx *ctx;
        int fd;
        char sni[EGRESS_HOST_MAX + 1];
        struct sockaddr_storage dst;
        socklen_t dst_len;
} worker_arg;

static void *worker(void *p) {
        worker_arg *a = p;
        egress_conn_run_bridged(a->ctx, a->fd, a->sni, &a->dst, a->dst_len);
        free(a);
        return NULL;
}

static void stream_free(h2_conn *h, h2_stream *st) {
        for (h2_stream **i = &h->streams; *i; i = &(*i)->next)
                if (*i == st) {
                        *i = st->next;
                        break;
                }
        if (st->fd >= 0)
                close(st->fd);
        free(st->path);
        free(st->hdr);
        free(st->rbuf);
        free(st);
        h->n_streams--;
}

static int append(char **buf, size_t *len, const char *fmt_a, size_t na, const char *b, size_t nb) {
        char *q = realloc(*buf, *len + na + nb + 5);
        if (!q)
                return -ENOMEM;
        *buf = q;
        *len += (size_t)sprintf(q + *len, "%.*s: %.*s\r\n", (int)na, fmt_a, (int)nb, b);
        return 0;
}

/* ---- nghttp2 callbacks: the guest's side ----------------------------------------------------- */

/* Into the guest stream's write buffer; egress_h2_serve flushes after each nghttp2_session_send. */
static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *ud) {
        h2_conn *h = ud;
        if (egress_io_put(h->guest, data, len) < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        return (ssize_t)len;
}

static ssize_t data_length_cb(nghttp2_session *s, uint8_t type, int32_t id, int32_t conn_window,
        int32_t stream_window, uint32_t max_frame, void *ud) {
        return H2_DATA_PAYLOAD; /* nghttp2 lowers it to the windows and the peer's frame size */
}

static int begin_headers_cb(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
        h2_conn *h = ud;
        if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        h2_stream *st = calloc(1, sizeof(*st));
        if (!st)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        st->id = f->hd.stream_id;
        st->fd = -1;
        st->next = h->streams;
        h->streams = st;
        h->n_streams++;
        nghttp2_session_set_stream_user_data(s, st->id, st);
        return 0;
}

static void copy_field(char *dst, size_t size, const uint8_t *v, size_t n, bool *bad) {
        if (n == 0 || n >= size) {
                *bad = true;
                return;
        }
        memcpy(dst, v, n);
        dst[n] = 0;
}

static int header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nn,
        const uint8_t *value, size_t vn, uint8_t flags, void *ud) {
        h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
        const char *n = (const char *)name;
        if (!st || f->hd.type != NGHTTP2_HEADERS)
                return 0;
        if (nn == 7 && memcmp(n, ":method", 7) == 0)
                copy_field(st->method, sizeof(st->method), value, vn, &st->bad);
        else if ((nn == 10 && memcmp(n, ":authority", 10) == 0) || (nn == 4 && memcmp(n, "host", 4) == 0)) {
                if (!st->authority[0])
                        copy_field(st->authority, sizeof(st->authority), value, vn, &st->bad);
        } else if (nn == 5 && memcmp(n, ":path", 5) == 0) {
                free(st->path);
                st->path = strndup((const char *)value, vn);
                st->bad |= !st->path;
        } else if (nn > 0 && n[0] == ':')
                return 0; /* :scheme is https by construction */
        else if (!(nn == 14 && memcmp(n, "content-length", 14) == 0) &&
                append(&st->hdr, &st->hdr_len, n, nn, (const char *)value, vn) < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        return 0;
}

/* The request head is complete: start the bridged worker and write the HTTP/1.1 head. */
static int start_stream(h2_conn *h, h2_stream *st, bool end_stream) {
        int sv[2];
        pthread_t t;
        pthread_attr_t attr;
        if (st->bad || !st->method[0] || !st->path || !st->authority[0])
                return nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_PROTOCOL_ERROR);
        worker_arg *a = calloc(1, sizeof(*a));
        if (!a || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                free(a);
                return nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        }
        *a = (worker_arg){ .ctx = h->ctx, .fd = sv[1], .dst = *h->dst, .dst_len = h->dst_len };
        (void)snprintf(a->sni, sizeof(a->sni), "%s", h->sni);
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&t, &attr, worker, a);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                close(sv[0]);
                close(sv[1]);
                free(a);
                return nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        }
        st->fd = sv[0];
        st->req_body = !end_stream;
        st->is_head = strcmp(st->method, "HEAD") == 0;
        egress_set_timeouts(st->fd, 30);
        char *head = NULL;
        int n = asprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n%.*s%s\r\n", st->method, st->path,
                st->authority, (int)st->hdr_len, st->hdr ? st->hdr : "",
                st->req_body ? "Transfer-Encoding: chunked\r\n" : "");
        if (n < 0 || send(st->fd, head, (size_t)n, MSG_NOSIGNAL) != n)
                (void)nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        free(head);
        return 0;
}

static int frame_recv_cb(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
        h2_conn *h = ud;
        h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
        bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
        if (!st)
                return 0;
        if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST && st->fd < 0)
                return start_stream(h, st, end);
        if (end && st->fd >= 0 && st->req_body)
                (void)send(st->fd, "0\r\n\r\n", 5, MSG_NOSIGNAL);
        return 0;
}

/* A piece of a DATA frame from the guest: one chunk to the worker, size line, bytes and CRLF in
 * one syscall. */
static int data_chunk_cb(
        nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud) {
        h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
        char line[24];
        if (!st || st->fd < 0 || len == 0)
                return 0;
        int n = snprintf(line, sizeof(line), "%zx\r\n", len);
        struct iovec iov[3] = { { line, (size_t)n }, { (void *)data, len }, { (void *)"\r\n", 2 } };
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = 3 };
        ssize_t k;
        do
                k = sendmsg(st->fd, &m, MSG_NOSIGNAL);
        while (k < 0 && errno == EINTR);
        if (k != (ssize_t)((size_t)n + len + 2))
                return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
        return 0;
}

static int stream_close_cb(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud) {
        h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
        if (st)
                stream_free(ud, st);
        return 0;
}

/* ---- the answer: HTTP/1.1 from the worker to HEADERS + DATA ----------------------------------- */

static void rbuf_consume(h2_stream *st, size_t n) {
        st->rstart += n;
        if (st->rstart == st->rend)
                st->rstart = st->rend = 0;
}

/* Up to length body bytes out of the worker's answer into nghttp2's frame: the only copy. */
static ssize_t body_read_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
        nghttp2_data_source *src, void *ud) {
        h2_stream *st = src->ptr;
        const char *in = st->rbuf + st->rstart;
        size_t avail = st->rend - st->rstart, got, used;
        bool end;
        if (st->fr == HTTP1_BODY_CHUNKED) {
                ssize_t k = http1_dechunk_feed(&st->dc, in, avail, (char *)buf, length, &used);
                if (k < 0)
                        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* a broken answer: reset */
                got = (size_t)k;
                end = st->dc.state == HTTP1_DECHUNK_DONE;
        } else {
                got = avail < length ? avail : length;
                if (st->fr == HTTP1_BODY_LENGTH && got > st->left)
                        got = (size_t)st->left;
                memcpy(buf, in, got);
                used = got;
                st->left -= st->fr == HTTP1_BODY_LENGTH ? got : 0;
                end = (st->fr == HTTP1_BODY_LENGTH && st->left == 0) ||
                        (st->fr == HTTP1_BODY_UNTIL_CLOSE && st->eof && used == avail);
        }
        rbuf_consume(st, used);
        if (end)
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        else if (got == 0 && st->eof)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* a truncated answer: reset */
        else if (got == 0)
                return NGHTTP2_ERR_DEFERRED;
        return (ssize_t)got;
}

static bool is_connection_field(const http1_field *f) {
        static const char *const drop[] = { "Connection", "Keep-Alive", "Proxy-Connection",
                "Transfer-Encoding", "Upgrade", "TE" };
        for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
                if (http1_field_is(f, drop[i]))
                        return true;
        return false;
}

/* The worker's answer head is complete in rbuf: submit it.  1xx heads are skipped. */
static int submit_answer(h2_conn *h, h2_stream *st) {
        http1_head hd;
        int r = http1_parse_response(st->rbuf + st->rstart, st->rend - st->rstart, &hd);
        if (r <= 0)
                return r == 0 && st->rend - st->rstart < H2_HEAD_MAX && !st->eof ? 0 : -EBADMSG;
        if (hd.status < 200) {
                rbuf_consume(st, hd.head_len);
                return submit_answer(h, st);
        }
        nghttp2_nv nv[HTTP1_HEADERS_MAX + 1];
        char status[12], names[HTTP1_HEADERS_MAX + 1][128];
        size_t n = 0;
        (void)snprintf(status, sizeof(status), "%03d", hd.status % 1000);
        nv[n++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP2_NV_FLAG_NONE };
        for (size_t i = 0; i < hd.n_fields; i++) {
                const http1_field *f = &hd.fields[i];
                if (is_connection_field(f) || f->name_len >= sizeof(names[0]))
                        continue;
                for (size_t j = 0; j < f->name_len; j++)
                        names[n][j] = (char)(f->name[j] >= 'A' && f->name[j] <= 'Z' ? f->name[j] + 32
                                                                                    : f->name[j]);
                nv[n] = (nghttp2_nv){ (uint8_t *)names[n], (uint8_t *)f->value, f->name_len, f->value_len,
                        NGHTTP2_NV_FLAG_NONE };
                n++;
        }
        uint64_t len;
        if (http1_response_framing(&hd, st->is_head, &st->fr, &len) < 0)
                return -EBADMSG;
        st->left = len;
        st->dc = (http1_dechunk){ 0 };
        nghttp2_data_provider dp = { .source.ptr = st, .read_callback = body_read_cb };
        r = nghttp2_submit_response(h->s, st->id, nv, n, st->fr == HTTP1_BODY_NONE ? NULL : &dp);
        rbuf_consume(st, hd.head_len);
        st->head_done = true;
        return r < 0 ? -EIO : 0;
}

/* Bytes from a worker: into rbuf (as much as has arrived and fits, in one read), then the head or
 * more DATA.  What is left is moved to the front only when that moves no more bytes than were
 * taken, or when the tail is full. */
static void stream_readable(h2_conn *h, h2_stream *st) {
        size_t held = st->rend - st->rstart;
        if (!st->rbuf && !(st->rbuf = malloc(H2_RBUF_MAX))) {
                (void)nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
                st->eof = true;
                return;
        }
        if (st->rstart > 0 && (held <= st->rstart || st->rend == H2_RBUF_MAX)) {
                memmove(st->rbuf, st->rbuf + st->rstart, held);
                st->rstart = 0;
                st->rend = held;
        }
        ssize_t k;
        do
                k = read(st->fd, st->rbuf + st->rend, H2_RBUF_MAX - st->rend);
        while (k < 0 && errno == EINTR);
        if (k <= 0)
                st->eof = true;
        else
                st->rend += (size_t)k;
        int r = st->head_done ? 0 : submit_answer(h, st);
        if (r < 0 || (!st->head_done && st->eof))
                (void)nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        else if (st->head_done)
                (void)nghttp2_session_resume_data(h->s, st->id);
}

/* ---- the loop -------------------------------------------------------------------------------- */

static int h2_session_new(h2_conn *h) {
        nghttp2_session_callbacks *cb;
        if (nghttp2_session_callbacks_new(&cb) != 0)
                return -ENOMEM;
        nghttp2_session_callbacks_set_send_callback(cb, send_cb);
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, begin_headers_cb);
        nghttp2_session_callbacks_set_on_header_callback(cb, header_cb);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, frame_recv_cb);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, data_chunk_cb);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, stream_close_cb);
        nghttp2_session_callbacks_set_data_source_read_length_callback(cb, data_length_cb);
        int r = nghttp2_session_server_new(&h->s, cb, h);
        nghttp2_session_callbacks_del(cb);
        if (r != 0)
                return -ENOMEM;
        nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_WINDOW } };
        if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
                nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW) != 0)
                return -EIO;
        return 0;
}

/* Guest bytes into nghttp2 (a TLS record at most; the stream reads ahead): < 0 when the guest
 * is gone. */
static int guest_readable(h2_conn *h) {
        uint8_t buf[IO_BUF];
        ssize_t got = egress_io_read(h->guest, (char *)buf, sizeof(buf));
        if (got <= 0)
                return -ECONNRESET;
        return nghttp2_session_mem_recv(h->s, buf, (size_t)got) < 0 ? -EPROTO : 0;
}

static int h2_poll(h2_conn *h) {
        struct pollfd p[H2_MAX_STREAMS + 2];
        h2_stream *by[H2_MAX_STREAMS + 2];
        size_t n = 1;
        p[0] = (struct pollfd){ .fd = h->guest->fd, .events = POLLIN };
        for (h2_stream *st = h->streams; st && n < sizeof(p) / sizeof(p[0]); st = st->next)
                if (st->fd >= 0 && !st->eof && st->rend - st->rstart < H2_RBUF_MAX) {
                        by[n] = st;
                        p[n++] = (struct pollfd){ .fd = st->fd, .events = POLLIN };
                }
        bool pending = egress_io_has_pending(h->guest); /* read ahead, or left in a record */
        int r = poll(p, n, pending ? 0 : H2_IDLE_SECS * 1000);
        if (r < 0)
                return errno == EINTR ? 0 : -errno;
        if (r == 0 && !pending)
                return h->n_streams ? 0 : -ETIMEDOUT;
        /* streams first: a stream may be freed by guest frames below */
        for (size_t i = 1; i < n; i++)
                if (p[i].revents)
                        stream_readable(h, by[i]);
        if (pending || (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                return guest_readable(h);
        return 0;
}

void egress_h2_serve(const egress_ctx *ctx, egress_io *guest, const char *sni,
        const struct sockaddr_storage *dst, socklen_t dst_len) {
        h2_conn h = { .ctx = ctx, .guest = guest, .sni = sni, .dst = dst, .dst_len = dst_len };
        if (h2_session_new(&h) < 0) {
                nghttp2_session_del(h.s);
                return;
        }
        /* every wait (poll, a worker's socket) comes after the flush: nothing sits in the buffer */
        while (nghttp2_session_want_read(h.s) || nghttp2_session_want_write(h.s)) {
                if (nghttp2_session_send(h.s) != 0 || egress_io_flush(h.guest) < 0 || h2_poll(&h) < 0)
                        break;
        }
        if (nghttp2_session_send(h.s) == 0)
                (void)egress_io_flush(h.guest);
        while (h.streams)
                stream_free(&h, h.streams);
        nghttp2_session_del(h.s);
}
