/* SPDX-License-Identifier: Apache-2.0 */
/* A strict HTTP/1.1 message-head parser (RFC 9112) for nook-egress: the request line or status
 * line and the header fields, pointing into the caller's buffer.  Strict on purpose: what a
 * proxy and an upstream could read differently (bare LF, obs-fold, whitespace before ':',
 * control bytes, Content-Length together with Transfer-Encoding) is refused, never guessed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP1_HEAD_MAX ((size_t)64 * 1024)
#define HTTP1_HEADERS_MAX 128

typedef struct http1_field {
        const char *name, *value;
        size_t name_len, value_len; /* value without surrounding blanks */
} http1_field;

typedef struct http1_head {
        const char *method, *target; /* request */
        size_t method_len, target_len;
        int status; /* response */
        int minor; /* HTTP/1.x */
        size_t n_fields;
        http1_field fields[HTTP1_HEADERS_MAX];
        size_t head_len; /* bytes up to and including the empty line */
} http1_head;

typedef enum http1_framing {
        HTTP1_BODY_NONE,
        HTTP1_BODY_LENGTH,
        HTTP1_BODY_CHUNKED,
        HTTP1_BODY_UNTIL_CLOSE, /* responses only */
} http1_framing;

/* > 0: head_len (the head is complete); 0: need more bytes; < 0: malformed (-EBADMSG), or too
 * large (-E2BIG). */
int http1_parse_request(const char *buf, size_t len, http1_head *ret);
int http1_parse_response(const char *buf, size_t len, http1_head *ret);

/* The value of the only field called name (case-insensitive); NULL if absent.  *ret_dup is set
 * when it occurs more than once. */
const http1_field *http1_find(const http1_head *h, const char *name, bool *ret_dup);
bool http1_field_is(const http1_field *f, const char *name);
/* A comma-separated field value contains token (case-insensitive), e.g. Connection: close. */
bool http1_value_has_token(const char *v, size_t n, const char *token);
/* The request body framing (RFC 9112 6.3): -EBADMSG for both Content-Length and
 * Transfer-Encoding, several different lengths, a bad number, or a coding other than chunked. */
int http1_request_framing(const http1_head *h, http1_framing *ret, uint64_t *ret_len);
/* The response framing for a request with method is_head. */
int http1_response_framing(const http1_head *h, bool is_head, http1_framing *ret, uint64_t *ret_len);
/* A chunk-size line "1a;ext" (without CRLF): the size, or -EBADMSG. */
int http1_parse_chunk_size(const char *line, size_t n, uint64_t *ret);

/* A chunked body decoded as it streams (the HTTP/2 upstream bridge's request bodies). */
typedef enum http1_dechunk_state {
        HTTP1_DECHUNK_SIZE,
        HTTP1_DECHUNK_DATA,
        HTTP1_DECHUNK_DATA_CRLF,
        HTTP1_DECHUNK_TRAILER,
        HTTP1_DECHUNK_DONE,
} http1_dechunk_state;

typedef struct http1_dechunk {
        http1_dechunk_state state; /* zero: at the first size line */
        uint64_t left; /* DATA: bytes left in this chunk */
        unsigned trailers;
} http1_dechunk;

/* Decodes from in (n bytes) into out (at most max bytes): returns the body bytes written and sets
 * *ret_used to the input consumed.  Stops when the input runs out, out is full or the body ends
 * (state DONE; trailers are read and dropped).  -EBADMSG: a bad size, no CRLF after a chunk, a
 * control line of 1 KiB or more, a trailer without ':' or more than 64 of them. */
ssize_t http1_dechunk_feed(
        http1_dechunk *d, const char *in, size_t n, char *out, size_t max, size_t *ret_used);
