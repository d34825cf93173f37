/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the addon's files: JS values in and out, nook_error -> SandboxError. */
#include <node_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "addon.h"

/* Never freed: 16 bytes per environment (the main thread, each worker ever started).  A finalizer
 * would run while the environment ends, where the finalizers of exec handles and the watch
 * loop's last calls may still make errors (make_error reads error_class): nothing may be freed
 * under them.  error_class goes with the environment; the loop frees itself (watch.c). */
int addon_env_init(napi_env env) {
        addon_env *e = calloc(1, sizeof(*e));
        if (!e)
                return -1;
        if (napi_set_instance_data(env, e, NULL, NULL) != napi_ok) {
                free(e);
                return -1;
        }
        return 0;
}

addon_env *addon_env_get(napi_env env) {
        void *data = NULL;
        return napi_get_instance_data(env, &data) == napi_ok ? data : NULL;
}

const napi_type_tag addon_tag_ws = { 0x6e6f6f6b2d77732dULL, 0x8d3f6a2c51e04b97ULL };
const napi_type_tag addon_tag_exec = { 0x6e6f6f6b2d657865ULL, 0x2b7c94e1d6a35f08ULL };

bool handle_tag(napi_env env, napi_value v, const napi_type_tag *tag) {
        if (napi_type_tag_object(env, v, tag) == napi_ok)
                return true;
        throw_napi_failure(env, "napi_type_tag_object");
        return false;
}

bool handle_get(napi_env env, napi_value v, const napi_type_tag *tag, void **ret) {
        napi_valuetype t;
        bool ok = false;
        *ret = NULL;
        if (napi_typeof(env, v, &t) != napi_ok || t != napi_external ||
                napi_check_object_type_tag(env, v, tag, &ok) != napi_ok || !ok)
                return false;
        return napi_get_value_external(env, v, ret) == napi_ok;
}

void throw_napi_failure(napi_env env, const char *what) {
        const napi_extended_error_info *info = NULL;
        bool pending = false;
        (void)napi_is_exception_pending(env, &pending);
        if (pending)
                return;
        (void)napi_get_last_error_info(env, &info);
        char msg[512];
        (void)snprintf(msg, sizeof(msg), "nook addon: %s failed: %s", what,
                info && info->error_message ? info->error_message : "unknown N-API error");
        (void)napi_throw_error(env, "internal", msg);
}

void secure_free(char *s) {
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

void strv_free_secure(char **l) {
        for (size_t i = 0; l && l[i]; i++)
                secure_free(l[i]);
        free(l);
}

/* Builds the SandboxError (or a plain Error before lib/errors.js registered its class). */
napi_value make_error(napi_env env, const nook_error *err) {
        napi_value ctor = NULL, msg, code, args[2], obj = NULL;
        const char *code_s = nook_errc_to_string(err->code);
        if (napi_create_string_utf8(env, err->msg, NAPI_AUTO_LENGTH, &msg) != napi_ok ||
                napi_create_string_utf8(env, code_s ? code_s : "internal", NAPI_AUTO_LENGTH, &code) !=
                        napi_ok)
                return NULL;
        addon_env *ae = addon_env_get(env);
        if (ae && ae->error_class && napi_get_reference_value(env, ae->error_class, &ctor) == napi_ok &&
                ctor) {
                args[0] = msg;
                args[1] = code;
                if (napi_new_instance(env, ctor, 2, args, &obj) != napi_ok)
                        return NULL;
        } else {
                if (napi_create_error(env, code, msg, &obj) != napi_ok)
                        return NULL;
        }
        if (err->sys_errno) {
                napi_value e;
                if (napi_create_int32(env, err->sys_errno, &e) == napi_ok)
                        (void)napi_set_named_property(env, obj, "errno", e);
        }
        return obj;
}

napi_value throw_nook(napi_env env, const nook_error *err) {
        napi_value e = make_error(env, err);
        if (e)
                (void)napi_throw(env, e);
        return NULL;
}

napi_value throw_invalid(napi_env env, const char *msg) {
        nook_error err = { .code = NOOK_E_INVALID };
        (void)snprintf(err.msg, sizeof(err.msg), "%s", msg);
        return throw_nook(env, &err);
}

/* A JS string argument as a malloc'd C string.  NUL bytes inside are refused here with
 * `invalid`: C cannot carry them, and a silently shortened path would name another file. */
int get_string(napi_env env, napi_value v, bool nullable, char **ret) {
        napi_valuetype t;
        size_t len = 0;
        *ret = NULL;
        if (napi_typeof(env, v, &t) != napi_ok)
                return -1;
        if (nullable && (t == napi_undefined || t == napi_null))
                return 0;
        if (t != napi_string) {
                (void)throw_invalid(env, "Expected a string argument");
                return -1;
        }
        if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok)
                return -1;
        char *s = malloc(len + 1);
        if (!s) {
                (void)throw_invalid(env, "Out of memory");
                return -1;
        }
        if (napi_get_value_string_utf8(env, v, s, len + 1, &len) != napi_ok) {
                free(s);
                return -1;
        }
        if (strlen(s) != len) {
                secure_free(s);
                nook_error err = { .code = NOOK_E_INVALID };
                (void)snprintf(err.msg, sizeof(err.msg), "Invalid argument: a string contains a NUL byte");
                (void)throw_nook(env, &err);
                return -1;
        }
        *ret = s;
        return 0;
}

/* A JS array of strings (or undefined) as a NULL-terminated vector. */
int get_strv(napi_env env, napi_value v, char ***ret) {
        napi_valuetype t;
        bool is_array = false;
        uint32_t n = 0;
        *ret = NULL;
        if (napi_typeof(env, v, &t) != napi_ok)
                return -1;
        if (t == napi_undefined || t == napi_null)
                return 0;
        if (napi_is_array(env, v, &is_array) != napi_ok)
                return -1;
        if (!is_array) {
                (void)throw_invalid(env, "Expected an array of strings");
                return -1;
        }
        if (napi_get_array_length(env, v, &n) != napi_ok)
                return -1;
        char **l = calloc((size_t)n + 1, sizeof(char *));
        if (!l) {
                (void)throw_invalid(env, "Out of memory");
                return -1;
        }
        for (uint32_t i = 0; i < n; i++) {
                napi_value e;
                if (napi_get_element(env, v, i, &e) != napi_ok || get_string(env, e, false, &l[i]) < 0) {
                        strv_free_secure(l);
                        return -1;
                }
        }
        *ret = l;
        return 0;
}

napi_value get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
        size_t argc = MAX_ARGS;
        napi_value all[MAX_ARGS];
        NAPI_OK(env, napi_get_cb_info(env, info, &argc, all, NULL, NULL));
        if (argc < want) {
                (void)throw_invalid(env, "Too few arguments");
                return NULL;
        }
        for (size_t i = 0; i < want; i++)
                argv[i] = all[i];
        napi_value ok;
        NAPI_OK(env, napi_get_boolean(env, true, &ok));
        return ok;
}

napi_value make_string(napi_env env, const char *s) {
        napi_value v;
        NAPI_OK(env, napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v));
        return v;
}

napi_value make_undefined(napi_env env) {
        napi_value v;
        NAPI_OK(env, napi_get_undefined(env, &v));
        return v;
}

napi_value js_set_error_class(napi_env env, napi_callback_info info) {
        napi_value argv[1];
        if (!get_args(env, info, 1, argv))
                return NULL;
        addon_env *e = addon_env_get(env);
        if (!e) {
                throw_napi_failure(env, "napi_get_instance_data");
                return NULL;
        }
        if (e->error_class)
                (void)napi_delete_reference(env, e->error_class);
        e->error_class = NULL;
        NAPI_OK(env, napi_create_reference(env, argv[0], 1, &e->error_class));
        return make_undefined(env);
}
