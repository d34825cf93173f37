/* SPDX-License-Identifier: Apache-2.0 */
/* What the addon's files (addon.c: lifecycle, workspace and snapshot calls; exec.c; watch.c;
 * util.c) share.  See addon.c for the threading rules. */
#pragma once

#include <node_api.h>
#include <stdbool.h>
#include <stddef.h>

#include "nook.h"

#define MAX_ARGS 4

/* Every napi call is checked; a failure becomes a pending JS exception and the caller returns
 * NULL (undefined) right away. */
#define NAPI_OK(env, call)                                                                                  \
        do {                                                                                                \
                if ((call) != napi_ok) {                                                                    \
                        throw_napi_failure(env, #call);                                                     \
                        return NULL;                                                                        \
                }                                                                                           \
        } while (0)

/* What one environment (the main thread, each worker, each load of the addon) keeps: never in a
 * static, which every environment of the process would share (a SandboxError class of another
 * environment's heap is not this one's; Bun aborts on the foreign reference). */
typedef struct addon_env {
        napi_ref error_class; /* lib/errors.js's SandboxError, or NULL */
        struct watch_loop *loop; /* watch.c's loop, made on the first watch */
} addon_env;

/* Made by the module's init (the environment's instance data); NULL if that failed. */
int addon_env_init(napi_env env);
addon_env *addon_env_get(napi_env env);

/* The kinds of handle the addon gives JS (externals), tagged when made and checked when used, so
 * that one kind passed for another (or any other object) is refused, never dereferenced. */
extern const napi_type_tag addon_tag_ws, addon_tag_exec;
/* Tags a new handle; false with an exception pending on failure. */
bool handle_tag(napi_env env, napi_value v, const napi_type_tag *tag);
/* The pointer inside a handle of that kind (NULL: closed); false, without an exception, when v
 * is not such a handle. */
bool handle_get(napi_env env, napi_value v, const napi_type_tag *tag, void **ret);

void throw_napi_failure(napi_env env, const char *what);
void secure_free(char *s);
void strv_free_secure(char **l);
/* The SandboxError (or a plain Error before lib/errors.js registered its class); NULL on failure. */
napi_value make_error(napi_env env, const nook_error *err);
napi_value throw_nook(napi_env env, const nook_error *err);
napi_value throw_invalid(napi_env env, const char *msg);
/* A JS string as a malloc'd C string (NUL bytes refused); nullable: undefined/null -> NULL. */
int get_string(napi_env env, napi_value v, bool nullable, char **ret);
/* A JS array of strings (or undefined) as a NULL-terminated vector. */
int get_strv(napi_env env, napi_value v, char ***ret);
/* The first `want` arguments; NULL with an exception pending when fewer were given. */
napi_value get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv);
napi_value make_string(napi_env env, const char *s);
napi_value make_undefined(napi_env env);

napi_value js_set_error_class(napi_env env, napi_callback_info info);
napi_value js_exec_start(napi_env env, napi_callback_info info);
napi_value js_exec_cancel(napi_env env, napi_callback_info info);
napi_value js_exec_resume(napi_env env, napi_callback_info info);
napi_value js_exec_write(napi_env env, napi_callback_info info);
napi_value js_exec_end_stdin(napi_env env, napi_callback_info info);
napi_value js_exec_close_pipe(napi_env env, napi_callback_info info);
napi_value js_exec_close(napi_env env, napi_callback_info info);
