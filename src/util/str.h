/* SPDX-License-Identifier: Apache-2.0 */
/* Strings and NULL-terminated string arrays (strv). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/* asprintf that returns NULL on failure. */
char *strprintf(const char *fmt, ...) _printf_(1, 2);
bool startswith(const char *s, const char *prefix);
bool endswith(const char *s, const char *suffix);
size_t strv_length(char *const *l);
/* Appends a copy of s; returns 0 or -ENOMEM. */
int strv_push(char ***l, const char *s);
char **strv_copy(const char *const *l);
/* Finds "KEY=..." in an environment-style list; returns the index or -1. */
int strv_env_find(char *const *l, const char *key, size_t key_len);
/* Sets or replaces "KEY=VALUE" (assignment must contain '='). */
int strv_env_set(char ***l, const char *assignment);
/* Checks an environment variable name: [A-Za-z_][A-Za-z0-9_]*, 1..255 chars. */
bool env_name_is_valid(const char *s, size_t len);
/* Whether s is UTF-8 text as JSON (RFC 8259) and jansson take it: no overlong forms, no
 * surrogates, nothing above U+10FFFF.  When it is not, *ret_off (if given) is the offset of the
 * first byte that breaks it. */
bool str_is_utf8(const char *s, size_t *ret_off);
/* FNV-1a (64 bit) of a string: a stable short name for it, not a security boundary. */
uint64_t str_fnv1a64(const char *s);
