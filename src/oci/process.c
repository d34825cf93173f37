/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/caps.h"
#include "isolate/seccomp.h"
#include "oci/process.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

int oci_proc_terminal(int console_fd, nook_error *err) {
        _cleanup_close_ int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        _cleanup_close_ int slave = -1;
        char name[64] = "";
        if (master < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot open /dev/ptmx in the container (is /dev/pts mounted?)");
        if (unlockpt(master) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot unlock the container's pty");
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY);
        if (slave < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the container's pty peer");
        if (ptsname_r(master, name, sizeof(name)) != 0)
                (void)snprintf(name, sizeof(name), "/dev/ptmx");
        int r = fd_send_with_fds(console_fd, name, strlen(name), &master, 1);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot send the pty over --console-socket");
        (void)setsid();
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make the pty the controlling terminal");
        for (int fd = 0; fd < 3; fd++)
                if (dup2(slave, fd) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot make the pty stdio");
        return 0;
}

static int apply_rlimits(const oci_process *p, nook_error *err) {
        for (size_t i = 0; i < p->n_rlimits; i++) {
                struct rlimit rl = { .rlim_cur = p->rlimits[i].soft, .rlim_max = p->rlimits[i].hard };
                if (setrlimit(p->rlimits[i].resource, &rl) < 0)
                        return nook_err_errno(err, NOOK_E_INVALID, "Cannot set rlimit %d to %llu/%llu",
                                p->rlimits[i].resource, (unsigned long long)rl.rlim_cur,
                                (unsigned long long)rl.rlim_max);
        }
        return 0;
}

static int apply_oom_score(const oci_process *p, nook_error *err) {
        char v[16];
        if (!p->has_oom_score_adj)
                return 0;
        _cleanup_close_ int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        (void)snprintf(v, sizeof(v), "%d", p->oom_score_adj);
        if (fd < 0 || write(fd, v, strlen(v)) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot set process.oomScoreAdj to %d", p->oom_score_adj);
        return 0;
}

static int load_seccomp(const oci_proc_ctx *c, nook_error *err) {
        int r;
        if (c->seccomp) {
                r = oci_seccomp_load(c->seccomp, err);
                if (r < 0)
                        return r;
        }
        if (c->has_profile)
                return iso_seccomp_load(c->profile, err);
        return 0;
}

/* Switching uid clears the permitted set unless PR_SET_KEEPCAPS is on; the spec's sets are then
 * applied from what we kept (capabilities(7), "Effect of user ID changes"). */
static int switch_user(const oci_proc_ctx *c, nook_error *err) {
        const oci_process *p = c->proc;
        if (!c->setgroups_denied && setgroups(p->n_gids, p->gids) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the additional groups of process.user");
        if (setresgid(p->gid, p->gid, p->gid) < 0)
                return nook_err_errno(
                        err, NOOK_E_INVALID, "Cannot switch to gid %u (process.user.gid)", p->gid);
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot keep capabilities across setuid");
        if (setresuid(p->uid, p->uid, p->uid) < 0)
                return nook_err_errno(
                        err, NOOK_E_INVALID, "Cannot switch to uid %u (process.user.uid)", p->uid);
        (void)prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
        return 0;
}

static int apply_caps(const oci_proc_ctx *c, nook_error *err) {
        const oci_process *p = c->proc;
        iso_capsets s = { 0 };
        if (p->has_caps)
                s = (iso_capsets){ .bounding = p->caps[OCI_CAP_BOUNDING],
                        .effective = p->caps[OCI_CAP_EFFECTIVE],
                        .inheritable = p->caps[OCI_CAP_INHERITABLE],
                        .permitted = p->caps[OCI_CAP_PERMITTED],
                        .ambient = p->caps[OCI_CAP_AMBIENT] };
        if (c->has_profile) {
                /* nook's profile tightens the spec's sets, it never widens them */
                uint64_t m = iso_caps_mask(c->profile);
                s.bounding &= m;
                s.effective &= m;
                s.inheritable &= m;
                s.permitted &= m;
                s.ambient &= m;
        }
        return iso_caps_set(&s, err);
}

int oci_proc_credentials(const oci_proc_ctx *c, nook_error *err) {
        const oci_process *p = c->proc;
        int r;

        r = apply_rlimits(p, err);
        if (r < 0)
                return r;
        r = apply_oom_score(p, err);
        if (r < 0)
                return r;
        if (!p->no_new_privs) {
                r = load_seccomp(c, err);
                if (r < 0)
                        return r;
        }
        r = switch_user(c, err);
        if (r < 0)
                return r;
        if (chdir(p->cwd) < 0)
                return nook_err_errno(
                        err, NOOK_E_INVALID, "Cannot change to process.cwd '%s' in the container", p->cwd);
        r = apply_caps(c, err);
        if (r < 0)
                return r;
        if (p->no_new_privs || c->has_profile)
                return iso_set_no_new_privs(err);
        return 0;
}

int oci_proc_seccomp_late(const oci_proc_ctx *c, nook_error *err) {
        if (!c->proc->no_new_privs)
                return 0;
        return load_seccomp(c, err);
}

static bool is_executable(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int oci_proc_lookup(const oci_process *p, char ret[PATH_MAX], nook_error *err) {
        const char *cmd = p->args[0];
        if (strchr(cmd, '/')) {
                struct stat st;
                if (stat(cmd, &st) < 0)
                        return nook_err_errno(err, NOOK_E_NOT_FOUND, "exec: \"%s\": stat %s", cmd, cmd);
                /* found, but no program: 126, as runc and a shell say it */
                if (!is_executable(cmd))
                        return nook_err_set(err, NOOK_E_REFUSED, "exec: \"%s\": permission denied%s", cmd,
                                S_ISDIR(st.st_mode) ? " (a directory)" : "");
                (void)snprintf(ret, PATH_MAX, "%s", cmd);
                return 0;
        }
        const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        int i = strv_env_find(p->env, "PATH", 4);
        if (i >= 0)
                path = p->env[i] + 5;
        _cleanup_free_ char *dirs = strdup(path);
        if (!dirs)
                return nook_err_oom(err);
        for (char *d = strtok(dirs, ":"); d; d = strtok(NULL, ":")) {
                (void)snprintf(ret, PATH_MAX, "%s/%s", d, cmd);
                if (is_executable(ret))
                        return 0;
        }
        return nook_err_set(err, NOOK_E_NOT_FOUND, "exec: \"%s\": executable file not found in $PATH", cmd);
}

int oci_proc_exec(const oci_process *p, const char *path, nook_error *err) {
        static char *const empty[] = { NULL };
        /* an ignored signal stays ignored across execve: the engine's (conmon ignores SIGPIPE,
         * a shell's trap '' HUP) would reach the container's program, where runc's never do */
        sigset_t none;
        sigemptyset(&none);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)signal(sig, SIG_DFL);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        (void)execve(path, p->args, p->env ? p->env : empty);
        if (errno == EACCES)
                return nook_err_errno(err, NOOK_E_REFUSED, "exec: \"%s\": permission denied", path);
        return nook_err_errno(err, NOOK_E_IO, "exec: \"%s\"", path);
}
