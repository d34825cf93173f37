/* SPDX-License-Identifier: Apache-2.0 */
/* jansson wrappers: parsing limits and field errors that name the field. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "util/error.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/str.h"

static json_t *parse_ok(const char *text) {
        nook_error err = {};
        json_t *j = NULL;
        cr_assert_eq(json_parse_object(text, strlen(text), &j, &err), 0, "'%s': %s", text, err.msg);
        return j;
}

static void parse_bad(const char *text, size_t len, const char *needle) {
        nook_error err = {};
        json_t *j = NULL;
        cr_expect_eq(json_parse_object(text, len, &j, &err), -NOOK_E_INVALID, "accepted: %.60s", text);
        cr_expect_null(j);
        cr_expect(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
}

Test(json, parse_object_and_refusals) {
        json_decref(parse_ok("{}"));
        json_decref(parse_ok(" {\"a\": [1, {\"b\": \"}]\\\"{{{{\"}]} "));
        parse_bad("[]", 2, "Expected a JSON object, got array");
        parse_bad("\"s\"", 3, "got string");
        parse_bad("null", 4, "got null");
        parse_bad("", 0, "Invalid JSON at line");
        parse_bad("{", 1, "Invalid JSON");
        parse_bad("{} {}", 5, "Invalid JSON");
        parse_bad("{\"a\":1,\"a\":2}", 13, "Invalid JSON");
        parse_bad("{\"a\":\"\\u0000\"}", 14, "Invalid JSON");
        parse_bad("{\"a\":\"\xff\"}", 8, "Invalid JSON");
        parse_bad("{\"a\":1}\0junk", 12, "Invalid JSON");
        parse_bad(NULL, 0, "No JSON");
        /* The length is honoured: text past len is not read. */
        nook_error err = {};
        json_t *j = NULL;
        cr_expect_eq(json_parse_object("{}garbage", 2, &j, &err), 0, "%s", err.msg);
        json_decref(j);
}

/* {"a":[[...]]} with `levels` levels in all, the object included. */
static char *nested(unsigned levels) {
        char *t = calloc(1, 2 * levels + 8);
        cr_assert_not_null(t);
        strcpy(t, "{\"a\":");
        size_t n = strlen(t);
        for (unsigned i = 1; i < levels; i++)
                t[n++] = '[';
        for (unsigned i = 1; i < levels; i++)
                t[n++] = ']';
        t[n++] = '}';
        return t;
}

Test(json, depth_and_size_caps) {
        char *t = nested(JSON_MAX_DEPTH);
        json_decref(parse_ok(t));
        free(t);
        t = nested(JSON_MAX_DEPTH + 1);
        parse_bad(t, strlen(t), "nested deeper than 32");
        free(t);
        t = nested(5000); /* past jansson's own limit, still refused cheaply by ours */
        parse_bad(t, strlen(t), "nested deeper than 32");
        free(t);

        /* Brackets inside strings do not count. */
        char strs[256] = "{\"a\":\"";
        for (unsigned i = 0; i < 100; i++)
                strcat(strs, "[");
        strcat(strs, "\"}");
        json_decref(parse_ok(strs));

        size_t big = JSON_MAX_BYTES + 1;
        char *huge = malloc(big);
        cr_assert_not_null(huge);
        memset(huge, ' ', big);
        huge[0] = '{';
        huge[big - 1] = '}';
        parse_bad(huge, big, "larger than the limit");
        free(huge);
}

Test(json, check_fields_names_unknown_and_suggests) {
        static const char *const allowed[] = { "image", "memoryMib", "cpus", "env", NULL };
        nook_error err = {};
        json_t *j = parse_ok("{\"image\":\"a\",\"memoryMib\":1}");
        cr_expect_eq(json_check_fields(j, allowed, "spec", &err), 0);
        json_decref(j);

        j = parse_ok("{\"image\":\"a\",\"memoryMB\":1}");
        cr_expect_eq(json_check_fields(j, allowed, "spec", &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "Invalid spec: unknown field 'memoryMB' (did you mean 'memoryMib'?)");
        json_decref(j);

        j = parse_ok("{\"MEMORYMIB\":1}");
        cr_expect_eq(json_check_fields(j, allowed, NULL, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "unknown field 'MEMORYMIB' (did you mean 'memoryMib'?)");
        json_decref(j);

        j = parse_ok("{\"x\":1}");
        cr_expect_eq(json_check_fields(j, allowed, "spec", &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "Invalid spec: unknown field 'x'");
        json_decref(j);

        j = parse_ok("{\"a\\nb\\u00e9\":1}");
        cr_expect_eq(json_check_fields(j, allowed, "spec", &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg,
                "Invalid spec: unknown field 'a?b?"
                "?'");
        json_decref(j);
}

Test(json, getters_present_absent_null_and_wrong_type) {
        nook_error err = {};
        json_t *j =
                parse_ok("{\"s\":\"v\",\"b\":true,\"n\":512,\"r\":512.0,\"f\":1.5,\"neg\":-1,\"nul\":null,"
                         "\"o\":{},\"a\":[\"x\",\"y\"]}");
        const char *s = "default";
        bool b = false;
        uint64_t u = 7;
        json_t *o = NULL;

        cr_expect_eq(json_get_string(j, "s", true, &s, &err), 1);
        cr_expect_str_eq(s, "v");
        s = "default";
        cr_expect_eq(json_get_string(j, "missing", false, &s, &err), 0);
        cr_expect_str_eq(s, "default", "absent leaves the default");
        cr_expect_eq(json_get_string(j, "nul", false, &s, &err), 0);
        cr_expect_eq(json_get_string(j, "missing", true, &s, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'missing' is required");
        cr_expect_eq(json_get_string(j, "n", true, &s, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'n' must be a string, got number");

        cr_expect_eq(json_get_bool(j, "b", true, &b, &err), 1);
        cr_expect(b);
        cr_expect_eq(json_get_bool(j, "s", true, &b, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 's' must be a boolean, got string");

        cr_expect_eq(json_get_uint64(j, "n", true, &u, &err), 1);
        cr_expect_eq(u, 512);
        u = 7;
        cr_expect_eq(json_get_uint64(j, "r", true, &u, &err), 1);
        cr_expect_eq(u, 512);
        u = 7;
        cr_expect_eq(json_get_uint64(j, "f", true, &u, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'f' must be a whole number, got 1.5");
        cr_expect_eq(json_get_uint64(j, "neg", true, &u, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'neg' must not be negative, got -1");
        cr_expect_eq(json_get_uint64(j, "s", true, &u, &err), -NOOK_E_INVALID);
        cr_expect_eq(u, 7);
        /* The message the caller shows after one wrap. */
        nook_err_wrap(&err, "Invalid spec");
        cr_expect_str_eq(err.msg, "Invalid spec: field 's' must be a number, got string");

        cr_expect_eq(json_get_object(j, "o", true, &o, &err), 1);
        cr_expect(json_is_object(o));
        cr_expect_eq(json_get_object(j, "a", true, &o, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'a' must be an object, got array");
        json_decref(j);

        /* A NULL object (an absent parent) behaves as absent. */
        cr_expect_eq(json_get_string(NULL, "s", false, &s, &err), 0);
}

Test(json, string_array) {
        nook_error err = {};
        json_t *j = parse_ok("{\"a\":[\"x\",\"\",\"z\"],\"e\":[],\"bad\":[\"x\",2],\"o\":{}}");
        char **l = NULL;

        cr_expect_eq(json_get_string_array(j, "a", true, &l, &err), 1, "%s", err.msg);
        cr_expect_eq(strv_length(l), 3);
        cr_expect_str_eq(l[1], "");
        l = strv_free(l);
        cr_expect_eq(json_get_string_array(j, "e", true, &l, &err), 1);
        cr_expect_not_null(l);
        cr_expect_null(l[0]);
        l = strv_free(l);
        cr_expect_eq(json_get_string_array(j, "bad", true, &l, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'bad' item 2 must be a string, got number");
        cr_expect_null(l);
        cr_expect_eq(json_get_string_array(j, "o", true, &l, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'o' must be an array of strings, got object");
        cr_expect_eq(json_get_string_array(j, "none", false, &l, &err), 0);
        cr_expect_null(l);
        json_decref(j);
}

Test(json, string_map) {
        nook_error err = {};
        json_t *j = parse_ok("{\"env\":{\"A\":\"1\",\"B\":\"x=y\",\"C\":\"\"},\"eq\":{\"A=B\":\"1\"},"
                             "\"empty\":{\"\":\"1\"},"
                             "\"num\":{\"A\":1}}");
        char **l = NULL;

        cr_expect_eq(json_get_string_map(j, "env", true, &l, &err), 1, "%s", err.msg);
        cr_expect_eq(strv_length(l), 3);
        cr_expect_str_eq(l[0], "A=1");
        cr_expect_str_eq(l[1], "B=x=y");
        cr_expect_str_eq(l[2], "C=");
        l = strv_free(l);
        cr_expect_eq(json_get_string_map(j, "eq", true, &l, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "field 'eq' has key 'A=B'"), "%s", err.msg);
        cr_expect_eq(json_get_string_map(j, "empty", true, &l, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "non-empty"), "%s", err.msg);
        cr_expect_eq(json_get_string_map(j, "num", true, &l, &err), -NOOK_E_INVALID);
        cr_expect_str_eq(err.msg, "field 'num' key 'A' must be a string, got number");
        cr_expect_null(l);
        json_decref(j);
}

Test(json, type_names) {
        json_t *v[] = { json_object(), json_array(), json_string("s"), json_integer(1), json_real(1.5),
                json_true(), json_false(), json_null() };
        const char *want[] = { "object", "array", "string", "number", "number", "boolean", "boolean",
                "null" };
        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                cr_expect_str_eq(json_type_name(v[i]), want[i]);
                json_decref(v[i]);
        }
}
