/* SPDX-License-Identifier: Apache-2.0 */
/* --format templates: see template.h for the grammar.  Parsing and rendering are one pass; the
 * renderer never allocates per byte and stops at the first error, returning nothing partial. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nook.h"
#include "cli/template.h"

#define TEMPLATE_HINT "supported: {{.Field}}, {{.A.B}}, {{.}}, {{json .Field}}"

__attribute__((format(printf, 2, 3))) static int tmpl_error(nook_error *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = NOOK_E_INVALID;
        err->sys_errno = 0;
        return -NOOK_E_INVALID;
}

/* Guest-influenced strings: C0 controls, DEL and C1 controls (U+0080..U+009F, which a UTF-8
 * terminal may read as CSI and friends) are escaped; everything else is copied. */
static void put_escaped(FILE *f, const char *s) {
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\x%02x", *p);
                else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        fprintf(f, "\\u%04x", p[1]);
                        p++;
                } else
                        fputc(*p, f);
        }
}

static void put_value(FILE *f, json_t *v) {
        switch (json_typeof(v)) {
        case JSON_STRING:
                put_escaped(f, json_string_value(v));
                break;
        case JSON_INTEGER:
                fprintf(f, "%lld", (long long)json_integer_value(v));
                break;
        case JSON_REAL:
                fprintf(f, "%g", json_real_value(v));
                break;
        case JSON_TRUE:
                fputs("true", f);
                break;
        case JSON_FALSE:
                fputs("false", f);
                break;
        case JSON_NULL:
                fputs("<nil>", f);
                break;
        case JSON_OBJECT:
        case JSON_ARRAY:
        default:
                (void)json_dumpf(v, f, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
                break;
        }
}

/* Key name[0..len) in obj: exact, then with its first letter lowered ("Name" -> "name"), then
 * ignoring case. */
static json_t *lookup(json_t *obj, const char *name, size_t len) {
        char key[256];
        const char *k;
        json_t *v;
        if (!json_is_object(obj) || len >= sizeof(key))
                return NULL;
        memcpy(key, name, len);
        key[len] = 0;
        v = json_object_get(obj, key);
        if (v)
                return v;
        key[0] = (char)tolower((unsigned char)key[0]);
        v = json_object_get(obj, key);
        if (v)
                return v;
        json_object_foreach(obj, k, v) if (strlen(k) == len && strncasecmp(k, name, len) == 0) return v;
        return NULL;
}

static bool ident_start(char c) {
        return isalpha((unsigned char)c) || c == '_';
}

static bool ident_char(char c) {
        return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* Evaluates the path a[0..len) ("." or ".A.B") over row; *ret is NULL for a missing field. */
static int eval_path(const char *a, size_t len, size_t off, json_t *row, json_t **ret, nook_error *err) {
        json_t *cur = row;
        size_t i = 1, depth = 0;
        if (len == 0 || a[0] != '.')
                return tmpl_error(
                        err, "--format: expected a field such as .Name at offset %zu; " TEMPLATE_HINT, off);
        if (len == 1) {
                *ret = row;
                return 0;
        }
        while (i < len) {
                size_t start = i;
                if (!ident_start(a[i]))
                        return tmpl_error(
                                err, "--format: bad field name at offset %zu; " TEMPLATE_HINT, off + i);
                while (i < len && ident_char(a[i]))
                        i++;
                if (++depth > TEMPLATE_MAX_DEPTH)
                        return tmpl_error(err, "--format: a field path deeper than %d at offset %zu",
                                TEMPLATE_MAX_DEPTH, off);
                cur = cur ? lookup(cur, a + start, i - start) : NULL;
                if (i < len && a[i] != '.')
                        return tmpl_error(err, "--format: unexpected '%c' at offset %zu; " TEMPLATE_HINT,
                                isprint((unsigned char)a[i]) ? a[i] : '?', off + i);
                if (i < len && ++i == len)
                        return tmpl_error(err, "--format: a field path ends in '.' at offset %zu", off + i);
        }
        *ret = cur;
        return 0;
}

/* One action: the text between {{ and }}, at offset off of the template. */
static int render_action(FILE *f, const char *a, size_t len, size_t off, json_t *row, nook_error *err) {
        bool as_json = false;
        json_t *v = NULL;
        while (len > 0 && a[0] == ' ') {
                a++;
                len--;
                off++;
        }
        while (len > 0 && a[len - 1] == ' ')
                len--;
        if (len >= 5 && strncmp(a, "json ", 5) == 0) {
                as_json = true;
                a += 5;
                len -= 5;
                off += 5;
                while (len > 0 && a[0] == ' ') {
                        a++;
                        len--;
                        off++;
                }
        } else if (len > 0 && ident_start(a[0])) {
                size_t w = 0;
                while (w < len && ident_char(a[w]) && w < 32)
                        w++;
                return tmpl_error(err, "--format: unknown function '%.*s' at offset %zu; " TEMPLATE_HINT,
                        (int)w, a, off);
        }
        int r = eval_path(a, len, off, row, &v, err);
        if (r < 0)
                return r;
        if (as_json)
                (void)json_dumpf(v ? v : json_null(), f, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
        else if (!v)
                fputs("<no value>", f);
        else
                put_value(f, v);
        return 0;
}

static int render_to(FILE *f, const char *tmpl, json_t *row, nook_error *err) {
        size_t n = strlen(tmpl);
        if (n > TEMPLATE_MAX_LEN)
                return tmpl_error(err, "--format: the template is longer than %d bytes", TEMPLATE_MAX_LEN);
        for (size_t i = 0; i < n;) {
                if (tmpl[i] == '{' && tmpl[i + 1] == '{') {
                        const char *end = strstr(tmpl + i + 2, "}}");
                        if (!end)
                                return tmpl_error(
                                        err, "--format: '{{' at offset %zu is never closed by '}}'", i);
                        size_t alen = (size_t)(end - (tmpl + i + 2));
                        int r = render_action(f, tmpl + i + 2, alen, i + 2, row, err);
                        if (r < 0)
                                return r;
                        i += alen + 4;
                } else if (tmpl[i] == '\\' && (tmpl[i + 1] == 't' || tmpl[i + 1] == 'n')) {
                        fputc(tmpl[i + 1] == 't' ? '\t' : '\n', f);
                        i += 2;
                } else
                        fputc(tmpl[i++], f);
        }
        return 0;
}

int template_render(const char *tmpl, json_t *row, char **ret, nook_error *err) {
        char *buf = NULL;
        size_t size = 0;
        /* docker's "table" directive (a header, aligned columns) is not a template: refused, not
         * printed as the word "table" before every row */
        if (strncmp(tmpl, "table", 5) == 0 && (tmpl[5] == 0 || tmpl[5] == ' ' || tmpl[5] == '\t')) {
                err->code = NOOK_E_INVALID;
                snprintf(err->msg, sizeof(err->msg),
                        "--format: docker's 'table' directive is not supported: drop 'table' for one line "
                        "per row without a header, or leave out --format for nook's table");
                return -NOOK_E_INVALID;
        }
        FILE *f = open_memstream(&buf, &size);
        if (!f) {
                err->code = NOOK_E_NOMEM;
                err->sys_errno = errno;
                snprintf(err->msg, sizeof(err->msg), "Out of memory rendering --format");
                return -NOOK_E_NOMEM;
        }
        int r = render_to(f, tmpl, row, err);
        if (fclose(f) != 0 && r == 0) {
                err->code = NOOK_E_NOMEM;
                err->sys_errno = errno;
                snprintf(err->msg, sizeof(err->msg), "Out of memory rendering --format");
                r = -NOOK_E_NOMEM;
        }
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        return 0;
}

int template_check(const char *tmpl, nook_error *err) {
        json_t *empty = json_object();
        char *out = NULL;

        if (!empty) {
                err->code = NOOK_E_NOMEM;
                snprintf(err->msg, sizeof(err->msg), "Out of memory");
                return -NOOK_E_NOMEM;
        }
        int r = template_render(tmpl, empty, &out, err);
        json_decref(empty);
        free(out);
        return r;
}
