/* SPDX-License-Identifier: Apache-2.0 */
/* The N-API addon under the `nook` Node package: a thin layer over include/nook.h.
 *
 * Files.  addon.c: the lifecycle, workspace and snapshot calls and the module table; exec.c:
 * commands; watch.c: the descriptor watcher exec uses; util.c: argument and error helpers.
 *
 * Threads.  A call that may block for a short while (sandbox lifecycle, workspace reads and
 * writes, connecting to a sandbox to start a command) runs in napi_create_async_work's execute
 * callback on the libuv pool; that callback only calls libnook and never touches JS.  A running
 * command holds no pool thread: its pipes and control socket are watched (watch.c) and handled
 * on the JS thread, so any number of commands can run while the pool serves the rest.  Each async operation opens its own `nook` handle
 * from the state root's path: a handle caches a SQLite connection and is not meant to be shared
 * between threads, and opening one costs a mkdir and nothing else until the store is needed.
 * A workspace handle (nook_ws) holds only a directory fd and is safe to share.
 *
 * Processes.  The addon never forks (STYLE.md R12): libnook starts the supervisor by
 * posix_spawn, and a command runs inside the sandbox, started by the supervisor.
 *
 * Errors.  A nook_error becomes an instance of the JS SandboxError class (registered once by
 * lib/errors.js through setErrorClass) with .code = nook_errc_to_string(code) and the libnook
 * message; .errno is set when the error came from a system call. */
#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "addon.h"

#define COPY_BUFFER_MAX ((size_t)64 * 1024) /* smaller reads are copied; larger ones are handed over */

/* ---- workspace handles --------------------------------------------------------------------- */

static void ws_finalize(napi_env env, void *data, void *hint) {
        (void)nook_ws_close(data);
}

static napi_value get_ws(napi_env env, napi_value v, nook_ws **ret) {
        void *p = NULL;
        if (!handle_get(env, v, &addon_tag_ws, &p)) {
                (void)throw_invalid(env, "Expected a workspace handle");
                return NULL;
        }
        if (!p) {
                (void)throw_invalid(env, "This workspace handle is closed");
                return NULL;
        }
        *ret = p;
        return v;
}

/* ---- the generic async operation ----------------------------------------------------------- */

typedef enum op_kind {
        OP_CREATE,
        OP_START,
        OP_STOP,
        OP_REMOVE,
        OP_INSPECT,
        OP_LIST,
        OP_WS_OPEN,
        OP_WS_WRITE,
        OP_WS_READ,
        OP_WS_MKDIR,
        OP_SNAP_CREATE,
        OP_SNAP_LIST,
        OP_SNAP_INSPECT,
        OP_SNAP_REMOVE,
        OP_PAUSE,
        OP_RESUME,
        OP_BRANCH,
        OP_DIFF,
        OP_MERGE,
        OP_EGRESS_LOG,
} op_kind;

typedef struct op {
        napi_async_work work;
        napi_deferred deferred;
        op_kind kind;
        char *home, *name, *text; /* text: spec JSON, a workspace path or a snapshot name */
        uint64_t num; /* flags, a timeout, a size limit */
        nook_ws *ws; /* borrowed: keep holds its JS external */
        napi_ref keep; /* the ws external and/or the data buffer, alive until complete */
        napi_ref keep2;
        const void *data;
        size_t len;
        int r;
        nook_error err;
        char *out_json;
        void *out_data;
        size_t out_len;
        nook_ws *out_ws;
} op;

static void op_free(napi_env env, op *o) {
        if (o->keep)
                (void)napi_delete_reference(env, o->keep);
        if (o->keep2)
                (void)napi_delete_reference(env, o->keep2);
        free(o->home);
        free(o->name);
        if (o->text) /* create's spec may hold secrets' values */
                explicit_bzero(o->text, strlen(o->text));
        free(o->text);
        nook_free(o->out_json);
        nook_free(o->out_data);
        (void)nook_ws_close(o->out_ws);
        free(o);
}

static int op_open(op *o, nook **ret) {
        return nook_open(o->home, ret, &o->err);
}

static void op_execute(napi_env env, void *data) {
        op *o = data;
        nook *n = NULL;
        /* Workspace reads and writes need no nook handle: nook_ws is self-contained. */
        if (o->kind == OP_WS_WRITE) {
                o->r = nook_ws_write_ex(o->ws, o->text, o->data, o->len, (unsigned)o->num, &o->err);
                return;
        }
        if (o->kind == OP_WS_MKDIR) {
                o->r = nook_ws_mkdir(o->ws, o->text, &o->err);
                return;
        }
        if (o->kind == OP_WS_READ) {
                o->r = nook_ws_read(o->ws, o->text, (size_t)o->num, &o->out_data, &o->out_len, &o->err);
                return;
        }
        o->r = op_open(o, &n);
        if (o->r < 0)
                return;
        switch (o->kind) {
        case OP_CREATE:
                o->r = nook_sandbox_create(n, o->name, o->text, (unsigned)o->num, &o->err);
                break;
        case OP_START:
                o->r = nook_sandbox_start(n, o->name, &o->err);
                break;
        case OP_STOP:
                o->r = nook_sandbox_stop(n, o->name, o->num, &o->err);
                break;
        case OP_REMOVE:
                o->r = nook_sandbox_remove(n, o->name, &o->err);
                break;
        case OP_INSPECT:
                o->r = nook_sandbox_inspect(n, o->name, &o->out_json, &o->err);
                break;
        case OP_LIST:
                o->r = nook_sandbox_list(n, NULL, &o->out_json, &o->err);
                break;
        case OP_WS_OPEN:
                o->r = nook_ws_open(n, o->name, &o->out_ws, &o->err);
                break;
        case OP_SNAP_CREATE:
                o->r = nook_snapshot_create(n, o->name, o->text, (unsigned)o->num, &o->out_json, &o->err);
                break;
        case OP_SNAP_LIST:
                o->r = nook_snapshot_list(n, &o->out_json, &o->err);
                break;
        case OP_SNAP_INSPECT:
                o->r = nook_snapshot_inspect(n, o->name, &o->out_json, &o->err);
                break;
        case OP_SNAP_REMOVE:
                o->r = nook_snapshot_remove(n, o->name, &o->err);
                break;
        case OP_PAUSE:
                o->r = nook_pause(n, o->name, &o->err);
                break;
        case OP_RESUME:
                o->r = nook_resume(n, o->name, &o->err);
                break;
        case OP_BRANCH: /* name: the source, text: the new name, num: the count (0: one) */
                o->r = nook_branch(n, o->name, o->text, (unsigned)o->num, 0, &o->out_json, &o->err);
                break;
        case OP_DIFF:
                o->r = nook_diff(n, o->name, (unsigned)o->num, &o->out_json, &o->err);
                break;
        case OP_MERGE:
                o->r = nook_merge(n, o->name, o->text, &o->out_json, &o->err);
                break;
        case OP_EGRESS_LOG:
                o->r = nook_egress_log_entries(n, o->name, &o->out_json, &o->err);
                break;
        case OP_WS_WRITE:
        case OP_WS_READ:
        case OP_WS_MKDIR:
        default:
                break;
        }
        (void)nook_close(n);
}

static napi_value op_result(napi_env env, op *o) {
        napi_value v;
        switch (o->kind) {
        case OP_INSPECT:
        case OP_LIST:
        case OP_SNAP_CREATE:
        case OP_SNAP_LIST:
        case OP_SNAP_INSPECT:
        case OP_BRANCH:
        case OP_DIFF:
        case OP_MERGE:
        case OP_EGRESS_LOG:
                return make_string(env, o->out_json ? o->out_json : "null");
        case OP_WS_OPEN: {
                NAPI_OK(env, napi_create_external(env, o->out_ws, ws_finalize, NULL, &v));
                o->out_ws = NULL; /* the external owns it now */
                return handle_tag(env, v, &addon_tag_ws) ? v : NULL;
        }
        case OP_WS_READ: /* small: one copy is cheaper than a finalizer (large: op_complete) */
                NAPI_OK(env, napi_create_buffer_copy(env, o->out_len, o->out_data, NULL, &v));
                return v;
        case OP_CREATE:
        case OP_START:
        case OP_STOP:
        case OP_REMOVE:
        case OP_WS_WRITE:
        case OP_WS_MKDIR:
        case OP_SNAP_REMOVE:
        case OP_PAUSE:
        case OP_RESUME:
        default:
                return make_undefined(env);
        }
}

static void free_nook_buffer(napi_env env, void *data, void *hint) {
        nook_free(data);
}

static void op_complete(napi_env env, napi_status status, void *data) {
        op *o = data;
        napi_value v = NULL;
        if (status != napi_ok) {
                o->err = (nook_error){ .code = NOOK_E_INTERNAL };
                (void)snprintf(o->err.msg, sizeof(o->err.msg), "The operation was cancelled by Node");
                o->r = -NOOK_E_INTERNAL;
        }
        if (o->r < 0) {
                v = make_error(env, &o->err);
                /* a refused merge's report (nook_merge sets it with NOOK_E_CONFLICT): lib/box.js
                 * turns it into err.conflicts */
                napi_value rep = o->out_json && v ? make_string(env, o->out_json) : NULL;
                if (rep)
                        (void)napi_set_named_property(env, v, "report", rep);
                if (v)
                        (void)napi_reject_deferred(env, o->deferred, v);
        } else if (o->kind == OP_WS_READ && o->out_len > COPY_BUFFER_MAX) {
                if (napi_create_external_buffer(env, o->out_len, o->out_data, free_nook_buffer, NULL, &v) ==
                        napi_ok) {
                        o->out_data = NULL;
                        (void)napi_resolve_deferred(env, o->deferred, v);
                }
        } else {
                v = op_result(env, o);
                if (v)
                        (void)napi_resolve_deferred(env, o->deferred, v);
        }
        if (!v) {
                /* A napi call failed while settling: reject with whatever is pending. */
                napi_value e = NULL;
                bool pending = false;
                if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
                        napi_get_and_clear_last_exception(env, &e) == napi_ok)
                        (void)napi_reject_deferred(env, o->deferred, e);
        }
        (void)napi_delete_async_work(env, o->work);
        op_free(env, o);
}

static napi_value op_queue(napi_env env, op *o, const char *what) {
        napi_value promise, name;
        if (napi_create_promise(env, &o->deferred, &promise) != napi_ok ||
                napi_create_string_utf8(env, what, NAPI_AUTO_LENGTH, &name) != napi_ok ||
                napi_create_async_work(env, NULL, name, op_execute, op_complete, o, &o->work) != napi_ok) {
                throw_napi_failure(env, "napi_create_async_work");
                op_free(env, o);
                return NULL;
        }
        if (napi_queue_async_work(env, o->work) != napi_ok) {
                throw_napi_failure(env, "napi_queue_async_work");
                (void)napi_delete_async_work(env, o->work);
                op_free(env, o);
                return NULL;
        }
        return promise;
}

static op *op_new(napi_env env, op_kind kind) {
        op *o = calloc(1, sizeof(*o));
        if (!o)
                (void)throw_invalid(env, "Out of memory");
        else
                o->kind = kind;
        return o;
}

/* (home, name[, text[, num]]) for the lifecycle and snapshot operations: text is the spec JSON
 * for create and the snapshot's name (null: libnook's default) for snapshotCreate. */
static napi_value lifecycle_op(napi_env env, napi_callback_info info, op_kind kind, const char *what) {
        size_t argc = MAX_ARGS;
        napi_value argv[MAX_ARGS];
        NAPI_OK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
        bool need_name = kind != OP_LIST && kind != OP_SNAP_LIST;
        bool has_text = kind == OP_CREATE || kind == OP_SNAP_CREATE || kind == OP_BRANCH || kind == OP_MERGE;
        if (argc < (need_name ? 2u : 1u))
                return throw_invalid(env, "Too few arguments");
        op *o = op_new(env, kind);
        if (!o)
                return NULL;
        if (get_string(env, argv[0], true, &o->home) < 0 ||
                (need_name && get_string(env, argv[1], false, &o->name) < 0)) {
                op_free(env, o);
                return NULL;
        }
        if (has_text && argc > 2 && get_string(env, argv[2], true, &o->text) < 0) {
                op_free(env, o);
                return NULL;
        }
        size_t num_at = has_text ? 3 : 2;
        if (kind == OP_STOP)
                o->num = NOOK_STOP_TIMEOUT_DEFAULT; /* no timeout given: libnook's default */
        if (argc > num_at) {
                napi_valuetype t;
                double d = 0;
                if (napi_typeof(env, argv[num_at], &t) != napi_ok) {
                        op_free(env, o);
                        return NULL;
                }
                if (t == napi_number && napi_get_value_double(env, argv[num_at], &d) == napi_ok &&
                        (d > 0 || (d == 0 && kind == OP_STOP)))
                        o->num = d < (double)NOOK_STOP_TIMEOUT_DEFAULT ? (uint64_t)d
                                                                       : NOOK_STOP_TIMEOUT_DEFAULT - 1;
        }
        return op_queue(env, o, what);
}

static napi_value js_create(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_CREATE, "nook.create");
}
static napi_value js_start(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_START, "nook.start");
}
static napi_value js_stop(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_STOP, "nook.stop");
}
static napi_value js_remove(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_REMOVE, "nook.remove");
}
static napi_value js_inspect(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_INSPECT, "nook.inspect");
}
static napi_value js_list(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_LIST, "nook.list");
}
static napi_value js_pause(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_PAUSE, "nook.pause");
}
static napi_value js_resume(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_RESUME, "nook.resume");
}
/* (home, src, newName, count) */
static napi_value js_branch(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_BRANCH, "nook.branch");
}
static napi_value js_ws_open(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_WS_OPEN, "nook.wsOpen");
}
/* snapshotCreate(home, sandbox, name | null, flags) -> Promise<JSON string> */
static napi_value js_snapshot_create(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_SNAP_CREATE, "nook.snapshotCreate");
}
/* diff(home, name, flags) -> Promise<JSON string> */
static napi_value js_diff(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_DIFF, "nook.diff");
}
/* merge(home, branch, optionsJSON) -> Promise<JSON string>; a conflict rejects with .report */
static napi_value js_merge(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_MERGE, "nook.merge");
}
static napi_value js_snapshot_list(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_SNAP_LIST, "nook.snapshotList");
}
static napi_value js_snapshot_inspect(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_SNAP_INSPECT, "nook.snapshotInspect");
}
static napi_value js_snapshot_remove(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_SNAP_REMOVE, "nook.snapshotRemove");
}
/* egressLog(home, name) -> Promise<JSON array string> */
static napi_value js_egress_log(napi_env env, napi_callback_info info) {
        return lifecycle_op(env, info, OP_EGRESS_LOG, "nook.egressLog");
}

/* wsWrite(ws, path, buffer, inPlace) -> Promise<void>.  The buffer is referenced, not copied. */
static napi_value js_ws_write(napi_env env, napi_callback_info info) {
        napi_value argv[4];
        nook_ws *ws;
        void *data = NULL;
        size_t len = 0;
        bool is_buf = false, in_place = false;
        if (!get_args(env, info, 4, argv) || !get_ws(env, argv[0], &ws))
                return NULL;
        NAPI_OK(env, napi_get_value_bool(env, argv[3], &in_place));
        NAPI_OK(env, napi_is_buffer(env, argv[2], &is_buf));
        if (!is_buf)
                return throw_invalid(env, "writeFile: data must be a Buffer");
        NAPI_OK(env, napi_get_buffer_info(env, argv[2], &data, &len));
        op *o = op_new(env, OP_WS_WRITE);
        if (!o)
                return NULL;
        o->ws = ws;
        o->data = data;
        o->len = len;
        o->num = in_place ? NOOK_WS_WRITE_IN_PLACE : 0;
        if (get_string(env, argv[1], false, &o->text) < 0 ||
                napi_create_reference(env, argv[0], 1, &o->keep) != napi_ok ||
                napi_create_reference(env, argv[2], 1, &o->keep2) != napi_ok) {
                op_free(env, o);
                return NULL;
        }
        return op_queue(env, o, "nook.writeFile");
}

/* wsRead(ws, path, max) -> Promise<Buffer> */
static napi_value js_ws_read(napi_env env, napi_callback_info info) {
        napi_value argv[3];
        nook_ws *ws;
        double max = 0;
        if (!get_args(env, info, 3, argv) || !get_ws(env, argv[0], &ws))
                return NULL;
        NAPI_OK(env, napi_get_value_double(env, argv[2], &max));
        op *o = op_new(env, OP_WS_READ);
        if (!o)
                return NULL;
        o->ws = ws;
        o->num = max > 0 ? (uint64_t)max : 0;
        if (get_string(env, argv[1], false, &o->text) < 0 ||
                napi_create_reference(env, argv[0], 1, &o->keep) != napi_ok) {
                op_free(env, o);
                return NULL;
        }
        return op_queue(env, o, "nook.readFile");
}

/* wsMkdir(ws, path) -> Promise<void>: mkdir -p under the workspace rule. */
static napi_value js_ws_mkdir(napi_env env, napi_callback_info info) {
        napi_value argv[2];
        nook_ws *ws;
        if (!get_args(env, info, 2, argv) || !get_ws(env, argv[0], &ws))
                return NULL;
        op *o = op_new(env, OP_WS_MKDIR);
        if (!o)
                return NULL;
        o->ws = ws;
        if (get_string(env, argv[1], false, &o->text) < 0 ||
                napi_create_reference(env, argv[0], 1, &o->keep) != napi_ok) {
                op_free(env, o);
                return NULL;
        }
        return op_queue(env, o, "nook.mkdir");
}

/* ---- synchronous calls ----------------------------------------------------------------------- */

/* home(homeOrNull) -> the resolved state root (created, mode 0700). */
static napi_value js_home(napi_env env, napi_callback_info info) {
        napi_value argv[1], v;
        nook_error err;
        nook *n = NULL;
        char *home = NULL;
        if (!get_args(env, info, 1, argv) || get_string(env, argv[0], true, &home) < 0)
                return NULL;
        int r = nook_open(home, &n, &err);
        free(home);
        if (r < 0)
                return throw_nook(env, &err);
        v = make_string(env, nook_home(n));
        (void)nook_close(n);
        return v;
}

/* wsDir(home, name) -> host path of the workspace, whether or not the sandbox exists. */
static napi_value js_ws_dir(napi_env env, napi_callback_info info) {
        napi_value argv[2], v = NULL;
        nook_error err;
        nook *n = NULL;
        char *home = NULL, *name = NULL, *path = NULL;
        if (!get_args(env, info, 2, argv) || get_string(env, argv[0], true, &home) < 0)
                return NULL;
        if (get_string(env, argv[1], false, &name) < 0) {
                free(home);
                return NULL;
        }
        int r = nook_open(home, &n, &err);
        if (r >= 0)
                r = nook_ws_dir(n, name, &path, &err);
        if (r < 0)
                (void)throw_nook(env, &err);
        else
                v = make_string(env, path);
        nook_free(path);
        (void)nook_close(n);
        free(home);
        free(name);
        return v;
}

/* wsExists(ws, path) -> bool; never reads the file. */
static napi_value js_ws_exists(napi_env env, napi_callback_info info) {
        napi_value argv[2], v;
        nook_ws *ws;
        nook_error err;
        char *path = NULL;
        if (!get_args(env, info, 2, argv) || !get_ws(env, argv[0], &ws) ||
                get_string(env, argv[1], false, &path) < 0)
                return NULL;
        int r = nook_ws_exists(ws, path, &err);
        free(path);
        if (r < 0)
                return throw_nook(env, &err);
        NAPI_OK(env, napi_get_boolean(env, r > 0, &v));
        return v;
}

/* wsHostPath(ws, path) -> absolute host path under the same rule, or throws. */
static napi_value js_ws_host_path(napi_env env, napi_callback_info info) {
        napi_value argv[2], v;
        nook_ws *ws;
        nook_error err;
        char *path = NULL, *out = NULL;
        if (!get_args(env, info, 2, argv) || !get_ws(env, argv[0], &ws) ||
                get_string(env, argv[1], false, &path) < 0)
                return NULL;
        int r = nook_ws_host_path(ws, path, &out, &err);
        free(path);
        if (r < 0)
                return throw_nook(env, &err);
        v = make_string(env, out);
        nook_free(out);
        return v;
}

static napi_value js_ws_root(napi_env env, napi_callback_info info) {
        napi_value argv[1];
        nook_ws *ws;
        if (!get_args(env, info, 1, argv) || !get_ws(env, argv[0], &ws))
                return NULL;
        return make_string(env, nook_ws_root(ws));
}

/* parseSize("512m") -> bytes, as libnook reads sizes for the CLI. */
static napi_value js_parse_size(napi_env env, napi_callback_info info) {
        napi_value argv[1], v;
        nook_error err;
        uint64_t bytes = 0;
        char *s = NULL;
        if (!get_args(env, info, 1, argv) || get_string(env, argv[0], false, &s) < 0)
                return NULL;
        int r = nook_parse_size(s, &bytes, &err);
        free(s);
        if (r < 0)
                return throw_nook(env, &err);
        NAPI_OK(env, napi_create_double(env, (double)bytes, &v));
        return v;
}

static napi_value js_parse_duration(napi_env env, napi_callback_info info) {
        napi_value argv[1], v;
        nook_error err;
        uint64_t ms = 0;
        char *s = NULL;
        if (!get_args(env, info, 1, argv) || get_string(env, argv[0], false, &s) < 0)
                return NULL;
        int r = nook_parse_duration_ms(s, &ms, &err);
        free(s);
        if (r < 0)
                return throw_nook(env, &err);
        NAPI_OK(env, napi_create_double(env, (double)ms, &v));
        return v;
}

static napi_value js_version(napi_env env, napi_callback_info info) {
        return make_string(env, nook_version());
}

/* ---- module -------------------------------------------------------------------------------- */

static napi_value init(napi_env env, napi_value exports) {
        if (addon_env_init(env) < 0) {
                throw_napi_failure(env, "napi_set_instance_data");
                return NULL;
        }
        static const struct {
                const char *name;
                napi_callback cb;
        } fns[] = {
                { "version", js_version },
                { "setErrorClass", js_set_error_class },
                { "home", js_home },
                { "create", js_create },
                { "start", js_start },
                { "stop", js_stop },
                { "remove", js_remove },
                { "pause", js_pause },
                { "resume", js_resume },
                { "branch", js_branch },
                { "inspect", js_inspect },
                { "list", js_list },
                { "wsDir", js_ws_dir },
                { "wsOpen", js_ws_open },
                { "wsRoot", js_ws_root },
                { "wsWrite", js_ws_write },
                { "wsRead", js_ws_read },
                { "wsMkdir", js_ws_mkdir },
                { "wsExists", js_ws_exists },
                { "wsHostPath", js_ws_host_path },
                { "parseSize", js_parse_size },
                { "parseDuration", js_parse_duration },
                { "execStart", js_exec_start },
                { "execCancel", js_exec_cancel },
                { "execResume", js_exec_resume },
                { "execWrite", js_exec_write },
                { "execEndStdin", js_exec_end_stdin },
                { "execClosePipe", js_exec_close_pipe },
                { "execClose", js_exec_close },
                { "snapshotCreate", js_snapshot_create },
                { "diff", js_diff },
                { "merge", js_merge },
                { "snapshotList", js_snapshot_list },
                { "snapshotInspect", js_snapshot_inspect },
                { "egressLog", js_egress_log },
                { "snapshotRemove", js_snapshot_remove },
        };
        for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
                napi_value f;
                NAPI_OK(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &f));
                NAPI_OK(env, napi_set_named_property(env, exports, fns[i].name, f));
        }
        napi_value v;
        NAPI_OK(env, napi_create_uint32(env, NOOK_CREATE_REPLACE, &v));
        NAPI_OK(env, napi_set_named_property(env, exports, "CREATE_REPLACE", v));
        NAPI_OK(env, napi_create_uint32(env, NOOK_SNAPSHOT_WITH_WORKSPACE, &v));
        NAPI_OK(env, napi_set_named_property(env, exports, "SNAPSHOT_WITH_WORKSPACE", v));
        NAPI_OK(env, napi_create_uint32(env, NOOK_DIFF_PATCH, &v));
        NAPI_OK(env, napi_set_named_property(env, exports, "DIFF_PATCH", v));
        NAPI_OK(env, napi_create_uint32(env, NOOK_DIFF_ROOT, &v));
        NAPI_OK(env, napi_set_named_property(env, exports, "DIFF_ROOT", v));
        return exports;
}

NAPI_MODULE(nook_node, init)
