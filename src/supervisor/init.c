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
#include "isolate/net.h"
#include "isolate/seccomp.h"
#include "supervisor/init.h"
#include "supervisor/init_internal.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"

_Noreturn static void fail_to_supervisor(int sock, const nook_error *e) {
        json_t *m = proto_error_msg(e);
        if (m)
                (void)proto_send(sock, m, NULL, 0);
        _exit(1);
}

/* Step 5. */
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

/* Step 9, the last of the setup.  seccomp: the profile's program, prepared by the supervisor
 * before the clone; the profile as the config parsed it. */
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

/* The sandbox's /etc/resolv.conf with a network: slirp4netns's DNS forwarder (public), or the
 * supervisor's filtering resolver on the sandbox's loopback (policy); NULL (the image's) without. */
static const char *resolv_conf_for(const char *network) {
        switch (net_mode_from_string(network)) {
        case NET_MODE_PUBLIC:
                return "nameserver " NET_SLIRP_DNS "\noptions edns0\n";
        case NET_MODE_POLICY:
                return "nameserver " NET_RESOLVER "\noptions edns0\n";
        case NET_MODE_OFF:
        case _NET_MODE_MAX:
        case _NET_MODE_INVALID:
        default:
                return NULL;
        }
}

/* Step 2: opens every host directory the sandbox needs.  This runs right after clone(), before
 * the id maps: the fds must belong to our own mount namespace (overlayfs and bind mounts refuse
 * mounts of another namespace), and our host credentials are still the supervisor's, so a
 * rootful sandbox can still walk the 0700 state folder it could not enter as its mapped root. */
static int open_rootfs(
        const sup_config *c, bool rootless, const sup_idmaps *idm, iso_rootfs *rf, nook_error *err) {
        int r;
        *rf = (iso_rootfs){ .hostname = c->name,
                .resolv_conf = resolv_conf_for(c->network),
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
        if (c->upper) {
                r = open_dir_path(c->upper, &rf->upper_fd, err);
                if (r < 0)
                        return r;
                r = open_dir_path(c->work, &rf->work_fd, err);
                if (r < 0)
                        return r;
        }
        if (c->workspace && idm->on) {
                rf->workspace_fd = idm->workspace_fd;
                rf->workspace_detached = true;
        } else if (c->workspace) {
                r = open_dir_path(c->workspace, &rf->workspace_fd, err);
                if (r < 0)
                        return r;
        }
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

/* Step 1: our argv still names the supervisor binary and the state folder on the host;
 * processes in the sandbox can read /proc/1/cmdline, so overwrite it in place (our copy, after
 * clone). */
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

/* Sync 1, "maps": the supervisor has written our uid/gid maps and, unless it sent the `tasks`
 * files of our v1 cgroups with it (we join ourselves: step 3), moved us into our cgroup.
 * Anything else, or a hang-up: the supervisor gave up. */
static void wait_maps(int sock, iso_cgroup_join *ret_cgj) {
        json_t *msg = NULL;
        size_t n = 0;
        int r = proto_recv(sock, &msg, ret_cgj->fds, &n);
        if (r <= 0 || !streq(proto_op(msg), "maps") || n > ISO_CGROUP_JOIN_MAX)
                _exit(1);
        ret_cgj->n = n;
        json_decref(msg);
}

bool init_own_netns(const sup_config *c) {
        return net_mode_from_string(c->network ? c->network : "off") <= NET_MODE_OFF;
}

/* Step 2b, without a network: our network namespace (we hold every capability in our new user
 * namespace, which owns it), made while the supervisor makes our cgroup. */
static int init_netns(nook_error *err) {
        if (unshare(CLONE_NEWNET) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the sandbox's network namespace");
        return 0;
}

/* Step 4: in our cgroup (joined in step 3 with the supervisor's files on v1, else put there by
 * the supervisor before sync 1), a cgroup namespace made now is rooted there, so the sandbox sees
 * its own cgroup as "/". */
static int init_cgroup_ns(nook_error *err) {
        if (unshare(CLONE_NEWCGROUP) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the sandbox's cgroup namespace");
        return 0;
}

/* Step 9: nothing of the host stays reachable through our fds.  The socket to the supervisor is
 * the only fd kept; our stdio were the supervisor's (its log on the host) and become /dev/null.
 * Not dumpable: the guest (same uid) must not ptrace us or open /proc/1/{root,fd,ns}. */
static void init_detach_fds(int sock) {
        int keep[] = { sock };
        (void)fd_close_all_except(3, keep, 1);
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int i = 0; i < 3 && nul >= 0; i++)
                (void)dup2(nul, i);
        if (nul > 2)
                safe_close(nul);
        (void)prctl(PR_SET_DUMPABLE, 0);
}

/* Steps 3 to 9, between the two sync points; init_main sends a failure to the supervisor,
 * which makes it the create's error. */
/* 8b: the execs' default working directory (--workdir), made when the image lacks it, as docker
 * makes a missing WORKDIR or run -w: root's, 0755.  Where it cannot be made (a read-only part of
 * the root) every exec says so, as before. */
static void init_workdir(const sup_config *c) {
        nook_error ignore;
        if (c->workdir && access(c->workdir, F_OK) < 0 && errno == ENOENT)
                (void)path_mkdir_p(c->workdir, 0755, &ignore);
}

static int init_setup(int sock, const sup_config *c, const iso_rootfs *rf, const iso_seccomp_prog *seccomp,
        const iso_cgroup_join *cgj, nook_error *err) {
        int r;

        r = iso_cgroup_join_self(cgj, err); /* 3: cgroup v1, rootful only */
        if (r < 0)
                return r;
        r = init_cgroup_ns(err); /* 4 */
        if (r < 0)
                return r;
        r = init_become_root(rf->rootless, err); /* 5 */
        if (r < 0)
                return r;
        r = iso_rootfs_setup(rf, err); /* 6, 7, 8: overlay, mounts, pivot_root */
        if (r < 0)
                return r;
        r = iso_net_uts_setup(c->name, err); /* 8: hostname, loopback */
        if (r < 0)
                return r;
        init_workdir(c); /* 8b */
        init_detach_fds(sock); /* 9 */
        return init_security(c, seccomp, err); /* 9: caps, no_new_privs, seccomp last */
}

/* Sync 2, "ready", with our root: nook cp reaches paths outside /workspace through it (the
 * supervisor cannot open /proc/<init>/root: we are not dumpable).  O_PATH: it grants no access
 * of its own. */
static void send_ready(int sock) {
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        json_t *msg = json_pack("{s:s}", "op", "ready");
        if (!msg || proto_send(sock, msg, &root, root >= 0 ? 1 : 0) < 0)
                _exit(1);
        json_decref(msg);
        if (root >= 0)
                safe_close(root);
}

/* Runs in the child of clone() (sup.c:start_init) and never returns.  State at entry:
 *   userns: new, no maps yet (every id reads as the overflow id), a full capability set in it
 *   mntns:  new, still a copy of the host's      pidns: new, we are PID 1
 *   utsns, ipcns: new; netns: new with a network  cgroupns and cgroup: the supervisor's
 *   host:   our credentials are still the supervisor's (rootful: host root), no capabilities
 *   fds:    sock, stdio (the supervisor's log), the idmapped mounts it opened
 * Steps, with the numbers of docs/design/runtime.md, "Setup order":
 *   1. hide the host argv, name ourselves nook-init
 *   2. open every host directory as O_PATH (open_rootfs says why before the maps)
 *   2b. without a network: make our network namespace (the supervisor makes our cgroup meanwhile)
 *      --- sync 1: "maps" from the supervisor, with our v1 cgroups' tasks files (wait_maps)
 *   2c. take back the supervisor's CPU mask (it may have started us off its own CPU)
 *   3. cgroup v1, rootful: join our cgroup through the files the supervisor opened
 *   4. unshare(CLONE_NEWCGROUP): the namespace is rooted at our own cgroup
 *   5. become root of the user namespace; drop host supplementary groups (rootful)
 *   6. the overlay root; 7. the mounts under it; 8. pivot_root (iso_rootfs_setup), hostname,
 *      loopback up
 *   9. close stray fds, stdio to /dev/null, not dumpable; drop capabilities, no_new_privs,
 *      seccomp last
 *      --- sync 2: "ready" with our root fd, or instead the error of any step from 2 on (the
 *          supervisor reads the socket only once it wrote the maps: step 2's error waits)
 *  10. PID 1's loop (init_loop.c), with spare exec helpers unless the sandbox is one-shot */
_Noreturn void init_main(int sock, const sup_config *c, bool rootless, const iso_seccomp_prog *seccomp,
        const sup_idmaps *idm, const cpu_set_t *cpus) {
        nook_error err = { 0 };
        iso_rootfs rf;
        iso_cgroup_join cgj = ISO_CGROUP_JOIN_INIT;
        int r;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        hide_cmdline(); /* 1 */
        (void)prctl(PR_SET_NAME, "nook-init");
        r = open_rootfs(c, rootless, idm, &rf, &err); /* 2 */
        if (r >= 0 && init_own_netns(c))
                r = init_netns(&err); /* 2b */
        wait_maps(sock, &cgj); /* sync 1 */
        if (cpus) /* 2c: every CPU the supervisor may use, before we fork anything */
                (void)sched_setaffinity(0, sizeof(*cpus), cpus);
        if (r < 0)
                fail_to_supervisor(sock, &err);
        r = init_setup(sock, c, &rf, seccomp, &cgj, &err); /* 3..9 */
        if (r < 0)
                fail_to_supervisor(sock, &err);
        send_ready(sock); /* sync 2 */
        init_loop(sock, /* spares= */ !c->one_shot); /* 10 */
}
