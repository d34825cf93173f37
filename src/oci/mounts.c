/* SPDX-License-Identifier: Apache-2.0 */
/* The container's root filesystem from config.json: root.path bound onto itself, the "mounts"
 * in order, /dev nodes, pivot_root (isolate/rootfs.c's), masked and read-only paths.
 *
 * Runs in the container init after clone() and the id maps.  State:
 *   mntns: new, still a copy of the caller's (host paths resolve)
 *   userns: the host's (rootful, no linux.uidMappings) or new with maps written
 *   pidns: new (usually), we are PID 1; caps: full in our user namespace.
 * Every mount target is resolved inside the root with openat2(RESOLVE_IN_ROOT), so a symlink in
 * the image (say /data -> /etc) stays inside the container's tree. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "isolate/rootfs.h"
#include "oci/mounts.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

/* Opens target (absolute, inside the root), creating missing directories, and the last
 * component as a directory or an empty file: util/path.c's walker. */
static int open_target(int root, const char *target, bool dir, int *ret_fd, nook_error *err) {
        int r = path_open_in_root(root, target, dir, ret_fd, err);
        return r < 0 ? nook_err_wrap(err, "mount point '%s'", target) : r;
}

static int fd_path(int fd, char buf[static 64]) {
        return snprintf(buf, 64, "/proc/self/fd/%d", fd);
}

/* Flags other than MS_BIND|MS_REC take a remount (mount(2): a bind ignores them). */
static int remount_flags(int root, const oci_mount *m, unsigned long extra, nook_error *err) {
        unsigned long fl = (m->flags | extra) & ~(MS_BIND | MS_REC | MS_REMOUNT);
        _cleanup_close_ int fd = -1;
        char p[64];
        if (!fl && !m->clear)
                return 0;
        int r = open_target(root, m->destination, true, &fd, err);
        if (r < 0)
                return r;
        (void)fd_path(fd, p);
        if (mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | fl | (iso_locked_flags(p) & ~m->clear), NULL) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot set the options of the mount at '%s'", m->destination);
        return 0;
}

static int set_propagation(int root, const oci_mount *m, nook_error *err) {
        _cleanup_close_ int fd = -1;
        char p[64];
        if (!m->propagation)
                return 0;
        int r = open_target(root, m->destination, true, &fd, err);
        if (r < 0)
                return r;
        (void)fd_path(fd, p);
        if (mount(NULL, p, NULL, m->propagation, NULL) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot set the propagation of the mount at '%s'", m->destination);
        return 0;
}

/* src_tree: the source as a detached mount (open_tree) the parent made before the clone: from a
 * new user namespace the init may not reach the source's path (podman's runroot is root's, mode
 * 0700), and a plain fd of it would name a mount of another namespace, which mount(2) refuses.
 * -1: bind by the path. */
static int mount_bind(int root, const oci_mount *m, int src_tree, nook_error *err) {
        struct stat st;
        _cleanup_close_ int fd = -1;
        char p[64];
        if (src_tree >= 0 ? fstat(src_tree, &st) < 0 : stat(m->source, &st) < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot use the bind source '%s' of '%s'",
                        m->source, m->destination);
        int r = open_target(root, m->destination, S_ISDIR(st.st_mode), &fd, err);
        if (r < 0)
                return r;
        (void)fd_path(fd, p);
        if (src_tree >= 0 ? move_mount(src_tree, "", fd, "",
                                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0
                          : mount(m->source, p, NULL, MS_BIND | (m->flags & MS_REC), NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot bind '%s' at '%s'", m->source, m->destination);
        r = remount_flags(root, m, 0, err);
        if (r < 0)
                return r;
        return set_propagation(root, m, err);
}

/* A cgroup v1 view (hybrid hosts): a tmpfs with the container's own cgroup of each controller
 * bound in, as runc does; cgroup2 where the host has it as the main hierarchy. */
static int mount_cgroup(int root, const oci_mount *m, iso_cgroup *cg, nook_error *err) {
        static const char *const ctls[] = { "cpu", "cpuacct", "memory", "pids", "freezer", "devices",
                "cpuset" };
        _cleanup_close_ int fd = -1;
        char p[64];
        int r = open_target(root, m->destination, true, &fd, err);
        if (r < 0)
                return r;
        (void)fd_path(fd, p);
        if (cg && iso_cgroup_dir(cg, "memory") == iso_cgroup_dir(cg, "cpu")) {
                /* v2: one directory for every controller */
                if (mount("cgroup2", p, "cgroup2", m->flags & ~(MS_BIND | MS_REC), NULL) == 0)
                        return 0;
        }
        if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755") < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot mount the cgroup view at '%s'", m->destination);
        for (size_t i = 0; cg && i < ELEMENTSOF(ctls); i++) {
                const char *dir = iso_cgroup_dir(cg, ctls[i]);
                char dst[PATH_MAX];
                if (!dir || access(dir, F_OK) < 0)
                        continue;
                (void)snprintf(dst, sizeof(dst), "%s%s/%s", m->destination, "", ctls[i]);
                _cleanup_close_ int t = -1;
                r = open_target(root, dst, true, &t, err);
                if (r < 0)
                        return r;
                char tp[64];
                (void)fd_path(t, tp);
                if (mount(dir, tp, NULL, MS_BIND, NULL) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot bind the cgroup '%s'", dir);
                /* the flags go on the bind just made: t is the folder under it (opened before),
                 * so the remount is through a new fd.  Read-only unless asked otherwise: with a
                 * writable controller folder the container raised its own limits */
                safe_close(t);
                r = open_target(root, dst, true, &t, err);
                if (r < 0)
                        return r;
                (void)fd_path(t, tp);
                if (mount(NULL, tp, NULL,
                            MS_BIND | MS_REMOUNT | (m->flags & MS_RDONLY) | MS_NOSUID | MS_NODEV |
                                    MS_NOEXEC | iso_locked_flags(tp),
                            NULL) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot make the cgroup view '%s' %s", dst,
                                m->flags & MS_RDONLY ? "read-only" : "nosuid, nodev and noexec");
        }
        oci_mount ro = *m;
        ro.flags &= MS_RDONLY;
        return remount_flags(root, &ro, MS_NOSUID | MS_NODEV | MS_NOEXEC, err);
}

/* A mount the kernel refuses in a user namespace that does not own the network (sysfs) or ipc
 * (mqueue) namespace: bind the host's instead, read-only, as runc does. */
static int mount_fallback_bind(int root, const oci_mount *m, const char *host, nook_error *err) {
        oci_mount b = *m;
        b.source = (char *)host;
        b.flags = MS_BIND | MS_REC | MS_RDONLY | (m->flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC));
        return mount_bind(root, &b, -1, err);
}

static int mount_one(int root, const oci_mount *m, iso_cgroup *cg, int src_tree, nook_error *err) {
        _cleanup_close_ int fd = -1;
        char p[64];
        int r;
        if (m->bind)
                return mount_bind(root, m, src_tree, err);
        if (streq(m->type, "cgroup") || streq(m->type, "cgroup2"))
                return mount_cgroup(root, m, cg, err);
        r = open_target(root, m->destination, true, &fd, err);
        if (r < 0)
                return r;
        (void)fd_path(fd, p);
        if (mount(m->source, p, m->type, m->flags & ~(MS_BIND | MS_REC), m->data) < 0) {
                if (errno == EPERM && streq(m->type, "sysfs"))
                        return mount_fallback_bind(root, m, "/sys", err);
                if (errno == EPERM && streq(m->type, "mqueue"))
                        return mount_fallback_bind(root, m, "/dev/mqueue", err);
                return nook_err_errno(err, errno == ENODEV ? NOOK_E_MISSING_FEATURE : NOOK_E_IO,
                        "Cannot mount '%s' (type %s) at '%s'", m->source, m->type, m->destination);
        }
        return set_propagation(root, m, err);
}

/* No mknod in a user namespace: there, device nodes are binds of the host's (bwrap and runc do
 * the same). */
static int make_device(int root, const oci_device *d, bool in_userns, nook_error *err) {
        _cleanup_close_ int fd = -1;
        char p[64];
        mode_t type = d->type == 'b' ? S_IFBLK : d->type == 'p' ? S_IFIFO : S_IFCHR;
        if (!in_userns) {
                char parent[PATH_MAX];
                (void)snprintf(parent, sizeof(parent), "%s", d->path);
                *strrchr(parent, '/') = 0;
                _cleanup_close_ int pfd = -1;
                int r = open_target(root, parent, true, &pfd, err);
                if (r < 0)
                        return r;
                _cleanup_close_ int dir = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                const char *name = strrchr(d->path, '/') + 1;
                (void)unlinkat(dir, name, 0);
                if (dir < 0 || mknodat(dir, name, type | d->mode, makedev(d->major, d->minor)) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create the device '%s'", d->path);
                /* mknod(2) applies the umask; the spec's fileMode is the mode to have */
                if (fchmodat(dir, name, d->mode, 0) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot chmod the device '%s'", d->path);
                if (fchownat(dir, name, d->uid, d->gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot chown the device '%s'", d->path);
                return 0;
        }
        int r = open_target(root, d->path, false, &fd, err);
        if (r < 0)
                return r;
        (void)fd_path(fd, p);
        if (mount(d->path, p, NULL, MS_BIND, NULL) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot bind the host's '%s' into the container", d->path);
        return 0;
}

static int setup_devices(int root, const oci_spec *s, bool in_userns, nook_error *err) {
#define DEV(p, ma, mi)                                                                                      \
        { .path = (p), .major = (ma), .minor = (mi), .mode = 0666, .type = 'c' }
        static const oci_device defaults[] = {
                DEV("/dev/null", 1, 3),
                DEV("/dev/zero", 1, 5),
                DEV("/dev/full", 1, 7),
                DEV("/dev/random", 1, 8),
                DEV("/dev/urandom", 1, 9),
                DEV("/dev/tty", 5, 0),
        };
#undef DEV
        static const char *const links[][2] = {
                { "/proc/self/fd", "fd" },
                { "/proc/self/fd/0", "stdin" },
                { "/proc/self/fd/1", "stdout" },
                { "/proc/self/fd/2", "stderr" },
                { "pts/ptmx", "ptmx" },
        };
        /* a /dev bound from the host already has its nodes */
        for (size_t i = 0; i < s->n_mounts; i++)
                if (streq(s->mounts[i].destination, "/dev") && s->mounts[i].bind)
                        return 0;
        for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
                int r = make_device(root, &defaults[i], in_userns, err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < s->n_devices; i++) {
                int r = make_device(root, &s->devices[i], in_userns, err);
                if (r < 0)
                        return r;
        }
        _cleanup_close_ int dev = -1;
        int r = open_target(root, "/dev", true, &dev, err);
        if (r < 0)
                return r;
        _cleanup_close_ int dir = openat(dev, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (size_t i = 0; dir >= 0 && i < ELEMENTSOF(links); i++)
                if (symlinkat(links[i][0], dir, links[i][1]) < 0 && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create /dev/%s", links[i][1]);
        return 0;
}

/* After pivot_root: paths are the container's. */
static int mask_paths(char **paths, nook_error *err) {
        STRV_FOREACH (p, paths) {
                struct stat st;
                if (lstat(*p, &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        if (mount("tmpfs", *p, "tmpfs", MS_RDONLY, "size=0") < 0)
                                return nook_err_errno(err, NOOK_E_IO, "Cannot mask '%s'", *p);
                } else if (mount("/dev/null", *p, NULL, MS_BIND, NULL) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot mask '%s'", *p);
        }
        return 0;
}

static int readonly_paths(char **paths, nook_error *err) {
        STRV_FOREACH (p, paths) {
                if (access(*p, F_OK) < 0)
                        continue;
                if (mount(*p, *p, NULL, MS_BIND | MS_REC, NULL) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot make '%s' read-only", *p);
                if (mount(NULL, *p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | iso_locked_flags(*p), NULL) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot make '%s' read-only", *p);
        }
        return 0;
}

/* --no-pivot: move the root over "/" and chroot (for a root on a ramfs, where pivot_root fails). */
static int chroot_into(const char *root, nook_error *err) {
        if (chdir(root) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot enter '%s'", root);
        if (mount(root, "/", NULL, MS_MOVE, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot move the root over '/'");
        if (chroot(".") < 0 || chdir("/") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot chroot into the container root");
        return 0;
}

int oci_rootfs_setup(const oci_spec *s, iso_cgroup *cg, bool in_userns, bool no_pivot, const int *bind_trees,
        nook_error *err) {
        int r;
        unsigned long prop = s->rootfs_propagation ? s->rootfs_propagation : MS_SLAVE | MS_REC;

        if (mount(NULL, "/", NULL, (prop & MS_SHARED) ? MS_SLAVE | MS_REC : prop, NULL) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot set the propagation of the container's mounts");
        if (mount(s->root, s->root, NULL, MS_BIND | MS_REC, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot bind root.path '%s' onto itself", s->root);
        _cleanup_close_ int root = open(s->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open root.path '%s'", s->root);
        for (size_t i = 0; i < s->n_mounts; i++) {
                r = mount_one(root, &s->mounts[i], cg, bind_trees ? bind_trees[i] : -1, err);
                if (r < 0)
                        return nook_err_wrap(err, "mounts[%zu]", i);
        }
        r = setup_devices(root, s, in_userns, err);
        if (r < 0)
                return r;
        r = no_pivot ? chroot_into(s->root, err) : iso_pivot_root(s->root, err);
        if (r < 0)
                return r;
        if (s->rootfs_propagation && mount(NULL, "/", NULL, s->rootfs_propagation, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set linux.rootfsPropagation on '/'");
        return 0;
}

/* After sysctl (it writes /proc/sys, which readonlyPaths usually lists), as runc orders it. */
int oci_rootfs_finalize(const oci_spec *s, nook_error *err) {
        int r = readonly_paths(s->readonly_paths, err);
        if (r < 0)
                return r;
        r = mask_paths(s->masked_paths, err);
        if (r < 0)
                return r;
        /* a process.cwd the image lacks is made, before the root turns read-only, as runc does (a
         * Kubernetes workingDir need not exist in the image) */
        if (s->has_process && s->process.cwd && access(s->process.cwd, F_OK) < 0 && errno == ENOENT)
                (void)path_mkdir_p(s->process.cwd, 0755, NULL);
        if (s->root_readonly &&
                mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | iso_locked_flags("/"), NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make the root read-only (root.readonly)");
        return 0;
}

int oci_sysctl_apply(char **sysctl, nook_error *err) {
        STRV_FOREACH (kv, sysctl) {
                char path[PATH_MAX];
                const char *eq = strchr(*kv, '=');
                int n = snprintf(path, sizeof(path), "/proc/sys/%.*s", (int)(eq - *kv), *kv);
                for (char *c = path + strlen("/proc/sys/"); c < path + n; c++)
                        if (*c == '.')
                                *c = '/';
                _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 || write(fd, eq + 1, strlen(eq + 1)) < 0)
                        return nook_err_errno(err, NOOK_E_INVALID, "linux.sysctl: cannot set '%s'", *kv);
        }
        return 0;
}
