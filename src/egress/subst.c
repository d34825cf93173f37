/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egress/subst.h"

ssize_t subst_match_at(const egress_config *c, const char *s, size_t n) {
        if (!egress_is_placeholder(s, n))
                return -1;
        for (size_t i = 0; i < c->n_secrets; i++)
                if (memcmp(c->secrets[i].placeholder, s, EGRESS_PH_LEN) == 0)
                        return (ssize_t)i;
        return -1;
}

/* Calls emit for each run of plain bytes and each replacement in buf[0..n). */
static int subst_walk(const egress_config *c, const subst_action *act, const char *buf, size_t n,
        subst_emit_fn emit, void *ud, size_t *ret_blocked, bool *ret_changed) {
        size_t plain = 0, i = 0;
        const size_t plen = strlen(EGRESS_PH_PREFIX);
        while (i < n) {
                const char *hit = memmem(buf + i, n - i, EGRESS_PH_PREFIX, plen);
                if (!hit)
                        break;
                size_t at = (size_t)(hit - buf);
                ssize_t k = subst_match_at(c, hit, n - at);
                if (k < 0 || act[k] == SUBST_KEEP) {
                        i = at + 1;
                        continue;
                }
                if (act[k] == SUBST_BLOCK) {
                        *ret_blocked = (size_t)k;
                        return -EPERM;
                }
                int r = emit(ud, buf + plain, at - plain);
                if (r < 0)
                        return r;
                r = emit(ud, c->secrets[k].value, c->secrets[k].value_len);
                if (r < 0)
                        return r;
                if (ret_changed)
                        *ret_changed = true;
                i = plain = at + EGRESS_PH_LEN;
        }
        return emit(ud, buf + plain, n - plain);
}

typedef struct growbuf {
        char *p;
        size_t len, cap;
} growbuf;

/* Grows by copying, wiping the old copy (it may hold a secret already). */
static int growbuf_emit(void *ud, const char *p, size_t n) {
        growbuf *g = ud;
        if (g->len + n + 1 > g->cap) {
                size_t cap = (g->len + n + 1) * 2;
                char *q = malloc(cap);
                if (!q)
                        return -ENOMEM;
                if (g->p) {
                        memcpy(q, g->p, g->len);
                        explicit_bzero(g->p, g->cap);
                        free(g->p);
                }
                g->p = q;
                g->cap = cap;
        }
        memcpy(g->p + g->len, p, n);
        g->len += n;
        g->p[g->len] = 0;
        return 0;
}

int subst_buffer(const egress_config *c, const subst_action *act, const char *buf, size_t n, char **ret,
        size_t *ret_len, size_t *ret_blocked, bool *ret_changed) {
        growbuf g = { 0 };
        *ret_changed = false;
        int r = growbuf_emit(&g, "", 0);
        if (r >= 0)
                r = subst_walk(c, act, buf, n, growbuf_emit, &g, ret_blocked, ret_changed);
        if (r < 0) {
                if (g.p)
                        explicit_bzero(g.p, g.cap);
                free(g.p);
                return r;
        }
        *ret = g.p;
        *ret_len = g.len;
        return 0;
}

/* Where the held-back tail starts: the first position in the last EGRESS_PH_LEN-1 bytes from
 * which the rest could still grow into a placeholder. */
static size_t carry_start(const char *p, size_t n) {
        const size_t plen = strlen(EGRESS_PH_PREFIX);
        size_t from = n >= EGRESS_PH_LEN ? n - (EGRESS_PH_LEN - 1) : 0;
        for (size_t s = from; s < n; s++) {
                size_t k = n - s, j = 0;
                for (; j < k; j++) {
                        char ch = p[s + j];
                        bool ok = j < plen ? ch == EGRESS_PH_PREFIX[j]
                                           : (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
                        if (!ok)
                                break;
                }
                if (j == k)
                        return s;
        }
        return n;
}

int subst_stream_feed(subst_stream *st, const char *p, size_t n, bool final, subst_emit_fn emit, void *ud,
        size_t *ret_blocked) {
        /* A held-back tail is joined with the new bytes, so a placeholder split across reads is
         * seen whole.  keep never falls inside a whole placeholder: only its first byte can start
         * a held-back tail, and a whole one is never held back. */
        char *joined = NULL;
        if (st->carry_len > 0) {
                joined = malloc(st->carry_len + n);
                if (!joined)
                        return -ENOMEM;
                memcpy(joined, st->carry, st->carry_len);
                if (n > 0)
                        memcpy(joined + st->carry_len, p, n);
                n += st->carry_len;
                p = joined;
                st->carry_len = 0;
        }
        size_t keep = final ? n : carry_start(p, n);
        int r = subst_walk(st->c, st->act, p, keep, emit, ud, ret_blocked, NULL);
        if (r >= 0) {
                st->carry_len = n - keep;
                memcpy(st->carry, p + keep, st->carry_len);
        }
        free(joined);
        return r < 0 ? r : 0;
}

/* Values shorter than this are not searched for in responses: masking every "abc" would
 * corrupt downloads, and a value that short is not a credential worth the damage. */
#define REDACT_MIN 8

void redact_buffer(const egress_config *c, char *buf, size_t n) {
        if (n == 0)
                return;
        for (size_t i = 0; i < c->n_secrets; i++) {
                const egress_secret *s = &c->secrets[i];
                if (s->value_len < REDACT_MIN)
                        continue;
                char *p = buf, *end = buf + n;
                while ((size_t)(end - p) >= s->value_len) {
                        char *hit = memmem(p, (size_t)(end - p), s->value, s->value_len);
                        if (!hit)
                                break;
                        memset(hit, '*', s->value_len);
                        p = hit + s->value_len;
                }
        }
}

static size_t longest_value(const egress_config *c) {
        size_t m = 0;
        for (size_t i = 0; i < c->n_secrets; i++)
                if (c->secrets[i].value_len > m && c->secrets[i].value_len >= REDACT_MIN)
                        m = c->secrets[i].value_len;
        return m;
}

static int redact_reserve(redact_stream *r, size_t need) {
        if (need <= r->cap)
                return 0;
        size_t cap = need < 32768 ? 32768 : need;
        char *b = malloc(cap);
        if (!b)
                return -ENOMEM;
        if (r->buf) {
                memcpy(b, r->buf, r->n);
                explicit_bzero(r->buf, r->cap);
                free(r->buf);
        }
        r->buf = b;
        r->cap = cap;
        return 0;
}

int redact_stream_feed(redact_stream *r, const char *p, size_t n, bool final, subst_emit_fn emit, void *ud) {
        size_t hold_max = longest_value(r->c);
        if (hold_max == 0)
                return n > 0 ? emit(ud, p, n) : 0;
        hold_max--;
        if (r->n + n == 0)
                return 0; /* nothing held, nothing new (buf may not exist yet) */
        if (redact_reserve(r, r->n + n) < 0)
                return -ENOMEM;
        if (n)
                memcpy(r->buf + r->n, p, n);
        size_t total = r->n + n;
        redact_buffer(r->c, r->buf, total);
        size_t keep = final ? 0 : total < hold_max ? total : hold_max;
        int ret = total > keep ? emit(ud, r->buf, total - keep) : 0;
        memmove(r->buf, r->buf + total - keep, keep);
        r->n = ret < 0 ? 0 : keep;
        return ret;
}

void redact_stream_done(redact_stream *r) {
        if (r->buf)
                explicit_bzero(r->buf, r->cap);
        free(r->buf);
        r->buf = NULL;
        r->n = r->cap = 0;
}
