/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholders: finding them in a request and swapping in the real value where allowed, in
 * one buffer (the head) or in a stream (the body, where a placeholder may be split across
 * reads). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "egress/config.h"

/* What to do with each secret's placeholder on this request. */
typedef enum subst_action {
        SUBST_KEEP, /* leave it as it is */
        SUBST_REPLACE, /* swap in the value */
        SUBST_BLOCK, /* refuse the request */
} subst_action;

/* The index of the secret whose placeholder starts at s (n bytes available), or -1. */
ssize_t subst_match_at(const egress_config *c, const char *s, size_t n);

/* Rewrites buf (n bytes) into a new malloc'd buffer.  Returns 0, -ENOMEM, or -EPERM with
 * *ret_blocked the index of the first secret whose action is SUBST_BLOCK.  *ret_changed says
 * whether anything was replaced (the caller must wipe a changed buffer). */
int subst_buffer(const egress_config *c, const subst_action *act, const char *buf, size_t n, char **ret,
        size_t *ret_len, size_t *ret_blocked, bool *ret_changed);

/* A stream: bytes that might begin a placeholder are held back until the next call. */
typedef struct subst_stream {
        const egress_config *c;
        const subst_action *act;
        char carry[EGRESS_PH_LEN];
        size_t carry_len;
} subst_stream;

typedef int (*subst_emit_fn)(void *userdata, const char *p, size_t n);
/* Feeds n bytes (n == 0 with final: flush the carry).  Returns 0, an emit error, or -EPERM
 * with *ret_blocked set. */
int subst_stream_feed(subst_stream *st, const char *p, size_t n, bool final, subst_emit_fn emit,
        void *userdata, size_t *ret_blocked);

/* The other direction: a real value an upstream sends back (an echo of headers, an error page)
 * is masked with '*' of the same length, so lengths and chunk sizes stay right.  In place. */
void redact_buffer(const egress_config *c, char *buf, size_t n);

/* Streaming redaction: up to the longest value minus one byte is held back between feeds.
 * final flushes (a value split across two chunks of a chunked body is not seen). */
typedef struct redact_stream {
        const egress_config *c;
        char *buf; /* the held-back tail, then the new bytes; kept between feeds */
        size_t n, cap;
} redact_stream;
int redact_stream_feed(
        redact_stream *r, const char *p, size_t n, bool final, subst_emit_fn emit, void *userdata);
void redact_stream_done(redact_stream *r);
