/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "str.h"

char *strprintf(const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool endswith(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

int strv_push(char ***l, const char *s) {
        size_t n = strv_length(*l);
        char *c = strdup(s);
        if (!c)
                return -ENOMEM;
        char **nl = realloc(*l, sizeof(char *) * (n + 2));
        if (!nl) {
                free(c);
                return -ENOMEM;
        }
        nl[n] = c;
        nl[n + 1] = NULL;
        *l = nl;
        return 0;
}

char **strv_copy(const char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        char **c = calloc(n + 1, sizeof(char *));
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                c[i] = strdup(l[i]);
                if (!c[i])
                        return strv_free(c);
        }
        return c;
}

int strv_env_find(char *const *l, const char *key, size_t key_len) {
        for (size_t i = 0; l && l[i]; i++)
                if (strncmp(l[i], key, key_len) == 0 && l[i][key_len] == '=')
                        return (int)i;
        return -1;
}

int strv_env_set(char ***l, const char *assignment) {
        const char *eq = strchr(assignment, '=');
        if (!eq)
                return -EINVAL;
        int i = strv_env_find(*l, assignment, (size_t)(eq - assignment));
        if (i < 0)
                return strv_push(l, assignment);
        char *c = strdup(assignment);
        if (!c)
                return -ENOMEM;
        free((*l)[i]);
        (*l)[i] = c;
        return 0;
}

bool env_name_is_valid(const char *s, size_t len) {
        if (len == 0 || len > 255)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                        (i > 0 && c >= '0' && c <= '9');
                if (!ok)
                        return false;
        }
        return true;
}

bool str_is_utf8(const char *s, size_t *ret_off) {
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;
        while (p[i]) {
                unsigned char c = p[i];
                size_t n; /* continuation bytes */
                unsigned char lo = 0x80, hi = 0xbf; /* the range of the first continuation byte */
                if (c < 0x80) {
                        i++;
                        continue;
                } else if (c >= 0xc2 && c <= 0xdf)
                        n = 1;
                else if (c >= 0xe0 && c <= 0xef) {
                        n = 2;
                        if (c == 0xe0)
                                lo = 0xa0; /* overlong below */
                        else if (c == 0xed)
                                hi = 0x9f; /* surrogates above */
                } else if (c >= 0xf0 && c <= 0xf4) {
                        n = 3;
                        if (c == 0xf0)
                                lo = 0x90;
                        else if (c == 0xf4)
                                hi = 0x8f; /* above U+10FFFF */
                } else
                        break; /* a continuation byte first, an overlong lead (C0, C1) or F5-FF */
                size_t k = 1;
                for (; k <= n; k++) {
                        unsigned char b = p[i + k];
                        if (k == 1 ? b < lo || b > hi : b < 0x80 || b > 0xbf)
                                break;
                }
                if (k <= n) {
                        i += k; /* the byte that breaks the sequence (the NUL ends it too) */
                        if (ret_off)
                                *ret_off = i;
                        return false;
                }
                i += n + 1;
        }
        if (p[i] && ret_off)
                *ret_off = i;
        return !p[i];
}

uint64_t str_fnv1a64(const char *s) {
        uint64_t h = 14695981039346656037ull;
        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 1099511628211ull;
        return h;
}
