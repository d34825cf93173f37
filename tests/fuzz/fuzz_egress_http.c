/* SPDX-License-Identifier: Apache-2.0 */
/* nook-egress's own HTTP/1.1 head parser and the placeholder stream on guest bytes: no crash,
 * no read past the input, heads that parse are self-consistent, and the outputs of the
 * placeholder stream and of the chunked decoder (h2up.c's request bodies) do not depend on where
 * the input was split. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "egress/config.h"
#include "egress/http1.h"
#include "egress/subst.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PH "nook-ph-0123456789abcdef0123456789abcdef"

typedef struct sink {
        char *p;
        size_t n;
} sink;

static int emit(void *ud, const char *p, size_t n) {
        sink *s = ud;
        char *q = realloc(s->p, s->n + n + 1);
        if (!q)
                abort();
        memcpy(q + s->n, p, n);
        s->p = q;
        s->n += n;
        return 0;
}

static void check_head(const char *buf, size_t size) {
        http1_head h;
        http1_framing fr;
        uint64_t len;
        int r = http1_parse_request(buf, size, &h);
        if (r > 0) {
                if ((size_t)r > size || h.head_len != (size_t)r || h.n_fields > HTTP1_HEADERS_MAX)
                        abort();
                (void)http1_request_framing(&h, &fr, &len);
                (void)http1_find(&h, "Host", NULL);
        }
        r = http1_parse_response(buf, size, &h);
        if (r > 0 && (size_t)r > size)
                abort();
        if (r > 0)
                (void)http1_response_framing(&h, false, &fr, &len);
        uint64_t v;
        (void)http1_parse_chunk_size(buf, size < 64 ? size : 64, &v);
}

static void check_stream(const egress_config *c, const char *buf, size_t size) {
        subst_action act[1] = { SUBST_REPLACE };
        sink whole = { 0 }, split = { 0 };
        size_t blocked, cut = size ? (unsigned char)buf[0] % size : 0;
        subst_stream a = { .c = c, .act = act }, b = { .c = c, .act = act };
        (void)subst_stream_feed(&a, buf, size, true, emit, &whole, &blocked);
        (void)subst_stream_feed(&b, buf, cut, false, emit, &split, &blocked);
        (void)subst_stream_feed(&b, buf + cut, size - cut, true, emit, &split, &blocked);
        if (whole.n != split.n || (whole.n && memcmp(whole.p, split.p, whole.n) != 0))
                abort();
        free(whole.p);
        free(split.p);
}

/* Decodes all of buf (n bytes) in windows of step bytes (more while a line is incomplete) into
 * outputs of at most step bytes: the decoded bytes, or NULL when refused or incomplete. */
static char *dechunk_all(const char *buf, size_t n, size_t step, size_t *ret_len) {
        http1_dechunk d = { 0 };
        char *out = malloc(n + 1);
        size_t off = 0, got = 0, win = step; /* the window grows while a line is incomplete */
        if (!out)
                abort();
        while (d.state != HTTP1_DECHUNK_DONE) {
                size_t used = 0, avail = n - off < win ? n - off : win;
                ssize_t k = http1_dechunk_feed(&d, buf + off, avail, out + got, step, &used);
                if (k < 0 || (k == 0 && used == 0 && off + avail == n)) {
                        free(out);
                        return NULL;
                }
                if ((size_t)k > step || used > avail)
                        abort();
                win = k == 0 && used == 0 ? win + step : step;
                got += (size_t)k;
                off += used;
        }
        *ret_len = got;
        return out;
}

static void check_dechunk(const char *buf, size_t size) {
        size_t a_len = 0, b_len = 0, step = size ? (unsigned char)buf[0] % 7 + 1 : 1;
        char *a = dechunk_all(buf, size, size + 1, &a_len), *b = dechunk_all(buf, size, step, &b_len);
        if (!a != !b || (a && (a_len != b_len || memcmp(a, b, a_len) != 0)))
                abort();
        free(a);
        free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static egress_config *cfg;
        if (!cfg) {
                const char *json =
                        "{\"sandbox\":\"f\",\"mode\":\"public\",\"secrets\":[{\"name\":\"A\",\"placeholder\":\"" PH
                        "\",\"value\":\"S\",\"hosts\":[\"a.test\"]}]}";
                nook_error err;
                if (egress_config_parse(json, strlen(json), &cfg, &err) < 0)
                        abort();
        }
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        check_head(buf, size);
        check_stream(cfg, buf, size);
        check_dechunk(buf, size);
        free(buf);
        return 0;
}
