/* SPDX-License-Identifier: Apache-2.0 */
/* `exec`: a new process in a running container.  The parent moves itself into the container's
 * cgroup; a short-lived middle process joins its pid namespace and clones the child with
 * CLONE_PARENT (so it is the parent's child, in the container's pid namespace); the child joins the user, ipc, uts, net, cgroup and mount namespaces of the container init, applies the
 * process' credentials and the container's seccomp, and execs.  The parent stays in the host's
 * mount namespace so that --pid-file is a host path.  With --detach the parent exits once the
 * exec succeeded, and the engine's subreaper adopts the process, as with runc. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "oci/container.h"
#include "oci/process.h"
#include "oci/seccomp.h"
#include "oci/spec.h"
#include "oci/state.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

typedef struct exec_plan {
        oci_spec *spec; /* the bundle's config: the base process, seccomp, annotations */
        json_t *process_json;
        oci_process proc;
        oci_seccomp *seccomp;
        int console_fd;
} exec_plan;

static void exec_plan_done(exec_plan *p) {
        oci_process_done(&p->proc);
        json_decref(p->process_json);
        p->spec = oci_spec_free(p->spec);
        p->seccomp = oci_seccomp_free(p->seccomp);
        p->console_fd = safe_close(p->console_fd);
}

static int load_process_file(const char *file, exec_plan *p, nook_error *err) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot open --process '%s'", file);
        int r = fd_read_to_end(fd, (size_t)JSON_MAX_BYTES, &text, &len, err);
        if (r >= 0)
                r = json_parse_object(text, len, &p->process_json, err);
        if (r >= 0)
                r = oci_process_parse(p->process_json, &p->proc, err);
        if (r < 0)
                return nook_err_wrap(err, "--process '%s'", file);
        return 0;
}

/* Without --process: the container's own process, with the command line's args and flags. */
static int process_from_flags(const oci_exec_opts *o, exec_plan *p, nook_error *err) {
        json_t *proc = json_object_get(p->spec->json, "process");
        json_t *base = json_is_object(proc) ? json_deep_copy(proc) : json_object();
        json_t *args = json_array();
        if (!base || !args) {
                json_decref(base);
                json_decref(args);
                return nook_err_oom(err);
        }
        STRV_FOREACH (a, o->args)
                (void)json_array_append_new(args, json_string(*a));
        (void)json_object_set_new(base, "args", args);
        (void)json_object_set_new(base, "terminal", json_boolean(o->tty));
        if (o->cwd)
                (void)json_object_set_new(base, "cwd", json_string(o->cwd));
        p->process_json = base;
        int r = oci_process_parse(base, &p->proc, err);
        if (r < 0)
                return r;
        if (o->user) {
                char *end = NULL;
                errno = 0;
                unsigned long uid = strtoul(o->user, &end, 10), gid = p->proc.gid;
                if (!errno && end != o->user && *end == ':')
                        gid = strtoul(end + 1, &end, 10);
                if (errno || end == o->user || *end || uid > UINT32_MAX || gid > UINT32_MAX)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "--user '%s': give uid[:gid] as numbers", o->user);
                p->proc.uid = (uid_t)uid;
                p->proc.gid = (gid_t)gid;
        }
        return 0;
}

static int plan_exec(const oci_exec_opts *o, const oci_state *st, exec_plan *p, nook_error *err) {
        int r = oci_spec_load(st->bundle, &p->spec, err);
        if (r < 0)
                return nook_err_wrap(err, "the bundle of container '%s'", st->id);
        if (o->process_file)
                r = load_process_file(o->process_file, p, err);
        else if (!o->args || !o->args[0])
                r = nook_err_set(err, NOOK_E_INVALID,
                        "exec needs --process FILE or a command after the container id");
        else
                r = process_from_flags(o, p, err);
        if (r < 0)
                return r;
        STRV_FOREACH (e, o->env)
                if (!strchr(*e, '=') || strv_env_set(&p->proc.env, *e) < 0)
                        return nook_err_set(err, NOOK_E_INVALID, "--env '%s' is not NAME=VALUE", *e);
        if (o->tty)
                p->proc.terminal = true;
        if (p->proc.terminal && !o->console_socket)
                return nook_err_set(err, NOOK_E_INVALID, "a terminal needs --console-socket");
        if (p->proc.terminal) {
                struct sockaddr_un a = { .sun_family = AF_UNIX };
                if (strlen(o->console_socket) >= sizeof(a.sun_path))
                        return nook_err_set(err, NOOK_E_INVALID, "--console-socket path is too long");
                strcpy(a.sun_path, o->console_socket);
                p->console_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (p->console_fd < 0 || connect(p->console_fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                        return nook_err_errno(err, NOOK_E_INVALID, "Cannot connect to --console-socket '%s'",
                                o->console_socket);
        }
        if (p->spec->seccomp) {
                _cleanup_free_ char *cache_dir = strprintf("%s/.seccomp-cache", o->root);
                if (!cache_dir)
                        return nook_err_oom(err);
                return oci_seccomp_prepare(p->spec->seccomp, cache_dir, &p->seccomp, err);
        }
        return 0;
}

/* In the child: the container's namespaces but pid (the parent's setns did that one). */
static int join_container(pid_t pid, nook_error *err) {
        static const struct {
                const char *name;
                int type;
        } ns[] = { { "user", CLONE_NEWUSER }, { "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS },
                { "net", CLONE_NEWNET }, { "cgroup", CLONE_NEWCGROUP }, { "mnt", CLONE_NEWNS } };
        for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
                char theirs[64], ours[64];
                struct stat a, b;
                (void)snprintf(theirs, sizeof(theirs), "/proc/%d/ns/%s", (int)pid, ns[i].name);
                (void)snprintf(ours, sizeof(ours), "/proc/self/ns/%s", ns[i].name);
                if (stat(theirs, &a) < 0)
                        return nook_err_errno(
                                err, NOOK_E_STATE, "Cannot see the container's %s namespace", ns[i].name);
                if (stat(ours, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
                        continue;
                _cleanup_close_ int fd = open(theirs, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || setns(fd, ns[i].type) < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot join the container's %s namespace", ns[i].name);
        }
        return 0;
}

_noreturn_ static void exec_child(const oci_state *st, exec_plan *p, unsigned preserve, int report_fd) {
        nook_error err = { 0 };
        char path[PATH_MAX];
        const char *prof = oci_spec_annotation(p->spec, "io.nook.profile");
        oci_proc_ctx c = { .proc = &p->proc,
                .seccomp = p->seccomp,
                .has_profile = prof != NULL,
                .profile = prof ? iso_profile_from_string(prof) : ISO_PROFILE_DEFAULT,
                .setgroups_denied = false,
                .console_fd = p->console_fd };
        int r = join_container(st->pid, &err);
        if (r >= 0 && p->proc.terminal)
                r = oci_proc_terminal(p->console_fd, &err);
        if (r >= 0)
                r = oci_proc_credentials(&c, &err);
        if (r >= 0)
                r = oci_proc_lookup(&p->proc, path, &err);
        if (r >= 0) {
                /* report_fd is CLOEXEC and must stay open for an exec failure */
                int keep = report_fd;
                (void)fd_close_all_except(3 + (int)preserve, &keep, 1);
                r = oci_proc_seccomp_late(&c, &err);
        }
        if (r >= 0)
                r = oci_proc_exec(&p->proc, path, &err);
        (void)!write(report_fd, &err, sizeof(err));
        _exit(r == -NOOK_E_REFUSED ? 126 : 127);
}

static int enter_cgroup(const oci_state *st, nook_error *err) {
        iso_cgroup *cg = NULL;
        if (st->cgroup_path && iso_cgroup_open_path(st->cgroup_path, &cg, err) == 0) {
                int r = iso_cgroup_attach_all(cg, getpid(), err);
                iso_cgroup_free(cg);
                if (r < 0)
                        return nook_err_wrap(err, "joining the container's cgroup");
        }
        return 0;
}

/* A short-lived middle process joins the container's pid namespace and clones the exec'd
 * process with CLONE_PARENT, so that it is our child (we wait for it) in their namespace (as
 * runc's nsexec does), while nook-oci itself never has a pid namespace for children other than
 * its own: a helper it forks later (LeakSanitizer's tracer, say) must see it. */
static int spawn_in_pidns(
        const oci_state *st, exec_plan *p, unsigned preserve, int report_fd, pid_t *ret, nook_error *err) {
        _cleanup_close_pair_ int pp[2] = { -1, -1 };
        char path[64];
        int status = 0;
        if (pipe2(pp, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a pipe");
        (void)snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)st->pid);
        _cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
        if (ns < 0)
                return nook_err_errno(err, NOOK_E_STATE, "Cannot open the container's pid namespace");
        pid_t mid = fork();
        if (mid < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot fork");
        if (mid == 0) {
                pid_t pid = -1;
                if (setns(ns, CLONE_NEWPID) == 0)
                        pid = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, NULL);
                if (pid == 0) {
                        safe_close(pp[0]);
                        safe_close(pp[1]);
                        exec_child(st, p, preserve, report_fd);
                }
                (void)!write(pp[1], &pid, sizeof(pid));
                _exit(pid > 0 ? 0 : 1);
        }
        pp[1] = safe_close(pp[1]);
        pid_t pid = -1;
        ssize_t n = read(pp[0], &pid, sizeof(pid));
        (void)pid_wait(mid, &status);
        if (n != (ssize_t)sizeof(pid) || pid <= 0)
                return nook_err_set(
                        err, NOOK_E_IO, "Cannot start a process in the container's pid namespace");
        *ret = pid;
        return 0;
}

int oci_exec(const oci_exec_opts *o, int *ret_status, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = NULL;
        _cleanup_(exec_plan_done) exec_plan p = { .console_fd = -1 };
        int pfd[2], status = 0;
        int r = oci_state_load(o->root, o->id, &st, err);
        if (r < 0)
                return r;
        oci_status s = oci_state_status(st);
        if (s != OCI_STATUS_RUNNING && s != OCI_STATUS_CREATED)
                return nook_err_set(
                        err, NOOK_E_STATE, "cannot exec in a %s container", oci_status_to_string(s));
        r = plan_exec(o, st, &p, err);
        if (r < 0)
                return r;
        r = enter_cgroup(st, err);
        if (r < 0)
                return r;
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a pipe");
        /* killed and reaped on an early return, as runc terminates a process it could not
         * report (its pid file): the engine would never learn about it */
        _cleanup_pid_kill_ pid_t pid = -1;
        r = spawn_in_pidns(st, &p, o->preserve_fds, pfd[1], &pid, err);
        if (r < 0) {
                safe_close(pfd[0]);
                safe_close(pfd[1]);
                return r;
        }
        safe_close(pfd[1]);
        nook_error child_err = { 0 };
        ssize_t n = read(pfd[0], &child_err, sizeof(child_err));
        safe_close(pfd[0]);
        if (n == (ssize_t)sizeof(child_err)) {
                (void)pid_wait(TAKE_PID(pid), &status);
                *err = child_err;
                return -(int)(child_err.code ? child_err.code : NOOK_E_INTERNAL);
        }
        if (o->pid_file) {
                r = oci_pid_file_write(o->pid_file, pid, err);
                if (r < 0)
                        return r;
        }
        if (o->detach) {
                (void)TAKE_PID(pid); /* runs on, the engine's to wait for */
                *ret_status = 0;
                return 0;
        }
        r = pid_wait(TAKE_PID(pid), &status);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot wait for the exec process");
        *ret_status = proc_status_code(status);
        return 0;
}
