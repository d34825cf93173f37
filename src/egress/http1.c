/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "egress/http1.h"

static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Finds the end of the head (CRLF CRLF); a bare LF anywhere before it is an error. */
static int find_head_end(const char *buf, size_t len, size_t *ret) {
        size_t max = len < HTTP1_HEAD_MAX ? len : HTTP1_HEAD_MAX;
        // cppcheck-suppress knownConditionTrueFalse
        for (size_t i = 0; i < max; i++) {
                if (buf[i] != '\n')
                        continue;
                if (i == 0 || buf[i - 1] != '\r')
                        return -EBADMSG;
                if (i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
                        *ret = i + 1;
                        return 1;
                }
        }
        return len >= HTTP1_HEAD_MAX ? -E2BIG : 0;
}

/* The head's length and the end of its first line (its "\r"): 1, 0 while the head is not
 * complete, or -errno. */
static int find_head(const char *buf, size_t len, size_t *ret_head_len, const char **ret_eol) {
        size_t head_len = 0;
        int r = find_head_end(buf, len, &head_len);
        if (r <= 0)
                return r;
        const char *eol = memchr(buf, '\r', head_len);
        if (!eol || eol[1] != '\n')
                return -EBADMSG;
        *ret_head_len = head_len;
        *ret_eol = eol;
        return 1;
}

/* "HTTP/1.x" */
static int parse_version(const char *p, size_t n, int *ret_minor) {
        if (n != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
                return -EBADMSG;
        *ret_minor = p[7] - '0';
        return 0;
}

/* Header fields from p (after the start line's CRLF) to end (at the final CRLF). */
static int parse_fields(const char *p, const char *end, http1_head *h) {
        h->n_fields = 0;
        while (p < end) {
                const char *eol = memchr(p, '\r', (size_t)(end - p));
                if (!eol || eol[1] != '\n')
                        return -EBADMSG;
                const char *colon = memchr(p, ':', (size_t)(eol - p));
                if (!colon || colon == p)
                        return -EBADMSG; /* also obs-fold: a line starting with a blank has no token */
                for (const char *c = p; c < colon; c++)
                        if (!is_tchar(*c))
                                return -EBADMSG;
                const char *v = colon + 1, *ve = eol;
                for (const char *c = v; c < ve; c++)
                        if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
                                return -EBADMSG;
                while (v < ve && (*v == ' ' || *v == '\t'))
                        v++;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                        ve--;
                if (h->n_fields >= HTTP1_HEADERS_MAX)
                        return -E2BIG;
                h->fields[h->n_fields++] = (http1_field){
                        .name = p, .name_len = (size_t)(colon - p), .value = v, .value_len = (size_t)(ve - v)
                };
                p = eol + 2;
        }
        return 0;
}

int http1_parse_request(const char *buf, size_t len, http1_head *h) {
        size_t head_len = 0;
        const char *eol = NULL;
        int r = find_head(buf, len, &head_len, &eol);
        if (r <= 0)
                return r;
        const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
        if (!sp1 || sp1 == buf)
                return -EBADMSG;
        const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
        if (!sp2 || sp2 == sp1 + 1)
                return -EBADMSG;
        for (const char *c = buf; c < sp1; c++)
                if (!is_tchar(*c))
                        return -EBADMSG;
        for (const char *c = sp1 + 1; c < sp2; c++)
                if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
                        return -EBADMSG;
        if (parse_version(sp2 + 1, (size_t)(eol - sp2 - 1), &h->minor) < 0)
                return -EBADMSG;
        h->method = buf;
        h->method_len = (size_t)(sp1 - buf);
        h->target = sp1 + 1;
        h->target_len = (size_t)(sp2 - sp1 - 1);
        h->status = 0;
        r = parse_fields(eol + 2, buf + head_len - 2, h);
        if (r < 0)
                return r;
        h->head_len = head_len;
        return (int)head_len;
}

int http1_parse_response(const char *buf, size_t len, http1_head *h) {
        size_t head_len = 0;
        const char *eol = NULL;
        int r = find_head(buf, len, &head_len, &eol);
        if (r <= 0)
                return r;
        size_t n = (size_t)(eol - buf);
        if (n < 12 || buf[8] != ' ' || parse_version(buf, 8, &h->minor) < 0)
                return -EBADMSG;
        if (buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' || buf[11] < '0' ||
                buf[11] > '9' || (n > 12 && buf[12] != ' '))
                return -EBADMSG;
        for (const char *c = buf + 12; c < eol; c++)
                if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
                        return -EBADMSG;
        h->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
        h->method = h->target = NULL;
        h->method_len = h->target_len = 0;
        r = parse_fields(eol + 2, buf + head_len - 2, h);
        if (r < 0)
                return r;
        h->head_len = head_len;
        return (int)head_len;
}

bool http1_field_is(const http1_field *f, const char *name) {
        return strlen(name) == f->name_len && strncasecmp(f->name, name, f->name_len) == 0;
}

const http1_field *http1_find(const http1_head *h, const char *name, bool *ret_dup) {
        const http1_field *found = NULL;
        bool dup = false;
        for (size_t i = 0; i < h->n_fields; i++)
                if (http1_field_is(&h->fields[i], name)) {
                        if (found)
                                dup = true;
                        else
                                found = &h->fields[i];
                }
        if (ret_dup)
                *ret_dup = dup;
        return found;
}

bool http1_value_has_token(const char *v, size_t n, const char *token) {
        size_t tn = strlen(token);
        size_t i = 0;
        while (i < n) {
                while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
                        i++;
                size_t s = i;
                while (i < n && v[i] != ',')
                        i++;
                size_t e = i;
                while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
                        e--;
                if (e - s == tn && strncasecmp(v + s, token, tn) == 0)
                        return true;
        }
        return false;
}

static int parse_decimal(const char *p, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        if (n == 0 || n > 18)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return -EBADMSG;
                v = v * 10 + (uint64_t)(p[i] - '0');
        }
        *ret = v;
        return 0;
}

/* Every Content-Length field must carry the same single number. */
static int content_length(const http1_head *h, bool *ret_has, uint64_t *ret) {
        bool has = false;
        uint64_t v = 0;
        for (size_t i = 0; i < h->n_fields; i++) {
                if (!http1_field_is(&h->fields[i], "Content-Length"))
                        continue;
                uint64_t x;
                if (parse_decimal(h->fields[i].value, h->fields[i].value_len, &x) < 0 || (has && x != v))
                        return -EBADMSG;
                has = true;
                v = x;
        }
        *ret_has = has;
        *ret = v;
        return 0;
}

static int transfer_encoding(const http1_head *h, bool *ret_chunked) {
        bool dup;
        const http1_field *te = http1_find(h, "Transfer-Encoding", &dup);
        *ret_chunked = false;
        if (!te)
                return 0;
        if (dup || te->value_len != 7 || strncasecmp(te->value, "chunked", 7) != 0)
                return -EBADMSG;
        *ret_chunked = true;
        return 1;
}

int http1_request_framing(const http1_head *h, http1_framing *ret, uint64_t *ret_len) {
        bool has_len, chunked;
        uint64_t len;
        if (content_length(h, &has_len, &len) < 0)
                return -EBADMSG;
        int r = transfer_encoding(h, &chunked);
        if (r < 0 || (r > 0 && has_len))
                return -EBADMSG;
        *ret_len = has_len ? len : 0;
        *ret = chunked ? HTTP1_BODY_CHUNKED : has_len && len > 0 ? HTTP1_BODY_LENGTH : HTTP1_BODY_NONE;
        return 0;
}

int http1_response_framing(const http1_head *h, bool is_head, http1_framing *ret, uint64_t *ret_len) {
        bool has_len, chunked;
        uint64_t len;
        *ret_len = 0;
        if (is_head || h->status < 200 || h->status == 204 || h->status == 304) {
                *ret = HTTP1_BODY_NONE;
                return 0;
        }
        if (content_length(h, &has_len, &len) < 0)
                return -EBADMSG;
        int r = transfer_encoding(h, &chunked);
        if (r < 0 || (r > 0 && has_len))
                return -EBADMSG;
        if (chunked)
                *ret = HTTP1_BODY_CHUNKED;
        else if (has_len) {
                *ret = len > 0 ? HTTP1_BODY_LENGTH : HTTP1_BODY_NONE;
                *ret_len = len;
        } else
                *ret = HTTP1_BODY_UNTIL_CLOSE;
        return 0;
}

int http1_parse_chunk_size(const char *line, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;
        for (; i < n; i++) {
                char c = line[i];
                int d = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
                if (d < 0)
                        break;
                if (i >= 15)
                        return -EBADMSG;
                v = v * 16 + (uint64_t)d;
        }
        if (i == 0 || (i < n && line[i] != ';' && line[i] != ' ' && line[i] != '\t'))
                return -EBADMSG;
        for (size_t j = i; j < n; j++)
                if (((unsigned char)line[j] < 0x20 && line[j] != '\t') || line[j] == 0x7f)
                        return -EBADMSG;
        *ret = v;
        return 0;
}

/* Control lines (sizes, the CRLF after data, trailers) longer than this are refused. */
#define DECHUNK_LINE_MAX 1024
#define DECHUNK_TRAILERS_MAX 64

/* One control line at in (n bytes, a whole line is there): the next state. */
static int dechunk_line(http1_dechunk *d, const char *in, size_t ln) {
        uint64_t size;
        switch (d->state) {
        case HTTP1_DECHUNK_SIZE:
                if (http1_parse_chunk_size(in, ln, &size) < 0)
                        return -EBADMSG;
                d->left = size;
                d->state = size ? HTTP1_DECHUNK_DATA : HTTP1_DECHUNK_TRAILER;
                return 0;
        case HTTP1_DECHUNK_DATA_CRLF:
                if (ln != 0)
                        return -EBADMSG;
                d->state = HTTP1_DECHUNK_SIZE;
                return 0;
        case HTTP1_DECHUNK_TRAILER:
                if (ln == 0)
                        d->state = HTTP1_DECHUNK_DONE;
                else if (++d->trailers > DECHUNK_TRAILERS_MAX || memchr(in, ':', ln) == NULL)
                        return -EBADMSG;
                return 0;
        case HTTP1_DECHUNK_DATA:
        case HTTP1_DECHUNK_DONE:
        default:
                return -EBADMSG;
        }
}

ssize_t http1_dechunk_feed(
        http1_dechunk *d, const char *in, size_t n, char *out, size_t max, size_t *ret_used) {
        size_t used = 0, got = 0;
        while (d->state != HTTP1_DECHUNK_DONE) {
                const char *p = in + used;
                size_t avail = n - used;
                if (d->state == HTTP1_DECHUNK_DATA) {
                        size_t k = avail < max - got ? avail : max - got;
                        if (k > d->left)
                                k = (size_t)d->left;
                        if (k == 0)
                                break;
                        memcpy(out + got, p, k);
                        got += k;
                        used += k;
                        d->left -= k;
                        if (d->left == 0)
                                d->state = HTTP1_DECHUNK_DATA_CRLF;
                        continue;
                }
                /* after a chunk's data comes CRLF at once: refused as soon as it is not */
                if (d->state == HTTP1_DECHUNK_DATA_CRLF &&
                        ((avail >= 1 && p[0] != '\r') || (avail >= 2 && p[1] != '\n')))
                        return -EBADMSG;
                const char *eol = avail ? memmem(p, avail, "\r\n", 2) : NULL;
                size_t ln = eol ? (size_t)(eol - p) : avail;
                if (ln >= DECHUNK_LINE_MAX)
                        return -EBADMSG;
                if (!eol)
                        break;
                if (dechunk_line(d, p, ln) < 0)
                        return -EBADMSG;
                used += ln + 2;
        }
        *ret_used = used;
        return (ssize_t)got;
}
