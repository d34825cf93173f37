/* SPDX-License-Identifier: Apache-2.0 */
/* nook-egress's HTTP/1.1 head parser (src/egress/http1.c) and placeholder substitution
 * (src/egress/subst.c): good heads, smuggling-shaped ones refused, a placeholder split across
 * every possible read boundary substituted, and one that may not go blocked. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "egress/config.h"
#include "egress/http1.h"
#include "egress/subst.h"
#include "util/macro.h"

static int req(const char *s, http1_head *h) {
        return http1_parse_request(s, strlen(s), h);
}

Test(egress_http, parses_a_request_head) {
        http1_head h;
        const char *s = "GET /a?b=1 HTTP/1.1\r\nHost: up.test\r\nX-A:  v w \t\r\n\r\nBODY";
        cr_assert_eq(req(s, &h), (int)(strlen(s) - 4));
        cr_expect_eq(h.method_len, 3);
        cr_expect_eq(h.target_len, 6);
        cr_expect_eq(h.minor, 1);
        cr_expect_eq(h.n_fields, 2);
        const http1_field *f = http1_find(&h, "x-a", NULL);
        cr_assert_not_null(f);
        cr_expect_eq(f->value_len, 3, "blanks around the value are not part of it");
        http1_framing fr;
        uint64_t len;
        cr_expect_eq(http1_request_framing(&h, &fr, &len), 0);
        cr_expect_eq(fr, HTTP1_BODY_NONE);
        cr_expect_eq(req("GET / HTTP/1.1\r\nHost: a", &h), 0, "incomplete");
        cr_expect_eq(req("GET / HTTP/1.1\r\n", &h), 0, "incomplete");
}

Test(egress_http, refuses_ambiguous_heads) {
        static const char *const bad[] = {
                "GET / HTTP/1.1\nHost: a\r\n\r\n", /* bare LF */
                "GET / HTTP/1.1\r\nHost: a\n\r\n",
                "GET / HTTP/1.1\r\nHost : a\r\n\r\n", /* blank before ':' */
                "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", /* obs-fold */
                "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", /* bare CR */
                "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n",
                "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
                "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
                "GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
                "G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
                " GET / HTTP/1.1\r\n\r\n",
                "GET / HTTP/1.1\r\n: v\r\n\r\n",
                "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                http1_head h;
                cr_expect_eq(req(bad[i], &h), -EBADMSG, "accepted #%zu", i);
        }
        static const char *const bad_framing[] = {
                "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n",
                "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
                "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_framing); i++) {
                http1_head h;
                http1_framing fr;
                uint64_t len;
                cr_assert_gt(req(bad_framing[i], &h), 0, "#%zu", i);
                cr_expect_eq(http1_request_framing(&h, &fr, &len), -EBADMSG, "framing #%zu accepted", i);
        }
}

Test(egress_http, refuses_huge_heads) {
        size_t n = HTTP1_HEAD_MAX + 100;
        char *big = malloc(n + 1);
        cr_assert_not_null(big);
        strcpy(big, "GET / HTTP/1.1\r\nX: ");
        memset(big + strlen(big), 'a', n - strlen(big));
        big[n] = 0;
        http1_head h;
        cr_expect_eq(http1_parse_request(big, n, &h), -E2BIG);
        free(big);
        /* too many fields */
        char *many = malloc(200 * 8 + 64);
        cr_assert_not_null(many);
        strcpy(many, "GET / HTTP/1.1\r\n");
        for (int i = 0; i < 200; i++)
                strcat(many, "A: b\r\n");
        strcat(many, "\r\n");
        cr_expect_eq(req(many, &h), -E2BIG);
        free(many);
}

Test(egress_http, responses_and_chunks) {
        http1_head h;
        const char *s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        cr_assert_gt(http1_parse_response(s, strlen(s), &h), 0);
        cr_expect_eq(h.status, 200);
        http1_framing fr;
        uint64_t len;
        cr_expect_eq(http1_response_framing(&h, false, &fr, &len), 0);
        cr_expect_eq(fr, HTTP1_BODY_CHUNKED);
        cr_expect_eq(http1_response_framing(&h, true, &fr, &len), 0);
        cr_expect_eq(fr, HTTP1_BODY_NONE, "a HEAD response has no body");
        s = "HTTP/1.0 200 OK\r\n\r\n";
        cr_assert_gt(http1_parse_response(s, strlen(s), &h), 0);
        cr_expect_eq(http1_response_framing(&h, false, &fr, &len), 0);
        cr_expect_eq(fr, HTTP1_BODY_UNTIL_CLOSE);
        s = "HTTP/1.1 20 OK\r\n\r\n";
        cr_expect_eq(http1_parse_response(s, strlen(s), &h), -EBADMSG);
        uint64_t v;
        cr_expect_eq(http1_parse_chunk_size("1aF", 3, &v), 0);
        cr_expect_eq(v, 0x1af);
        cr_expect_eq(http1_parse_chunk_size("10;ext=1", 8, &v), 0);
        cr_expect_eq(http1_parse_chunk_size("", 0, &v), -EBADMSG);
        cr_expect_eq(http1_parse_chunk_size("x", 1, &v), -EBADMSG);
        cr_expect_eq(http1_parse_chunk_size("-1", 2, &v), -EBADMSG);
        cr_expect_eq(http1_parse_chunk_size("1111111111111111", 16, &v), -EBADMSG, "over 60 bits");
        cr_expect(http1_value_has_token("keep-alive, Close", 17, "close"));
        cr_expect_not(http1_value_has_token("closed", 6, "close"));
}

/* ---- substitution ---- */

#define PH "nook-ph-0123456789abcdef0123456789abcdef"
#define PH2 "nook-ph-ffffffffffffffffffffffffffffffff"

static egress_config *cfg_new(void) {
        const char *json =
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":["
                "{\"name\":\"A\",\"placeholder\":\"" PH "\",\"value\":\"SECRET-A\",\"hosts\":[\"a.test\"]},"
                "{\"name\":\"B\",\"placeholder\":\"" PH2 "\",\"value\":\"B\",\"hosts\":[\"*.b.test\"]}]}";
        egress_config *c = NULL;
        nook_error err = {};
        cr_assert_eq(egress_config_parse(json, strlen(json), &c, &err), 0, "%s", err.msg);
        return c;
}

typedef struct sink {
        char buf[4096];
        size_t n;
} sink;

static int sink_emit(void *ud, const char *p, size_t n) {
        sink *s = ud;
        cr_assert_lt(s->n + n, sizeof(s->buf));
        memcpy(s->buf + s->n, p, n);
        s->n += n;
        return 0;
}

Test(egress_http, stream_substitutes_across_every_split) {
        egress_config *c = cfg_new();
        subst_action act[2] = { SUBST_REPLACE, SUBST_KEEP };
        const char *in = "x=" PH "&y=" PH2 "&z=nook-ph-nothex!&w=" PH;
        const char *want = "x=SECRET-A&y=" PH2 "&z=nook-ph-nothex!&w=SECRET-A";
        size_t n = strlen(in);
        for (size_t a = 0; a <= n; a++)
                for (size_t b = a; b <= n; b += 7) {
                        subst_stream st = { .c = c, .act = act };
                        sink s = { .n = 0 };
                        size_t blocked;
                        cr_assert_eq(subst_stream_feed(&st, in, a, false, sink_emit, &s, &blocked), 0);
                        cr_assert_eq(
                                subst_stream_feed(&st, in + a, b - a, false, sink_emit, &s, &blocked), 0);
                        cr_assert_eq(
                                subst_stream_feed(&st, in + b, n - b, false, sink_emit, &s, &blocked), 0);
                        cr_assert_eq(subst_stream_feed(&st, "", 0, true, sink_emit, &s, &blocked), 0);
                        s.buf[s.n] = 0;
                        cr_assert_str_eq(s.buf, want, "split at %zu,%zu", a, b);
                }
        act[1] = SUBST_BLOCK;
        subst_stream st = { .c = c, .act = act };
        sink s = { .n = 0 };
        size_t blocked = 99;
        cr_expect_eq(subst_stream_feed(&st, in, 30, false, sink_emit, &s, &blocked), 0);
        cr_expect_eq(subst_stream_feed(&st, in + 30, n - 30, false, sink_emit, &s, &blocked), -EPERM);
        cr_expect_eq(blocked, 1);
        egress_config_free(c);
}

Test(egress_http, buffer_substitution_and_config_checks) {
        egress_config *c = cfg_new();
        subst_action act[2] = { SUBST_REPLACE, SUBST_BLOCK };
        char *out = NULL;
        size_t len = 0, blocked = 0;
        bool changed = false;
        const char *head = "GET /?t=" PH " HTTP/1.1\r\nAuthorization: Bearer " PH "\r\n\r\n";
        cr_assert_eq(subst_buffer(c, act, head, strlen(head), &out, &len, &blocked, &changed), 0);
        cr_expect(changed);
        cr_expect_str_eq(out, "GET /?t=SECRET-A HTTP/1.1\r\nAuthorization: Bearer SECRET-A\r\n\r\n");
        free(out);
        const char *head2 = "GET / HTTP/1.1\r\nX: " PH2 "\r\n\r\n";
        cr_expect_eq(subst_buffer(c, act, head2, strlen(head2), &out, &len, &blocked, &changed), -EPERM);
        cr_expect_eq(blocked, 1);
        cr_expect(egress_secret_allows_host(&c->secrets[1], "x.b.test"));
        cr_expect_not(egress_secret_allows_host(&c->secrets[1], "b.test"));
        egress_config_free(c);

        static const char *const bad[] = {
                "",
                "[]",
                "{}",
                "{\"sandbox\":\"t\",\"mode\":\"open\"}",
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\",\"placeholder\":\"nook-ph-1\","
                "\"value\":\"v\",\"hosts\":[\"a\"]}]}",
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\",\"placeholder\":\"" PH
                "\",\"value\":\"v\\r\\nX: y\",\"hosts\":[\"a\"]}]}",
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\",\"placeholder\":\"" PH
                "\",\"value\":\"v\\u0000\",\"hosts\":[\"a\"]}]}",
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\",\"placeholder\":\"" PH
                "\",\"value\":\"v\",\"hosts\":[]}]}",
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\",\"placeholder\":\"" PH
                "\",\"value\":\"v\",\"hosts\":[\"*\"]}]}",
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"allowHttp\":[\"GET ftp://x/\"]}",
                "{\"sandbox\":\"t\",\"sandbox\":\"u\",\"mode\":\"public\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                egress_config *x = (egress_config *)0x1;
                nook_error err = {};
                cr_expect_eq(egress_config_parse(bad[i], strlen(bad[i]), &x, &err), -NOOK_E_INVALID,
                        "#%zu accepted", i);
                cr_expect_eq(x, (egress_config *)0x1);
                cr_expect_null(strstr(err.msg, "v\r\n"), "the message never quotes a value");
        }
}

Test(egress_http, redaction_masks_echoed_values_across_splits) {
        egress_config *c = cfg_new();
        const char *in = "a SECRET-A b SECRET-SECRET-A c";
        const char *want = "a ******** b SECRET-******** c";
        size_t n = strlen(in);
        for (size_t a = 0; a <= n; a++) {
                redact_stream rs = { .c = c };
                sink s = { .n = 0 };
                cr_assert_eq(redact_stream_feed(&rs, in, a, false, sink_emit, &s), 0);
                cr_assert_eq(redact_stream_feed(&rs, in + a, n - a, true, sink_emit, &s), 0);
                redact_stream_done(&rs);
                s.buf[s.n] = 0;
                cr_assert_str_eq(s.buf, want, "split at %zu", a);
        }
        char head[] = "HTTP/1.1 200 OK\r\nX: SECRET-A\r\n\r\n";
        redact_buffer(c, head, strlen(head));
        cr_expect_str_eq(head, "HTTP/1.1 200 OK\r\nX: ********\r\n\r\n");
        char body[] = "B is a short value: B stays";
        redact_buffer(c, body, strlen(body));
        cr_expect_str_eq(body, "B is a short value: B stays", "values under 8 bytes are not masked");
        egress_config_free(c);
}

/* "value": null (a restart without the values): parsed, no value, still redacts nothing; an
 * absent, empty, numeric or false value is still refused. */
Test(egress_http, a_secret_without_its_value) {
        const char *json =
                "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\",\"placeholder\":\"" PH
                "\",\"value\":null,\"hosts\":[\"a.test\"]}]}";
        egress_config *c = NULL;
        nook_error err = {};
        cr_assert_eq(egress_config_parse(json, strlen(json), &c, &err), 0, "%s", err.msg);
        cr_expect_null(c->secrets[0].value);
        cr_expect_eq(c->secrets[0].value_len, 0);
        char body[] = "nothing to mask here";
        redact_buffer(c, body, strlen(body));
        cr_expect_str_eq(body, "nothing to mask here");
        egress_config_free(c);
        static const char *const bad[] = { "", ",\"value\":\"\"", ",\"value\":0", ",\"value\":false" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *j = NULL;
                cr_assert_gt(asprintf(&j,
                                     "{\"sandbox\":\"t\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\","
                                     "\"placeholder\":\"" PH "\",\"hosts\":[\"a.test\"]%s}]}",
                                     bad[i]),
                        0);
                egress_config *x = (egress_config *)0x1;
                cr_expect_eq(
                        egress_config_parse(j, strlen(j), &x, &err), -NOOK_E_INVALID, "#%zu accepted", i);
                cr_expect_eq(x, (egress_config *)0x1);
                cr_expect(strstr(err.msg, "or null") != NULL, "%s", err.msg);
        }
}

/* The h2 upstream bridge's chunked decoder: the same body whatever the split, trailers dropped. */
Test(egress_http, dechunk_across_every_split) {
        const char *in = "5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        size_t n = strlen(in) - 4;
        for (size_t cut = 0; cut <= n; cut++) {
                http1_dechunk d = { 0 };
                char out[64];
                size_t used = 0, got = 0, off = 0;
                ssize_t k = http1_dechunk_feed(&d, in, cut, out, sizeof(out), &used);
                cr_assert_geq(k, 0);
                got += (size_t)k;
                off += used;
                /* the rest, in 3-byte outputs: out being full must not lose bytes */
                while (d.state != HTTP1_DECHUNK_DONE) {
                        k = http1_dechunk_feed(&d, in + off, n - off, out + got, 3, &used);
                        cr_assert_geq(k, 0, "cut %zu", cut);
                        cr_assert(k > 0 || used > 0, "no progress at cut %zu", cut);
                        got += (size_t)k;
                        off += used;
                }
                cr_expect_eq(off, n, "cut %zu: the body ends where the trailers do", cut);
                cr_expect_eq(got, 12);
                cr_expect_eq(memcmp(out, "hello world!", 12), 0, "cut %zu", cut);
        }
}

Test(egress_http, dechunk_refuses_bad_framing) {
        char big[2048];
        memset(big, '1', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        _cleanup_free_ char *trailers = NULL;
        size_t tn = 0;
        FILE *f = open_memstream(&trailers, &tn);
        cr_assert_not_null(f);
        fputs("0\r\n", f);
        for (int i = 0; i < 65; i++)
                fputs("X: y\r\n", f);
        fputs("\r\n", f);
        fclose(f);
        const char *bad[] = { "zz\r\n", "5\r\nhelloXY", "5\r\nhello\n0\r\n\r\n", "-1\r\n",
                "0\r\nno colon\r\n\r\n", "1\n\r\n", big, trailers };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                http1_dechunk d = { 0 };
                char out[16];
                size_t used = 0, off = 0, n = strlen(bad[i]);
                ssize_t k = 0;
                for (int step = 0; step < 200 && k >= 0 && d.state != HTTP1_DECHUNK_DONE; step++) {
                        k = http1_dechunk_feed(&d, bad[i] + off, n - off, out, sizeof(out), &used);
                        off += used;
                }
                cr_expect_eq(k, -EBADMSG, "#%zu accepted", i);
        }
}
