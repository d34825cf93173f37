/* SPDX-License-Identifier: Apache-2.0 */
/* exec: a command in a sandbox, driven from the JS thread.
 *
 *   execStart(home, name, req, onEvent) -> handle
 *   onEvent(kind, value): "stdout"/"stderr" (Buffer; return false to pause that stream until
 *   execResume), "stdout-end"/"stderr-end", "stdin-drain" (a partial execWrite finished),
 *   "exit" ({exitCode, signal, reason, pending: [stdout, stderr bytes still in the pipes]}) or
 *   "error" (SandboxError), one of the two, once.
 *   "stdin-closed" (the command closed its stdin: what was pending is dropped),
 *   execResume(handle, 0|1), execClosePipe(handle, 0|1) (JS destroyed that stream),
 *   execWrite(handle, buffer) -> 1 when all was written now, 0 when the rest follows
 *   ("stdin-drain"), -1 when the command's stdin is closed (the data is dropped),
 *   execEndStdin(handle), execCancel(handle), execClose(handle): JS closes every exec once it is
 *   done with it (output drained); the GC closes a forgotten one.
 *
 * The addon makes the pipes (O_CLOEXEC; our ends O_NONBLOCK), hands the command's ends to
 * nook_exec_start, which passes them to the supervisor (SCM_RIGHTS), and closes its own copies:
 * the only writers left are in the sandbox, so we see EOF when the last of them exits.
 *
 * Threads: only nook_open + nook_exec_start (connect and send one message) run on the libuv
 * pool.  From then on the control socket (nook_exec_fd) and the pipes are watched (watch.c) and
 * every read, write and nook_exec_process happens on the JS thread, so a running command holds
 * no pool thread.  The pool thread touches only the request, child_fds, e, r and err, which the
 * JS thread leaves alone until exec_started runs; a cancel before that sets an atomic flag.
 *
 * Ordering: when the exit report arrives, whatever the pipes already hold is read and delivered
 * before "exit": everything the command wrote before it ended reaches JS first.  Later output
 * can only come from background processes still holding the pipes; JS decides how long to wait
 * for those (lib/box.js) and then calls execClose. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "nook.h"
#include "addon.h"
#include "watch.h"

#define READ_CHUNK ((size_t)64 * 1024)
#define READS_PER_WAKE 16 /* then yield to the loop: one chatty command cannot starve the rest */

enum { OUT, ERR };
static const char *const pipe_kind[2] = { "stdout", "stderr" };
static const char *const pipe_end_kind[2] = { "stdout-end", "stderr-end" };

typedef struct exec_ctx {
        napi_env env;
        napi_async_work work;
        napi_ref on_event;
        int refs; /* the async work and the JS external, both released on the JS thread */
        /* the request */
        char *home, *name, *shell, *cwd, *user;
        char **argv, **env_list, **secret_env;
        uint64_t timeout_ms;
        int child_fds[3]; /* stdin read end, stdout/stderr write ends: given away, then closed */
        atomic_bool cancel_requested;
        /* set by the pool thread, read on the JS thread after exec_started */
        nook_exec *e;
        int r;
        nook_error err;
        /* JS thread only */
        int out_fd[2], in_fd;
        watch *w_out[2], *w_in, *w_ctl;
        bool paused[2], start_done, reported, closed;
        bool hooked; /* exec_env_cleanup is registered */
        char *in_buf; /* stdin bytes the pipe did not take yet */
        size_t in_len, in_off;
        bool in_end;
} exec_ctx;

static void exec_ctx_unref(exec_ctx *c) {
        if (!c || --c->refs > 0)
                return;
        for (int i = 0; i < 3; i++)
                if (c->child_fds[i] >= 0)
                        (void)close(c->child_fds[i]);
        free(c->home);
        free(c->name);
        secure_free(c->shell);
        free(c->cwd);
        free(c->user);
        strv_free_secure(c->argv);
        strv_free_secure(c->env_list);
        strv_free_secure(c->secret_env);
        free(c->in_buf);
        free(c);
}

/* ---- events to JS ------------------------------------------------------------------------------ */

/* Calls onEvent(kind, value); returns what it returned (true unless it returned false).  An
 * exception thrown by it is reported as uncaught, as an event handler's would be. */
static bool emit(exec_ctx *c, const char *kind, napi_value value) {
        napi_env env = c->env;
        napi_value fn, k, undef, ret, args[2];
        bool keep = true, pending = false;
        if (!c->on_event || napi_get_reference_value(env, c->on_event, &fn) != napi_ok || !fn)
                return false;
        if (napi_create_string_utf8(env, kind, NAPI_AUTO_LENGTH, &k) != napi_ok ||
                napi_get_undefined(env, &undef) != napi_ok)
                return false;
        args[0] = k;
        args[1] = value ? value : undef;
        if (napi_call_function(env, undef, fn, 2, args, &ret) == napi_ok) {
                napi_valuetype t;
                if (napi_typeof(env, ret, &t) == napi_ok && t == napi_boolean)
                        (void)napi_get_value_bool(env, ret, &keep);
        }
        if (napi_is_exception_pending(env, &pending) == napi_ok && pending) {
                napi_value e;
                if (napi_get_and_clear_last_exception(env, &e) == napi_ok)
                        (void)napi_fatal_exception(env, e);
        }
        return keep;
}

static void emit_error(exec_ctx *c, const nook_error *err) {
        if (c->reported)
                return;
        c->reported = true;
        (void)emit(c, "error", make_error(c->env, err));
}

/* pending: what each pipe still held when the exit was reported (a paused stream's bytes). */
static void emit_exit(exec_ctx *c, const nook_exec_result *res, const int pending[2]) {
        napi_env env = c->env;
        napi_value o = NULL, v, a;
        if (c->reported)
                return;
        c->reported = true;
        if (napi_create_object(env, &o) != napi_ok ||
                napi_create_int32(env, res->exit_code, &v) != napi_ok ||
                napi_set_named_property(env, o, "exitCode", v) != napi_ok ||
                napi_create_int32(env, res->signal, &v) != napi_ok ||
                napi_set_named_property(env, o, "signal", v) != napi_ok ||
                napi_create_string_utf8(env, res->reason, strnlen(res->reason, sizeof(res->reason)), &v) !=
                        napi_ok ||
                napi_set_named_property(env, o, "reason", v) != napi_ok ||
                napi_create_array_with_length(env, 2, &a) != napi_ok)
                o = NULL;
        for (uint32_t i = 0; o && i < 2; i++)
                if (napi_create_int32(env, pending[i], &v) != napi_ok ||
                        napi_set_element(env, a, i, v) != napi_ok)
                        o = NULL;
        if (o && napi_set_named_property(env, o, "pending", a) != napi_ok)
                o = NULL;
        (void)emit(c, "exit", o);
}

/* ---- the pipes ------------------------------------------------------------------------------- */

static void close_out(exec_ctx *c, int which) {
        c->w_out[which] = watch_remove(c->w_out[which]);
        if (c->out_fd[which] >= 0)
                (void)close(c->out_fd[which]);
        c->out_fd[which] = -1;
}

static void close_in(exec_ctx *c) {
        c->w_in = watch_remove(c->w_in);
        if (c->in_fd >= 0)
                (void)close(c->in_fd);
        c->in_fd = -1;
        free(c->in_buf);
        c->in_buf = NULL;
        c->in_len = c->in_off = 0;
}

/* Reads what the pipe holds, up to READS_PER_WAKE chunks, and hands it to JS.  Returns true
 * when it stopped at that limit (more may be waiting), false when the pipe is empty for now,
 * ended, paused, or a read or allocation failed. */
static bool read_out(exec_ctx *c, int which) {
        char *buf = malloc(READ_CHUNK);
        if (!buf)
                return false;
        for (int i = 0; i < READS_PER_WAKE; i++) {
                if (c->closed || c->out_fd[which] < 0 || c->paused[which])
                        break;
                ssize_t n = read(c->out_fd[which], buf, READ_CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0) { /* EOF; a read error ends the stream the same way */
                        close_out(c, which);
                        (void)emit(c, pipe_end_kind[which], NULL);
                        break;
                }
                napi_value b;
                if (napi_create_buffer_copy(c->env, (size_t)n, buf, NULL, &b) != napi_ok)
                        break;
                if (!emit(c, pipe_kind[which], b))
                        c->paused[which] = true;
                if (i == READS_PER_WAKE - 1) {
                        free(buf);
                        return true;
                }
        }
        free(buf);
        return false;
}

static void on_out(exec_ctx *c, int which) {
        (void)read_out(c, which);
        if (!c->closed && c->out_fd[which] >= 0 && !c->paused[which])
                (void)watch_arm(c->w_out[which]);
}

static void on_stdout(napi_env env, void *userdata, uint32_t events) {
        on_out(userdata, OUT);
}

static void on_stderr(napi_env env, void *userdata, uint32_t events) {
        on_out(userdata, ERR);
}

/* Writes pending stdin bytes.  Returns 1 when all went, 0 when the pipe is full, -1 when the
 * command closed its end (EPIPE: what it did not read is dropped, as a shell pipe drops it). */
static int flush_in(exec_ctx *c) {
        while (c->in_off < c->in_len) {
                ssize_t n = write(c->in_fd, c->in_buf + c->in_off, c->in_len - c->in_off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n < 0)
                        return -1;
                c->in_off += (size_t)n;
        }
        free(c->in_buf);
        c->in_buf = NULL;
        c->in_len = c->in_off = 0;
        return 1;
}

static void on_stdin(napi_env env, void *userdata, uint32_t events) {
        exec_ctx *c = userdata;
        int r = flush_in(c);
        if (r == 0) {
                (void)watch_arm(c->w_in);
                return;
        }
        if (r < 0 || c->in_end)
                close_in(c);
        else
                c->w_in = watch_remove(c->w_in);
        (void)emit(c, r < 0 ? "stdin-closed" : "stdin-drain", NULL);
}

/* ---- the control socket ------------------------------------------------------------------------ */

static void on_control(napi_env env, void *userdata, uint32_t events) {
        exec_ctx *c = userdata;
        nook_exec_result res;
        nook_error err = { 0 };
        int r = nook_exec_process(c->e, &res, &err);
        if (r == 0) {
                (void)watch_arm(c->w_ctl);
                return;
        }
        c->w_ctl = watch_remove(c->w_ctl);
        if (r < 0) {
                emit_error(c, &err);
                return;
        }
        /* Everything the command wrote before it ended is in the pipes now: deliver it first.
         * A paused stream keeps its bytes in the pipe; JS is told how many, and waits for them
         * before it applies its quiet rule to what background processes may still write. */
        int pending[2] = { 0, 0 };
        for (int which = OUT; which <= ERR; which++) {
                while (read_out(c, which))
                        ;
                if (!c->closed && c->out_fd[which] >= 0 &&
                        ioctl(c->out_fd[which], FIONREAD, &pending[which]) < 0)
                        pending[which] = 0;
        }
        if (!c->closed)
                emit_exit(c, &res, pending);
}

/* ---- start ---------------------------------------------------------------------------------- */

static void exec_execute(napi_env env, void *data) {
        exec_ctx *c = data;
        nook *n = NULL;
        nook_exec_opts o;

        /* Cancelled before it started: it never starts (nothing to kill, nothing to race). */
        if (atomic_load(&c->cancel_requested))
                return;
        nook_exec_opts_init(&o);
        o.argv = (const char *const *)c->argv;
        o.shell = c->shell;
        o.env = (const char *const *)c->env_list;
        o.secret_env = (const char *const *)c->secret_env;
        o.cwd = c->cwd;
        o.user = c->user;
        o.stdin_fd = c->child_fds[0];
        o.stdout_fd = c->child_fds[1];
        o.stderr_fd = c->child_fds[2];
        o.timeout_ms = c->timeout_ms;
        c->r = nook_open(c->home, &n, &c->err);
        if (c->r >= 0)
                c->r = nook_exec_start(n, c->name, &o, &c->e, &c->err);
        (void)nook_close(n);
}

/* On the JS thread once the start attempt is over. */
static void exec_started(napi_env env, napi_status status, void *data) {
        exec_ctx *c = data;
        /* Our copies of the command's ends go now, started or not: EOF must come when the
         * command's own copies close. */
        for (int i = 0; i < 3; i++)
                if (c->child_fds[i] >= 0) {
                        (void)close(c->child_fds[i]);
                        c->child_fds[i] = -1;
                }
        c->start_done = true;
        (void)napi_delete_async_work(env, c->work);
        c->work = NULL;
        if (status != napi_ok && c->r >= 0) {
                c->err = (nook_error){ .code = NOOK_E_INTERNAL };
                (void)snprintf(c->err.msg, sizeof(c->err.msg), "The command was cancelled by Node");
                c->r = -NOOK_E_INTERNAL;
        }
        if (c->closed) {
                /* JS gave it up meanwhile: closing the connection kills the command */
                c->e = nook_exec_free(c->e);
        } else if (c->r < 0) {
                emit_error(c, &c->err);
        } else if (!c->e) { /* cancelled before it started */
                nook_exec_result res = { .exit_code = -1 };
                (void)snprintf(res.reason, sizeof(res.reason), "cancelled");
                emit_exit(c, &res, (const int[2]){ 0, 0 });
        } else {
                nook_error ignore;
                if (atomic_load(&c->cancel_requested))
                        (void)nook_exec_cancel(c->e, &ignore);
                int r = watch_add(env, nook_exec_fd(c->e), EPOLLIN, on_control, c, &c->w_ctl);
                if (r < 0) {
                        nook_error err = { .code = NOOK_E_IO, .sys_errno = -r };
                        (void)snprintf(err.msg, sizeof(err.msg), "Cannot watch the command's connection: %s",
                                strerror(-r));
                        emit_error(c, &err);
                }
        }
        exec_ctx_unref(c);
}

static void exec_env_cleanup(void *data);

/* Stops everything: the watches, our pipe ends, the connection (a running command is killed).
 * JS is not called from here. */
static void exec_close(exec_ctx *c) {
        if (c->closed)
                return;
        c->closed = true;
        if (c->hooked)
                (void)napi_remove_env_cleanup_hook(c->env, exec_env_cleanup, c);
        c->hooked = false;
        c->w_ctl = watch_remove(c->w_ctl);
        close_out(c, OUT);
        close_out(c, ERR);
        close_in(c);
        if (c->start_done)
                c->e = nook_exec_free(c->e);
        if (c->on_event)
                (void)napi_delete_reference(c->env, c->on_event);
        c->on_event = NULL;
        atomic_store(&c->cancel_requested, true);
}

static void exec_finalize(napi_env env, void *data, void *hint) {
        exec_close(data);
        exec_ctx_unref(data);
}

/* The environment ends (a worker terminated, the process exiting) with the command running: it
 * is killed and its watches go now, before the watch loop's own cleanup hook frees the loop
 * (hooks run last registered first, and this one is registered after the loop's).  The external's
 * finalizer, which the environment may still run later, then finds it closed. */
static void exec_env_cleanup(void *data) {
        exec_ctx *c = data;
        c->hooked = false; /* being run: nothing to remove */
        exec_close(c);
}

/* ---- arguments -------------------------------------------------------------------------------- */

static int get_opt_string(napi_env env, napi_value obj, const char *key, char **ret) {
        napi_value v;
        if (napi_get_named_property(env, obj, key, &v) != napi_ok)
                return -1;
        return get_string(env, v, true, ret);
}

static int get_opt_strv(napi_env env, napi_value obj, const char *key, char ***ret) {
        napi_value v;
        if (napi_get_named_property(env, obj, key, &v) != napi_ok)
                return -1;
        return get_strv(env, v, ret);
}

/* Returns 1 when the command wants a stdin pipe, 0 when not, -1 with an exception pending. */
static int exec_ctx_fill(napi_env env, exec_ctx *c, napi_value *argv) {
        napi_value v;
        napi_valuetype t;
        double d = 0;
        bool want_stdin = false;
        if (get_string(env, argv[0], true, &c->home) < 0 || get_string(env, argv[1], false, &c->name) < 0 ||
                get_opt_strv(env, argv[2], "argv", &c->argv) < 0 ||
                get_opt_string(env, argv[2], "shell", &c->shell) < 0 ||
                get_opt_strv(env, argv[2], "env", &c->env_list) < 0 ||
                get_opt_strv(env, argv[2], "secretEnv", &c->secret_env) < 0 ||
                get_opt_string(env, argv[2], "cwd", &c->cwd) < 0 ||
                get_opt_string(env, argv[2], "user", &c->user) < 0)
                return -1;
        if (napi_get_named_property(env, argv[2], "timeoutMs", &v) != napi_ok ||
                napi_typeof(env, v, &t) != napi_ok)
                return -1;
        if (t == napi_number && napi_get_value_double(env, v, &d) == napi_ok && d > 0)
                c->timeout_ms = (uint64_t)d;
        if (napi_get_named_property(env, argv[2], "stdin", &v) != napi_ok ||
                napi_get_value_bool(env, v, &want_stdin) != napi_ok)
                want_stdin = false;
        if (napi_typeof(env, argv[3], &t) != napi_ok)
                return -1;
        if (t != napi_function) {
                (void)throw_invalid(env, "execStart: onEvent must be a function");
                return -1;
        }
        return want_stdin ? 1 : 0;
}

static exec_ctx *exec_ctx_new(napi_env env) {
        exec_ctx *c = calloc(1, sizeof(*c));
        if (!c) {
                (void)throw_invalid(env, "Out of memory");
                return NULL;
        }
        c->env = env;
        c->refs = 1;
        c->child_fds[0] = c->child_fds[1] = c->child_fds[2] = -1;
        c->out_fd[OUT] = c->out_fd[ERR] = c->in_fd = -1;
        atomic_init(&c->cancel_requested, false);
        return c;
}

/* The three pipes: the command gets child_fds, we keep the other ends, non-blocking. */
static int make_pipes(exec_ctx *c, bool want_stdin, nook_error *err) {
        int p[2];
        for (int i = want_stdin ? 0 : 1; i < 3; i++) {
                if (pipe2(p, O_CLOEXEC) < 0) {
                        err->sys_errno = errno;
                        (void)snprintf(
                                err->msg, sizeof(err->msg), "Cannot create a pipe: %s", strerror(errno));
                        return -1;
                }
                int ours = i == 0 ? p[1] : p[0];
                c->child_fds[i] = i == 0 ? p[0] : p[1];
                if (i == 0)
                        c->in_fd = ours;
                else
                        c->out_fd[i - 1] = ours;
                if (fcntl(ours, F_SETFL, O_NONBLOCK) < 0) {
                        err->sys_errno = errno;
                        (void)snprintf(err->msg, sizeof(err->msg), "Cannot make a pipe non-blocking: %s",
                                strerror(errno));
                        return -1;
                }
        }
        return 0;
}

static int watch_pipes(exec_ctx *c, nook_error *err) {
        int r = watch_add(c->env, c->out_fd[OUT], EPOLLIN, on_stdout, c, &c->w_out[OUT]);
        if (r >= 0)
                r = watch_add(c->env, c->out_fd[ERR], EPOLLIN, on_stderr, c, &c->w_out[ERR]);
        if (r < 0) {
                err->sys_errno = -r;
                (void)snprintf(
                        err->msg, sizeof(err->msg), "Cannot watch the command's pipes: %s", strerror(-r));
        }
        return r;
}

napi_value js_exec_start(napi_env env, napi_callback_info info) {
        napi_value argv[4], handle, name;
        nook_error err = { .code = NOOK_E_IO };
        if (!get_args(env, info, 4, argv))
                return NULL;
        exec_ctx *c = exec_ctx_new(env);
        if (!c)
                return NULL;
        int want_stdin = exec_ctx_fill(env, c, argv);
        if (want_stdin < 0) {
                exec_ctx_unref(c);
                return NULL;
        }
        if (make_pipes(c, want_stdin, &err) < 0 || watch_pipes(c, &err) < 0) {
                exec_close(c);
                exec_ctx_unref(c);
                return throw_nook(env, &err);
        }
        /* after watch_pipes: the watch loop, and its cleanup hook, exist by now */
        c->hooked = napi_add_env_cleanup_hook(env, exec_env_cleanup, c) == napi_ok;
        if (napi_create_reference(env, argv[3], 1, &c->on_event) != napi_ok ||
                napi_create_external(env, c, exec_finalize, NULL, &handle) != napi_ok) {
                throw_napi_failure(env, "execStart");
                exec_close(c);
                exec_ctx_unref(c);
                return NULL;
        }
        /* from here the external holds the first reference; the async work takes a second */
        if (!handle_tag(env, handle, &addon_tag_exec)) {
                exec_close(c);
                return NULL;
        }
        if (napi_create_string_utf8(env, "nook.exec", NAPI_AUTO_LENGTH, &name) != napi_ok ||
                napi_create_async_work(env, NULL, name, exec_execute, exec_started, c, &c->work) !=
                        napi_ok) {
                throw_napi_failure(env, "napi_create_async_work");
                exec_close(c);
                return NULL;
        }
        if (napi_queue_async_work(env, c->work) != napi_ok) {
                throw_napi_failure(env, "napi_queue_async_work");
                (void)napi_delete_async_work(env, c->work);
                exec_close(c);
                return NULL;
        }
        c->refs++;
        return handle;
}

/* ---- calls on a running exec ------------------------------------------------------------------ */

static exec_ctx *get_ctx(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
        void *p = NULL;
        if (!get_args(env, info, want, argv))
                return NULL;
        if (!handle_get(env, argv[0], &addon_tag_exec, &p) || !p) {
                (void)throw_invalid(env, "Expected an exec handle");
                return NULL;
        }
        return p;
}

/* execCancel(handle): kills the command's process tree (now, or as soon as it has started). */
napi_value js_exec_cancel(napi_env env, napi_callback_info info) {
        napi_value argv[1];
        nook_error err = { 0 };
        exec_ctx *c = get_ctx(env, info, 1, argv);
        if (!c)
                return NULL;
        if (c->closed || c->reported)
                return make_undefined(env);
        if (!c->start_done) {
                atomic_store(&c->cancel_requested, true);
                return make_undefined(env);
        }
        if (c->e && nook_exec_cancel(c->e, &err) < 0)
                return throw_nook(env, &err);
        return make_undefined(env);
}

/* (handle, 0 | 1) of execResume and execClosePipe: the exec and which of stdout (0) or stderr
 * (1); NULL with a JS exception pending otherwise. */
static exec_ctx *get_ctx_stream(napi_env env, napi_callback_info info, const char *fn, int32_t *ret_which) {
        napi_value argv[2];
        exec_ctx *c = get_ctx(env, info, 2, argv);
        if (!c)
                return NULL;
        NAPI_OK(env, napi_get_value_int32(env, argv[1], ret_which));
        if (*ret_which != OUT && *ret_which != ERR) {
                char msg[96];
                (void)snprintf(msg, sizeof(msg), "%s: the stream must be 0 (stdout) or 1 (stderr)", fn);
                (void)throw_invalid(env, msg);
                return NULL;
        }
        return c;
}

/* execResume(handle, 0 | 1): JS wants more of stdout (0) or stderr (1). */
napi_value js_exec_resume(napi_env env, napi_callback_info info) {
        int32_t which = 0;
        exec_ctx *c = get_ctx_stream(env, info, "execResume", &which);
        if (!c)
                return NULL;
        if (c->paused[which] && !c->closed && c->out_fd[which] >= 0) {
                c->paused[which] = false;
                (void)watch_arm(c->w_out[which]);
        }
        return make_undefined(env);
}

/* execWrite(handle, buffer) -> 1 when the pipe took it all now; 0: the rest is kept and
 * "stdin-drain" follows once written; -1: the command closed its stdin (EPIPE) or it was ended,
 * and the data is dropped: the writer stops there (an endless source must not spin). */
napi_value js_exec_write(napi_env env, napi_callback_info info) {
        napi_value argv[2], v;
        void *data = NULL;
        size_t len = 0;
        bool is_buf = false;
        exec_ctx *c = get_ctx(env, info, 2, argv);
        if (!c)
                return NULL;
        NAPI_OK(env, napi_is_buffer(env, argv[1], &is_buf));
        if (!is_buf)
                return throw_invalid(env, "execWrite: data must be a Buffer");
        NAPI_OK(env, napi_get_buffer_info(env, argv[1], &data, &len));
        int32_t done = c->in_fd >= 0 && !c->in_end ? 1 : -1;
        if (done > 0 && len > 0) {
                char *buf = realloc(c->in_buf, c->in_len + len);
                if (!buf)
                        return throw_invalid(env, "Out of memory");
                memcpy(buf + c->in_len, data, len);
                c->in_buf = buf;
                c->in_len += len;
                int r = flush_in(c);
                if (r < 0) {
                        close_in(c);
                        done = -1;
                } else if (r == 0) {
                        done = 0;
                        if (!c->w_in && watch_add(env, c->in_fd, EPOLLOUT, on_stdin, c, &c->w_in) < 0) {
                                close_in(c); /* cannot wait for room: drop it, as on EPIPE */
                                done = -1;
                        }
                }
        }
        NAPI_OK(env, napi_create_int32(env, done, &v));
        return v;
}

/* execEndStdin(handle): EOF on the command's stdin once what is pending has been written. */
napi_value js_exec_end_stdin(napi_env env, napi_callback_info info) {
        napi_value argv[1];
        exec_ctx *c = get_ctx(env, info, 1, argv);
        if (!c)
                return NULL;
        c->in_end = true;
        if (c->in_off >= c->in_len)
                close_in(c);
        return make_undefined(env);
}

/* execClosePipe(handle, 0 | 1): JS destroyed stdout (0) or stderr (1); the command's next write
 * to it fails (EPIPE / SIGPIPE), as with any pipe whose reader went away. */
napi_value js_exec_close_pipe(napi_env env, napi_callback_info info) {
        int32_t which = 0;
        exec_ctx *c = get_ctx_stream(env, info, "execClosePipe", &which);
        if (!c)
                return NULL;
        close_out(c, which);
        return make_undefined(env);
}

/* execClose(handle): stops watching and closes everything; a running command is killed. */
napi_value js_exec_close(napi_env env, napi_callback_info info) {
        napi_value argv[1];
        exec_ctx *c = get_ctx(env, info, 1, argv);
        if (!c)
                return NULL;
        exec_close(c);
        return make_undefined(env);
}
