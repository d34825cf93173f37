/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "isolate/userns.h"
#include "supervisor/egress.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

#define EGRESS_REPLY_MS 15000
#define EGRESS_MSG_MAX ((size_t)200 * 1024) /* one datagram: below the default unix socket buffer */
#define EGRESS_REPLY_MAX ((size_t)64 * 1024)
#define EGRESS_FDS_MAX 8 /* what one message carries (util/fd.c) */
#define NOBODY 65534

/* A secret whose value this start does not have (a sticky sandbox started again: values are
 * never stored) goes with "value": null: the gateway never substitutes it and blocks its
 * placeholder wherever it is sent, with a 403 and an audit reason saying to create the sandbox
 * again with the value. */
static json_t *secret_entry(json_t *x, json_t *vals) {
        json_t *s = json_deep_copy(x);
        json_t *v = json_object_get(vals, json_string_value(json_object_get(x, "name")));
        if (!s)
                return NULL;
        json_object_set_new(s, "value", json_is_string(v) ? json_string(json_string_value(v)) : json_null());
        return s;
}

/* The gateway's config message: contract message 1.  Values join the stored secret entries
 * here, in memory only. */
static json_t *config_msg(const sup_config *c, const char *values, nook_error *err) {
        json_t *vals = values ? json_loads(values, 0, NULL) : NULL;
        json_t *secrets = json_array(), *x;
        size_t i;
        if (values && !json_is_object(vals)) {
                json_decref(vals);
                json_decref(secrets);
                (void)nook_err_set(
                        err, NOOK_E_INVALID, "The secrets handed to the supervisor are not a JSON object");
                return NULL;
        }
        json_array_foreach(json_object_get(c->egress, "secrets"), i, x)
                json_array_append_new(secrets, secret_entry(x, vals));
        json_decref(vals);
        json_t *m = json_pack("{s:s, s:s, s:o, s:O}", "sandbox", c->name, "mode",
                c->network ? c->network : "off", "secrets", secrets, "allowHttp",
                json_object_get(c->egress, "allowHttp"));
        json_t *ca = json_object_get(c->egress, "extraCaPem");
        if (m && json_is_string(ca))
                json_object_set(m, "extraCaPem", ca);
        if (!m)
                (void)nook_err_oom(err);
        return m;
}

/* In the forked child: becomes nook-egress.  Only async-signal-safe calls and exec. */
_noreturn_ static void exec_gateway(const char *program, int sock, bool rootful) {
        sigset_t none;
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* our signalfd's blocked signals and ignored SIGPIPE would outlive the exec */
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        (void)signal(SIGPIPE, SIG_DFL);
        if (fd_move_to(sock, 3) < 0)
                _exit(127);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul >= 0)
                (void)dup2(nul, 0);
        (void)fd_close_all_except(4, NULL, 0);
        /* Rootful, the gateway needs no privilege at all: it holds the sockets it is given and
         * connects out.  Its pdeath signal survives only if set again after the id change. */
        if (rootful && (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
                _exit(126);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        char *argv[] = { (char *)"nook-egress", NULL };
        char *envp[] = { (char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        execve(program, argv, envp);
        _exit(127);
}

static int send_msg(int sock, json_t *m, const int *fds, size_t n_fds, nook_error *err) {
        char *text = json_dumps(m, JSON_COMPACT);
        if (!text)
                return nook_err_oom(err);
        size_t len = strlen(text);
        int r = len > EGRESS_MSG_MAX ? -EMSGSIZE : fd_send_with_fds(sock, text, len, fds, n_fds);
        explicit_bzero(text, len);
        free(text);
        if (r == -EMSGSIZE)
                return nook_err_set(err, NOOK_E_INVALID,
                        "The egress gateway's config is larger than %zu bytes (fewer or shorter secrets, rules or CA)",
                        EGRESS_MSG_MAX);
        if (r < 0)
                return nook_err_errnum(
                        err, NOOK_E_INTERNAL, -r, "Cannot talk to the egress gateway (it died?)");
        return 0;
}

/* One reply within timeout_ms; {"error": "..."} becomes the error.  An fd that came with it goes
 * to *ret_fd (NULL: closed). */
static int recv_reply(int sock, int timeout_ms, json_t **ret, int *ret_fd, nook_error *err) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        int k = poll(&p, 1, timeout_ms);
        if (k == 0)
                return nook_err_set(err, NOOK_E_TIMEOUT, "The egress gateway did not answer within %d s",
                        timeout_ms / 1000);
        _cleanup_free_ char *buf = malloc(EGRESS_REPLY_MAX + 1);
        if (!buf)
                return nook_err_oom(err);
        int fds[1];
        size_t n_fds = 0;
        ssize_t n = fd_recv_with_fds(sock, buf, EGRESS_REPLY_MAX, fds, 1, &n_fds);
        _cleanup_close_ int fd = n_fds ? fds[0] : -1;
        if (n <= 0)
                return nook_err_set(err, NOOK_E_INTERNAL,
                        "The egress gateway exited during setup; see 'nook logs --system NAME'");
        buf[n] = 0;
        json_t *m = json_loads(buf, 0, NULL);
        if (!json_is_object(m)) {
                json_decref(m);
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "The egress gateway sent a message that is not a JSON object");
        }
        const char *e = json_string_value(json_object_get(m, "error"));
        if (e) {
                (void)nook_err_set(err, NOOK_E_INVALID, "egress gateway: %.400s", e);
                json_decref(m);
                return -NOOK_E_INVALID;
        }
        *ret = m;
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 0;
}

static int append_ca(const sup_config *c, const char *pem, nook_error *err) {
        const char *path = json_string_value(json_object_get(c->egress, "caBundle"));
        if (!path)
                return nook_err_set(err, NOOK_E_INVALID, "config: egress.caBundle is missing");
        if (!startswith(pem, "-----BEGIN CERTIFICATE-----") || strlen(pem) > 16384)
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "The egress gateway's CA is not one PEM certificate");
        _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the sandbox's CA bundle '%s'", path);
        size_t len = strlen(pem);
        int r = fd_write_all(fd, pem, len);
        if (r >= 0 && (len == 0 || pem[len - 1] != '\n'))
                r = fd_write_all(fd, "\n", 1);
        return r < 0 ? nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write the sandbox's CA bundle '%s'", path)
                     : 0;
}

static int spawn_gateway(sup_egress *e, const char *program, nook_error *err) {
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the egress gateway's socket");
        bool rootful = iso_rootful();
        pid_t pid = fork();
        if (pid < 0) {
                safe_close(sp[0]);
                safe_close(sp[1]);
                return nook_err_errno(err, NOOK_E_IO, "Cannot fork the egress gateway");
        }
        if (pid == 0)
                exec_gateway(program, sp[1], rootful);
        /* its exec and its loading (OpenSSL, nghttp2) beside our setup of the init, not after it;
         * it takes our whole mask back once it has its config, which we send after this */
        proc_start_off_our_cpu(pid, NULL);
        safe_close(sp[1]);
        e->pid = pid;
        e->sock = sp[0];
        e->killed = e->in_cgroup = false;
        log_debug("egress gateway '%s' started, pid %d", program, (int)pid);
        return 0;
}

/* A gateway with its message 1: the config (values included) and the audit log, and for a
 * successor the first gateway's CA. */
static int spawn_configured(sup_egress *e, nook_error *err) {
        const char *program = json_string_value(json_object_get(e->cfg->egress, "program"));
        if (!program || program[0] != '/')
                return nook_err_set(err, NOOK_E_INVALID, "config: egress.program must be an absolute path");
        _cleanup_free_ char *logp = strprintf("%s/egress.log", e->state_dir);
        if (!logp)
                return nook_err_oom(err);
        _cleanup_close_ int logfd = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (logfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the egress audit log '%s'", logp);
        json_t *m = config_msg(e->cfg, e->values, err);
        if (!m)
                return -NOOK_E_INVALID;
        int fds[2] = { logfd, e->ca_seed };
        int r = spawn_gateway(e, program, err);
        if (r >= 0)
                r = send_msg(e->sock, m, fds, e->ca_seed >= 0 ? 2 : 1, err);
        json_decref(m);
        return r;
}

int sup_egress_start(
        sup_egress *e, const sup_config *c, const char *state_dir, const char *values, nook_error *err) {
        if (!c->egress)
                return 0;
        e->cfg = c;
        e->state_dir = state_dir;
        e->values = values;
        int r = spawn_configured(e, err);
        return r < 0 ? nook_err_wrap(err, "starting the egress gateway") : 0;
}

int sup_egress_attach(sup_egress *e, iso_cgroup *cg, nook_error *err) {
        e->cg = cg;
        if (!cg || e->pid <= 0)
                return 0;
        int r = iso_cgroup_attach(cg, e->pid, err);
        if (r < 0)
                return nook_err_wrap(err, "moving the egress gateway into the sandbox's cgroup");
        e->in_cgroup = true;
        e->oom_kills = iso_cgroup_oom_kills(cg);
        return 0;
}

/* Message 2.  The first gateway's CA is appended to the bundle libnook already made in the
 * writable layer (the overlay is mounted by now; the file exists in the upper layer, so this
 * changes only the data of the inode the overlay already points at: no name appears or goes
 * under it), and kept with its memfd for a successor; a successor's must be the same. */
static int take_ca(sup_egress *e, json_t *reply, int seed, nook_error *err) {
        const char *pem = json_string_value(json_object_get(reply, "caCertPem"));
        if (!pem)
                return nook_err_set(err, NOOK_E_INTERNAL, "The egress gateway sent no CA certificate");
        if (e->ca_pem && !streq(pem, e->ca_pem))
                return nook_err_set(err, NOOK_E_INTERNAL,
                        "The restarted egress gateway's CA is not the one the sandbox trusts");
        if (e->ca_pem)
                return 0;
        if (seed < 0)
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "The egress gateway sent its CA without its memfd");
        int r = append_ca(e->cfg, pem, err);
        if (r < 0)
                return r;
        e->ca_pem = strdup(pem);
        if (!e->ca_pem)
                return nook_err_oom(err);
        e->ca_seed = seed;
        return 0;
}

/* Message 3: the listeners, and how the gateway gets into the sandbox's cgroup.  On cgroup v1 it
 * joins itself through our `tasks` files (as init does, isolate/cgroup.h: no global lock, no RCU
 * grace period in create's path); where they cannot be opened (v2; a delegated v1 folder that
 * grants only cgroup.procs) we move it by pid, unless sup_egress_attach did already. */
static int send_listen(sup_egress *e, nook_error *err) {
        _cleanup_(iso_cgroup_join_done) iso_cgroup_join j = ISO_CGROUP_JOIN_INIT;
        int fds[EGRESS_FDS_MAX] = { e->listeners[0], e->listeners[1] };
        size_t n = 2;
        int r;
        if (e->cg && !e->in_cgroup) {
                nook_error ignore = { 0 };
                if (iso_cgroup_join_open(e->cg, &j, &ignore) < 0 || j.n > EGRESS_FDS_MAX - 2)
                        iso_cgroup_join_done(&j);
                if (j.n == 0 && (r = sup_egress_attach(e, e->cg, err)) < 0)
                        return r;
                for (size_t i = 0; i < j.n; i++)
                        fds[n++] = j.fds[i];
                e->in_cgroup = true;
                e->oom_kills = iso_cgroup_oom_kills(e->cg);
        }
        json_t *m = json_pack("{s:[i,i]}", "listen", 80, 443);
        if (!m)
                return nook_err_oom(err);
        r = send_msg(e->sock, m, fds, n, err);
        json_decref(m);
        return r;
}

static int check_ready(json_t *reply, nook_error *err) {
        return json_is_true(json_object_get(reply, "ready"))
                ? 0
                : nook_err_set(err, NOOK_E_INTERNAL, "The egress gateway did not report ready");
}

int sup_egress_listen(sup_egress *e, int fds[2], iso_cgroup *cg, nook_error *err) {
        e->listeners[0] = TAKE_FD(fds[0]);
        e->listeners[1] = TAKE_FD(fds[1]);
        e->cg = cg;
        json_t *reply = NULL;
        int seed = -1;
        int r = recv_reply(e->sock, EGRESS_REPLY_MS, &reply, &seed, err);
        if (r >= 0)
                r = take_ca(e, reply, seed, err);
        if (r < 0)
                safe_close(seed);
        json_decref(reply);
        reply = NULL;
        if (r >= 0)
                r = send_listen(e, err);
        if (r >= 0)
                r = recv_reply(e->sock, EGRESS_REPLY_MS, &reply, NULL, err);
        if (r >= 0)
                r = check_ready(reply, err);
        json_decref(reply);
        if (r < 0)
                return nook_err_wrap(err, "starting the egress gateway");
        e->state = SUP_EGRESS_RUNNING;
        log_debug("egress gateway ready");
        return 0;
}

/* ---- restarts -------------------------------------------------------------------------------- */

static const char *const state_names[_SUP_EGRESS_STATE_MAX] = {
        [SUP_EGRESS_NONE] = "none",
        [SUP_EGRESS_RUNNING] = "running",
        [SUP_EGRESS_RESTARTING] = "restarting",
        [SUP_EGRESS_FAILED] = "failed",
};

const char *sup_egress_state_to_string(sup_egress_state s) {
        return s >= 0 && s < _SUP_EGRESS_STATE_MAX ? state_names[s] : NULL;
}

/* Ends a gateway that does not start right; why is its last end (its reap keeps it). */
static void gateway_kill(sup_egress *e, const char *why) {
        (void)snprintf(e->last_exit, sizeof(e->last_exit), "%.150s", why);
        e->killed = true;
        e->due_ms = UINT64_MAX; /* its reap schedules what comes next */
        e->sock = safe_close(e->sock);
        if (e->pid > 0)
                (void)kill(e->pid, SIGKILL);
}

static unsigned restarts_in_window(const sup_egress *e, uint64_t now) {
        unsigned n = 0;
        for (size_t i = 0; i < ELEMENTSOF(e->recent); i++)
                if (e->recent[i] && now - e->recent[i] < SUP_EGRESS_RESTART_WINDOW_MS)
                        n++;
        return n;
}

/* Too many restarts: the guest's HTTP and HTTPS are refused from now on (nothing listens behind
 * the redirect), and the sandbox says so. */
static void give_up(sup_egress *e, unsigned n) {
        e->state = SUP_EGRESS_FAILED;
        e->due_ms = UINT64_MAX;
        e->listeners[0] = safe_close(e->listeners[0]);
        e->listeners[1] = safe_close(e->listeners[1]);
        e->ca_seed = safe_close(e->ca_seed);
        (void)snprintf(e->reason, sizeof(e->reason),
                "the egress gateway was restarted %u times within %d s and ended again (%s); the sandbox's HTTP and HTTPS are refused until it is stopped and started again",
                n, SUP_EGRESS_RESTART_WINDOW_MS / 1000, e->last_exit);
        fprintf(stderr, "nook-supervisor: giving up: %s\n", e->reason);
}

static void schedule_restart(sup_egress *e, uint64_t now) {
        unsigned n = restarts_in_window(e, now);
        if (n >= SUP_EGRESS_RESTARTS_MAX) {
                give_up(e, n);
                return;
        }
        e->state = SUP_EGRESS_RESTARTING;
        e->step = SUP_EGRESS_STEP_WAIT;
        e->due_ms = now + (100ull << n);
        fprintf(stderr,
                "nook-supervisor: starting another egress gateway in %llu ms (restart %u of at most %d within %d s)\n",
                100ull << n, n + 1, SUP_EGRESS_RESTARTS_MAX, SUP_EGRESS_RESTART_WINDOW_MS / 1000);
}

static void restart_begin(sup_egress *e, uint64_t now) {
        nook_error err = { 0 };
        e->recent[e->restarts % SUP_EGRESS_RESTARTS_MAX] = now;
        e->restarts++;
        int r = spawn_configured(e, &err);
        if (r >= 0) {
                e->step = SUP_EGRESS_STEP_CA;
                e->due_ms = now + EGRESS_REPLY_MS;
                return;
        }
        if (e->pid > 0) {
                gateway_kill(e, err.msg);
                return;
        }
        (void)snprintf(e->last_exit, sizeof(e->last_exit), "%.150s", err.msg);
        fprintf(stderr, "nook-supervisor: the egress gateway did not start: %s\n", err.msg);
        schedule_restart(e, now);
}

/* A successor's reply: its CA (the same as before), then "ready". */
static void restart_step(sup_egress *e) {
        nook_error err = { 0 };
        json_t *reply = NULL;
        int seed = -1;
        int r = recv_reply(e->sock, 0, &reply, &seed, &err);
        safe_close(seed); /* a successor has the CA it was given: none comes */
        if (r >= 0 && e->step == SUP_EGRESS_STEP_CA) {
                r = take_ca(e, reply, -1, &err);
                if (r >= 0)
                        r = send_listen(e, &err);
                if (r >= 0) {
                        e->step = SUP_EGRESS_STEP_READY;
                        e->due_ms = now_ms() + EGRESS_REPLY_MS;
                }
        } else if (r >= 0) {
                r = check_ready(reply, &err);
                if (r >= 0) {
                        e->state = SUP_EGRESS_RUNNING;
                        e->due_ms = UINT64_MAX;
                        fprintf(stderr, "nook-supervisor: the egress gateway is running again, pid %d\n",
                                (int)e->pid);
                }
        }
        json_decref(reply);
        if (r < 0)
                gateway_kill(e, err.msg);
}

size_t sup_egress_pollfd(const sup_egress *e, struct pollfd *p) {
        if (e->sock < 0)
                return 0;
        *p = (struct pollfd){ .fd = e->sock, .events = POLLIN };
        return 1;
}

void sup_egress_dispatch(sup_egress *e, short revents) {
        char buf[256];
        if (!revents || e->sock < 0)
                return;
        ssize_t k = recv(e->sock, buf, 1, MSG_PEEK | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR) && !(revents & (POLLHUP | POLLERR)))
                return;
        /* EOF: it is exiting; its reap says how it ended and starts another */
        if (k <= 0) {
                log_debug("the egress gateway hung up");
                e->sock = safe_close(e->sock);
                return;
        }
        if (e->state == SUP_EGRESS_RESTARTING)
                restart_step(e);
        else /* nothing more is expected after "ready" */
                (void)recv(e->sock, buf, sizeof(buf), MSG_DONTWAIT);
}

/* How a gateway we did not kill ended, into e->last_exit. */
static void describe_end(sup_egress *e, int status) {
        /* SIGKILL while the cgroup counted a new OOM kill: the sandbox's memory limit, which the
         * gateway shares with the guest */
        bool oom = e->in_cgroup && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
                iso_cgroup_oom_kills(e->cg) > e->oom_kills;
        if (WIFSIGNALED(status))
                (void)snprintf(e->last_exit, sizeof(e->last_exit), "killed by signal %d%s", WTERMSIG(status),
                        oom ? " (the OOM killer: the sandbox's memory limit)" : "");
        else
                (void)snprintf(
                        e->last_exit, sizeof(e->last_exit), "exited with status %d", WEXITSTATUS(status));
}

bool sup_egress_reaped(sup_egress *e, pid_t p, int status) {
        if (e->pid <= 0 || p != e->pid)
                return false;
        if (!e->killed)
                describe_end(e, status);
        fprintf(stderr, "nook-supervisor: the egress gateway (pid %d) ended: %s\n", (int)p, e->last_exit);
        e->pid = 0;
        e->sock = safe_close(e->sock);
        if (e->state == SUP_EGRESS_RUNNING || e->state == SUP_EGRESS_RESTARTING)
                schedule_restart(e, now_ms());
        return true;
}

uint64_t sup_egress_deadline(const sup_egress *e) {
        return e->state == SUP_EGRESS_RESTARTING ? e->due_ms : UINT64_MAX;
}

void sup_egress_tick(sup_egress *e, uint64_t now) {
        if (e->state != SUP_EGRESS_RESTARTING || now < e->due_ms)
                return;
        if (e->step == SUP_EGRESS_STEP_WAIT)
                restart_begin(e, now);
        else {
                char why[64];
                (void)snprintf(
                        why, sizeof(why), "did not finish starting within %d s", EGRESS_REPLY_MS / 1000);
                gateway_kill(e, why);
        }
}

void sup_egress_resumed(sup_egress *e, uint64_t now) {
        if (e->state == SUP_EGRESS_RESTARTING && e->step != SUP_EGRESS_STEP_WAIT && e->due_ms != UINT64_MAX)
                e->due_ms = now + EGRESS_REPLY_MS;
}

json_t *sup_egress_status(const sup_egress *e) {
        if (e->state == SUP_EGRESS_NONE)
                return NULL;
        json_t *o = json_pack("{s:s, s:I}", "state", sup_egress_state_to_string(e->state), "restarts",
                (json_int_t)e->restarts);
        if (o && e->state == SUP_EGRESS_RUNNING && e->pid > 0)
                json_object_set_new(o, "pid", json_integer(e->pid));
        if (o && e->last_exit[0])
                json_object_set_new(o, "lastExit", json_string(e->last_exit));
        if (o && e->state == SUP_EGRESS_FAILED)
                json_object_set_new(o, "reason", json_string(e->reason));
        return o;
}

void sup_egress_stop(sup_egress *e) {
        e->sock = safe_close(e->sock);
        e->listeners[0] = safe_close(e->listeners[0]);
        e->listeners[1] = safe_close(e->listeners[1]);
        e->ca_seed = safe_close(e->ca_seed);
        free(e->ca_pem);
        e->ca_pem = NULL;
        e->due_ms = UINT64_MAX;
        if (e->pid <= 0)
                return;
        /* EOF on fd 3 ends it; a gateway that does not go within 200 ms is killed.  A pidfd turns
         * readable the moment it exits (no polling interval added to every stop). */
        _cleanup_close_ int pfd = pidfd_open_(e->pid);
        struct pollfd p = { .fd = pfd, .events = POLLIN };
        if (pfd < 0 || poll(&p, 1, 200) <= 0)
                (void)kill(e->pid, SIGKILL);
        (void)pid_wait(e->pid, NULL);
        e->pid = 0;
}
