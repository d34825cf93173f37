/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox init's setup: from clone() to "ready" (init_main), then PID 1's loop (init_loop.c).
 * init.h says what init is; docs/design/runtime.md, "Setup order", lists the same steps. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/caps.h"
#include "isolate/seccomp.h"
#include "supervisor/init.h"
#include "supervisor/init_internal.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"

_Noreturn static void fail_to_supervisor(int sock, const nook_error *e) {
        json_t *m = proto_error_msg(e);
        if (m)
                (void)proto_send(sock, m, NULL, 0);
        _exit(1);
}

static int init_become_root(bool rootless, nook_error *err) {
        if (setresgid(0, 0, 0) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot become root (gid) in the sandbox's user namespace");
        /* Host root's supplementary groups would still grant host access: drop them.  Rootless,
         * setgroups is denied in the namespace and we keep the caller's (user_namespaces(7)). */
        if (!rootless && setgroups(0, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot drop supplementary groups");
        if (setresuid(0, 0, 0) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot become root (uid) in the sandbox's user namespace");
        return 0;
}

/* seccomp: the profile's program, prepared by the supervisor before the clone; the profile as
 * the config parsed it. */
static int init_security(const sup_config *c, const iso_seccomp_prog *seccomp, nook_error *err) {
        iso_profile p = c->sec_profile;
        int r = iso_caps_drop(p, err);
        if (r < 0)
                return r;
        r = iso_set_no_new_privs(err);
        if (r < 0)
                return r;
        /* Last: the filter would refuse some of the calls above. */
        return iso_seccomp_load_prog(p, seccomp, err);
}

static int open_dir_path(const char *p, int *ret, nook_error *err) {
        int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", p);
        *ret = fd;
        return 0;
}

/* Opens every host directory the sandbox needs.  This runs right after clone(), before the id
 * maps: the fds must belong to our own mount namespace (overlayfs and bind mounts refuse mounts
 * of another namespace), and our host credentials are still the supervisor's, so a rootful
 * sandbox can still walk the 0700 state folder it could not enter as its mapped root. */
static int open_rootfs(
        const sup_config *c, bool rootless, const sup_idmaps *idm, iso_rootfs *rf, nook_error *err) {
        int r;
        *rf = (iso_rootfs){ .hostname = c->name,
                .upper_fd = -1,
                .work_fd = -1,
                .workspace_fd = -1,
                .ro_binds = c->ro_binds,
                .upper_volatile = c->ephemeral,
                .rootless = rootless };
        if (idm->on) {
                /* idmapped by the supervisor: detached mounts we attach in iso_rootfs_setup */
                for (size_t i = 0; i < idm->n_lowers; i++)
                        rf->lower_fds[rf->n_lowers++] = idm->lower_fds[i];
                rf->lowers_detached = true;
        }
        STRV_FOREACH (l, idm->on ? NULL : c->lowers) {
                if (rf->n_lowers >= ISO_MAX_LOWERS)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Too many image layers (max %d)", ISO_MAX_LOWERS);
                r = open_dir_path(*l, &rf->lower_fds[rf->n_lowers], err);
                if (r < 0)
                        return r;
                rf->n_lowers++;
        }
        if (c->upper &&
                ((r = open_dir_path(c->upper, &rf->upper_fd, err)) < 0 ||
                        (r = open_dir_path(c->work, &rf->work_fd, err)) < 0))
                return r;
        if (c->workspace && idm->on) {
                rf->workspace_fd = idm->workspace_fd;
                rf->workspace_detached = true;
        } else if (c->workspace && (r = open_dir_path(c->workspace, &rf->workspace_fd, err)) < 0)
                return r;
        /* Volume sources were resolved by libnook at create; open them now without following
         * any symlink, so one swapped in since cannot redirect the mount. */
        for (size_t i = 0; i < c->n_mounts && rf->n_mounts < ISO_MAX_MOUNTS; i++) {
                const sup_mount *m = &c->mounts[i];
                iso_mount *im = &rf->mounts[rf->n_mounts++];
                *im = (iso_mount){ .source_fd = -1,
                        .target = m->target,
                        .readonly = m->readonly,
                        .size_mib = (unsigned long)m->size_mib };
                if (!streq(m->type, "bind"))
                        continue;
                if (idm->on && idm->mount_fds[i] >= 0) {
                        im->source_fd = idm->mount_fds[i];
                        im->detached = true;
                        continue;
                }
                struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
                im->source_fd = (int)syscall(SYS_openat2, AT_FDCWD, m->source, &how, sizeof(how));
                if (im->source_fd < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot open the volume source '%s'", m->source);
        }
        return 0;
}

/* Our argv still names the supervisor binary and the state folder on the host; processes in the
 * sandbox can read /proc/1/cmdline, so overwrite it in place (our copy, after clone). */
static void hide_cmdline(void) {
        char buf[4096];
        int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, buf, sizeof(buf));
        safe_close(fd);
        if (n <= (ssize_t)sizeof("nook-init"))
                return;
        memset(program_invocation_name, 0, (size_t)n);
        strcpy(program_invocation_name, "nook-init");
}

_Noreturn void init_main(int sock, const sup_config *c, bool rootless, const iso_seccomp_prog *seccomp,
        const sup_idmaps *idm, const iso_cgroup_join *cgj) {
        nook_error err = { 0 };
        json_t *msg = NULL;
        iso_rootfs rfs;
        const iso_rootfs *rf = &rfs;
        int r;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        hide_cmdline();
        (void)prctl(PR_SET_NAME, "nook-init");
        bool opened = open_rootfs(c, rootless, idm, &rfs, &err) >= 0;
        /* Step 2: wait until the supervisor has written our id maps. */
        r = proto_recv(sock, &msg, NULL, NULL);
        if (r <= 0 || !streq(proto_op(msg), "maps"))
                _exit(1);
        json_decref(msg);
        if (!opened)
                fail_to_supervisor(sock, &err);
        /* In our cgroup (joined here with the supervisor's files on v1, else put there by the
         * supervisor before "maps"): a cgroup namespace made here is rooted there, so the sandbox
         * sees its own cgroup as "/". */
        if (iso_cgroup_join_self(cgj, &err) < 0)
                fail_to_supervisor(sock, &err);
        if (unshare(CLONE_NEWCGROUP) < 0) {
                (void)nook_err_errno(&err, NOOK_E_IO, "Cannot create the sandbox's cgroup namespace");
                fail_to_supervisor(sock, &err);
        }
        if ((r = init_become_root(rf->rootless, &err)) < 0 || (r = iso_rootfs_setup(rf, &err)) < 0 ||
                (r = iso_net_uts_setup(c->name, &err)) < 0)
                fail_to_supervisor(sock, &err);
        int keep[] = { sock };
        (void)fd_close_all_except(3, keep, 1);
        /* Our stdio were the supervisor's (its log on the host): nothing in the sandbox keeps them. */
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int i = 0; i < 3 && nul >= 0; i++)
                (void)dup2(nul, i);
        if (nul > 2)
                safe_close(nul);
        (void)prctl(PR_SET_DUMPABLE, 0);
        r = init_security(c, seccomp, &err);
        if (r < 0)
                fail_to_supervisor(sock, &err);
        /* Our root goes to the supervisor with the ready message: nook cp reaches paths outside
         * /workspace through it (the supervisor cannot open /proc/<init>/root: we are not
         * dumpable).  O_PATH: it grants no access of its own. */
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        msg = json_pack("{s:s}", "op", "ready");
        if (!msg || proto_send(sock, msg, &root, root >= 0 ? 1 : 0) < 0)
                _exit(1);
        json_decref(msg);
        if (root >= 0)
                safe_close(root);
        init_loop(sock);
}
