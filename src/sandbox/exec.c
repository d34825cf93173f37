/* SPDX-License-Identifier: Apache-2.0 */
/* exec: the client side.  The command's stdio are the caller's own descriptors, passed to the
 * supervisor and on to the sandbox (SCM_RIGHTS): output goes straight from the command to the
 * caller's pipe or terminal.  No database access on this path: exec only needs the socket. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/lifecycle.h"
#include "sandbox/state.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/str.h"

struct nook_exec {
        int fd;
        int tty_fd;
        int pid;
        bool done, detach, tty;
        /* remove_sandbox_when_done: the handle and the sandbox's name, which keep the
         * connection once the command ended (nook_exec_free) */
        nook *n;
        char *remove_name;
        nook_exec_result result;
        char start_error[256]; /* why the command could not start, or "" */
};

static int exec_wait_started(nook_exec *e, nook_error *err);
static void fill_result(nook_exec *e, json_t *m);

void nook_exec_opts_init(nook_exec_opts *o) {
        memset(o, 0, sizeof(*o));
        o->stdin_fd = o->stdout_fd = o->stderr_fd = -1;
}

/* A command's strings travel to the sandbox as JSON text, which must be UTF-8: jansson refuses
 * other bytes, and an argument dropped on the way would run a different command.  So they are
 * refused here, saying which.  what: "Argument 2 of the command", "The working directory". */
static int text_check(const char *s, const char *what, bool path_hint, nook_error *err) {
        size_t off = 0;
        if (str_is_utf8(s, &off))
                return 0;
        return nook_err_set(err, NOOK_E_INVALID,
                "%s is not UTF-8 text (byte 0x%02x at offset %zu): nook passes commands as UTF-8%s", what,
                (unsigned char)s[off], off,
                !path_hint
                        ? ""
                        : "; a file name in another encoding can be reached with a shell pattern ('ls caf*')");
}

static int add_text(json_t *a, const char *s, const char *what, nook_error *err) {
        int r = text_check(s, what, true, err);
        if (r < 0)
                return r;
        return json_array_append_new(a, json_string(s)) < 0 ? nook_err_oom(err) : 0;
}

static int add_env(json_t *a, const char *const *env, const char *what, nook_error *err) {
        for (size_t i = 0; env && env[i]; i++) {
                const char *eq = strchr(env[i], '=');
                /* never echo the value (nor an entry without '=', which may be one): it may be a
                 * secret; the name is the user's own, and says which entry is wrong */
                if (!eq)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid %s entry %zu: it has no '=' (must be NAME=value)", what, i);
                size_t nl = (size_t)(eq - env[i]);
                if (!env_name_is_valid(env[i], nl)) {
                        bool shown = nl <= 64;
                        for (size_t k = 0; shown && k < nl; k++)
                                shown = (unsigned char)env[i][k] >= 0x20 && (unsigned char)env[i][k] < 0x7f;
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid %s entry %zu: the name %s%.*s%s must match [A-Za-z_][A-Za-z0-9_]* (NAME=value)",
                                what, i, shown ? "'" : "", shown ? (int)nl : 0, env[i],
                                shown ? "'" : "(not shown: control characters or over 64 bytes)");
                }
                char which[320];
                snprintf(which, sizeof(which), "The value of %s entry %zu (%.*s)", what, i,
                        (int)(eq - env[i]), env[i]);
                /* the name is checked above; the value is never echoed (only its bad byte) */
                int r = text_check(eq + 1, which, false, err);
                if (r < 0)
                        return r;
                if (json_array_append_new(a, json_string(env[i])) < 0)
                        return nook_err_oom(err);
        }
        return 0;
}

/* report_started false: the caller waits for the end only (nook_exec_run), so no "started" is
 * sent, one wake-up of the caller less per exec (a detached or terminal exec always wants it). */
static json_t *exec_request(const nook_exec_opts *o, bool report_started, nook_error *err) {
        json_t *argv = json_array(), *env = json_array();
        if (!argv || !env) {
                json_decref(argv);
                json_decref(env);
                (void)nook_err_oom(err);
                return NULL;
        }
        int r = 0;
        if (o->shell) {
                json_array_append_new(argv, json_string("/bin/sh"));
                json_array_append_new(argv, json_string("-lc"));
                r = add_text(argv, o->shell, "The shell command", err);
        } else if (o->argv && o->argv[0] && o->argv[0][0]) {
                for (size_t i = 0; r >= 0 && o->argv[i]; i++) {
                        char what[64];
                        if (i == 0)
                                snprintf(what, sizeof(what), "The command's program name");
                        else
                                snprintf(what, sizeof(what), "Argument %zu of the command", i);
                        r = add_text(argv, o->argv[i], what, err);
                }
        } else if (o->argv && o->argv[0])
                r = nook_err_set(err, NOOK_E_INVALID,
                        "exec: the command's program name is empty (''): give the program to run");
        else
                r = nook_err_set(err, NOOK_E_INVALID, "exec: give a command (argv) or a shell string");
        if (r >= 0)
                r = add_env(env, o->env, "env", err);
        if (r >= 0)
                r = add_env(env, o->secret_env, "secret env", err);
        if (r >= 0 && o->cwd)
                r = text_check(o->cwd, "The working directory", true, err);
        if (r >= 0 && o->user)
                r = text_check(o->user, "The user", false, err);
        if (r >= 0 && o->cwd && o->cwd[0] != '/')
                r = nook_err_set(err, NOOK_E_INVALID,
                        "exec: the working directory '%s' must be an absolute path", o->cwd);
        if (r < 0) {
                json_decref(argv);
                json_decref(env);
                return NULL;
        }
        /* A detached command with nowhere to write gets the sandbox's output log. */
        bool log = o->detach && !o->tty && o->stdout_fd < 0 && o->stderr_fd < 0;
        json_t *req = json_pack("{s:s, s:o, s:o, s:s?, s:s?, s:I, s:b, s:b, s:i, s:i, s:b, s:b}", "op",
                "exec", "argv", argv, "env", env, "cwd", o->cwd, "user", o->user, "timeoutMs",
                (json_int_t)o->timeout_ms, "detach", o->detach, "tty", o->tty, "rows", (int)o->rows, "cols",
                (int)o->cols, "log", log, "stopSandbox", o->stop_sandbox_when_done);
        if (!req) /* its strings are checked above: only memory is left to fail */
                (void)nook_err_oom(err);
        if (req && !report_started && !o->detach && !o->tty)
                (void)json_object_set_new(req, "reportStarted", json_false());
        if (req && !o->detach && o->remove_sandbox_when_done)
                (void)json_object_set_new(req, "removeSandbox", json_true());
        return req;
}

/* Sends req (taken) with o's stdio (/dev/null for a missing one; none with a terminal) on fd. */
static int exec_send(int fd, json_t *req, const nook_exec_opts *o, const char *name, nook_error *err) {
        _cleanup_close_ int nul = -1;
        int fds[3] = { o->stdin_fd, o->stdout_fd, o->stderr_fd };
        for (int i = 0; i < 3 && !o->tty; i++) {
                if (fds[i] >= 0)
                        continue;
                if (nul < 0 && (nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0) {
                        json_decref(req);
                        return nook_err_errno(err, NOOK_E_IO, "Cannot open /dev/null");
                }
                fds[i] = nul;
        }
        int r = proto_send(fd, req, fds, o->tty ? 0 : 3);
        json_decref(req);
        if (r == -EMSGSIZE)
                return nook_err_set(err, NOOK_E_INVALID,
                        "The command for sandbox '%s' is too large: its arguments, environment and "
                        "working directory go to the sandbox in one message of at most about 200 KiB; "
                        "pass long input on stdin or in a file in the workspace",
                        name);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot send the command to sandbox '%s'", name);
        return 0;
}

/* The exec of the request sent on fd (taken). */
static int exec_wrap(
        nook *n, const char *name, const nook_exec_opts *o, int fd, nook_exec **ret, nook_error *err) {
        nook_exec *e = calloc(1, sizeof(*e));
        if (!e) {
                safe_close(fd);
                return nook_err_oom(err);
        }
        e->fd = fd;
        e->tty_fd = -1;
        e->detach = o->detach;
        e->tty = o->tty;
        if (!o->detach && o->remove_sandbox_when_done) {
                e->n = n;
                e->remove_name = strdup(name);
                if (!e->remove_name) {
                        nook_exec_free(e);
                        return nook_err_oom(err);
                }
        }
        if (o->tty) {
                /* the terminal's master arrives with "started": wait for it before returning */
                int r = exec_wait_started(e, err);
                if (r < 0) {
                        nook_exec_free(e);
                        return r;
                }
        }
        *ret = e;
        return 0;
}

static int exec_start(nook *n, const char *name, const nook_exec_opts *o, bool report_started,
        nook_exec **ret, nook_error *err) {
        _cleanup_close_ int fd = -1;
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        json_t *req = exec_request(o, report_started, err);
        if (!req)
                return err->code == NOOK_E_NOMEM ? -NOOK_E_NOMEM
                                                 : -NOOK_E_INVALID; /* what exec_request fails with */
        r = sb_connect(n, name, &fd, err);
        if (r < 0) {
                json_decref(req);
                return r;
        }
        r = exec_send(fd, req, o, name, err);
        if (r < 0)
                return r;
        return exec_wrap(n, name, o, TAKE_FD(fd), ret, err);
}

/* The request goes first, on a socket pair whose other end the supervisor gets at its spawn
 * (--client-fd): it serves it as soon as the sandbox is ready, before it says so, instead of
 * after this process heard "ready", recorded the sandbox and connected (docs/design/runtime.md,
 * Exec). */
int nook_sandbox_create_exec(nook *n, const char *name, const char *spec_json, unsigned flags,
        const nook_exec_opts *o, nook_exec **ret, nook_error *err) {
        if (o->detach)
                return nook_err_set(err, NOOK_E_INVALID,
                        "nook_sandbox_create_exec: a detached command is started with nook_exec_start after create");
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        json_t *req = exec_request(o, /* report_started= */ true, err);
        if (!req)
                return err->code == NOOK_E_NOMEM ? -NOOK_E_NOMEM : -NOOK_E_INVALID;
        _cleanup_close_pair_ int sp[2] = { -1, -1 };
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                json_decref(req);
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the connection to sandbox '%s'", name);
        }
        r = exec_send(sp[0], req, o, name, err);
        if (r >= 0)
                r = sb_create(n, name, spec_json, flags, TAKE_FD(sp[1]), err);
        if (r < 0)
                return r;
        return exec_wrap(n, name, o, TAKE_FD(sp[0]), ret, err);
}

int nook_exec_start(nook *n, const char *name, const nook_exec_opts *o, nook_exec **ret, nook_error *err) {
        return exec_start(n, name, o, /* report_started= */ true, ret, err);
}

int nook_exec_tty_fd(const nook_exec *e) {
        return e->tty_fd;
}

int nook_exec_pid(const nook_exec *e) {
        return e->pid;
}

int nook_exec_fd(const nook_exec *e) {
        return e->fd;
}

static void fill_result(nook_exec *e, json_t *m) {
        int st = (int)json_integer_value(json_object_get(m, "status"));
        const char *reason = json_string_value(json_object_get(m, "reason"));
        const char *why = json_string_value(json_object_get(m, "error"));
        (void)snprintf(e->start_error, sizeof(e->start_error), "%s", why ? why : "");
        e->result = (nook_exec_result){ 0 };
        if (WIFSIGNALED(st)) {
                e->result.exit_code = -1;
                e->result.signal = WTERMSIG(st);
        } else
                e->result.exit_code = WEXITSTATUS(st);
        (void)snprintf(e->result.reason, sizeof(e->result.reason), "%s", reason ? reason : "exited");
        e->done = true;
}

/* Reads one message from the supervisor and applies it.  Returns 0, or <0 on error. */
static int exec_read_one(nook_exec *e, nook_error *err) {
        json_t *m = NULL;
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;
        int r;
        do
                r = proto_recv(e->fd, &m, fds, &n_fds);
        while (r == -EINTR);
        if (r == 0)
                return nook_err_set(err, NOOK_E_STATE, "The sandbox stopped while the command ran");
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Lost the connection to the sandbox");
        const char *op = proto_op(m);
        if (streq(op, "started")) {
                e->pid = (int)json_integer_value(json_object_get(m, "pid"));
                /* only a terminal's master rides along, and only when one was asked for: a
                 * direct exec's "started" comes from its helper in the sandbox (runtime.md) */
                if (n_fds > 0 && e->tty && e->tty_fd < 0) {
                        e->tty_fd = fds[0];
                        fds[0] = -1;
                }
        } else if (streq(op, "exited"))
                fill_result(e, m);
        else if (streq(op, "error"))
                r = proto_error_from_msg(m, err);
        proto_close_fds(fds, n_fds);
        json_decref(m);
        return r < 0 ? r : 0;
}

static int exec_wait_started(nook_exec *e, nook_error *err) {
        while (!e->done && e->pid == 0) {
                int r = exec_read_one(e, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

const char *nook_exec_start_error(const nook_exec *e) {
        return e->start_error[0] ? e->start_error : NULL;
}

int nook_exec_wait_started(nook_exec *e, nook_error *err) {
        return exec_wait_started(e, err);
}

int nook_exec_wait(nook_exec *e, nook_exec_result *ret, nook_error *err) {
        while (!e->done) {
                int r = exec_read_one(e, err);
                if (r < 0)
                        return r;
                if (e->detach && e->pid)
                        break;
        }
        if (ret)
                *ret = e->result;
        return 0;
}

/* One message is waiting when poll() says so; SOCK_SEQPACKET keeps records whole, so a readable
 * socket always holds at least one complete message (or EOF/an error, which exec_read_one
 * reports).  Nothing here blocks: the caller's event loop calls again on the next wake-up. */
int nook_exec_process(nook_exec *e, nook_exec_result *ret, nook_error *err) {
        while (!e->done && !(e->detach && e->pid)) {
                struct pollfd p = { .fd = e->fd, .events = POLLIN };
                int k = poll(&p, 1, /* timeout= */ 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot poll the connection to the sandbox");
                if (k == 0)
                        return 0;
                int r = exec_read_one(e, err);
                if (r < 0)
                        return r;
        }
        if (ret)
                *ret = e->result;
        return 1;
}

static int send_simple(nook_exec *e, json_t *m, nook_error *err) {
        int r = m ? proto_send(e->fd, m, NULL, 0) : -ENOMEM;
        json_decref(m);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot reach the sandbox");
        return 0;
}

int nook_exec_cancel(nook_exec *e, nook_error *err) {
        if (e->done)
                return 0;
        return send_simple(e, json_pack("{s:s}", "op", "cancel"), err);
}

int nook_exec_signal(nook_exec *e, int sig, nook_error *err) {
        if (sig <= 0 || sig > 64)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid signal number %d", sig);
        if (e->done)
                return 0;
        return send_simple(e, json_pack("{s:s, s:i}", "op", "signal", "signal", sig), err);
}

nook_exec *nook_exec_free(nook_exec *e) {
        if (!e)
                return NULL;
        /* Closing the connection of a running, attached exec makes the supervisor kill it.  An
         * ended one with remove_sandbox_when_done: its supervisor is stopping and answers
         * "stopped" there, for nook_sandbox_remove. */
        if (e->remove_name && e->done)
                ctx_stop_conn_keep(e->n, e->remove_name, TAKE_FD(e->fd));
        safe_close(e->fd);
        safe_close(e->tty_fd);
        free(e->remove_name);
        free(e);
        return NULL;
}

int nook_exec_run(
        nook *n, const char *name, const nook_exec_opts *o, nook_exec_result *ret, nook_error *err) {
        nook_exec *e = NULL;
        int r = exec_start(n, name, o, /* report_started= */ false, &e, err);
        if (r < 0)
                return r;
        r = nook_exec_wait(e, ret, err);
        nook_exec_free(e);
        return r;
}
