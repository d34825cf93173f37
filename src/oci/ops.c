/* SPDX-License-Identifier: Apache-2.0 */
/* start, kill, delete, pause/resume, state, list, ps, update: each reads ROOT/ID/state.json,
 * checks the computed status, acts, and prints what runc prints. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "oci/container.h"
#include "oci/hooks.h"
#include "oci/internal.h"
#include "oci/state.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/parse.h"
#include "util/proc.h"
#include "util/str.h"

static void closedirp(DIR **d) {
        if (*d)
                (void)closedir(*d);
}

static char *state_text(const oci_state *st) {
        json_t *j = oci_state_to_json(st);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return s;
}

/* The hooks of the bundle's config.json (poststart, poststop), or NULL when it is gone. */
static json_t *bundle_hooks(const oci_state *st) {
        char path[PATH_MAX];
        (void)snprintf(path, sizeof(path), "%s/config.json", st->bundle ? st->bundle : "");
        json_t *cfg = json_load_file(path, 0, NULL);
        json_t *h = cfg ? json_incref(json_object_get(cfg, "hooks")) : NULL;
        json_decref(cfg);
        return h;
}

static void run_late_hooks(const oci_state *st, const char *name) {
        json_t *h = bundle_hooks(st);
        _cleanup_free_ char *s = state_text(st);
        nook_error e = { 0 };
        if (h && s && oci_hooks_run(h, name, s, &e) < 0)
                (void)fprintf(stderr, "nook-oci: %s hook failed, ignoring: %s\n", name, e.msg);
        json_decref(h);
}

int oci_start(const char *root, const char *id, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        char fifo[PATH_MAX];
        int r = oci_state_load(root, id, &st, err);
        if (r < 0)
                return r;
        oci_status s = oci_state_status(st);
        if (s != OCI_STATUS_CREATED)
                return nook_err_set(err, NOOK_E_STATE,
                        "cannot start a container that is %s (only a created one)", oci_status_to_string(s));
        (void)snprintf(fifo, sizeof(fifo), "%s/exec.fifo", st->dir);
        _cleanup_close_ int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(
                        err, NOOK_E_STATE, "cannot start container \"%s\": its init is gone", id);
        if (write(fd, "0", 1) != 1)
                return nook_err_errno(err, NOOK_E_IO, "Cannot signal the container init through '%s'", fifo);
        (void)unlink(fifo);
        /* the init closes its end right before execve: then the program is what runs */
        struct pollfd pfd = { .fd = fd, .events = 0 };
        (void)poll(&pfd, 1, 2000);
        if (st->no_process)
                /* the init had nothing to run and exited: the container is stopped */
                return nook_err_set(err, NOOK_E_INVALID,
                        "container \"%s\" has no 'process' in its config.json: nothing was started", id);
        run_late_hooks(st, "poststart");
        return 0;
}

int oci_kill(const char *root, const char *id, int sig, bool all, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        int r = oci_state_load(root, id, &st, err);
        if (r < 0)
                return r;
        oci_status s = oci_state_status(st);
        if (s == OCI_STATUS_STOPPED && !all)
                return nook_err_set(err, NOOK_E_STATE, "container not running");
        if (all && st->cgroup_path) {
                iso_cgroup *cg = NULL;
                _cleanup_free_ pid_t *pids = NULL;
                size_t n = 0;
                if (iso_cgroup_open_path(st->cgroup_path, &cg, err) == 0 &&
                        iso_cgroup_pids(cg, &pids, &n, err) == 0) {
                        if (sig == SIGKILL)
                                (void)iso_cgroup_freeze(cg, true, err);
                        for (size_t i = 0; i < n; i++)
                                (void)kill(pids[i], sig);
                        if (sig == SIGKILL)
                                (void)iso_cgroup_freeze(cg, false, err);
                }
                iso_cgroup_free(cg);
                return 0;
        }
        int fd = pidfd_open_(st->pid);
        if (fd < 0 || proc_start_time(st->pid) != st->start_time) {
                safe_close(fd);
                return nook_err_set(err, NOOK_E_STATE, "container not running");
        }
        r = pidfd_send_signal_(fd, sig);
        safe_close(fd);
        if (r < 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, -r, "Cannot send signal %d to container \"%s\"", sig, id);
        /* a frozen process takes SIGKILL only once thawed: a paused container's engine waited
         * for an exit that never came (runc thaws too) */
        if (sig == SIGKILL && s == OCI_STATUS_PAUSED && st->cgroup_path) {
                iso_cgroup *cg = NULL;
                nook_error ignore = { 0 };
                if (iso_cgroup_open_path(st->cgroup_path, &cg, &ignore) == 0)
                        (void)iso_cgroup_freeze(cg, false, &ignore);
                iso_cgroup_free(cg);
        }
        return 0;
}

static void wait_gone(const oci_state *st) {
        for (int i = 0; i < 1000 && proc_alive(st->pid, st->start_time); i++)
                usleep(2000);
}

/* SIGKILL to a create still at work (delete --force), then wait until it is gone: its init dies
 * with it (PR_SET_PDEATHSIG, or the sync socket's end). */
static void stop_creator(const oci_create_note *n) {
        _cleanup_close_ int fd = pidfd_open_(n->pid);
        if (fd < 0 || proc_start_time(n->pid) != n->start_time)
                return;
        (void)pidfd_send_signal_(fd, SIGKILL);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        (void)poll(&p, 1, 2000);
}

/* ROOT/ID without state.json: a create still at work, or one killed before it wrote the state.
 * Its create.json names the cgroup it made (linux.cgroupsPath or /nook-oci/ID) and the create's
 * process; without one (killed before it wrote it) no cgroup was made, except by a nook-oci from
 * before create.json, whose default path is tried.  Once that create is dead the only process
 * its cgroup can hold is its init, dying with it: destroy kills what is left and removes the
 * folders, as delete does for a created container.  runc removes the state folder alone and
 * leaves such a cgroup behind; like runc, the answer is "does not exist" unless --force. */
static int delete_half_created(const char *root, const char *id, bool force, nook_error *err) {
        _cleanup_free_ char *dir = strprintf("%s/%s", root, id);
        _cleanup_free_ char *fallback = strprintf("/nook-oci/%s", id);
        _cleanup_(oci_create_note_done) oci_create_note note = { 0 };
        nook_error ignore = { 0 };
        iso_cgroup *cg = NULL;
        if (!dir || !fallback)
                return nook_err_oom(err);
        if (access(dir, F_OK) < 0)
                return force ? 0
                             : nook_err_set(err, NOOK_E_NOT_FOUND, "container \"%s\" does not exist", id);
        int r = oci_create_note_load(dir, &note, &ignore);
        if (r >= 0 && proc_alive(note.pid, note.start_time)) {
                if (!force)
                        return nook_err_set(err, NOOK_E_STATE,
                                "container \"%s\" is being created (nook-oci pid %d): use --force to stop that create",
                                id, (int)note.pid);
                stop_creator(&note);
        }
        if (iso_cgroup_open_path(r >= 0 ? note.cgroup_path : fallback, &cg, &ignore) == 0 &&
                !iso_cgroup_destroy(cg)) {
                iso_cgroup_free(cg);
                return nook_err_set(err, NOOK_E_IO,
                        "Cannot remove the cgroup '%s' of container \"%s\": it still has processes",
                        r >= 0 ? note.cgroup_path : fallback, id);
        }
        iso_cgroup_free(cg);
        r = oci_state_remove(dir, err);
        if (r < 0)
                return r;
        return force ? 0 : nook_err_set(err, NOOK_E_NOT_FOUND, "container \"%s\" does not exist", id);
}

int oci_delete(const char *root, const char *id, bool force, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        int r = oci_state_load(root, id, &st, err);
        if (r == -NOOK_E_NOT_FOUND)
                return delete_half_created(root, id, force, err);
        if (r < 0)
                return r;
        oci_status s = oci_state_status(st);
        if ((s == OCI_STATUS_RUNNING || s == OCI_STATUS_PAUSED) && !force)
                return nook_err_set(err, NOOK_E_STATE,
                        "cannot delete container \"%s\" that is not stopped: %s (use --force, or kill it first)",
                        id, oci_status_to_string(s));
        iso_cgroup *cg = NULL;
        if (st->cgroup_path && iso_cgroup_open_path(st->cgroup_path, &cg, err) == 0 &&
                s == OCI_STATUS_PAUSED)
                (void)iso_cgroup_freeze(cg, false, err);
        if (s != OCI_STATUS_STOPPED) {
                (void)kill(st->pid, SIGKILL);
                wait_gone(st);
        }
        if (cg)
                (void)iso_cgroup_destroy(cg); /* kills what is left, then rmdir */
        iso_cgroup_free(cg);
        if (s != OCI_STATUS_CREATED)
                run_late_hooks(st, "poststop");
        return oci_state_remove(st->dir, err);
}

int oci_pause(const char *root, const char *id, bool pause, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        iso_cgroup *cg = NULL;
        int r = oci_state_load(root, id, &st, err);
        if (r < 0)
                return r;
        oci_status s = oci_state_status(st);
        if (s != (pause ? OCI_STATUS_RUNNING : OCI_STATUS_PAUSED))
                return nook_err_set(err, NOOK_E_STATE, "container \"%s\" is %s, not %s", id,
                        oci_status_to_string(s), pause ? "running" : "paused");
        if (!st->cgroup_path)
                return nook_err_set(
                        err, NOOK_E_MISSING_FEATURE, "container \"%s\" has no cgroup to freeze", id);
        r = iso_cgroup_open_path(st->cgroup_path, &cg, err);
        if (r < 0)
                return r;
        r = iso_cgroup_freeze(cg, pause, err);
        iso_cgroup_free(cg);
        return r;
}

int oci_state_print(const char *root, const char *id, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        int r = oci_state_load(root, id, &st, err);
        if (r < 0)
                return r;
        json_t *j = oci_state_to_runc_json(st, /* owner= */ NULL);
        if (!j)
                return nook_err_oom(err);
        (void)json_dumpf(j, stdout, JSON_INDENT(2));
        (void)fputc('\n', stdout);
        json_decref(j);
        return 0;
}

/* The user owning ROOT/ID, "#UID" when it has no name: runc's list prints it as the owner. */
static void dir_owner(const char *dir, char *ret, size_t len) {
        struct stat sb;
        struct passwd pw, *res = NULL;
        char buf[1024];
        if (stat(dir, &sb) < 0) {
                (void)snprintf(ret, len, "?");
                return;
        }
        if (getpwuid_r(sb.st_uid, &pw, buf, sizeof(buf), &res) == 0 && res)
                (void)snprintf(ret, len, "%s", res->pw_name);
        else
                (void)snprintf(ret, len, "#%u", (unsigned)sb.st_uid);
}

int oci_list(const char *root, bool json, bool quiet, nook_error *err) {
        _cleanup_(closedirp) DIR *d = opendir(root);
        json_t *arr = json_array();
        struct dirent *e;
        if (!arr)
                return nook_err_oom(err);
        if (!json && !quiet)
                (void)printf("%-24s %-8s %-10s %-40s %-32s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED",
                        "OWNER");
        while (d && (e = readdir(d))) {
                oci_state *st = NULL;
                nook_error ignore;
                char owner[256];
                if (e->d_name[0] == '.' || oci_state_load(root, e->d_name, &st, &ignore) < 0)
                        continue;
                oci_status s = oci_state_status(st);
                dir_owner(st->dir, owner, sizeof(owner));
                if (quiet)
                        (void)printf("%s\n", st->id);
                else if (!json)
                        (void)printf("%-24s %-8d %-10s %-40s %-32s %s\n", st->id,
                                s == OCI_STATUS_STOPPED ? 0 : (int)st->pid, oci_status_to_string(s),
                                st->bundle ? st->bundle : "", st->created ? st->created : "", owner);
                else
                        (void)json_array_append_new(arr, oci_state_to_runc_json(st, owner));
                oci_state_free(st);
        }
        if (json) {
                (void)json_dumpf(arr, stdout, JSON_COMPACT);
                (void)fputc('\n', stdout);
        }
        json_decref(arr);
        return 0;
}

/* `ps ARGS...` on the host, stdin /dev/null, stdout and stderr together in *ret (as runc takes
 * its CombinedOutput); *ret_status is its wait status. */
static int run_ps(char *const *args, char **ret, int *ret_status, nook_error *err) {
        static char *const def[] = { (char *)"-ef", NULL };
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_pair_ int p[2] = { -1, -1 };
        _cleanup_free_ char *text = NULL;
        posix_spawn_file_actions_t fa;
        size_t len = 0;
        pid_t pid = 0;
        if (strv_push(&argv, "ps") < 0)
                return nook_err_oom(err);
        STRV_FOREACH (a, (char **)(args && args[0] ? args : def))
                if (strv_push(&argv, *a) < 0)
                        return nook_err_oom(err);
        if (pipe2(p, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a pipe");
        int r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return nook_err_errnum(err, NOOK_E_NOMEM, r, "Cannot prepare to run 'ps'");
        r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, p[1], 2);
        if (r == 0)
                r = posix_spawnp(&pid, "ps", &fa, NULL, argv, environ);
        (void)posix_spawn_file_actions_destroy(&fa);
        p[1] = safe_close(p[1]);
        if (r != 0)
                return nook_err_errnum(err, NOOK_E_MISSING_FEATURE, r,
                        "Cannot run 'ps' (procps): 'nook-oci ps' in table form lists the container's processes with it");
        r = fd_read_to_end(p[0], 16u << 20, &text, &len, err);
        int w = pid_wait(pid, ret_status);
        if (r < 0)
                return r;
        if (w < 0)
                return nook_err_errnum(err, NOOK_E_IO, -w, "Cannot wait for 'ps'");
        *ret = text ? TAKE_PTR(text) : strdup("");
        return *ret ? 0 : nook_err_oom(err);
}

static bool pid_in(pid_t p, const pid_t *pids, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (pids[i] == p)
                        return true;
        return false;
}

/* Field n (from 0) of a line of ps, split on blanks, in buf; NULL past the last one. */
static const char *ps_field(const char *line, int n, char *buf, size_t len) {
        (void)snprintf(buf, len, "%s", line);
        char *save = NULL, *f = strtok_r(buf, " \t", &save);
        for (int i = 0; f && i < n; i++)
                f = strtok_r(NULL, " \t", &save);
        return f;
}

/* runc's table: ps's header, then the lines of ps whose PID column is one of the container's. */
static int print_ps_table(char *const *args, const pid_t *pids, size_t n, nook_error *err) {
        _cleanup_free_ char *text = NULL;
        char buf[4096];
        const char *f = NULL;
        int status = 0, col = 0;
        int r = run_ps(args, &text, &status, err);
        if (r < 0)
                return r;
        for (size_t k = strlen(text); k > 0 && strchr("\n ", text[k - 1]); k--)
                text[k - 1] = 0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return nook_err_set(err, NOOK_E_INVALID, "ps failed (%s %d): %s",
                        WIFEXITED(status) ? "exit status" : "signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), text);
        char *save = NULL, *line = strtok_r(text, "\n", &save);
        while (line && (f = ps_field(line, col, buf, sizeof(buf))) && !streq(f, "PID"))
                col++;
        if (!line || !f)
                return nook_err_set(err, NOOK_E_INVALID, "couldn't find PID field in ps output");
        (void)printf("%s\n", line);
        while ((line = strtok_r(NULL, "\n", &save))) {
                char *end = NULL;
                f = ps_field(line, col, buf, sizeof(buf));
                long v = f ? strtol(f, &end, 10) : 0;
                if (!f || *end || v <= 0)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "unable to parse pid in ps output line '%s'", line);
                if (pid_in((pid_t)v, pids, n))
                        (void)printf("%s\n", line);
        }
        return 0;
}

int oci_ps(const char *root, const char *id, bool json, char *const *ps_args, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        _cleanup_free_ pid_t *pids = NULL;
        iso_cgroup *cg = NULL;
        size_t n = 0;
        int r = oci_state_load(root, id, &st, err);
        if (r < 0)
                return r;
        if (!st->cgroup_path)
                return nook_err_set(err, NOOK_E_MISSING_FEATURE, "container \"%s\" has no cgroup", id);
        r = iso_cgroup_open_path(st->cgroup_path, &cg, err);
        if (r >= 0)
                r = iso_cgroup_pids(cg, &pids, &n, err);
        iso_cgroup_free(cg);
        if (r < 0)
                return r;
        if (!json)
                return print_ps_table(ps_args, pids, n, err);
        for (size_t i = 0; i < n; i++)
                (void)printf("%s%d", i ? "," : "[", (int)pids[i]);
        (void)printf("%s]\n", n ? "" : "[");
        return 0;
}

/* runc's values, on the command line and in --resources (runc update.go, libcontainer/cgroups):
 * 0 leaves a limit as it is and -1 lifts it ("max"; for pids any negative number does). */
static void set_limit(int64_t val, bool *ret_has, int64_t *ret) {
        if (val == 0)
                return;
        *ret_has = true;
        *ret = val;
}

/* --pids-limit, --cpu-quota, --cpu-period, --cpu-share: a whole number. */
static int opt_int(const char *s, const char *name, int64_t *ret, nook_error *err) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || !end || end == s || *end)
                return nook_err_set(err, NOOK_E_INVALID, "--%s '%s' is not a whole number", name, s);
        *ret = v;
        return 0;
}

/* --memory, --memory-swap: bytes with an optional unit (64m, 1g), or -1 for unlimited. */
static int opt_bytes(const char *s, const char *name, int64_t *ret, nook_error *err) {
        uint64_t b = 0;
        if (streq(s, "-1")) {
                *ret = -1;
                return 0;
        }
        if (parse_size(s, &b, err) < 0 || b > INT64_MAX)
                return nook_err_set(err, NOOK_E_INVALID,
                        "--%s '%s' is not a size in bytes (67108864, 64m, 1g) or -1 (unlimited)", name, s);
        *ret = (int64_t)b;
        return 0;
}

static int update_flags(const oci_update_opts *o, iso_cgroup_values *v, nook_error *err) {
        int64_t x = 0;
        if (o->memory && opt_bytes(o->memory, "memory", &x, err) < 0)
                return -NOOK_E_INVALID;
        if (o->memory)
                set_limit(x, &v->has_memory, &v->memory);
        if (o->memory_swap && opt_bytes(o->memory_swap, "memory-swap", &x, err) < 0)
                return -NOOK_E_INVALID;
        if (o->memory_swap)
                set_limit(x, &v->has_swap, &v->swap);
        if (o->cpu_quota && opt_int(o->cpu_quota, "cpu-quota", &x, err) < 0)
                return -NOOK_E_INVALID;
        if (o->cpu_quota)
                set_limit(x, &v->has_cpu_quota, &v->cpu_quota);
        if (o->cpu_period && opt_int(o->cpu_period, "cpu-period", &x, err) < 0)
                return -NOOK_E_INVALID;
        if (o->cpu_period && x > 0)
                v->has_cpu_period = true, v->cpu_period = (uint64_t)x;
        if (o->cpu_shares && opt_int(o->cpu_shares, "cpu-share", &x, err) < 0)
                return -NOOK_E_INVALID;
        if (o->cpu_shares && x > 0)
                v->cpu_shares = (uint64_t)x;
        if (o->pids_limit && opt_int(o->pids_limit, "pids-limit", &x, err) < 0)
                return -NOOK_E_INVALID;
        if (o->pids_limit)
                set_limit(x, &v->has_pids, &v->pids);
        if (o->cpuset_cpus)
                v->cpuset_cpus = o->cpuset_cpus;
        return 0;
}

static void json_limit(json_t *obj, const char *field, bool *ret_has, int64_t *ret) {
        json_t *x = json_object_get(obj, field);
        if (json_is_integer(x))
                set_limit(json_integer_value(x), ret_has, ret);
}

static int resources_json(const char *file, iso_cgroup_values *v, json_t **keep, nook_error *err) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        json_t *j = NULL, *o;
        _cleanup_close_ int fd =
                streq(file, "-") ? fcntl(0, F_DUPFD_CLOEXEC, 3) : open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot open --resources '%s'", file);
        int r = fd_read_to_end(fd, (size_t)JSON_MAX_BYTES, &text, &len, err);
        if (r >= 0)
                r = json_parse_object(text, len, &j, err);
        if (r < 0)
                return nook_err_wrap(err, "--resources");
        *keep = j;
        if ((o = json_object_get(j, "memory")) && json_is_object(o)) {
                json_limit(o, "limit", &v->has_memory, &v->memory);
                json_limit(o, "swap", &v->has_swap, &v->swap);
                if ((v->has_memory && v->memory < -1) || (v->has_swap && v->swap < -1))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "--resources: memory.limit and memory.swap are bytes, or -1 for unlimited");
        }
        if ((o = json_object_get(j, "cpu")) && json_is_object(o)) {
                json_t *p = json_object_get(o, "period"), *sh = json_object_get(o, "shares"),
                       *c = json_object_get(o, "cpus");
                json_limit(o, "quota", &v->has_cpu_quota, &v->cpu_quota);
                if (json_is_integer(p) && json_integer_value(p) > 0)
                        v->has_cpu_period = true, v->cpu_period = (uint64_t)json_integer_value(p);
                if (json_is_integer(sh) && json_integer_value(sh) > 0)
                        v->cpu_shares = (uint64_t)json_integer_value(sh);
                if (json_is_string(c) && json_string_length(c))
                        v->cpuset_cpus = json_string_value(c);
        }
        if ((o = json_object_get(j, "pids")) && json_is_object(o))
                json_limit(o, "limit", &v->has_pids, &v->pids);
        return 0;
}

int oci_update(const char *root, const char *id, const oci_update_opts *o, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        iso_cgroup_values v = { 0 };
        json_t *keep = NULL;
        iso_cgroup *cg = NULL;
        int r = oci_state_load(root, id, &st, err);
        if (r < 0)
                return r;
        if (oci_state_status(st) == OCI_STATUS_STOPPED)
                return nook_err_set(err, NOOK_E_STATE, "container \"%s\" is stopped: nothing to update", id);
        if (o->resources_file && (r = resources_json(o->resources_file, &v, &keep, err)) < 0) {
                json_decref(keep);
                return r;
        }
        r = update_flags(o, &v, err);
        if (r >= 0)
                r = st->cgroup_path
                        ? iso_cgroup_open_path(st->cgroup_path, &cg, err)
                        : nook_err_set(err, NOOK_E_MISSING_FEATURE, "container \"%s\" has no cgroup", id);
        if (r >= 0)
                r = iso_cgroup_apply(cg, &v, err);
        iso_cgroup_free(cg);
        json_decref(keep);
        return r;
}

int oci_devices_apply(iso_cgroup *cg, const oci_spec *s, nook_error *err) {
        json_t *rules = s->device_rules, *e;
        size_t i;
        if (rules && !json_is_array(rules))
                return nook_err_set(err, NOOK_E_INVALID, "linux.resources.devices must be an array");
        json_array_foreach(rules, i, e) {
                bool allow = json_is_true(json_object_get(e, "allow"));
                const char *type = json_string_value(json_object_get(e, "type"));
                const char *access = json_string_value(json_object_get(e, "access"));
                json_t *ma = json_object_get(e, "major"), *mi = json_object_get(e, "minor");
                char rule[96], smaj[24] = "*", smin[24] = "*";
                if (!json_is_object(e))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "linux.resources.devices[%zu] must be an object", i);
                if (json_is_integer(ma))
                        (void)snprintf(smaj, sizeof(smaj), "%lld", (long long)json_integer_value(ma));
                if (json_is_integer(mi))
                        (void)snprintf(smin, sizeof(smin), "%lld", (long long)json_integer_value(mi));
                if (!type || streq(type, "a"))
                        (void)snprintf(rule, sizeof(rule), "a");
                else if (strlen(type) == 1 && strchr("cb", type[0]))
                        (void)snprintf(rule, sizeof(rule), "%s %s:%s %s", type, smaj, smin,
                                access ? access : "rwm");
                else
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.resources.devices[%zu]: type '%s' is not a, c or b", i, type);
                if (access && strspn(access, "rwm") != strlen(access))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.resources.devices[%zu]: access '%s' is not of r, w, m", i, access);
                int r = iso_cgroup_devices(cg, allow, rule, err);
                if (r < 0)
                        return nook_err_wrap(err, "linux.resources.devices[%zu]", i);
        }
        /* What every container gets whatever the rules say (runc's default allow list): the six
         * default nodes, /dev/console, /dev/ptmx and the ptys; then the nodes of linux.devices. */
        static const char *const always[] = { "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm",
                "c 1:9 rwm", "c 5:0 rwm", "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm" };
        for (size_t k = 0; k < ELEMENTSOF(always); k++) {
                int r = iso_cgroup_devices(cg, true, always[k], err);
                if (r < 0)
                        return r;
        }
        for (size_t k = 0; k < s->n_devices; k++) {
                char rule[96];
                if (s->devices[k].type == 'p')
                        continue;
                (void)snprintf(rule, sizeof(rule), "%c %lld:%lld rwm", s->devices[k].type == 'b' ? 'b' : 'c',
                        (long long)s->devices[k].major, (long long)s->devices[k].minor);
                int r = iso_cgroup_devices(cg, true, rule, err);
                if (r < 0)
                        return r;
        }
        return iso_cgroup_devices_commit(cg, err);
}
