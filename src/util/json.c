/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "nook.h"
#include "error.h"
#include "json.h"
#include "macro.h"
#include "parse.h"
#include "str.h"

#define PREVIEW_SIZE 64

const char *json_type_name(const json_t *j) {
        if (!j)
                return "nothing";
        switch (json_typeof(j)) {
        case JSON_OBJECT:
                return "object";
        case JSON_ARRAY:
                return "array";
        case JSON_STRING:
                return "string";
        case JSON_INTEGER:
        case JSON_REAL:
                return "number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "boolean";
        case JSON_NULL:
                return "null";
        default:
                return "unknown";
        }
}

/* Nesting depth of text, counting brackets outside strings, stopping once past the limit.
 * jansson recurses once per level (up to its compiled-in 2048); checking first keeps a
 * hostile document from costing more than a linear scan. */
static bool json_too_deep(const char *t, size_t len) {
        unsigned depth = 0;
        bool in_string = false, escaped = false;

        for (size_t i = 0; i < len; i++) {
                char c = t[i];
                if (in_string) {
                        if (escaped)
                                escaped = false;
                        else if (c == '\\')
                                escaped = true;
                        else if (c == '"')
                                in_string = false;
                } else if (c == '"')
                        in_string = true;
                else if (c == '[' || c == '{') {
                        if (++depth > JSON_MAX_DEPTH)
                                return true;
                } else if ((c == ']' || c == '}') && depth > 0)
                        depth--;
        }
        return false;
}

int json_parse_object(const char *text, size_t len, json_t **ret, nook_error *err) {
        json_error_t jerr;

        if (!text)
                return nook_err_set(err, NOOK_E_INVALID, "No JSON text given");
        if (len > JSON_MAX_BYTES)
                return nook_err_set(err, NOOK_E_INVALID,
                        "JSON text of %zu bytes is larger than the limit of %u bytes", len, JSON_MAX_BYTES);
        if (json_too_deep(text, len))
                return nook_err_set(
                        err, NOOK_E_INVALID, "JSON text is nested deeper than %u levels", JSON_MAX_DEPTH);
        /* DECODE_ANY: a top-level array or string gets our clearer message below. */
        json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!j) {
                char pv[sizeof(jerr.text)];
                util_preview(jerr.text, pv, sizeof(pv));
                return nook_err_set(err, NOOK_E_INVALID, "Invalid JSON at line %d, column %d: %s", jerr.line,
                        jerr.column, pv);
        }
        if (!json_is_object(j)) {
                const char *t = json_type_name(j);
                json_decref(j);
                return nook_err_set(err, NOOK_E_INVALID, "Expected a JSON object, got %s", t);
        }
        *ret = j;
        return 0;
}

/* Levenshtein distance ignoring ASCII case, for "did you mean"; long keys are never close. */
static unsigned edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        unsigned row[65];

        if (la > 64 || lb > 64)
                return UINT_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = (unsigned)j;
        for (size_t i = 1; i <= la; i++) {
                unsigned diag = row[0];
                row[0] = (unsigned)i;
                for (size_t j = 1; j <= lb; j++) {
                        unsigned up = row[j];
                        unsigned cost = (a[i - 1] | 0x20) == (b[j - 1] | 0x20) ? 0 : 1;
                        unsigned best = diag + cost;
                        if (up + 1 < best)
                                best = up + 1;
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

static const char *closest_field(const char *key, const char *const *allowed) {
        const char *best = NULL;
        unsigned best_d = UINT_MAX;

        for (size_t i = 0; allowed[i]; i++) {
                unsigned d = edit_distance(key, allowed[i]);
                /* Short names get less slack, so "id" is not offered for "x". */
                unsigned slack = strlen(allowed[i]) >= 6 ? 2 : 1;
                if (d <= slack && d < best_d) {
                        best = allowed[i];
                        best_d = d;
                }
        }
        return best;
}

int json_check_fields(json_t *obj, const char *const *allowed, const char *what, nook_error *err) {
        const char *key;
        json_t *v = NULL;

        json_object_foreach(obj, key, v) {
                bool known = false;
                for (size_t i = 0; allowed && allowed[i] && !known; i++)
                        known = streq(key, allowed[i]);
                if (known)
                        continue;
                char pv[PREVIEW_SIZE], hint[128] = "";
                util_preview(key, pv, sizeof(pv));
                const char *near = allowed ? closest_field(key, allowed) : NULL;
                if (near)
                        (void)snprintf(hint, sizeof(hint), " (did you mean '%s'?)", near);
                if (what)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Invalid %s: unknown field '%s'%s", what, pv, hint);
                return nook_err_set(err, NOOK_E_INVALID, "unknown field '%s'%s", pv, hint);
        }
        return 0;
}

static int wrong_type(const char *field, const char *want, const json_t *got, nook_error *err) {
        return nook_err_set(
                err, NOOK_E_INVALID, "field '%s' must be %s, got %s", field, want, json_type_name(got));
}

/* The value of field, or NULL when it is absent or null (an error if required). */
static int field_lookup(json_t *obj, const char *field, bool required, json_t **ret, nook_error *err) {
        json_t *v = obj ? json_object_get(obj, field) : NULL;

        if (!v || json_is_null(v)) {
                if (required)
                        return nook_err_set(err, NOOK_E_INVALID, "field '%s' is required", field);
                *ret = NULL;
                return 0;
        }
        *ret = v;
        return 1;
}

int json_get_object(json_t *obj, const char *field, bool required, json_t **ret, nook_error *err) {
        json_t *v = NULL;
        int r = field_lookup(obj, field, required, &v, err);
        if (r <= 0)
                return r;
        if (!json_is_object(v))
                return wrong_type(field, "an object", v, err);
        *ret = v;
        return 1;
}

int json_get_string(json_t *obj, const char *field, bool required, const char **ret, nook_error *err) {
        json_t *v = NULL;
        int r = field_lookup(obj, field, required, &v, err);
        if (r <= 0)
                return r;
        if (!json_is_string(v))
                return wrong_type(field, "a string", v, err);
        *ret = json_string_value(v);
        return 1;
}

int json_get_bool(json_t *obj, const char *field, bool required, bool *ret, nook_error *err) {
        json_t *v = NULL;
        int r = field_lookup(obj, field, required, &v, err);
        if (r <= 0)
                return r;
        if (!json_is_boolean(v))
                return wrong_type(field, "a boolean", v, err);
        *ret = json_is_true(v);
        return 1;
}

int json_get_uint64(json_t *obj, const char *field, bool required, uint64_t *ret, nook_error *err) {
        json_t *v = NULL;
        int r = field_lookup(obj, field, required, &v, err);
        if (r <= 0)
                return r;
        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i < 0)
                        return nook_err_set(err, NOOK_E_INVALID, "field '%s' must not be negative, got %lld",
                                field, (long long)i);
                *ret = (uint64_t)i;
                return 1;
        }
        if (json_is_real(v)) {
                double x = json_real_value(v);
                /* Only up to 2^53, where every whole double is exact. */
                if (x < 0)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "field '%s' must not be negative, got %g", field, x);
                if (x > 9007199254740992.0 || x != (double)(uint64_t)x)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "field '%s' must be a whole number, got %g", field, x);
                *ret = (uint64_t)x;
                return 1;
        }
        return wrong_type(field, "a number", v, err);
}

int json_get_string_array(json_t *obj, const char *field, bool required, char ***ret, nook_error *err) {
        _cleanup_strv_free_ char **l = NULL;
        json_t *v = NULL, *item;
        size_t i;
        int r = field_lookup(obj, field, required, &v, err);
        if (r <= 0)
                return r;
        if (!json_is_array(v))
                return wrong_type(field, "an array of strings", v, err);
        l = calloc(json_array_size(v) + 1, sizeof(char *));
        if (!l)
                return nook_err_oom(err);
        json_array_foreach(v, i, item) {
                if (!json_is_string(item))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "field '%s' item %zu must be a string, got %s", field, i + 1,
                                json_type_name(item));
                l[i] = strdup(json_string_value(item));
                if (!l[i])
                        return nook_err_oom(err);
        }
        *ret = TAKE_PTR(l);
        return 1;
}

int json_get_string_map(json_t *obj, const char *field, bool required, char ***ret, nook_error *err) {
        _cleanup_strv_free_ char **l = NULL;
        const char *key;
        json_t *v = NULL, *item;
        size_t n = 0;
        int r = field_lookup(obj, field, required, &v, err);
        if (r <= 0)
                return r;
        if (!json_is_object(v))
                return wrong_type(field, "an object of strings", v, err);
        l = calloc(json_object_size(v) + 1, sizeof(char *));
        if (!l)
                return nook_err_oom(err);
        json_object_foreach(v, key, item) {
                char pv[PREVIEW_SIZE];
                util_preview(key, pv, sizeof(pv));
                if (!key[0] || strchr(key, '='))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "field '%s' has key '%s': a key must be non-empty and must not contain '='",
                                field, pv);
                if (!json_is_string(item))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "field '%s' key '%s' must be a string, got %s", field, pv,
                                json_type_name(item));
                l[n] = strprintf("%s=%s", key, json_string_value(item));
                if (!l[n])
                        return nook_err_oom(err);
                n++;
        }
        *ret = TAKE_PTR(l);
        return 1;
}
