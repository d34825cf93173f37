/* SPDX-License-Identifier: Apache-2.0 */
/* Thin jansson wrappers that turn a wrong field into a nook_error naming it.
 *
 * Getters return 1 when the field is present and *ret was set, 0 when it is absent (or JSON
 * null) and not required, leaving *ret alone so the caller's default stays, and -NOOK_E_INVALID
 * otherwise.  Their messages name the field but not the document ("field 'memoryMib' must be a
 * number, got string"), so a caller wraps them once with what it was reading:
 *         nook_err_wrap(err, "Invalid spec")  ->  "Invalid spec: field 'memoryMib' must be ..."
 * Strings returned as const char * are borrowed from obj and live as long as it does. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"

/* Input limits of json_parse_object: far above any real spec, low enough that a hostile one
 * costs little memory and no deep recursion. */
#define JSON_MAX_BYTES (1024u * 1024u)
#define JSON_MAX_DEPTH 32u

/* "object", "array", "string", "number", "boolean", "null" (integers and reals are both
 * "number", as a JavaScript caller sees them). */
const char *json_type_name(const json_t *j);

/* Parses text (not NUL-terminated; len bytes) that must be one JSON object, at most
 * JSON_MAX_BYTES long and JSON_MAX_DEPTH deep.  Duplicate keys and "\u0000" are refused. */
int json_parse_object(const char *text, size_t len, json_t **ret, nook_error *err);

/* Fails on the first key of obj not in allowed (NULL-terminated), suggesting a near match:
 * "Invalid spec: unknown field 'memoryMB' (did you mean 'memoryMib'?)".  what may be NULL for a
 * message to wrap ("unknown field 'memoryMB' ..."). */
int json_check_fields(json_t *obj, const char *const *allowed, const char *what, nook_error *err);

int json_get_object(json_t *obj, const char *field, bool required, json_t **ret, nook_error *err);
int json_get_string(json_t *obj, const char *field, bool required, const char **ret, nook_error *err);
int json_get_bool(json_t *obj, const char *field, bool required, bool *ret, nook_error *err);
/* An integer >= 0.  A real with no fraction ("512.0") is accepted: JavaScript has one number type. */
int json_get_uint64(json_t *obj, const char *field, bool required, uint64_t *ret, nook_error *err);
/* An array of strings, copied into a NULL-terminated strv ([] gives an empty one). */
int json_get_string_array(json_t *obj, const char *field, bool required, char ***ret, nook_error *err);
/* An object of strings, copied into a strv of "key=value" in document order.  A key must be
 * non-empty and free of '=' so the result splits back unambiguously. */
int json_get_string_map(json_t *obj, const char *field, bool required, char ***ret, nook_error *err);
