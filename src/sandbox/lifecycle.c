/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox operations: create, start, stop, remove, inspect, list.  Every state change of one
 * name holds that name's lock file (<runtime folder>/.locks/<name>.lock), so separate processes never
 * interleave on one sandbox; the database keeps the records consistent across names. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "config.h"
#include "image/unpack.h"
#include "sandbox/baseline.h"
#include "sandbox/ctx.h"
#include "sandbox/egress.h"
#include "sandbox/idclaim.h"
#include "sandbox/image.h"
#include "sandbox/lifecycle.h"
#include "sandbox/pause.h"
#include "sandbox/state.h"
#include "sandbox/provision.h"
#include "sandbox/rundir.h"
#include "sandbox/snapshot.h"
#include "sandbox/spec.h"
#include "sandbox/spec_egress.h"
#include "store/idrange.h"
#include "store/store.h"
#include "supervisor/config.h"
#include "supervisor/exitfile.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/path.h"
#include "util/proc.h"
#include "util/str.h"
#include "util/testhook.h"

#define READY_TIMEOUT_MS 60000
#define DEFAULT_STOP_MS 10000

/* ---- the supervisor -------------------------------------------------------------------------- */

/* Where nook-supervisor lives: $NOOK_SUPERVISOR, else sb_libexec_find's order. */
static char *find_supervisor(void) {
        return sb_libexec_find("nook-supervisor", "supervisor", "NOOK_SUPERVISOR");
}

static int read_ready(int fd, json_t **ret, nook_error *err) {
        char buf[2048];
        size_t len = 0;
        uint64_t deadline = now_ms() + READY_TIMEOUT_MS;
        while (len < sizeof(buf) - 1) {
                uint64_t now = now_ms();
                if (now >= deadline)
                        return nook_err_set(err, NOOK_E_TIMEOUT,
                                "The sandbox supervisor did not report within %d s",
                                READY_TIMEOUT_MS / 1000);
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, (int)(deadline - now));
                if (r < 0 && errno == EINTR)
                        continue;
                ssize_t k = read(fd, buf + len, sizeof(buf) - 1 - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                len += (size_t)k;
                if (memchr(buf, '\n', len))
                        break;
        }
        buf[len] = 0;
        json_t *m = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
        if (!m || !json_is_object(m)) {
                json_decref(m);
                return nook_err_set(err, NOOK_E_INTERNAL,
                        "The sandbox supervisor exited during setup; see its log with 'nook logs --system NAME'");
        }
        *ret = m;
        return 0;
}

/* Sends all of data on a socket we hold (the config or the secrets), then ends it: EOF is
 * what the supervisor reads up to.  A socket, not a pipe: a supervisor that died early gives
 * EPIPE without SIGPIPE (MSG_NOSIGNAL) in a caller such as Node. */
static int send_all(int fd, const char *data, const char *what, nook_error *err) {
        size_t len = strlen(data), off = 0;
        while (off < len) {
                ssize_t k = send(fd, data + off, len - off, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_INTERNAL,
                                "Cannot hand %s to the sandbox supervisor; see 'nook logs --system NAME'",
                                what);
                off += (size_t)k;
        }
        (void)shutdown(fd, SHUT_WR);
        return 0;
}

/* A supervisor started ahead of its config (docs/design/runtime.md, "Processes"): it execs and
 * loads its libraries on the other CPU while this process records the sandbox and makes its
 * folders, then blocks reading fd 6 until supervisor_send_config sends the config.  Until then
 * it has made nothing: if we fail, or die, it reads EOF and exits (sup_start_done kills it
 * anyway), and reconcile skips it while it is ours (n->spawning, state.c). */
typedef struct sup_start {
        nook *n;
        pid_t pid; /* 0: none, or handed over */
        int ready; /* read end of its ready pipe */
        int config; /* our end of its config socket (fd 6) */
        int secrets; /* our end of its secrets socket (fd 5), -1: no secrets */
        int lifeline; /* write end of a tied sandbox's lifeline (its fd 4), -1: not tied */
} sup_start;
#define SUP_START_INIT                                                                                      \
        { .ready = -1, .config = -1, .secrets = -1, .lifeline = -1 }

static void sup_start_done(sup_start *s) {
        s->ready = safe_close(s->ready);
        s->config = safe_close(s->config);
        s->secrets = safe_close(s->secrets);
        s->lifeline = safe_close(s->lifeline);
        if (s->pid > 0) {
                (void)kill(s->pid, SIGKILL);
                (void)sb_wait_gone(s->pid, 0, 5000);
                s->pid = 0;
        }
        if (s->n)
                s->n->spawning = 0;
}

/* The child's fds 3 to 7 from ours: copies above 7 first, since a source among 3..7 (a caller
 * with few fds open) would otherwise be overwritten by an earlier dup2 of the same spawn.
 * child[i] -1: none.  Returns 0 or -errno; hi[] are closed by the caller. */
static int spawn_fds(posix_spawn_file_actions_t *fa, const int child[5], int hi[5]) {
        for (int i = 0; i < 5; i++) {
                if (child[i] < 0)
                        continue;
                hi[i] = fcntl(child[i], F_DUPFD_CLOEXEC, 8);
                if (hi[i] < 0)
                        return -errno;
                posix_spawn_file_actions_adddup2(fa, hi[i], 3 + i);
        }
        return 0;
}

/* Starts nook-supervisor by exec (posix_spawn: safe from a threaded caller such as Node) with a
 * clean environment, in its own session.  Its config and secrets come later (supervisor_send_config). */
static int supervisor_spawn(nook *n, const char *state_dir, const char *run_dir, bool tied, bool tie_stops,
        bool secrets, int client_fd, sup_start *s, nook_error *err) {
        _cleanup_free_ char *bin = find_supervisor();
        _cleanup_close_pair_ int cfg[2] = { -1, -1 }, sec[2] = { -1, -1 }, rdy[2] = { -1, -1 },
                                 life[2] = { -1, -1 };
        if (!bin)
                return nook_err_oom(err);
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cfg) < 0 ||
                (secrets && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sec) < 0) ||
                pipe2(rdy, O_CLOEXEC) < 0 || (tied && pipe2(life, O_CLOEXEC) < 0))
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot create the sockets and pipes of the supervisor");
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&attr);
        int child[5] = { rdy[1], life[0], sec[1], cfg[1], client_fd }, hi[5] = { -1, -1, -1, -1, -1 };
        int r = spawn_fds(&fa, child, hi);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        /* "--state" first: reconcile finds a supervisor by it (state.c:find_supervisor_of) */
        char *argv[16] = { bin, (char *)"--state", (char *)state_dir, (char *)"--run", (char *)run_dir,
                (char *)"--config-fd", (char *)"6", (char *)"--ready-fd", (char *)"3" };
        size_t na = 9;
        if (tied) {
                argv[na++] = (char *)(tie_stops ? "--stop-lifeline-fd" : "--lifeline-fd");
                argv[na++] = (char *)"4";
        }
        if (secrets) {
                argv[na++] = (char *)"--secrets-fd";
                argv[na++] = (char *)"5";
        }
        if (client_fd >= 0) {
                argv[na++] = (char *)"--client-fd";
                argv[na++] = (char *)"7";
        }
        const char *dbg = secure_getenv("NOOK_DEBUG");
        _cleanup_free_ char *dbg_env = strprintf("NOOK_DEBUG=%s", dbg ? dbg : "");
        char *envp[5] = { (char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                dbg_env };
#ifdef NOOK_TEST_HOOKS
        /* test_sandbox_lifecycle.sh: a supervisor slow to exit after its replies; test_cli_run.sh:
         * one slow to look while it stops (sup.c) */
        size_t n_env = 2;
        _cleanup_free_ char *hook_env = NULL, *lag_env = NULL;
        const char *delay = secure_getenv("NOOK_TEST_SUPERVISOR_EXIT_DELAY_MS");
        if (delay && (hook_env = strprintf("NOOK_TEST_SUPERVISOR_EXIT_DELAY_MS=%s", delay)))
                envp[n_env++] = hook_env;
        const char *lag = secure_getenv("NOOK_TEST_SUPERVISOR_STOP_LAG_MS");
        if (lag && (lag_env = strprintf("NOOK_TEST_SUPERVISOR_STOP_LAG_MS=%s", lag)))
                envp[n_env++] = lag_env;
#endif
        pid_t pid;
        int dup_errno = -r;
        if (r == 0)
                r = posix_spawn(&pid, bin, &fa, &attr, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        for (int i = 0; i < 5; i++)
                safe_close(hi[i]);
        if (dup_errno > 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, dup_errno, "Cannot duplicate the supervisor's descriptors");
        if (r != 0)
                return nook_err_errnum(
                        err, NOOK_E_MISSING_FEATURE, r, "Cannot start the supervisor '%s'", bin);
        /* Its exec ran on our CPU, and our wake-up at its exec preempted it there: our ~0.7 ms of
         * database and folder work before the hand-over ran before its exec and loading, not
         * beside them (bench/README.md, issue #17).  It takes our whole mask back once it has its
         * config (main.c), which we send after this. */
        proc_start_off_our_cpu(pid, NULL);
        sb_children_add(pid);
        n->spawning = pid;
        *s = (sup_start){ .n = n,
                .pid = pid,
                .ready = TAKE_FD(rdy[0]),
                .config = TAKE_FD(cfg[0]),
                .secrets = TAKE_FD(sec[0]),
                .lifeline = TAKE_FD(life[1]) };
        return 0;
}

/* Sends the supervisor its config and the secrets' values (JSON, or NULL). */
static int supervisor_send_config(sup_start *s, const char *config, const char *values, nook_error *err) {
        int r = send_all(s->config, config, "the sandbox config", err);
        s->config = safe_close(s->config);
        if (r >= 0 && values)
                r = send_all(s->secrets, values, "the secrets", err);
        s->secrets = safe_close(s->secrets);
        return r;
}

/* Then waits for its ready line.  On success the supervisor is the sandbox's; on failure it is
 * gone. */
static int supervisor_await_ready(sup_start *s, nook_error *err) {
        pid_t pid = s->pid;
        json_t *m = NULL;
        int r = read_ready(s->ready, &m, err);
        s->ready = safe_close(s->ready);
        if (r < 0)
                return r; /* it gave up or hangs: sup_start_done kills and reaps it */
        s->n->spawning = 0;
        if (!json_is_true(json_object_get(m, "ok"))) {
                r = proto_error_from_msg(m, err);
                json_decref(m);
                s->pid = 0;
                /* it has cleaned up and is exiting; a cleanup that hangs must not hold the lock */
                if (!sb_wait_gone(pid, 0, READY_TIMEOUT_MS)) {
                        (void)kill(pid, SIGKILL);
                        (void)sb_wait_gone(pid, 0, 5000);
                }
                return r;
        }
        json_decref(m);
        s->pid = 0;
        return 0;
}

/* ---- create ------------------------------------------------------------------------------------ */

static int mkdir_owned(const char *p, mode_t mode, uid_t uid, gid_t gid, nook_error *err) {
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", p);
        if (chown(p, uid, gid) < 0 && errno != EPERM)
                return nook_err_errno(err, NOOK_E_IO, "Cannot give '%s' to the sandbox's root", p);
        return 0;
}

/* The per-sandbox state folder: config.json, the writable layer (upper, work), the socket.
 * image_digest: in, the image a kept writable layer sits on (NULL: resolve spec->image); out, the
 * registry image's digest for the record (NULL for "host" or a directory). */
static int prepare_state(nook *n, const char *name, const sb_spec *spec, bool keep_upper, bool one_shot,
        const char *sdir, const char *rundir, bool rundir_fresh, const char *wsdir, uid_t ruid, gid_t rgid,
        char **image_digest, char **ret_config, nook_error *err) {
        _cleanup_free_ char *upper = strprintf("%s/upper", sdir), *work = strprintf("%s/work", sdir);
        _cleanup_free_ char *sdirs = strprintf("%s/sandboxes", n->home);
        _cleanup_free_ char *wsdirs = strprintf("%s/workspaces", n->home);
        /* config.json of older versions: the config goes over a socket now (supervisor/config.h) */
        _cleanup_free_ char *cfgp = strprintf("%s/config.json", sdir);
        int r;
        if (!upper || !work || !sdirs || !wsdirs || !cfgp)
                return nook_err_oom(err);
        r = path_mkdir_p(sdirs, 0700, err);
        if (r < 0)
                return r;
        r = path_mkdir_p(wsdirs, 0711, err);
        if (r < 0)
                return r;
        /* The state folder is made only when something goes in it (below: the layer, the
         * scripts, the egress gateway's log; baseline files, sb_baseline_capture): a create
         * without them has none, and is spared its mkdir and its deletion (docs/design/
         * runtime.md, "The state folder"). */
        bool made = access(sdir, F_OK) == 0 || errno != ENOENT;
        bool fresh = !made || mkdir(sdir, 0700) == 0; /* nothing of an earlier run to clear in it */
        if (!fresh && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", sdir);
        /* the sandbox's root walks to its upper layer through an fd, yet the overlay's work dir
         * must be on the same filesystem as upper: both live here */
        if (!fresh && !keep_upper) {
                if ((r = path_rm_rf(upper, err)) < 0)
                        return r;
        }
        if (!fresh && (r = path_rm_rf(work, err)) < 0)
                return r;
        if (!fresh)
                (void)unlink(cfgp);
        /* the last run's exit record: compared by the second only, it would otherwise explain a
         * supervisor of this run killed within the same second (stop, start, SIGKILL) */
        _cleanup_free_ char *exitp = strprintf("%s/exit.json", sdir);
        if (!exitp)
                return nook_err_oom(err);
        if (!fresh)
                (void)unlink(exitp);
        /* An ephemeral layer in the runtime folder when it can hold one (rundir.h): on its tmpfs
         * the layer and the overlay's own work folders cost no inodes on NOOK_HOME's disk, and no
         * discard at their deletion (bench/README.md, issue #17). */
        if (!rundir_fresh)
                sb_run_dir_clean(rundir, /* keep_log= */ true); /* a layer a killed run left there */
        r = spec->sticky || keep_upper ? 0 : sb_run_dir_layer(rundir, err);
        if (r < 0)
                return r;
        if (r > 0) {
                free(upper);
                free(work);
                upper = strprintf("%s/upper", rundir);
                work = strprintf("%s/work", rundir);
                if (!upper || !work)
                        return nook_err_oom(err);
        }
        bool needs_sdir = r == 0 || (spec->scripts && json_object_size(spec->scripts) > 0) ||
                sb_spec_wants_egress(spec); /* egress.log */
        if (!made && needs_sdir && mkdir(sdir, 0700) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", sdir);
        r = mkdir_owned(upper, 0755, ruid, rgid, err);
        if (r < 0)
                return r;
        r = mkdir_owned(work, 0700, ruid, rgid, err);
        if (r < 0)
                return r;
        r = mkdir_owned(wsdir, 0755, n->ws_uid, n->ws_gid, err);
        if (r < 0)
                return r;

        sb_image img = { 0 };
        r = spec->snapshot ? sb_snapshot_image(n, spec, wsdir, &img, err)
                           : sb_image_resolve(n, *image_digest ? *image_digest : spec->image,
                                     *image_digest ? "never" : spec->pull_policy, &img, err);
        if (r < 0)
                return r;
        /* The image's env goes below the spec's; its user is the default when the spec has none. */
        _cleanup_strv_free_ char **env = strv_copy((const char *const *)img.env);
        if (!env) {
                sb_image_done(&img);
                return nook_err_oom(err);
        }
        STRV_FOREACH (e, spec->env)
                if (strv_env_set(&env, *e) < 0) {
                        sb_image_done(&img);
                        return nook_err_oom(err);
                }
        sup_config c = { .name = (char *)name,
                .lowers = img.lowers,
                .ro_binds = img.ro_binds,
                .upper = upper,
                .work = work,
                .workspace = (char *)wsdir,
                .env = env,
                .workdir = spec->workdir,
                .user = spec->user ? spec->user : img.user,
                .profile = spec->security,
                .network = spec->network,
                .net_rules = spec->net_rules,
                .net_domains = spec->net_domains,
                .ports = spec->ports,
                .max_duration_ms = spec->max_duration_secs * 1000,
                .idle_timeout_ms = spec->idle_timeout_secs * 1000,
                .ephemeral = !spec->sticky,
                .one_shot = one_shot,
                .home = n->home,
                .cpus = spec->cpus,
                .memory_bytes = spec->memory_mib * 1024 * 1024,
                .pids_max = sb_spec_pids_limit(spec),
                .pids_default = !spec->pids_max,
                .id_base = n->idmap ? (uint32_t)ruid : 0,
                .ws_uid = n->ws_uid,
                .ws_gid = n->ws_gid };
        r = sb_provision(n, spec, sdir, wsdir, upper, &c, &env, err);
        if (r >= 0)
                r = sb_egress_prepare(spec, &img, upper, ruid, rgid, &env, &c.egress, err);
        if (r >= 0) {
                c.env = env;
                r = sup_config_to_json(&c, ret_config, err);
        }
        if (r >= 0) {
                free(*image_digest);
                *image_digest = TAKE_PTR(img.digest);
        }
        sb_provision_done(&c);
        json_decref(c.egress);
        sb_image_done(&img);
        return r;
}

static int rec_fill(
        sandbox_rec *rec, const char *name, const sb_spec *spec, const char *spec_json, nook_error *err) {
        sandbox_rec_done(rec);
        rec->name = strdup(name);
        rec->state = strdup("creating");
        rec->image = strdup(spec->image);
        rec->spec_json = strdup(spec_json);
        rec->labels = strv_copy((const char *const *)spec->labels);
        rec->sticky = spec->sticky;
        rec->created_at = now_epoch();
        if (!rec->name || !rec->state || !rec->image || !rec->spec_json || !rec->labels)
                return nook_err_oom(err);
        return 0;
}

static int stop_locked(
        nook *n, sandbox_rec *rec, uint64_t timeout_ms, bool removing, bool *ret_exiting, nook_error *err);

static int set_str(char **field, const char *value, nook_error *err) {
        char *c = value ? strdup(value) : NULL;
        if (value && !c)
                return nook_err_oom(err);
        free(*field);
        *field = c;
        return 0;
}

/* A branch's record: the image its copied layer sits on, its source and branch point. */
static int rec_branch(sandbox_rec *rec, const sb_create_extra *x, nook_error *err) {
        int r = set_str(&rec->image_digest, x->image_digest, err);
        if (r >= 0)
                r = set_str(&rec->branch_of, x->branch_of, err);
        if (r >= 0)
                r = set_str(&rec->branch_point, x->branch_point, err);
        return r;
}

/* The handle keeps a tied sandbox's lifeline until nook_close (or the process's end), or until
 * sb_lifeline_drop. */
static int lifeline_keep(nook *n, const char *name, int fd, nook_error *err) {
        struct ctx_lifeline *l = reallocarray(n->lifelines, n->n_lifelines + 1, sizeof(*l));
        char *nm = strdup(name);
        if (l)
                n->lifelines = l;
        if (!l || !nm) {
                free(nm);
                safe_close(fd);
                return nook_err_oom(err);
        }
        l[n->n_lifelines++] = (struct ctx_lifeline){ .name = nm, .fd = fd };
        return 0;
}

void sb_lifeline_drop(nook *n, const char *name) {
        for (size_t i = n->n_lifelines; i-- > 0;)
                if (streq(n->lifelines[i].name, name)) {
                        safe_close(n->lifelines[i].fd);
                        free(n->lifelines[i].name);
                        n->lifelines[i] = n->lifelines[--n->n_lifelines];
                }
}

/* The baseline diff and merge compare with (docs/design/diff-merge.md): taken once the
 * workspace and the writable layer are complete and before the supervisor starts, so no guest
 * write precedes it. */
static int baseline_capture(nook *n, const char *name, const char *sdir, const char *wsdir, unsigned kept,
        bool fresh_upper, bool sticky, unsigned *ret_empty, nook_error *err) {
        _cleanup_free_ char *upper = sb_upper_path(n, name, sdir);
        if (!upper)
                return nook_err_oom(err);
        return sb_baseline_capture(
                sdir, wsdir, upper, kept, fresh_upper, /* upper_durable= */ sticky, ret_empty, err);
}

/* The secrets' values (sb_egress_values_json) are wiped before they are freed. */
static void values_freep(char **p) {
        if (*p) {
                explicit_bzero(*p, strlen(*p));
                free(*p);
        }
}

/* Kill points (util/testhook.h): NOOK_TEST_CREATE_KILL_AT=spawned|recorded|prepared|handed kills
 * the creating process after the supervisor's spawn; after the "creating" record; with the folders
 * made, before the supervisor has its config; after the "running" record, while the sandbox is set
 * up (and =restored: snapshot.c, a snapshot's workspace unpacked, not yet in place);
 * NOOK_TEST_REMOVE_KILL_AT=stopped the removing one, once the sandbox stopped and before its
 * folders and record go. */

/* Saves the "creating" record (a new one, or over the existing) and acquires the sandbox's host
 * id range in the same transaction. */
static int rec_save_with_ids(nook *n, store *st, const sandbox_rec *rec, bool existed, uid_t *ret_uid,
        gid_t *ret_gid, nook_error *err) {
        int r = store_begin(st, err);
        if (r < 0)
                return r;
        r = existed ? store_sandbox_update(st, rec, err) : store_sandbox_insert(st, rec, err);
        if (r >= 0)
                r = ctx_sandbox_root(n, rec->name, /* acquire= */ true, ret_uid, ret_gid, err);
        if (r < 0) {
                store_rollback(st);
                return r;
        }
        return store_commit(st, err);
}

/* Creates (or re-creates over the same workspace) and starts; the caller holds the lock. */
static int create_locked_client(nook *n, const char *name, const sb_spec *spec, unsigned flags,
        const sb_create_extra *x, int client_fd, nook_error *err);

static int create_locked(nook *n, const char *name, const sb_spec *spec, unsigned flags, nook_error *err) {
        return create_locked_client(n, name, spec, flags, NULL, -1, err);
}

/* x (may be NULL): a branch's extras (lifecycle.h). */
int sb_create_locked(nook *n, const char *name, const sb_spec *spec, unsigned flags,
        const sb_create_extra *x, nook_error *err) {
        return create_locked_client(n, name, spec, flags, x, -1, err);
}

/* client_fd: see sb_create; not taken here (the spawn gives the supervisor a copy). */
static int create_locked_client(nook *n, const char *name, const sb_spec *spec, unsigned flags,
        const sb_create_extra *x, int client_fd, nook_error *err) {
        _cleanup_free_ char *spec_json = sb_spec_to_json(spec), *sdir = NULL, *wsdir = NULL;
        _cleanup_(sandbox_rec_done) sandbox_rec rec = { 0 };
        store *st;
        bool existed, ws_existed, keep_upper = false;
        int r;

        if (!spec_json)
                return nook_err_oom(err);
        r = ctx_dirs(n, name, &sdir, &wsdir, err);
        if (r < 0)
                return r;
        /* The supervisor first: its exec and loading (~1 ms of CPU) run on the other CPU while we
         * open the database, record the sandbox and make its folders; it waits for its config
         * (supervisor_spawn says why a kill at any point leaks nothing). */
        _cleanup_free_ char *rundir = NULL;
        _cleanup_(values_freep) char *values = sb_egress_values_json(spec);
        _cleanup_(sup_start_done) sup_start sup = SUP_START_INIT;
        r = sb_run_dir(n, name, &rundir, err);
        if (r >= 0)
                r = supervisor_spawn(n, sdir, rundir, flags & (NOOK_CREATE_TIED | SB_CREATE_TIED_STOP),
                        flags & SB_CREATE_TIED_STOP, values != NULL, client_fd, &sup, err);
        if (r < 0)
                return r;
        test_kill_at("NOOK_TEST_CREATE_KILL_AT", "spawned");
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_sandbox_get(st, name, &rec, err);
        if (r < 0 && r != -NOOK_E_NOT_FOUND)
                return r;
        existed = r >= 0;
        if (existed && (flags & NOOK_CREATE_EXCLUSIVE))
                return nook_err_set(err, NOOK_E_EXISTS,
                        "Sandbox '%s' exists (%s); a run makes a new sandbox: run the command in that one with "
                        "'nook exec %s' (after 'nook start %s' if it is stopped), choose another --name, or "
                        "remove it first ('nook rm %s')",
                        name, rec.state, name, name, name);
        if (existed) {
                r = sb_reconcile(n, &rec, err);
                if (r < 0)
                        return r;
                if (!streq(rec.state, "stopped")) {
                        if (!(flags & NOOK_CREATE_REPLACE))
                                return nook_err_set(err, NOOK_E_EXISTS,
                                        "Sandbox '%s' is already running; stop it first, or create with --replace (replace: true in the API)",
                                        name);
                        r = stop_locked(n, &rec, DEFAULT_STOP_MS, false, NULL, err);
                        if (r < 0)
                                return r;
                }
                /* A sticky sandbox keeps its writable layer across create of the same name. */
                keep_upper = rec.sticky && spec->sticky;
        }
        ws_existed = access(wsdir, F_OK) == 0;
        int64_t created = existed ? rec.created_at : 0;
        /* A kept writable layer stays on the image it was made on, wherever its tag points now. */
        char *pin =
                keep_upper && rec.image && streq(rec.image, spec->image) ? TAKE_PTR(rec.image_digest) : NULL;
        /* a branch stays one across stop and start */
        char *branch_of = TAKE_PTR(rec.branch_of), *branch_point = TAKE_PTR(rec.branch_point);
        unsigned kept_empty = rec.empty_baselines; /* an earlier create's (baseline.h) */
        r = rec_fill(&rec, name, spec, spec_json, err);
        rec.image_digest = pin;
        rec.branch_of = branch_of;
        rec.branch_point = branch_point;
        if (r >= 0 && x) {
                keep_upper = x->keep_upper;
                r = rec_branch(&rec, x, err);
        }
        if (r < 0)
                return r;
        /* Empty baselines are bits of the record, not files in the state folder (baseline.h): a
         * create of a new workspace and an ephemeral layer makes no state folder at all.  The
         * record saved next has the guess, the capture below makes it exact. */
        bool provisions = json_object_size(spec->setup_files) > 0 || json_object_size(spec->scripts) > 0;
        rec.empty_baselines = (flags & NOOK_CREATE_NO_BASELINE)
                ? kept_empty
                : sb_baseline_guess_empty(kept_empty, !keep_upper && !provisions,
                          !ws_existed && !spec->snapshot && !provisions);
        rec.one_shot = (flags & NOOK_CREATE_ONE_SHOT) != 0;
        if (created)
                rec.created_at = created;
        /* The record and the sandbox's own host id range (docs/design/security.md): one write
         * transaction, not two (each costs a WAL append and the database's write lock). */
        uid_t ruid = 0;
        gid_t rgid = 0;
        r = rec_save_with_ids(n, st, &rec, existed, &ruid, &rgid, err);
        if (r < 0)
                return r;
        test_kill_at("NOOK_TEST_CREATE_KILL_AT", "recorded");
        _cleanup_free_ char *config = NULL;
        r = sb_run_dir_make(rundir, err);
        if (r >= 0)
                r = prepare_state(n, name, spec, keep_upper, flags & NOOK_CREATE_ONE_SHOT, sdir, rundir,
                        r > 0, wsdir, ruid, rgid, &rec.image_digest, &config, err);
        if (r >= 0 && !(flags & NOOK_CREATE_NO_BASELINE))
                r = baseline_capture(n, name, sdir, wsdir, kept_empty, !keep_upper, spec->sticky,
                        &rec.empty_baselines, err);
        if (r >= 0)
                test_kill_at("NOOK_TEST_CREATE_KILL_AT", "prepared");
        bool handed = r >= 0; /* the supervisor has its config: it may have made its cgroups, its log */
        if (r >= 0)
                r = supervisor_send_config(&sup, config, values, err);
        /* The record says "running", with the supervisor, while the sandbox is set up (~4 ms) rather
         * than after its "ready": that update was ~0.25 ms of every create's wall time (bench/
         * README.md, issue #17).  Killed from here on, we leave a supervisor with its config, which
         * a reconcile finds serving (running) or gone (stopped, with its exit record's reason or
         * supervisor_died); a setup that fails rewrites the record below. */
        if (r >= 0) {
                rec.supervisor_pid = sup.pid;
                rec.supervisor_start = proc_start_time(sup.pid);
                rec.started_at = now_epoch();
                rec.stopped_at = 0;
                free(rec.stop_reason);
                rec.stop_reason = NULL;
                r = sb_rec_set_state(&rec, "running", err);
        }
        if (r >= 0)
                r = store_sandbox_update_state(st, &rec, err); /* its labels went in with the first save */
        if (r >= 0) {
                test_kill_at("NOOK_TEST_CREATE_KILL_AT", "handed");
                r = supervisor_await_ready(&sup, err);
        }
        if (r >= 0 && sup.lifeline >= 0)
                r = lifeline_keep(n, name, TAKE_FD(sup.lifeline), err);
        if (r < 0) {
                /* Nothing half-made stays: the supervisor, the state folder, the runtime folder, a
                 * workspace we made, the record.  But when the supervisor failed without a reason
                 * of its own (it died, hung, or its init died: an internal error or a timeout), its
                 * log is where the error points ('nook logs --system NAME'): the runtime folder
                 * keeps it until the next create of the name or 'nook rm'. */
                nook_error ignore;
                bool keep_log = handed && (r == -NOOK_E_INTERNAL || r == -NOOK_E_TIMEOUT);
                sup_start_done(&sup);
                sb_cgroup_remove(n, name); /* a supervisor killed in setup cleaned nothing */
                if (!keep_upper) {
                        (void)path_rm_rf(sdir, &ignore);
                        rec.empty_baselines = 0; /* the baselines go with the state folder */
                }
                sb_run_dir_clean(rundir, keep_log || !handed);
                if (!handed)
                        (void)rmdir(rundir); /* unless it keeps a log of an earlier failed create */
                if (!ws_existed)
                        (void)path_rm_rf(wsdir, &ignore);
                if (existed) {
                        (void)sb_rec_set_state(&rec, "stopped", &ignore);
                        rec.supervisor_pid = 0;
                        rec.supervisor_start = 0;
                        (void)store_sandbox_update(st, &rec, &ignore);
                } else
                        (void)store_sandbox_delete(st, name, &ignore);
                return r;
        }
        return 0;
}

int nook_sandbox_create(nook *n, const char *name, const char *spec_json, unsigned flags, nook_error *err) {
        return sb_create(n, name, spec_json, flags, -1, err);
}

int sb_create(
        nook *n, const char *name, const char *spec_json, unsigned flags, int client_fd, nook_error *err) {
        _cleanup_close_ int lock = -1, client = client_fd;
        sb_spec spec = { 0 };
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        if ((r = sb_spec_parse(spec_json, &spec, err)) < 0)
                return r;
        r = sb_spec_check_secret_values(&spec, err);
        if (r >= 0)
                r = sb_spec_cpus_check_host(spec.cpus, err);
        if (r >= 0)
                r = sb_snapshot_fill_spec(n, &spec, err);
        if (r >= 0)
                r = sb_lock(n, name, &lock, err);
        if (r >= 0)
                r = create_locked_client(n, name, &spec, flags, NULL, client, err);
        sb_spec_done(&spec);
        if (r < 0)
                return nook_err_wrap(err, "creating sandbox '%s'", name);
        return 0;
}

/* The start of every state change of one existing sandbox: a valid name, its lock held, its
 * record read. */
static int open_locked(
        nook *n, const char *name, int *ret_lock, store **ret_st, sandbox_rec *ret_rec, nook_error *err) {
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        r = sb_lock(n, name, ret_lock, err);
        if (r < 0)
                return r;
        r = ctx_store(n, ret_st, err);
        if (r < 0)
                return r;
        return store_sandbox_get(*ret_st, name, ret_rec, err);
}

int nook_sandbox_start(nook *n, const char *name, nook_error *err) {
        return sb_start(n, name, 0, err);
}

int sb_start(nook *n, const char *name, unsigned flags, nook_error *err) {
        _cleanup_close_ int lock = -1;
        sandbox_rec rec = { 0 };
        sb_spec spec = { 0 };
        store *st;
        int r = open_locked(n, name, &lock, &st, &rec, err);
        if (r < 0)
                return r;
        if ((r = sb_reconcile(n, &rec, err)) >= 0) {
                if (streq(rec.state, "running"))
                        r = 0; /* already running: nothing to do */
                else if ((r = sb_spec_parse(rec.spec_json, &spec, err)) >= 0)
                        r = create_locked(n, name, &spec, flags, err);
        }
        sb_spec_done(&spec);
        sandbox_rec_done(&rec);
        if (r < 0)
                return nook_err_wrap(err, "starting sandbox '%s'", name);
        return 0;
}

/* ---- control socket, stop ---------------------------------------------------------------------- */

/* Asks the supervisor on fd (closed here) to stop ("remove": it writes no exit record, the
 * folder goes next), and reads fd until it says "stopped" or hangs up (or timeout_ms + 5 s
 * pass). */
/* Sends "stop" on fd (taken) and waits for "stopped".  True when it came saying the supervisor
 * removed its cgroups ("cgroupGone"). */
static bool stop_request(int fd, uint64_t timeout_ms, bool removing) {
        json_t *m = json_pack(
                "{s:s, s:I, s:b}", "op", "stop", "timeoutMs", (json_int_t)timeout_ms, "remove", removing);
        int r = m ? proto_send(fd, m, NULL, 0) : -ENOMEM;
        json_decref(m);
        if (r < 0) {
                safe_close(fd);
                return false;
        }
        struct pollfd p = { .fd = fd, .events = POLLIN };
        uint64_t deadline = now_ms() + timeout_ms + 5000;
        bool cgroup_gone = false;
        while (now_ms() < deadline) {
                if (poll(&p, 1, (int)(deadline - now_ms())) <= 0)
                        break;
                json_t *reply = NULL;
                int k = proto_recv(fd, &reply, NULL, NULL);
                bool done = k <= 0 || streq(proto_op(reply), "stopped");
                if (k > 0 && done)
                        cgroup_gone = json_is_true(json_object_get(reply, "cgroupGone"));
                json_decref(reply);
                if (done)
                        break;
        }
        safe_close(fd);
        return cgroup_gone;
}

/* Waits until the supervisor is gone; kills it if it does not go. */
static void supervisor_wait_gone(const sandbox_rec *rec) {
        if (rec->supervisor_pid > 0 && !sb_wait_gone(rec->supervisor_pid, rec->supervisor_start, 5000)) {
                /* It did not answer: its init dies with it (PR_SET_PDEATHSIG). */
                (void)kill(rec->supervisor_pid, SIGKILL);
                (void)sb_wait_gone(rec->supervisor_pid, rec->supervisor_start, 5000);
        }
}

/* Asks the supervisor to stop and waits until it is gone; kills it if it does not answer.  Then
 * records the stop, unless the sandbox is being removed (its record goes next).  ret_exiting
 * (a removal only; may be NULL): set when the supervisor said it removed its cgroups, and then
 * not waited for: the caller waits for it once it deleted the folders (nook_sandbox_remove). */
static int stop_locked(
        nook *n, sandbox_rec *rec, uint64_t timeout_ms, bool removing, bool *ret_exiting, nook_error *err) {
        int fd = -1;
        nook_error e2 = { 0 };
        bool gone_cg = sb_connect(n, rec->name, &fd, &e2) >= 0 && stop_request(fd, timeout_ms, removing);
        if (removing && ret_exiting && gone_cg) {
                *ret_exiting = true;
                return 0;
        }
        supervisor_wait_gone(rec);
        return removing ? 0 : sb_reconcile(n, rec, err);
}

int nook_sandbox_stop(nook *n, const char *name, uint64_t timeout_ms, nook_error *err) {
        _cleanup_close_ int lock = -1;
        sandbox_rec rec = { 0 };
        store *st;
        if (timeout_ms == NOOK_STOP_TIMEOUT_DEFAULT)
                timeout_ms = DEFAULT_STOP_MS;
        else if (timeout_ms > NOOK_STOP_TIMEOUT_MAX_MS)
                return nook_err_set(err, NOOK_E_INVALID,
                        "A stop's timeout of %llu ms is more than an hour; give at most 1h (0: kill at once)",
                        (unsigned long long)timeout_ms);
        int r = open_locked(n, name, &lock, &st, &rec, err);
        if (r < 0)
                return r;
        pid_t pid = rec.supervisor_pid;
        uint64_t start = rec.supervisor_start;
        r = sb_reconcile(n, &rec, err);
        if (r >= 0 && !streq(rec.state, "stopped"))
                r = stop_locked(n, &rec, timeout_ms, false, NULL, err);
        /* A stop whose record could not be saved (a full disk) has still stopped the sandbox, and
         * that is what is reported: the record follows the processes at the next reconcile. */
        if (r < 0 && streq(rec.state, "stopped") && !proc_alive(pid, start) &&
                sb_supervisor_find(n, name) == 0)
                r = 0;
        sandbox_rec_done(&rec);
        if (r < 0)
                return nook_err_wrap(err, "stopping sandbox '%s'", name);
        return 0;
}

/* ---- remove --------------------------------------------------------------------------------------- */

/* The workspace leaves its name in one step (an rmdir when it is empty, else a rename into
 * <home>/trash/ws-XXXXXX, which holds an owner lock until it is deleted): a handle opened before
 * finds it gone, a killed rm leaves a whole workspace or none (and the trash is swept), and what
 * a guest made undeletable never fails rm with "Directory not empty". */
static int remove_workspace(nook *n, const char *wsdir, nook_error *err) {
        struct stat st;
        if (lstat(wsdir, &st) < 0)
                return 0;
        /* An empty workspace (a `nook run` that wrote nothing) goes in one step by itself: rmdir
         * is as atomic as the rename, and saves making, locking and deleting a trash folder. */
        if (S_ISDIR(st.st_mode) && rmdir(wsdir) == 0)
                return 0;
        _cleanup_free_ char *t = NULL;
        _cleanup_close_ int lock = -1;
        int r = sb_trash_new(n, "ws", &t, &lock, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *dst = strprintf("%s/ws", t);
        if (!dst)
                return nook_err_oom(err);
        if (rename(wsdir, dst) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot move the workspace '%s' away", wsdir);
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        nook_error ignore;
        (void)path_rm_rf_at(root, t + 1, &ignore); /* copes with 0555 folders; a sweep retries */
        return 0;
}

int nook_sandbox_remove(nook *n, const char *name, nook_error *err) {
        _cleanup_close_ int lock = -1;
        _cleanup_free_ char *sdir = NULL, *wsdir = NULL, *rundir = NULL;
        sandbox_rec rec = { 0 };
        store *st;
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        r = sb_lock(n, name, &lock, err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = ctx_dirs(n, name, &sdir, &wsdir, err);
        if (r >= 0)
                r = sb_run_dir(n, name, &rundir, err);
        if (r < 0)
                return r;
        r = store_sandbox_get(st, name, &rec, err);
        bool has_rec = r >= 0;
        if (r < 0 && r != -NOOK_E_NOT_FOUND)
                return r;
        if (!has_rec && access(sdir, F_OK) < 0 && access(wsdir, F_OK) < 0 && access(rundir, F_OK) < 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        /* An exec of ours with remove_sandbox_when_done ended: its supervisor began the stop
         * already and takes this request on that exec's connection; once it is gone there is
         * nothing to reconcile (it cleaned up, and what is left goes below). */
        int stop_fd = has_rec && streq(rec.state, "running") ? ctx_stop_conn_take(n, name) : -1;
        /* When it says it removed its cgroups, the supervisor exits while we delete its folders
         * and its record (either way of asking it to stop): it is waited for at the end, the
         * name's lock still held, so no supervisor outlives its sandbox and nothing can take the
         * name before it is gone. */
        bool overlap = false;
        if (stop_fd >= 0) {
                overlap = stop_request(stop_fd, /* timeout_ms= */ 0, /* removing= */ true);
                if (!overlap)
                        supervisor_wait_gone(&rec);
        } else if (has_rec) {
                r = sb_reconcile(n, &rec, err);
                if (r >= 0 && !streq(rec.state, "stopped"))
                        r = stop_locked(n, &rec, /* timeout_ms= */ 0, /* removing= */ true, &overlap, err);
                if (r < 0 && rec.supervisor_pid > 0) {
                        (void)kill(rec.supervisor_pid, SIGKILL);
                        (void)sb_wait_gone(rec.supervisor_pid, rec.supervisor_start, 5000);
                }
        }
        test_kill_at("NOOK_TEST_REMOVE_KILL_AT", "stopped");
        if (!overlap)
                sb_cgroup_remove(
                        n, name); /* also one a killed supervisor left before this record said stopped */
        r = path_rm_rf(rundir, err);
        if (r >= 0)
                r = path_rm_rf(sdir, err);
        if (r >= 0)
                r = remove_workspace(n, wsdir, err);
        uint32_t id_base = 0;
        nook_error ignore;
        bool has_ids = has_rec && n->idmap && store_idrange_get(st, name, &id_base, &ignore) >= 0;
        if (r >= 0 && has_rec)
                r = store_sandbox_delete(st, name, err);
        if (r >= 0 && has_ids)
                idclaims_release(n->home, name, id_base); /* its range goes with the record */
        if (overlap)
                supervisor_wait_gone(&rec);
        sandbox_rec_done(&rec);
        if (r < 0)
                return nook_err_wrap(err, "removing sandbox '%s'", name);
        sb_lock_drop(n, name); /* still held: one lock file per name ever used would pile up */
        sb_lifeline_drop(n, name); /* its supervisor is gone: the tie's descriptor goes too */
        return 0;
}

/* ---- inspect / list ------------------------------------------------------------------------------ */

/* A tied sandbox (NOOK_CREATE_TIED) whose creator died was stopped by its supervisor with the
 * reason "client_gone": what is left of it (record, state, workspace) goes now.  So does a
 * one-shot sandbox (`nook run`'s) whose creator was killed during its create
 * ("create_interrupted") or during its removal (its supervisor writes no exit record for a
 * sandbox being removed: "supervisor_died"): nobody comes back for it.  Returns true if
 * it was removed.  Called without the name's lock held. */
static bool remove_if_orphaned(nook *n, const sandbox_rec *rec) {
        if (!streq(rec->state, "stopped") || !rec->stop_reason)
                return false;
        bool orphan = streq(rec->stop_reason, "client_gone") ||
                (rec->one_shot &&
                        (streq(rec->stop_reason, "supervisor_died") ||
                                streq(rec->stop_reason, "create_interrupted")));
        if (!orphan)
                return false;
        nook_error ignore;
        return nook_sandbox_remove(n, rec->name, &ignore) >= 0;
}

/* How the command of a stopped run -d ended (exit_record.command_exit), from the exit record of
 * its last run (not an earlier one: a start runs no command); -1 when there is none. */
static int rec_command_exit(nook *n, const sandbox_rec *rec) {
        _cleanup_free_ char *sdir = NULL;
        exit_record ex;
        nook_error ignore;
        if (!streq(rec->state, "stopped") || ctx_sandbox_dir(n, rec->name, &sdir, &ignore) < 0 ||
                exit_record_read(sdir, &ex, &ignore) < 0 || ex.stopped_at < rec->started_at)
                return -1;
        return ex.command_exit;
}

static json_t *rec_to_json(nook *n, const sandbox_rec *rec) {
        json_t *spec = json_loads(rec->spec_json ? rec->spec_json : "{}", 0, NULL);
        json_t *labels = json_object();
        _cleanup_free_ char *wsdir = NULL;
        nook_error ignore;
        (void)ctx_ws_dir(n, rec->name, &wsdir, &ignore);
        STRV_FOREACH (l, rec->labels) {
                char *eq = strchr(*l, '=');
                _cleanup_free_ char *k = eq ? strndup(*l, (size_t)(eq - *l)) : strdup(*l);
                if (k)
                        json_object_set_new(labels, k, json_string(eq ? eq + 1 : ""));
        }
        /* paused is the cgroup's state, not the record's: it holds whoever asked for it */
        bool paused = streq(rec->state, "running") && sb_is_paused(n, rec->name);
        /* a run -d whose command ended, by itself or stopped: docker's State.ExitCode */
        int command_exit = rec_command_exit(n, rec);
        json_t *exit_code = command_exit >= 0 ? json_integer(command_exit) : NULL;
        json_t *o = json_pack(
                "{s:s, s:s, s:s?, s:s?, s:o?, s:o, s:s, s:I, s:o?, s:o?, s:s?, s:s?, s:o?, s:s?, s:s?}",
                "name", rec->name, "state", paused ? "paused" : rec->state, "image", rec->image,
                "imageDigest", rec->image_digest, "spec", spec, "labels", labels, "persistence",
                rec->sticky ? "sticky" : "ephemeral", "createdAt", (json_int_t)rec->created_at, "startedAt",
                rec->started_at ? json_integer(rec->started_at) : NULL, "stoppedAt",
                rec->stopped_at ? json_integer(rec->stopped_at) : NULL, "stopReason", rec->stop_reason,
                "workspace", wsdir, "supervisorPid",
                rec->supervisor_pid ? json_integer(rec->supervisor_pid) : NULL, "branchOf", rec->branch_of,
                "branchPoint", rec->branch_point);
        if (o && exit_code)
                (void)json_object_set_new(o, "exitCode", exit_code);
        else
                json_decref(exit_code);
        return o;
}

/* The record of name, made true (sb_reconcile_unlocked): NOOK_E_NOT_FOUND for a name without one,
 * or whose sandbox is gone (removed meanwhile, or a tied one whose creator died). */
static int rec_get_reconciled(nook *n, const char *name, sandbox_rec *ret, nook_error *err) {
        _cleanup_(sandbox_rec_done) sandbox_rec rec = { 0 };
        store *st;
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        if ((r = ctx_store(n, &st, err)) < 0)
                return r;
        if (store_sandbox_get(st, name, &rec, err) < 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        if ((r = sb_reconcile_unlocked(n, &rec, err)) < 0)
                return r;
        if (streq(rec.state, "removed") || remove_if_orphaned(n, &rec))
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        *ret = rec;
        rec = (sandbox_rec){ 0 };
        return 0;
}

int nook_sandbox_inspect(nook *n, const char *name, char **ret_json, nook_error *err) {
        _cleanup_(sandbox_rec_done) sandbox_rec rec = { 0 };
        int r = rec_get_reconciled(n, name, &rec, err);
        if (r < 0)
                return r;
        json_t *o = rec_to_json(n, &rec);
        /* the gateway's state is its supervisor's to tell: it restarts a gateway that died, or
         * gives up (supervisor/egress.h); ls does not ask */
        json_t *egress = sb_egress_inspect(n, &rec);
        if (o && egress)
                (void)json_object_set_new(o, "egress", egress);
        else
                json_decref(egress);
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}

/* ---- wait ------------------------------------------------------------------------------------------ */

/* Between two looks at the record while the supervisor cannot be watched (no pidfd; a create,
 * stop or remove by someone else holds the name's lock). */
#define WAIT_POLL_MS 100

int nook_sandbox_wait(nook *n, const char *name, uint64_t timeout_ms, int *ret_exit_code, nook_error *err) {
        uint64_t deadline = timeout_ms ? now_ms() + timeout_ms : 0;
        for (;;) {
                _cleanup_(sandbox_rec_done) sandbox_rec rec = { 0 };
                int r = rec_get_reconciled(n, name, &rec, err);
                if (r < 0)
                        return r;
                if (streq(rec.state, "stopped")) {
                        *ret_exit_code = rec_command_exit(n, &rec);
                        return 0;
                }
                int wait_ms = WAIT_POLL_MS;
                uint64_t now = now_ms();
                if (deadline && now >= deadline)
                        return nook_err_set(err, NOOK_E_TIMEOUT, "Sandbox '%s' is still %s after %llu ms",
                                name, rec.state, (unsigned long long)timeout_ms);
                /* Its supervisor is its life: watched, no wake-up until it exits (or the deadline) */
                _cleanup_close_ int pfd = rec.supervisor_pid > 0 ? pidfd_open_(rec.supervisor_pid) : -1;
                if (pfd >= 0 && proc_alive(rec.supervisor_pid, rec.supervisor_start))
                        wait_ms = -1;
                else
                        pfd = safe_close(pfd);
                if (deadline && (wait_ms < 0 || (uint64_t)wait_ms > deadline - now))
                        wait_ms = deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now);
                struct pollfd p = { .fd = pfd, .events = POLLIN };
                if (poll(&p, 1, wait_ms) < 0 && errno != EINTR)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot wait for sandbox '%s'", name);
        }
}

int nook_sandbox_list(nook *n, const char *const *label_filters, char **ret_json, nook_error *err) {
        sandbox_rec *recs = NULL;
        size_t nrec = 0;
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        if ((r = store_sandbox_list(st, label_filters, &recs, &nrec, err)) < 0)
                return r;
        json_t *a = json_array();
        for (size_t i = 0; i < nrec && a; i++) {
                nook_error ignore;
                (void)sb_reconcile_unlocked(n, &recs[i], &ignore);
                if (!streq(recs[i].state, "removed") && !remove_if_orphaned(n, &recs[i]))
                        json_array_append_new(a, rec_to_json(n, &recs[i]));
        }
        sandbox_rec_array_free(recs, nrec);
        sb_sweep_tmp(n); /* what killed operations left: temporaries, free lock files */
        char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
        json_decref(a);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}

/* ---- prune ---------------------------------------------------------------------------------------- */

int nook_sandbox_prune(nook *n, bool include_sticky, char **ret_json, nook_error *err) {
        sandbox_rec *recs = NULL;
        size_t nrec = 0;
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_sandbox_list(st, NULL, &recs, &nrec, err);
        if (r < 0)
                return r;
        sb_sweep_tmp(n);
        (void)sb_run_sweep_orphans(n); /* those of state folders deleted by hand */
        json_t *removed = json_array();
        for (size_t i = 0; i < nrec && r >= 0; i++) {
                nook_error e2;
                if (sb_reconcile_unlocked(n, &recs[i], &e2) < 0 || !streq(recs[i].state, "stopped"))
                        continue;
                if (recs[i].sticky && !include_sticky)
                        continue;
                r = nook_sandbox_remove(n, recs[i].name, err);
                if (r >= 0)
                        json_array_append_new(removed, json_string(recs[i].name));
        }
        sandbox_rec_array_free(recs, nrec);
        char *t = r >= 0 ? json_dumps(removed, JSON_COMPACT) : NULL;
        json_decref(removed);
        if (r < 0)
                return r;
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}
