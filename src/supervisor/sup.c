/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "isolate/seccomp.h"
#include "isolate/rootfs.h"
#include "isolate/userns.h"
#include "supervisor/egress.h"
#include "supervisor/exitfile.h"
#include "supervisor/init.h"
#include "supervisor/network.h"
#include "supervisor/outlog.h"
#include "supervisor/proto.h"
#include "supervisor/sup.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/idlemem.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/proc.h"
#include "util/str.h"

#define MAX_CLIENTS 512
#define MAX_DIRECT 1024 /* execs sent straight to a spare helper, running at once */
#define MAX_ABANDONED 1024 /* execs through init whose client went without detaching */
#define SETUP_TIMEOUT_MS 30000
#define RETIRE_GRACE_MS 5000
#define CLIENT_GONE_GRACE_MS 1000 /* a tied sandbox whose creator died: SIGTERM, then SIGKILL */
#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

typedef struct client {
        int fd;
        uint64_t exec_id; /* 0: none */
        bool exec_running;
        bool detach;
        bool no_started; /* the client asked for no "started" ("reportStarted": false) */
        bool wants_stopped; /* sent "stop": answer when the sandbox is down */
        bool holds_pause; /* paused with "hold": thawed when this client goes (a branch's copy) */
        bool remove_when_done; /* "removeSandbox": its exec's end begins the stop for removal */
        uint64_t deadline; /* exec timeout (monotonic ms), 0 = none */
        const char *reason; /* why the exec ended early: "timeout", "cancelled" */
        uint64_t oom_kills_at_start; /* the cgroup's OOM kill count when the exec began */
        uint64_t hard_kill_at; /* exec_kill's grace: its helper is SIGKILLed then if still there */
        bool hard_killed; /* and after that, the exec is ended here (exec_abandon) */
        json_t *deferred; /* an exec that came while a branch's copy held the sandbox paused */
        int deferred_fds[PROTO_MAX_FDS];
        size_t n_deferred_fds;
} client;

/* An exec sent straight to a spare helper (handle_exec): its "started" and "exited" come back on
 * fd, the helper's request socket, as helper_rec records; init is on neither path.  It outlives
 * its client when detached. */
typedef struct direct_exec {
        int fd;
        pid_t pid; /* the helper's pid in the sandbox: "kill" goes to init with it */
        uint64_t id;
        bool started;
        bool detached; /* counted in detached_running once its client is gone */
} direct_exec;

typedef struct sup {
        const sup_config *cfg;
        const char *state_dir; /* exit.json, output.log, egress.log: kept across stop */
        const char *run_dir; /* ctl.sock, slirp.sock (supervisor.log: main.c): the runtime folder */
        int init_sock, listen_fd, sig_fd;
        int root_fd; /* O_PATH on the sandbox's "/", sent by init when ready (nook cp); -1 when gone */
        int mntns_fd; /* init's mount namespace, held so that its teardown is ours (finish); -1: none */
        pid_t init_pid;
        client clients[MAX_CLIENTS];
        size_t n_clients;
        uint64_t next_exec_id;
        uint64_t started_ms, last_activity_ms;
        size_t detached_running; /* execs whose client went away on purpose */
        bool stopping;
        bool paused; /* the cgroup is frozen (nook pause): no exec, the idle timer stands still */
        uint64_t stop_deadline;
        const char *stop_reason;
        bool removing; /* a "stop" said "remove": its client deletes the state folder next */
        sup_net net; /* slirp4netns, firewall, policy resolver (network on) */
        iso_cgroup *cg; /* NULL: no cgroup (rootless without delegation and no limits) */
        iso_seccomp_prog seccomp; /* compiled (or read from the cache) before init is cloned */
        int lifeline_fd; /* NOOK_CREATE_TIED: hangs up when the creating client is gone; else -1 */
        bool lifeline_stops; /* its hang-up stops the sandbox ("starter_gone"), not for removal */
        uint64_t main_exec_id; /* run -d: the sandbox stops when this exec ends; 0 = none */
        int main_exit; /* how that exec ended (exit_record.command_exit); -1: not yet */
        outlog out; /* detached commands' stdout/stderr (output.log) */
        sup_egress egress; /* nook-egress, when the sandbox has secrets or HTTP rules */
        int spare_fd; /* the spare helper's request socket, handed over by init; -1: none */
        pid_t spare_pid;
        direct_exec direct[MAX_DIRECT];
        size_t n_direct;
        uint64_t abandoned[MAX_ABANDONED]; /* their end is not a detached exec's end */
        size_t n_abandoned;
        uint64_t last_event_ms; /* the last poll that returned an event */
        bool idle_released; /* idle_release ran since then */
} sup;

static uint64_t oom_kills(sup *s) {
        return s->cg ? iso_cgroup_oom_kills(s->cg) : 0;
}

/* Every sandbox gets a cgroup when the host lets us make one (stats, OOM reports, the default
 * process limit); a requested limit the host cannot enforce is an error, never a silently
 * unlimited sandbox.  The default process limit was not requested: without a cgroup (rootless,
 * nothing delegated) the sandbox runs without it. */
static int setup_cgroup(sup *s, nook_error *err) {
        const sup_config *c = s->cfg;
        iso_limits l = { .cpus = c->cpus,
                .memory_bytes = c->memory_bytes,
                .pids_max = c->pids_max,
                .pids_optional = c->pids_default };
        bool wanted = l.cpus || l.memory_bytes || (l.pids_max && !l.pids_optional);
        if (!c->home)
                return 0;
        /* It says when the host has no cgroup for us (iso_cgroup_available's reason): an
         * error only when a limit was asked for. */
        nook_error optional = { 0 };
        int r = iso_cgroup_create(c->home, c->name, &l, &s->cg, wanted ? err : &optional);
        if (r < 0 && !wanted) {
                log_debug("no cgroup for the sandbox: %s, ignoring", optional.msg);
                return 0;
        }
        return r;
}

static void sup_log(const char *line) {
        fprintf(stderr, "%s\n", line);
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* Waits for init's first message: "ready" or an error. */
static int wait_ready(sup *s, nook_error *err) {
        struct pollfd p = { .fd = s->init_sock, .events = POLLIN };
        int r = poll(&p, 1, SETUP_TIMEOUT_MS);
        if (r == 0)
                return nook_err_set(err, NOOK_E_TIMEOUT, "The sandbox did not finish its setup within %d s",
                        SETUP_TIMEOUT_MS / 1000);
        json_t *msg = NULL;
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;
        r = proto_recv(s->init_sock, &msg, fds, &n_fds);
        if (r <= 0)
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "The sandbox init died during setup; see the supervisor log");
        if (streq(proto_op(msg), "ready")) {
                /* init's root, kept so a client can copy files through it (nook cp) */
                if (n_fds == 1)
                        s->root_fd = fds[0];
                else
                        proto_close_fds(fds, n_fds);
                json_decref(msg);
                return 0;
        }
        proto_close_fds(fds, n_fds);
        r = proto_error_from_msg(msg, err);
        json_decref(msg);
        return nook_err_wrap(err, "setting up the sandbox");
}

static int start_init(sup *s, nook_error *err) {
        int sp[2] = { -1, -1 };
        int r;
        bool rootless = !iso_rootful();
        _cleanup_free_ char *cache = s->cfg->home ? strprintf("%s/cache", s->cfg->home) : NULL;
        r = iso_seccomp_prepare(s->cfg->sec_profile, cache, &s->seccomp, err);
        if (r < 0)
                return r;
        /* Before clone: the init inherits the detached idmapped mounts; ours go once it has them. */
        _cleanup_(sup_idmaps_done) sup_idmaps idm = SUP_IDMAPS_INIT;
        r = sup_idmaps_prepare(s->cfg, &idm, err);
        if (r < 0)
                return r;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the init socket");
        /* clone() as a fork with namespace flags: we are single-threaded (STYLE.md R12).  The
         * child creates every namespace at once, owned by its new user namespace, except the
         * cgroup namespace: init unshares that after it joined its cgroup, so the namespace's
         * root is the sandbox's own cgroup.  And without a network, the network namespace: init
         * makes it (init_own_netns) while we make its cgroup below, on the other CPU; in the
         * clone it was ~0.7 ms (copy_net_ns) of every create's critical path (bench/README.md,
         * issue #17).  With a network we open init's namespaces right after the clone
         * (sup_net_open_ns), so the clone makes it. */
        bool own_net = init_own_netns(s->cfg);
        cpu_set_t cpus;
        bool have_cpus = sched_getaffinity(0, sizeof(cpus), &cpus) == 0;
        /* owned by the sandbox's host root, not by ours: what the guest makes is counted against
         * its own per-user allowance (iso_userns_owner) */
        iso_userns_owner owner;
        r = iso_userns_owner_begin(s->cfg->id_base, &owner, err);
        if (r < 0) {
                safe_close(sp[0]);
                safe_close(sp[1]);
                return r;
        }
        long pid = syscall(SYS_clone,
                CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
                        (own_net ? 0 : CLONE_NEWNET) | SIGCHLD,
                0, 0, 0, 0);
        int e = errno;
        if (pid != 0 && iso_userns_owner_end(&owner, err) < 0) {
                /* a supervisor left as another uid would do nothing right: stop here */
                if (pid > 0)
                        (void)kill((pid_t)pid, SIGKILL);
                safe_close(sp[0]);
                safe_close(sp[1]);
                return -NOOK_E_IO;
        }
        if (pid < 0) {
                safe_close(sp[0]);
                safe_close(sp[1]);
                return nook_err_errnum(err,
                        e == EPERM || e == EINVAL || e == ENOSPC ? NOOK_E_MISSING_FEATURE : NOOK_E_IO, e,
                        "Cannot create the sandbox's namespaces (user namespaces may be disabled; run 'nook doctor')");
        }
        if (pid == 0) {
                iso_userns_owner_child(&owner);
                safe_close(sp[0]);
                init_main(sp[1], s->cfg, rootless, &s->seccomp, &idm, have_cpus ? &cpus : NULL);
        }
        /* the init, queued on our CPU, waited for us to block after the cgroup and the maps: ~0.5
         * ms of every create; it takes the whole mask back after sync 1 (init.c, step 2c) */
        if (have_cpus)
                proc_start_off_our_cpu((pid_t)pid, &cpus);
        safe_close(sp[1]);
        s->init_pid = (pid_t)pid;
        s->init_sock = sp[0];
        sup_net_open_ns(&s->net, s->cfg, s->init_pid);
        /* Held so that the namespace's teardown (every mount unmounted, then an expedited RCU
         * grace period: ~0.1-0.3 ms) is not in init's exit, before we may remove its cgroups and
         * say "stopped", but in our close after the replies (finish).  Not having it only costs
         * that time. */
        s->mntns_fd = proc_ns_open(s->init_pid, "mnt");
        /* While init opens its folders (and makes its network namespace): its cgroup. */
        r = setup_cgroup(s, err);
        if (r < 0)
                return r;
        /* v1, as real root: the init joins its cgroup itself, through files we open and send
         * with "maps" (cgroup.h says why).  Rootless (a delegated v1 folder may grant
         * cgroup.procs but not tasks), or when a file cannot be opened: we attach it, as on v2. */
        _cleanup_(iso_cgroup_join_done) iso_cgroup_join cgj = ISO_CGROUP_JOIN_INIT;
        if (s->cg && !rootless) {
                nook_error jerr = { 0 };
                if (iso_cgroup_join_open(s->cg, &cgj, &jerr) < 0)
                        log_debug("the init joins no cgroup itself: %s; attaching it instead", jerr.msg);
        }
        r = iso_userns_write_maps(s->init_pid, s->cfg->id_base, err);
        if (r < 0)
                return r;
        if (s->cg && cgj.n == 0 && (r = iso_cgroup_attach(s->cg, s->init_pid, err)) < 0)
                return nook_err_wrap(err, "moving the sandbox into its cgroup");
        /* the gateway too, while the kernel's cgroup lock is still cheap to take (egress.h);
         * with the v1 files it joins itself later, as init does */
        if (s->cg && cgj.n == 0 && (r = sup_egress_attach(&s->egress, s->cg, err)) < 0)
                return r;
        json_t *m = json_pack("{s:s}", "op", "maps");
        r = m ? proto_send(s->init_sock, m, cgj.fds, cgj.n) : -ENOMEM;
        json_decref(m);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot talk to the sandbox init");
        return wait_ready(s, err);
}

static int listen_control(sup *s, nook_error *err) {
        /* sun_path holds 108 bytes; a deep NOOK_HOME would not fit, so bind through the
         * directory's fd (the path is resolved like any other). */
        _cleanup_close_ int dfd = open(s->run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", s->run_dir);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        (void)snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/ctl.sock", dfd);
        (void)unlink(sa.sun_path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the control socket");
        mode_t old = umask(0177); /* the socket is 0600: only the owner may control the sandbox */
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0 || listen(fd, 128) < 0) {
                safe_close(fd);
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot listen on the control socket in '%s'", s->run_dir);
        }
        s->listen_fd = fd;
        return 0;
}

static void notify_ready(int ready_fd, const nook_error *e, pid_t init_pid) {
        json_t *m;
        if (e)
                m = json_pack("{s:b, s:s, s:s, s:i}", "ok", 0, "code", nook_errc_to_string(e->code),
                        "message", e->msg, "errno", e->sys_errno);
        else
                m = json_pack("{s:b, s:i, s:i}", "ok", 1, "pid", (int)getpid(), "initPid", (int)init_pid);
        char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
        if (text) {
                (void)fd_write_all(ready_fd, text, strlen(text));
                (void)fd_write_all(ready_fd, "\n", 1);
        }
        free(text);
        json_decref(m);
}

/* ---- clients --------------------------------------------------------------------------------- */

static void client_send(client *c, json_t *m) {
        if (c->fd >= 0 && m)
                (void)proto_send(c->fd, m, NULL, 0);
        json_decref(m);
}

static void client_send_fd(client *c, json_t *m, int fd) {
        if (c->fd >= 0 && m)
                (void)proto_send(c->fd, m, &fd, 1);
        json_decref(m);
}

static void client_error(client *c, nook_errc code, const char *msg) {
        nook_error e = { 0 };
        (void)nook_err_set(&e, code, "%s", msg);
        client_send(c, proto_error_msg(&e));
}

static void deferred_drop(client *c) {
        proto_close_fds(c->deferred_fds, c->n_deferred_fds);
        c->n_deferred_fds = 0;
        json_decref(c->deferred);
        c->deferred = NULL;
}

static client *client_by_exec(sup *s, uint64_t id) {
        for (size_t i = 0; i < s->n_clients; i++)
                if (s->clients[i].exec_id == id)
                        return &s->clients[i];
        return NULL;
}

static direct_exec *direct_by_id(sup *s, uint64_t id) {
        for (size_t i = 0; i < s->n_direct; i++)
                if (s->direct[i].id == id)
                        return &s->direct[i];
        return NULL;
}

/* A signal for an exec's helper goes through init (the helper is its child, in its pid
 * namespace): by the helper's pid for a direct exec, else by the exec's id.  hard: SIGKILL the
 * helper itself (exec_kill_hard), not the command's tree through it. */
static void init_kill_how(sup *s, uint64_t id, int sig, bool hard) {
        direct_exec *d = direct_by_id(s, id);
        json_t *m = d ? json_pack("{s:s, s:i, s:i, s:b}", "op", "kill", "pid", (int)d->pid, "signal", sig,
                                "hard", hard)
                      : json_pack("{s:s, s:I, s:i, s:b}", "op", "kill", "id", (json_int_t)id, "signal", sig,
                                "hard", hard);
        if (m)
                (void)proto_send(s->init_sock, m, NULL, 0);
        json_decref(m);
}

static void init_kill(sup *s, uint64_t id, int sig) {
        init_kill_how(s, id, sig, false);
}

/* How long a helper asked to kill its command's tree may take before it is SIGKILLed itself: a
 * guest can SIGSTOP the helpers (its root owns them), and a stopped helper never acts on the
 * request, which left a timed-out or cancelled exec's client waiting for good.  The command's
 * processes then stay behind in the sandbox (init reaps them), the client is answered. */
#define HARD_KILL_GRACE_MS 2000

/* Ends an exec on our side (timeout, cancel): its helper kills the command's tree. */
static void exec_kill(sup *s, client *c) {
        init_kill(s, c->exec_id, SIGKILL);
        c->hard_kill_at = now_ms() + HARD_KILL_GRACE_MS;
}

static void exec_kill_hard(sup *s, client *c) {
        init_kill_how(s, c->exec_id, SIGKILL, true);
        c->hard_killed = true;
        c->hard_kill_at = now_ms() + HARD_KILL_GRACE_MS / 2;
}

static void begin_stop(sup *s, const char *reason, uint64_t grace_ms) {
        if (s->stopping)
                return;
        /* a frozen init would never see the stop: thaw, then stop as always */
        if (s->paused && s->cg)
                (void)iso_cgroup_freeze(s->cg, false, NULL);
        s->paused = false;
        s->stopping = true;
        s->stop_reason = reason;
        for (size_t i = 0; i < s->n_clients; i++)
                if (s->clients[i].deferred) {
                        deferred_drop(&s->clients[i]);
                        client_error(&s->clients[i], NOOK_E_STATE, "The sandbox is stopping");
                }
        s->stop_deadline = now_ms() + grace_ms + 2000;
        log_debug("stopping: %s", reason);
        json_t *m = json_pack("{s:s, s:I}", "op", "stop", "timeoutMs", (json_int_t)grace_ms);
        if (m)
                (void)proto_send(s->init_sock, m, NULL, 0);
        json_decref(m);
}

/* Checks the "exec" request and builds the message for init.  The environment is the sandbox's,
 * then the request's on top; values never reach a log. */
static json_t *build_exec(sup *s, json_t *req, uint64_t id, nook_error *err) {
        json_t *argv = json_object_get(req, "argv"), *env = json_object_get(req, "env"), *v;
        const char *cwd = json_string_value(json_object_get(req, "cwd"));
        const char *user = json_string_value(json_object_get(req, "user"));
        _cleanup_strv_free_ char **merged = NULL;
        size_t i;

        if (!json_is_array(argv) || json_array_size(argv) == 0) {
                (void)nook_err_set(err, NOOK_E_INVALID, "exec: 'argv' must be a non-empty array of strings");
                return NULL;
        }
        json_array_foreach(argv, i, v) if (!json_is_string(v)) {
                (void)nook_err_set(err, NOOK_E_INVALID, "exec: argv[%zu] must be a string", i);
                return NULL;
        }
        /* TERM only with a terminal, as docker sets it: a pipe is no xterm */
        bool tty = json_is_true(json_object_get(req, "tty"));
        if (strv_push(&merged, DEFAULT_PATH) < 0 || (tty && strv_push(&merged, "TERM=xterm") < 0) ||
                strv_push(&merged, "HOSTNAME=") < 0) {
                (void)nook_err_oom(err);
                return NULL;
        }
        _cleanup_free_ char *hn = strprintf("HOSTNAME=%s", s->cfg->name);
        if (!hn || strv_env_set(&merged, hn) < 0) {
                (void)nook_err_oom(err);
                return NULL;
        }
        STRV_FOREACH (e, s->cfg->env)
                if (strv_env_set(&merged, *e) < 0) {
                        (void)nook_err_oom(err);
                        return NULL;
                }
        if (env && !json_is_array(env)) {
                (void)nook_err_set(
                        err, NOOK_E_INVALID, "exec: 'env' must be an array of \"NAME=value\" strings");
                return NULL;
        }
        json_array_foreach(env, i, v) {
                const char *a = json_string_value(v);
                const char *eq = a ? strchr(a, '=') : NULL;
                if (!eq || !env_name_is_valid(a, (size_t)(eq - a))) {
                        (void)nook_err_set(err, NOOK_E_INVALID,
                                "exec: env[%zu] must be \"NAME=value\" with a valid name", i);
                        return NULL;
                }
                if (strv_env_set(&merged, a) < 0) {
                        (void)nook_err_oom(err);
                        return NULL;
                }
        }
        if (cwd && cwd[0] != '/') {
                (void)nook_err_set(
                        err, NOOK_E_INVALID, "exec: the working directory '%s' must be absolute", cwd);
                return NULL;
        }
        /* "reportStarted": false, from a client that only waits for the end; a detached exec or
         * a terminal always gets "started" (its pid, its pty) */
        bool report_started = !json_is_false(json_object_get(req, "reportStarted")) ||
                json_is_true(json_object_get(req, "detach")) || tty;
        json_t *envj = json_array();
        STRV_FOREACH (e, merged)
                json_array_append_new(envj, json_string(*e));
        return json_pack("{s:s, s:I, s:O, s:o, s:s, s:s, s:b, s:I, s:I, s:b}", "op", "exec", "id",
                (json_int_t)id, "argv", argv, "env", envj, "cwd",
                cwd ? cwd : (s->cfg->workdir ? s->cfg->workdir : "/workspace"), "user",
                user ? user : (s->cfg->user ? s->cfg->user : "0"), "tty", tty, "rows",
                json_integer_value(json_object_get(req, "rows")), "cols",
                json_integer_value(json_object_get(req, "cols")), "reportStarted", report_started);
}

/* Sends the exec straight to the spare helper when there is one, else to init (which forks a
 * helper on the spot).  A terminal always goes through init: it opens the pty.  A spare that
 * cannot take the request (killed from inside the sandbox: guest root can) is dropped.  The
 * helper gets the client's connection too (client_fd, a fourth fd), through init as well unless
 * with a terminal (whose master init sends with "started"): it tells the client "started" and
 * "exited" itself, then us (helper_rec.told, or init's "told"; docs/design/runtime.md, Exec). */
static int send_exec(
        sup *s, json_t *m, const int fds[3], int client_fd, bool tty, uint64_t id, bool detach) {
        if (!tty && s->spare_fd >= 0 && s->n_direct < MAX_DIRECT) {
                int fd = s->spare_fd;
                int all[4] = { fds[0], fds[1], fds[2], client_fd };
                s->spare_fd = -1;
                if (proto_send(fd, m, all, 4) >= 0) {
                        s->direct[s->n_direct++] =
                                (direct_exec){ .fd = fd, .pid = s->spare_pid, .id = id, .detached = detach };
                        return 0;
                }
                safe_close(fd);
        }
        int all[4] = { fds[0], fds[1], fds[2], client_fd };
        return proto_send(s->init_sock, m, all, tty ? 0 : 4);
}

/* Whether the sandbox is paused only for a branch's copy (a client's "hold"), not by the user. */
static bool pause_held(const sup *s) {
        for (size_t i = 0; s->paused && i < s->n_clients; i++)
                if (s->clients[i].holds_pause)
                        return true;
        return false;
}

static void handle_exec(sup *s, client *c, json_t *req, int *fds, size_t n_fds) {
        nook_error err = { 0 };
        if (s->stopping) {
                client_error(c, NOOK_E_STATE, "The sandbox is stopping");
                return;
        }
        if (pause_held(s) && !c->deferred && !c->exec_id) {
                /* a branch's copy takes a moment: the exec waits for it (exec_run_deferred), as a
                 * pause, resume or file write waits for the branch's lock, rather than fail as
                 * if the user had paused the sandbox */
                c->deferred = json_incref(req);
                for (size_t i = 0; i < n_fds; i++) {
                        c->deferred_fds[i] = fds[i];
                        fds[i] = -1;
                }
                c->n_deferred_fds = n_fds;
                return;
        }
        if (s->paused) {
                char msg[256];
                (void)snprintf(msg, sizeof(msg),
                        "Sandbox '%s' is paused; resume it ('nook resume %s'; resume() in the API) before running commands",
                        s->cfg->name, s->cfg->name);
                client_error(c, NOOK_E_STATE, msg);
                return;
        }
        if (c->exec_id) {
                client_error(c, NOOK_E_STATE, "One exec per connection: open another connection");
                return;
        }
        bool tty = json_is_true(json_object_get(req, "tty"));
        if (tty ? n_fds != 0 : n_fds != 3) {
                client_error(
                        c, NOOK_E_INVALID, "exec: expected 3 stdio descriptors (stdin, stdout, stderr)");
                return;
        }
        uint64_t id = ++s->next_exec_id;
        json_t *m = build_exec(s, req, id, &err);
        if (!m) {
                client_send(c, proto_error_msg(&err));
                return;
        }
        /* A detached command with nowhere to write: its stdout and stderr go to output.log. */
        int send_fds[3] = { tty ? -1 : fds[0], tty ? -1 : fds[1], tty ? -1 : fds[2] };
        int log_out = -1, log_err = -1;
        bool detach = json_is_true(json_object_get(req, "detach"));
        if (!tty && detach && json_is_true(json_object_get(req, "log"))) {
                int r = outlog_open_pipes(&s->out, &log_out, &log_err);
                if (r < 0) {
                        json_decref(m);
                        client_error(c, NOOK_E_BUSY,
                                "Too many detached commands write to the sandbox's log at once; wait for some to end");
                        return;
                }
                send_fds[1] = log_out;
                send_fds[2] = log_err;
        }
        int r = send_exec(s, m, send_fds, c->fd, tty, id, detach);
        safe_close(log_out);
        safe_close(log_err);
        json_decref(m);
        if (r < 0) {
                client_error(c, NOOK_E_IO, "Cannot pass the command to the sandbox init");
                return;
        }
        json_int_t t = json_integer_value(json_object_get(req, "timeoutMs"));
        c->exec_id = id;
        c->exec_running = true;
        c->oom_kills_at_start = oom_kills(s);
        c->detach = detach;
        c->no_started = !tty && !detach && json_is_false(json_object_get(req, "reportStarted"));
        c->remove_when_done = !detach && json_is_true(json_object_get(req, "removeSandbox"));
        /* run -d, run --keep: the sandbox stops when this command ends, with its status */
        if (json_is_true(json_object_get(req, "stopSandbox"))) {
                s->main_exec_id = id;
                /* run -d: from here on the sandbox lives as long as this command, not as its
                 * creator (tied until now, so a creator killed before it got here left nothing
                 * running: NOOK_CREATE_TIED) */
                if (detach)
                        s->lifeline_fd = safe_close(s->lifeline_fd);
        }
        c->deadline = t > 0 ? now_ms() + (uint64_t)t : 0;
        s->last_activity_ms = now_ms();
}

/* The execs deferred while a branch's copy held the pause, once it ended (or, paused by the user
 * meanwhile, refused as any exec to a paused sandbox is). */
static void exec_run_deferred(sup *s) {
        for (size_t i = 0; i < s->n_clients && !pause_held(s); i++) {
                client *c = &s->clients[i];
                if (!c->deferred)
                        continue;
                json_t *req = c->deferred;
                int fds[PROTO_MAX_FDS];
                size_t n = c->n_deferred_fds;
                memcpy(fds, c->deferred_fds, sizeof(fds[0]) * n);
                c->deferred = NULL;
                c->n_deferred_fds = 0;
                handle_exec(s, c, req, fds, n);
                proto_close_fds(fds, n);
                json_decref(req);
        }
}

/* Pause and resume (docs/design/branch.md): the cgroup freezer stops every task of the sandbox;
 * the supervisor stays outside it and keeps serving.  While paused the idle timer stands still
 * (a paused sandbox is parked on purpose, not forgotten) and restarts at resume; the maximum
 * duration keeps counting (it bounds how long the sandbox holds memory, and a retirement thaws
 * and stops it as always). */
static void handle_pause(sup *s, client *c, bool pause, bool hold) {
        nook_error err = { 0 };
        if (s->stopping) {
                client_error(c, NOOK_E_STATE, "The sandbox is stopping");
                return;
        }
        if (!s->cg) {
                char reason[256];
                if (iso_cgroup_freezer_available(reason, sizeof(reason)))
                        (void)snprintf(reason, sizeof(reason), "the sandbox has no cgroup");
                (void)nook_err_set(&err, NOOK_E_MISSING_FEATURE, "Cannot %s: %s; run 'nook doctor'",
                        pause ? "pause" : "resume", reason);
                client_send(c, proto_error_msg(&err));
                return;
        }
        if (iso_cgroup_freeze(s->cg, pause, &err) < 0) {
                client_send(c, proto_error_msg(&err));
                return;
        }
        s->paused = pause;
        s->last_activity_ms = now_ms(); /* resume: the idle timer starts again from now */
        if (!pause)
                sup_egress_resumed(&s->egress, s->last_activity_ms);
        /* a plain pause stays until resume: no holder may end it any more */
        for (size_t i = 0; i < s->n_clients; i++)
                s->clients[i].holds_pause = false;
        c->holds_pause = pause && hold;
        client_send(c, json_pack("{s:s, s:b}", "op", pause ? "paused" : "resumed", "paused", pause));
        exec_run_deferred(s); /* thawed, or paused by the user now: refused as such */
}

/* nook kill: a signal to every command running in the sandbox (init passes it to each helper,
 * which passes it to its command, as for one exec's "signal").  A frozen sandbox would take it
 * only once thawed: refused, as docker refuses to signal a paused container. */
static void handle_kill(sup *s, client *c, json_t *sigv) {
        json_int_t sig = json_integer_value(sigv);
        if (!json_is_integer(sigv) || sig < 1 || sig > 64) {
                client_error(c, NOOK_E_INVALID, "The signal must be a number from 1 to 64");
                return;
        }
        if (s->stopping) {
                client_error(c, NOOK_E_STATE, "The sandbox is stopping");
                return;
        }
        if (s->paused) {
                char msg[256];
                (void)snprintf(msg, sizeof(msg),
                        "Sandbox '%s' is paused: its commands would take the signal only once resumed; resume "
                        "it first ('nook resume %s'), or stop it",
                        s->cfg->name, s->cfg->name);
                client_error(c, NOOK_E_STATE, msg);
                return;
        }
        json_t *m = json_pack("{s:s, s:b, s:i}", "op", "kill", "all", true, "signal", (int)sig);
        int r = m ? proto_send(s->init_sock, m, NULL, 0) : -ENOMEM;
        json_decref(m);
        if (r < 0) {
                client_error(c, NOOK_E_IO, "The sandbox's init did not take the signal");
                return;
        }
        s->last_activity_ms = now_ms();
        client_send(c, json_pack("{s:s}", "op", "killed"));
}

static json_t *status_msg(sup *s) {
        size_t running = s->detached_running;
        for (size_t i = 0; i < s->n_clients; i++)
                running += s->clients[i].exec_running;
        return json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:o*}", "op", "status", "state",
                s->stopping         ? "stopping"
                        : s->paused ? "paused"
                                    : "running",
                "pid", (int)getpid(), "initPid", (int)s->init_pid, "execsRunning", (json_int_t)running,
                "uptimeMs", (json_int_t)(now_ms() - s->started_ms), "egress", sup_egress_status(&s->egress));
}

static void handle_direct(sup *s, size_t i);

/* A direct exec's helper tells its client "exited" first, then us: a client that hung up right
 * after hearing it may be read before the helper's record.  Read the record now, so that such
 * a client is not taken for one that vanished mid-exec (a kill for an exec whose exit we have
 * not read is ignored by its helper anyway: init_exec.c, helper_main). */
static void direct_drain(sup *s, uint64_t id) {
        for (size_t i = 0; i < s->n_direct; i++)
                if (s->direct[i].id == id) {
                        handle_direct(s, i);
                        return;
                }
}

/* A client that asked with its exec ("removeSandbox") for the stop its removal needs, and went
 * before it asked for that removal: none follows, so the stop is its client's going (an exit
 * record "client_gone", which the next list or inspect removes, as for a tied sandbox). */
static void remove_owner_gone(sup *s, const client *c) {
        if (c->remove_when_done && c->wants_stopped && !s->removing)
                s->stop_reason = "client_gone";
}

static void client_drop(sup *s, size_t i) {
        client *c = &s->clients[i];
        if (c->exec_running)
                direct_drain(s, c->exec_id); /* its end may begin the removal's stop */
        remove_owner_gone(s, c);
        /* a pause held for a copy ends with its holder, however that died */
        bool thawed = false;
        if (c->holds_pause && s->paused && s->cg && iso_cgroup_freeze(s->cg, false, NULL) >= 0) {
                s->paused = false;
                thawed = true;
                sup_egress_resumed(&s->egress, now_ms());
                log_debug("the client holding the pause is gone: thawed");
        }
        deferred_drop(c);
        if (c->exec_running) {
                if (c->detach)
                        s->detached_running++;
                else {
                        init_kill(s, c->exec_id, SIGKILL); /* a vanished client takes its command along */
                        if (!direct_by_id(s, c->exec_id) && s->n_abandoned < MAX_ABANDONED)
                                s->abandoned[s->n_abandoned++] = c->exec_id;
                }
        }
        safe_close(c->fd);
        s->clients[i] = s->clients[--s->n_clients];
        s->last_activity_ms = now_ms();
        if (thawed)
                exec_run_deferred(s);
}

static void handle_client(sup *s, size_t i, short revents) {
        client *c = &s->clients[i];
        json_t *msg = NULL;
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;
        int r = proto_recv(c->fd, &msg, fds, &n_fds);
        if (r == -EAGAIN && !(revents & (POLLHUP | POLLERR)))
                return;
        if (r <= 0) {
                client_drop(s, i);
                return;
        }
        const char *op = proto_op(msg);
        if (streq(op, "exec"))
                handle_exec(s, c, msg, fds, n_fds);
        else if (streq(op, "cancel") && c->exec_running) {
                c->reason = "cancelled";
                exec_kill(s, c);
        } else if (streq(op, "signal") && c->exec_running) {
                json_int_t sig = json_integer_value(json_object_get(msg, "signal"));
                if (sig > 0 && sig < 65)
                        init_kill(s, c->exec_id, (int)sig);
        } else if (streq(op, "stop")) {
                json_int_t t = json_integer_value(json_object_get(msg, "timeoutMs"));
                c->wants_stopped = true;
                s->removing |= json_is_true(json_object_get(msg, "remove"));
                json_t *tv = json_object_get(msg, "timeoutMs");
                begin_stop(s, "user", json_is_integer(tv) && t >= 0 && t < 3600000 ? (uint64_t)t : 10000);
        } else if (streq(op, "kill"))
                handle_kill(s, c, json_object_get(msg, "signal"));
        else if (streq(op, "pause") || streq(op, "resume"))
                handle_pause(s, c, streq(op, "pause"), json_is_true(json_object_get(msg, "hold")));
        else if (streq(op, "status"))
                client_send(c, status_msg(s));
        else if (streq(op, "root") && s->root_fd >= 0 && !s->stopping)
                client_send_fd(c, json_pack("{s:s}", "op", "root"), s->root_fd);
        else if (streq(op, "root"))
                client_error(c, NOOK_E_STATE, "The sandbox is stopping");
        else if (!streq(op, "cancel") && !streq(op, "signal"))
                client_error(c, NOOK_E_INVALID, "Unknown request");
        proto_close_fds(fds, n_fds);
        json_decref(msg);
}

/* A client usually sends its request right after connecting: read it now rather than after
 * another poll (handle_client returns on EAGAIN when it is not there yet). */
static void accept_clients(sup *s) {
        for (;;) {
                int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;
                if (s->n_clients >= MAX_CLIENTS) {
                        safe_close(fd);
                        continue;
                }
                s->clients[s->n_clients++] = (client){ .fd = fd };
                handle_client(s, s->n_clients - 1, 0);
        }
}

/* ---- messages from init and from direct helpers ---------------------------------------------- */

/* "started" for exec id, with the pty master (fd, or -1) for its client. */
static void exec_started(sup *s, uint64_t id, json_int_t pid, int fd) {
        client *c = id > 0 ? client_by_exec(s, id) : NULL;
        if (c && c->no_started)
                return;
        json_t *m = json_pack("{s:s, s:I, s:I}", "op", "started", "id", (json_int_t)id, "pid", pid);
        if (c && m)
                (void)proto_send(c->fd, m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
        json_decref(m);
}

/* Whether exec id (through init) lost its client without detaching; forgets it. */
static bool abandoned_take(sup *s, uint64_t id) {
        for (size_t i = 0; i < s->n_abandoned; i++) {
                if (s->abandoned[i] != id)
                        continue;
                s->abandoned[i] = s->abandoned[--s->n_abandoned];
                return true;
        }
        return false;
}

/* "exited" for exec id; error: why the command could not start (no "started" came).  detached:
 * the exec, once its client is gone, is counted in detached_running (false for a direct exec
 * that was not detached; an exec through init is looked up in the abandoned ones).  told: a
 * direct exec's helper told the client itself; it is told again only when we ended the exec
 * on purpose (timeout, cancel: a reason of ours), a duplicate the client ignores. */
static void exec_exited(sup *s, uint64_t id, json_int_t st, const char *error, bool detached, bool told) {
        client *c = id > 0 ? client_by_exec(s, id) : NULL;
        if (c) {
                c->exec_running = false;
                /* a timeout or a cancel that came as the command was ending did not end it: its
                 * kill is SIGKILL, any other end was the command's own */
                if (c->reason && (streq(c->reason, "timeout") || streq(c->reason, "cancelled")) &&
                        !(WIFSIGNALED((int)st) && WTERMSIG((int)st) == SIGKILL))
                        c->reason = NULL;
                /* killed by SIGKILL (or a shell's 137) while the cgroup counted a new OOM kill */
                if (!c->reason && proto_end_maybe_oom((int)st) && oom_kills(s) > c->oom_kills_at_start)
                        c->reason = "oom";
                /* a signal's end while the sandbox stops is "stopped" (proto_end_reason), as the
                 * caller is told when init is gone first (finish) */
                if (!c->reason && streq(proto_end_reason(s->stopping, (int)st), "stopped"))
                        c->reason = "stopped";
                if (!told || c->reason)
                        client_send(c, proto_exited_msg(id, st, c->reason ? c->reason : "exited", error));
        } else if (detached && !abandoned_take(s, id) && s->detached_running > 0)
                s->detached_running--;
        s->last_activity_ms = now_ms();
        if (s->main_exec_id && id == s->main_exec_id) {
                s->main_exit = proc_status_code((int)st);
                begin_stop(s, "command_exited", RETIRE_GRACE_MS);
        }
        /* `nook run`: the stop its removal asks for, begun now, before that request (its "stop"
         * with "remove" on this exec's connection, which the client keeps; finish waits for it
         * before it decides on the exit record: remove_confirm) */
        if (c && c->remove_when_done && !s->stopping) {
                c->wants_stopped = true;
                begin_stop(s, "user", 0);
        }
}

/* init's spare helper (its request socket, fds[0]): the next exec goes straight to it.  Made
 * non-blocking: a socket that cannot take a request at once is no spare (init is as trusted as
 * the sandbox's code). */
static void take_spare(sup *s, json_int_t pid, int *fds, size_t n_fds) {
        int type = 0;
        socklen_t len = sizeof(type);
        if (n_fds != 1 || pid <= 1 || pid > INT32_MAX || s->stopping ||
                getsockopt(fds[0], SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_SEQPACKET ||
                fd_set_nonblock(fds[0], true) < 0)
                return;
        safe_close(s->spare_fd); /* the one before died unused (killed from inside) */
        s->spare_fd = fds[0];
        fds[0] = -1;
        s->spare_pid = (pid_t)pid;
}

static void handle_init(sup *s) {
        json_t *msg = NULL;
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;
        int r = proto_recv(s->init_sock, &msg, fds, &n_fds);
        if (r <= 0) {
                /* init closed its end: it is exiting; SIGCHLD follows */
                s->init_sock = safe_close(s->init_sock);
                return;
        }
        const char *op = proto_op(msg);
        json_int_t id = json_integer_value(json_object_get(msg, "id"));
        json_int_t pid = json_integer_value(json_object_get(msg, "pid"));
        /* "told": the helper init forked told the client itself (helper_rec.told); only a JSON
         * true counts, anything else is a "no" and the client hears it from us */
        bool told = json_is_true(json_object_get(msg, "told"));
        if (streq(op, "started") && !told) /* with a terminal, the pty master rides along */
                exec_started(s, (uint64_t)id, pid, n_fds > 0 ? fds[0] : -1);
        else if (streq(op, "exited"))
                exec_exited(s, (uint64_t)id, json_integer_value(json_object_get(msg, "status")),
                        json_string_value(json_object_get(msg, "error")), true, told);
        else if (streq(op, "spare"))
                take_spare(s, pid, fds, n_fds);
        proto_close_fds(fds, n_fds);
        json_decref(msg);
}

/* init is exiting (its socket hung up), or gone: then finish() reports every exec "stopped". */
static bool init_gone(sup *s) {
        struct pollfd p = { .fd = s->init_sock, .events = POLLIN };
        return s->init_sock < 0 || (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)));
}

/* A record from a direct exec's helper.  One that ends without "exited" was killed: from inside
 * the sandbox (reported as SIGKILL, with why when the command never started), or by a stop or
 * with init (whose socket hung up first): then finish() reports the exec "stopped". */
static void handle_direct(sup *s, size_t i) {
        static const char helper_killed[] =
                "the exec's helper in the sandbox was killed before the command started; run it again";
        direct_exec *d = &s->direct[i];
        helper_rec rec;
        ssize_t n;
        /* "exited" often follows "started" at once (exec true): both in one round, no more */
        for (int round = 0; round < 2; round++) {
                n = recv(d->fd, &rec, sizeof(rec), MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n != (ssize_t)sizeof(rec) || rec.kind != HELPER_STARTED)
                        break;
                if (!d->started && !rec.told)
                        exec_started(s, d->id, d->pid, -1);
                d->started = true;
        }
        if (n == (ssize_t)sizeof(rec) && rec.kind == HELPER_STARTED)
                return;
        if (n == (ssize_t)sizeof(rec) && rec.kind == HELPER_EXITED) {
                rec.why[sizeof(rec.why) - 1] = 0;
                exec_exited(s, d->id, rec.status, !d->started && rec.why[0] ? rec.why : NULL, d->detached,
                        rec.told != 0);
        } else if (!s->stopping && !init_gone(s))
                exec_exited(s, d->id, SIGKILL, d->started ? NULL : helper_killed, d->detached, false);
        safe_close(d->fd);
        *d = s->direct[--s->n_direct];
}

/* init has exited: the records it and the direct execs' helpers sent before they ended may still
 * wait in their sockets (the SIGCHLD is read first in the round that sees them all).  Reads them
 * now, so that an exec's "exited" (the main command's status, commandExit) is not lost to a
 * slow supervisor. */
static void drain_records(sup *s) {
        for (;;) {
                struct pollfd p = { .fd = s->init_sock, .events = POLLIN };
                if (s->init_sock < 0 || poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
                        break;
                handle_init(s); /* closes the socket at its end */
        }
        for (size_t i = s->n_direct; i-- > 0;) {
                struct pollfd p = { .fd = s->direct[i].fd, .events = POLLIN };
                if (poll(&p, 1, 0) > 0 && p.revents)
                        handle_direct(s, i);
        }
}

/* ---- the loop -------------------------------------------------------------------------------- */

static uint64_t next_deadline(sup *s) {
        uint64_t d = UINT64_MAX;
        const sup_config *c = s->cfg;
        if (s->stopping)
                return s->stop_deadline;
        if (c->max_duration_ms)
                d = s->started_ms + c->max_duration_ms;
        bool busy = s->n_clients > 0 || s->detached_running > 0;
        if (c->idle_timeout_ms && !busy && !s->paused && s->last_activity_ms + c->idle_timeout_ms < d)
                d = s->last_activity_ms + c->idle_timeout_ms;
        /* a gateway's restart waits for the thaw: a successor in the frozen cgroup cannot answer */
        if (!s->paused && sup_egress_deadline(&s->egress) < d)
                d = sup_egress_deadline(&s->egress);
        /* an exec already being killed (reason set) waits for init's report, not for a timer */
        for (size_t i = 0; i < s->n_clients; i++) {
                const client *cl = &s->clients[i];
                if (cl->exec_running && cl->deadline && !cl->reason && cl->deadline < d)
                        d = cl->deadline;
                if (cl->exec_running && cl->hard_kill_at && cl->hard_kill_at < d)
                        d = cl->hard_kill_at;
        }
        return d;
}

/* The last resort for an exec whose helper a SIGKILL did not end either (a command child the
 * guest stopped between fork and exec still holds the helper's socket, so no hang-up comes): it
 * is ended here, SIGKILLed in the client's eyes, and its direct record dropped. */
static void exec_abandon(sup *s, client *c) {
        c->hard_kill_at = 0;
        for (size_t i = 0; i < s->n_direct; i++)
                if (s->direct[i].id == c->exec_id) {
                        safe_close(s->direct[i].fd);
                        s->direct[i] = s->direct[--s->n_direct];
                        break;
                }
        exec_exited(s, c->exec_id, SIGKILL, NULL, false, false);
}

static void check_deadlines(sup *s) {
        uint64_t now = now_ms();
        const sup_config *c = s->cfg;
        if (s->stopping) {
                if (now >= s->stop_deadline) {
                        (void)kill(s->init_pid, SIGKILL);
                        s->stop_deadline = now + 1000; /* SIGCHLD ends the loop; don't spin meanwhile */
                }
                return;
        }
        if (c->max_duration_ms && now >= s->started_ms + c->max_duration_ms) {
                begin_stop(s, "max_duration", RETIRE_GRACE_MS);
                return;
        }
        if (!s->paused)
                sup_egress_tick(&s->egress, now);
        bool busy = s->n_clients > 0 || s->detached_running > 0;
        if (c->idle_timeout_ms && !busy && !s->paused && now >= s->last_activity_ms + c->idle_timeout_ms) {
                begin_stop(s, "idle", RETIRE_GRACE_MS);
                return;
        }
        for (size_t i = 0; i < s->n_clients; i++) {
                client *cl = &s->clients[i];
                if (cl->exec_running && cl->deadline && now >= cl->deadline && !cl->reason) {
                        cl->reason = "timeout";
                        exec_kill(s, cl);
                }
                if (cl->exec_running && cl->hard_kill_at && now >= cl->hard_kill_at) {
                        if (!cl->hard_killed)
                                exec_kill_hard(s, cl);
                        else
                                exec_abandon(s, cl);
                }
        }
}

/* Returns init's wait status once it has exited, -1 while it runs. */
static int reap(sup *s) {
        int st, result = -1;
        for (;;) {
                pid_t p = waitpid(-1, &st, WNOHANG);
                if (p <= 0)
                        return result;
                if (sup_egress_reaped(&s->egress, p, st))
                        continue;
                if (p == s->init_pid)
                        result = st; /* its root's fd goes at the end of finish() */
        }
}

/* The poll timeout, shortened to when the supervisor will have been idle (no event at all) for
 * IDLE_RELEASE_MS, unless it gave its pages back already in this quiet period. */
static int idle_timeout(const sup *s, int timeout, uint64_t now) {
        if (s->idle_released || s->stopping)
                return timeout;
        uint64_t at = s->last_event_ms + IDLE_RELEASE_MS;
        int until = at <= now ? 0 : (int)(at - now);
        return timeout < 0 || until < timeout ? until : timeout;
}

/* After a poll that returned ready: quiet for IDLE_RELEASE_MS, give back the pages the setup
 * and the last execs touched (docs/design/runtime.md, "Idle memory"), once per quiet period. */
static void idle_check(sup *s, int ready) {
        uint64_t now = now_ms();
        if (ready != 0) {
                s->last_event_ms = now;
                s->idle_released = false;
                return;
        }
        if (s->idle_released || s->stopping || now < s->last_event_ms + IDLE_RELEASE_MS)
                return;
        idle_release(IDLE_RELEASE_FILE | IDLE_RELEASE_HEAP | IDLE_RELEASE_STACK);
        s->idle_released = true;
}

/* signalfd, init, listener, clients, network, lifeline, output log, egress, direct execs */
#define SUP_POLL_MAX (3 + MAX_CLIENTS + SUP_NET_MAX_FDS + 1 + OUTLOG_MAX_STREAMS + 1 + MAX_DIRECT)

static int sup_loop(sup *s) {
        for (;;) {
                struct pollfd pfd[SUP_POLL_MAX];
                size_t n = 0;
                pfd[n++] = (struct pollfd){ .fd = s->sig_fd, .events = POLLIN };
                pfd[n++] = (struct pollfd){ .fd = s->init_sock, .events = POLLIN };
                pfd[n++] = (struct pollfd){ .fd = s->listen_fd, .events = POLLIN };
                for (size_t i = 0; i < s->n_clients; i++)
                        pfd[n++] = (struct pollfd){ .fd = s->clients[i].fd, .events = POLLIN };
                size_t n_net = sup_net_pollfds(&s->net, pfd + n); /* after the clients, not in n */
                size_t i_life = n + n_net; /* then the lifeline and the output log's pipes */
                pfd[i_life] = (struct pollfd){ .fd = s->lifeline_fd, .events = POLLIN };
                size_t n_out = outlog_pollfds(&s->out, pfd + i_life + 1);
                size_t i_eg = i_life + 1 + n_out; /* last: the egress gateway's socket */
                size_t n_eg = sup_egress_pollfd(&s->egress, pfd + i_eg);
                size_t i_dir = i_eg + n_eg, n_dir = s->n_direct; /* then the direct execs */
                /* A direct exec's helper tells its client itself and closes its socket right after
                 * its "exited" record (or dies): its records are read at that hang-up, in one
                 * wake-up per exec instead of one per record (POLLHUP needs no event bit). */
                for (size_t i = 0; i < n_dir; i++)
                        pfd[i_dir + i] = (struct pollfd){ .fd = s->direct[i].fd, .events = 0 };
                uint64_t d = next_deadline(s), now = now_ms();
                int timeout = d == UINT64_MAX ? -1
                        : d <= now            ? 0
                                              : (int)((d - now) > 60000 ? 60000 : (d - now));
#ifdef NOOK_TEST_HOOKS
                /* test_cli_run.sh: a supervisor too slow to look while it stops, so that init's
                 * end and its last records arrive in one round (drain_records) */
                const char *lag = s->stopping ? getenv("NOOK_TEST_SUPERVISOR_STOP_LAG_MS") : NULL;
                if (lag)
                        (void)usleep((useconds_t)strtoul(lag, NULL, 10) * 1000);
#endif
                int ready = poll(pfd, i_dir + n_dir, idle_timeout(s, timeout, now));
                if (ready < 0 && errno != EINTR)
                        return 1;
                idle_check(s, ready);
                if (pfd[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(s->sig_fd, &si, sizeof(si)) == sizeof(si))
                                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
                                        begin_stop(s, "signal", RETIRE_GRACE_MS);
                        int st = reap(s);
                        if (st >= 0) {
                                drain_records(s);
                                return st;
                        }
                }
                if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))
                        handle_init(s);
                if (pfd[2].revents & POLLIN)
                        accept_clients(s);
                /* back to front: client_drop moves the last client into the freed slot */
                for (size_t i = n - 3; i-- > 0;)
                        if (pfd[3 + i].revents & (POLLIN | POLLHUP | POLLERR))
                                handle_client(s, i, pfd[3 + i].revents);
                sup_net_dispatch(&s->net, pfd + n, n_net);
                outlog_dispatch(&s->out, pfd + i_life + 1, n_out);
                if (n_eg)
                        sup_egress_dispatch(&s->egress, pfd[i_eg].revents);
                /* back to front: handle_direct moves the last one into the freed slot; execs added
                 * since the poll are at the end, unpolled */
                for (size_t i = n_dir; i-- > 0;)
                        if (pfd[i_dir + i].revents && i < s->n_direct &&
                                pfd[i_dir + i].fd == s->direct[i].fd)
                                handle_direct(s, i);
                if (s->lifeline_fd >= 0 && pfd[i_life].revents) {
                        /* the client that created this tied sandbox is gone: so is the sandbox
                         * (or, started for a copy, it stops as it was before the copy) */
                        s->lifeline_fd = safe_close(s->lifeline_fd);
                        begin_stop(
                                s, s->lifeline_stops ? "starter_gone" : "client_gone", CLIENT_GONE_GRACE_MS);
                }
                check_deadlines(s);
        }
}

/* How long finish waits for the removal that a stop begun by an exec's end ("removeSandbox")
 * is for: the client's "stop" with "remove" usually came during the teardown already. */
#define REMOVE_CONFIRM_MS 2000

/* c began the stop with its exec's end ("removeSandbox") and has not asked for the removal yet:
 * waits for that request (then no exit record: its client deletes the folder) or c's hang-up (it
 * died: "client_gone", remove_owner_gone); after REMOVE_CONFIRM_MS the record is written, which
 * a removal coming later deletes with the rest. */
static void remove_confirm(sup *s, client *c) {
        uint64_t deadline = now_ms() + REMOVE_CONFIRM_MS;
        while (c->remove_when_done && c->wants_stopped && !s->removing && c->fd >= 0) {
                uint64_t now = now_ms();
                struct pollfd p = { .fd = c->fd, .events = POLLIN };
                if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
                        return;
                json_t *msg = NULL;
                int fds[PROTO_MAX_FDS];
                size_t n_fds = 0;
                int r = proto_recv(c->fd, &msg, fds, &n_fds);
                if (r == -EAGAIN || r == -EINTR)
                        continue;
                if (r <= 0) {
                        remove_owner_gone(s, c);
                        return;
                }
                bool stop = streq(proto_op(msg), "stop");
                if (stop)
                        s->removing = json_is_true(json_object_get(msg, "remove"));
                proto_close_fds(fds, n_fds);
                json_decref(msg);
                if (stop)
                        return;
        }
}

static void finish(sup *s, int init_status) {
        nook_error err = { 0 };
        /* The sandbox's main command still ran when init went (the stop's SIGKILL after its
         * timeout, or init's own death): the end of the pid namespace killed it with SIGKILL. */
        if (s->main_exec_id && s->main_exit < 0)
                s->main_exit = 128 + SIGKILL;
        exit_record rec = {
                .stopped_at = now_epoch(), .init_status = init_status, .command_exit = s->main_exit
        };
        const char *why = s->stopping ? s->stop_reason : oom_kills(s) > 0 ? "oom" : "init_died";
        (void)snprintf(rec.reason, sizeof(rec.reason), "%s", why);
        /* "cgroupGone" in "stopped": the remover need not look for our cgroups again.  Without
         * one of ours (rootless without delegation) we say nothing of another's. */
        bool cgroup_gone = false;
        sup_egress_stop(&s->egress); /* first: it is in the cgroup (egress.h) */
        if (s->cg) {
                cgroup_gone = iso_cgroup_destroy(s->cg);
                s->cg = iso_cgroup_free(s->cg);
        }
        sup_net_stop(&s->net);
        outlog_done(&s->out);
        log_debug("sandbox stopped: %s (init status %d)", rec.reason, init_status);
        _cleanup_free_ char *sock = strprintf("%s/ctl.sock", s->run_dir);
        if (sock)
                (void)unlink(sock);
        /* No exit record for a sandbox being removed (nook rm, the end of nook run): its client
         * deletes the folder next, and one more inode there costs (bench/README.md, issue #17).
         * Were that client killed first, the record reconciles as "supervisor_died". */
        for (size_t i = 0; i < s->n_clients; i++)
                remove_confirm(s, &s->clients[i]);
        /* An ephemeral sandbox's writable layer goes with it; its workspace stays.  Not when it
         * is being removed: the remover deletes the folders that hold the layer right after our
         * "stopped", so the deletion is not done twice on the way to it (bench/README.md, issue
         * #17).  A remover killed before that leaves them to the next remove of the name. */
        if (s->cfg->ephemeral && s->cfg->upper && !s->removing) {
                if (path_rm_rf(s->cfg->upper, &err) < 0 || path_rm_rf(s->cfg->work, &err) < 0)
                        log_debug("removing the writable layer: %s, ignoring", err.msg);
        }
        (void)snprintf(rec.reason, sizeof(rec.reason), "%s", s->stopping ? s->stop_reason : why);
        if (!s->removing && exit_record_write(s->state_dir, &rec, &err) < 0)
                log_debug("%s, ignoring", err.msg);
        for (size_t i = 0; i < s->n_clients; i++) {
                client *c = &s->clients[i];
                if (c->exec_running)
                        client_send(c,
                                json_pack("{s:s, s:I, s:i, s:s}", "op", "exited", "id",
                                        (json_int_t)c->exec_id, "status", SIGKILL, "reason", "stopped"));
                if (c->wants_stopped)
                        client_send(c,
                                json_pack("{s:s, s:s, s:b}", "op", "stopped", "reason", rec.reason,
                                        "cgroupGone", cgroup_gone));
                safe_close(c->fd);
        }
        s->spare_fd = safe_close(s->spare_fd);
        for (size_t i = 0; i < s->n_direct; i++)
                safe_close(s->direct[i].fd);
        s->n_direct = 0;
        /* The last holds on the sandbox's mounts: this fd on the overlay's root, whose
         * teardown waits for an RCU grace period (kern_unmount_array), and init's mount
         * namespace, whose unmounting waits for another (namespace_unlock): after the replies,
         * so the remover deletes its folders meanwhile (bench/README.md, issue #17). */
        s->root_fd = safe_close(s->root_fd);
        s->mntns_fd = safe_close(s->mntns_fd);
}

/* The network, with the egress gateway when the config has one (started before init, sup_run):
 * its CA in the bundle, its listeners and the redirect, all before any exec. */
static int start_network(sup *s, nook_error *err) {
        int fds[2] = { -1, -1 };
        int r = sup_net_start(&s->net, s->cfg, s->init_pid, s->run_dir, s->cfg->egress ? fds : NULL, err);
        if (r >= 0 && s->cfg->egress)
                return sup_egress_listen(&s->egress, fds, s->cg, err); /* it keeps fds */
        safe_close(fds[0]);
        safe_close(fds[1]);
        return r;
}

/* The creator's connection with its exec request queued (nook_sandbox_create_exec): served now,
 * as a client that had just connected (accept_clients), before "ready" is said. */
static void adopt_client(sup *s, int fd) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
                safe_close(fd);
                return;
        }
        s->clients[s->n_clients++] = (client){ .fd = fd };
        handle_client(s, s->n_clients - 1, 0);
}

int sup_run(const sup_config *c, const char *state_dir, const char *run_dir, int ready_fd, int lifeline_fd,
        bool lifeline_stops, int client_fd, const char *values) {
        nook_error err = { 0 };
        /* Static and set field by field, not a zeroed local: its tables (clients, direct execs,
         * ~70 KiB) would be written whole, and stay resident in us and in init's copy for the
         * sandbox's life; untouched static pages cost nothing (docs/design/runtime.md, "Idle
         * memory").  sup_run runs once per process. */
        static sup s;
        s.cfg = c;
        s.state_dir = state_dir;
        s.run_dir = run_dir;
        s.init_sock = s.root_fd = s.mntns_fd = s.listen_fd = s.sig_fd = s.spare_fd = -1;
        s.lifeline_fd = lifeline_fd;
        s.lifeline_stops = lifeline_stops;
        s.main_exit = -1;
        s.egress = SUP_EGRESS_INIT;
        outlog_init(&s.out, state_dir);
        sigset_t mask;
        int r;

        log_set_sink(sup_log);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        (void)sigprocmask(SIG_BLOCK, &mask, NULL);
        (void)signal(SIGPIPE, SIG_IGN);
        s.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (s.sig_fd < 0)
                r = nook_err_errno(&err, NOOK_E_IO, "Cannot create a signalfd");
        else
                r = sup_egress_start(&s.egress, c, state_dir, values, &err);
        if (r >= 0)
                r = start_init(&s, &err);
        if (r >= 0)
                r = start_network(&s, &err);
        if (r >= 0)
                r = listen_control(&s, &err);
        if (r < 0) {
                log_debug("setup failed: %s", err.msg);
                sup_net_stop(&s.net);
                sup_egress_stop(&s.egress);
                if (s.init_pid > 0) {
                        (void)kill(s.init_pid, SIGKILL);
                        (void)pid_wait(s.init_pid, NULL);
                }
                if (s.cg) {
                        (void)iso_cgroup_destroy(s.cg);
                        s.cg = iso_cgroup_free(s.cg);
                }
                if (s.listen_fd >= 0) {
                        _cleanup_free_ char *sock = strprintf("%s/ctl.sock", run_dir);
                        if (sock)
                                (void)unlink(sock);
                }
                iso_seccomp_prog_done(&s.seccomp);
                outlog_done(&s.out);
                safe_close(s.mntns_fd);
                safe_close(s.lifeline_fd);
                safe_close(client_fd);
                notify_ready(ready_fd, &err, 0);
                return 1;
        }
        s.started_ms = s.last_activity_ms = s.last_event_ms = now_ms();
        log_debug("sandbox '%s' running, init pid %d", c->name, (int)s.init_pid);
        if (client_fd >= 0)
                adopt_client(&s, client_fd);
        notify_ready(ready_fd, NULL, s.init_pid);
        safe_close(ready_fd);
        iso_seccomp_prog_done(&s.seccomp); /* init has its copy */
        int st = sup_loop(&s);
        finish(&s, st);
        safe_close(s.lifeline_fd);
#ifdef NOOK_TEST_HOOKS
        /* test_sandbox_lifecycle.sh: slow to exit after the replies, which nook rm must wait out */
        const char *delay = getenv("NOOK_TEST_SUPERVISOR_EXIT_DELAY_MS");
        if (delay)
                (void)usleep((useconds_t)strtoul(delay, NULL, 10) * 1000);
#endif
        return 0;
}
