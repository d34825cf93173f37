/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/rootfs.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

/* Scratch place for the new root inside our private mount namespace.  /tmp exists on every
 * host we support; the tmpfs we put over it is visible only to this sandbox. */
#define SCRATCH "/tmp"
#define NEWROOT SCRATCH "/nook-root"

static int mkdir_at_root(const char *rel, mode_t mode, nook_error *err) {
        char path[PATH_MAX];
        (void)snprintf(path, sizeof(path), NEWROOT "%s", rel);
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s' in the sandbox root", rel);
        return 0;
}

/* The new root (the overlay), opened once after its mount for every mount point below it: init
 * is single-threaded, and iso_rootfs_setup closes it before the pivot. */
static int new_root_fd = -1;

/* Opens (creating what is missing) a mount point under the new root: util/path.c's walker,
 * every lookup openat2(RESOLVE_IN_ROOT) from the new root, so a symlink in the image (say
 * /data -> /etc, or /etc/ssl -> /) resolves inside the sandbox's tree, never on the host's. */
static int open_target(const char *target, bool dir, int *ret_fd, nook_error *err) {
        if (new_root_fd < 0)
                new_root_fd = open(NEWROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (new_root_fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the new root");
        int r = path_open_in_root(new_root_fd, target, dir, ret_fd, err);
        return r < 0 ? nook_err_wrap(err, "mount point '%s'", target) : r;
}

/* A bind mount keeps the flags of its source; a read-only remount inside a user namespace must
 * repeat the locked ones (nosuid, nodev, noexec, atime) or the kernel refuses it (mount(2),
 * EPERM "locked mount flags"). */
unsigned long iso_locked_flags(const char *path) {
        struct statvfs sv;
        unsigned long f = 0;
        if (statvfs(path, &sv) < 0)
                return 0;
        if (sv.f_flag & ST_NOSUID)
                f |= MS_NOSUID;
        if (sv.f_flag & ST_NODEV)
                f |= MS_NODEV;
        if (sv.f_flag & ST_NOEXEC)
                f |= MS_NOEXEC;
        if (sv.f_flag & ST_NOATIME)
                f |= MS_NOATIME;
        if (sv.f_flag & ST_NODIRATIME)
                f |= MS_NODIRATIME;
        if (sv.f_flag & ST_RELATIME)
                f |= MS_RELATIME;
        return f;
}

/* A read-only clone of src (with what is mounted under it) attached at target_fd (an O_PATH fd
 * of the mount point) or, when it is -1, at target: the new mount API (Linux 5.12), three calls
 * where a bind and its read-only remount took a statfs (the locked flags), two mount calls and,
 * through an fd, a second walk to the new mount's root.  mount_setattr only adds flags: the
 * locked ones stay as they are.  -1 with errno when the kernel lacks it or refuses; the caller
 * then binds and remounts as before (nothing was attached). */
static int clone_ro(const char *src, int target_fd, const char *target, uint64_t extra) {
        _cleanup_close_ int tree = open_tree(
                AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_NO_AUTOMOUNT);
        if (tree < 0)
                return -1;
        struct mount_attr a = { .attr_set =
                                        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | extra };
        if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
                return -1;
        if (target_fd >= 0)
                return move_mount(
                        tree, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
        return move_mount(tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}

static int bind_ro(const char *src, const char *dst, bool recursive, unsigned long extra, nook_error *err) {
        if (recursive && clone_ro(src, -1, dst, (extra & MS_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0) == 0)
                return 0;
        if (mount(src, dst, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot bind '%s' into the sandbox", src);
        unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY | extra | iso_locked_flags(dst);
        if (mount(NULL, dst, NULL, fl, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make '%s' read-only in the sandbox", src);
        return 0;
}

/* Attaches a detached mount (open_tree + mount_setattr by the supervisor) at path. */
static int attach_at(int tree_fd, const char *path, nook_error *err) {
        if (syscall(SYS_move_mount, tree_fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot attach an idmapped mount at '%s'", path);
        return 0;
}

/* overlayfs refuses a lower layer that is a detached mount (it must be in our mount namespace):
 * attach each idmapped layer on a directory of the scratch tmpfs first. */
static int attach_lowers(const iso_rootfs *rf, nook_error *err) {
        for (size_t i = 0; i < rf->n_lowers; i++) {
                char p[64];
                (void)snprintf(p, sizeof(p), SCRATCH "/l%zu", i);
                if (mkdir(p, 0755) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", p);
                int r = attach_at(rf->lower_fds[i], p, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

#define ETC_LAYER SCRATCH "/etc-layer"

static int write_scratch_file(const char *path, const char *content, nook_error *err) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", path);
        int r = fd_write_all(fd, content, strlen(content));
        if (r < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", path);
        (void)fchmod(fd, 0644); /* whatever the umask the supervisor inherited */
        return 0;
}

/* The sandbox's /etc/hosts, /etc/hostname and, with a network, /etc/resolv.conf, as the topmost
 * read-only layer of its overlay: a folder on the scratch tmpfs.  So a create writes none of
 * them (nor upper/etc) into the writable layer on the host, where every new inode cost 0.3-0.5
 * ms of CPU on a churned ext4 (bench/README.md, issue #17), and the guest sees them as it saw
 * them there: plain files of its root, 0644 in a 0755 /etc, changed or deleted by copy-up into
 * the writable layer like any image file (no bind mount: rm and sed -i work).  The layer hides an
 * image's /etc that is not a folder, as the upper/etc made before did. */
static int make_etc_layer(const iso_rootfs *rf, nook_error *err) {
        char hosts[512], hostname[128];
        if (mkdir(ETC_LAYER, 0755) < 0 || mkdir(ETC_LAYER "/etc", 0755) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the sandbox's /etc layer");
        (void)chmod(ETC_LAYER, 0755);
        (void)chmod(ETC_LAYER "/etc", 0755);
        if (rf->hostname) {
                (void)snprintf(hosts, sizeof(hosts),
                        "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                        rf->hostname);
                (void)snprintf(hostname, sizeof(hostname), "%s\n", rf->hostname);
                int r = write_scratch_file(ETC_LAYER "/etc/hosts", hosts, err);
                if (r < 0)
                        return r;
                r = write_scratch_file(ETC_LAYER "/etc/hostname", hostname, err);
                if (r < 0)
                        return r;
        }
        if (rf->resolv_conf)
                return write_scratch_file(ETC_LAYER "/etc/resolv.conf", rf->resolv_conf, err);
        return 0;
}

static int mount_overlay(const iso_rootfs *rf, nook_error *err) {
        char opts[4096];
        size_t n = 0;

        if (rf->n_lowers == 0 || rf->n_lowers > ISO_MAX_LOWERS)
                return nook_err_set(err, NOOK_E_INVALID, "A sandbox needs 1 to %d image layers, got %zu",
                        ISO_MAX_LOWERS, rf->n_lowers);
        if (rf->lowers_detached) {
                int r = attach_lowers(rf, err);
                if (r < 0)
                        return r;
        }
        bool etc = rf->hostname || rf->resolv_conf;
        if (etc) {
                int r = make_etc_layer(rf, err);
                if (r < 0)
                        return r;
        }
        n += (size_t)snprintf(opts + n, sizeof(opts) - n, "lowerdir=%s", etc ? ETC_LAYER ":" : "");
        for (size_t i = 0; i < rf->n_lowers && n < sizeof(opts); i++)
                n += rf->lowers_detached
                        ? (size_t)snprintf(opts + n, sizeof(opts) - n, "%s" SCRATCH "/l%zu", i ? ":" : "", i)
                        : (size_t)snprintf(opts + n, sizeof(opts) - n, "%s/proc/self/fd/%d", i ? ":" : "",
                                  rf->lower_fds[i]);
        if (rf->upper_fd >= 0)
                n += (size_t)snprintf(opts + n, sizeof(opts) - n,
                        ",upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d", rf->upper_fd, rf->work_fd);
        if (n >= sizeof(opts))
                return nook_err_set(err, NOOK_E_INVALID, "Too many image layers for one overlay mount");
        /* userxattr: inside a user namespace overlayfs may only use user.* xattrs (kernel 5.11+).
         * volatile (5.10+): no sync of the upper layer's filesystem, not by a guest's sync()
         * and not when the overlay goes away at stop; that unmount synced the whole host
         * filesystem under the state folder (ovl_sync_fs), 2-3 % of the CPU of a `nook run`
         * and more wall time when others write there.  Only for an upper that is deleted at
         * stop: after a crash, overlayfs refuses to mount a volatile upper again. */
        const char *variants[] = { ",volatile,userxattr", ",volatile", ",userxattr", "" };
        for (size_t i = rf->upper_volatile && rf->upper_fd >= 0 ? 0 : 2; i < ELEMENTSOF(variants); i++) {
                char full[4200];
                (void)snprintf(full, sizeof(full), "%s%s", opts, variants[i]);
                if (mount("overlay", NEWROOT, "overlay", MS_NOSUID | MS_NODEV, full) == 0)
                        return 0;
        }
        if (errno == EPERM)
                return nook_err_errno(err, NOOK_E_MISSING_FEATURE,
                        "Cannot mount the sandbox's overlay root filesystem in a user namespace (needs Linux >= 5.11); run 'nook doctor'");
        return nook_err_errno(err, NOOK_E_IO, "Cannot mount the sandbox's overlay root filesystem");
}

static int setup_dev(nook_error *err) {
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
        int r;

        r = mkdir_at_root("/dev", 0755, err);
        if (r < 0)
                return r;
        if (mount("tmpfs", NEWROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536k") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot mount /dev in the sandbox");
        /* No mknod in a user namespace: device nodes are bind mounts of the host's (bwrap does
         * the same).  These six are harmless by design.  Their mount points are made first in
         * the new /dev (resolved in the root, like every mount point), so each is then found by
         * one lookup (issue #17). */
        _cleanup_close_ int dev = -1;
        r = open_target("/dev", /* dir= */ true, &dev, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
                if (mknodat(dev, nodes[i], S_IFREG | 0644, 0) < 0 && errno != EEXIST)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot create '/dev/%s' in the sandbox", nodes[i]);
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                char src[64], rel[64];
                (void)snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
                (void)snprintf(rel, sizeof(rel), "/dev/%s", nodes[i]);
                _cleanup_close_ int tfd = -1;
                r = open_target(rel, /* dir= */ false, &tfd, err);
                if (r < 0)
                        return r;
                char dst[64];
                (void)snprintf(dst, sizeof(dst), "/proc/self/fd/%d", tfd);
                if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot bind '%s' into the sandbox", src);
        }
        r = mkdir_at_root("/dev/pts", 0755, err);
        if (r < 0)
                return r;
        if (mount("devpts", NEWROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                    "newinstance,ptmxmode=0666,mode=620") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot mount /dev/pts in the sandbox");
        if (symlink("pts/ptmx", NEWROOT "/dev/ptmx") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create /dev/ptmx in the sandbox");
        r = mkdir_at_root("/dev/shm", 01777, err);
        if (r < 0)
                return r;
        if (mount("tmpfs", NEWROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot mount /dev/shm in the sandbox");
        static const char *const links[][2] = {
                { "/proc/self/fd", "/dev/fd" },
                { "/proc/self/fd/0", "/dev/stdin" },
                { "/proc/self/fd/1", "/dev/stdout" },
                { "/proc/self/fd/2", "/dev/stderr" },
                { "/proc/kcore", "/dev/core" },
        };
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                char dst[PATH_MAX];
                (void)snprintf(dst, sizeof(dst), NEWROOT "%s", links[i][1]);
                if (symlink(links[i][0], dst) < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot create '%s' in the sandbox", links[i][1]);
        }
        return 0;
}

/* Paths in /proc that expose the host or let root inside poke at the kernel.  A path this kernel
 * lacks is skipped: its mount fails with ENOENT (no access() first: one lookup each, issue #17). */
static int mask_proc(nook_error *err) {
        static const char *const hide[] = { "/proc/kcore", "/proc/keys", "/proc/timer_list",
                "/proc/sched_debug", "/proc/latency_stats" };
        static const char *const ro[] = { "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus",
                "/proc/fs" };
        static const char *const empty[] = { "/proc/acpi", "/proc/scsi" };

        for (size_t i = 0; i < ELEMENTSOF(hide); i++) {
                char dst[PATH_MAX];
                (void)snprintf(dst, sizeof(dst), NEWROOT "%s", hide[i]);
                if (mount(NEWROOT "/dev/null", dst, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot mask '%s' in the sandbox", hide[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(ro); i++) {
                char dst[PATH_MAX];
                (void)snprintf(dst, sizeof(dst), NEWROOT "%s", ro[i]);
                if (clone_ro(dst, -1, dst, MOUNT_ATTR_NOEXEC) == 0 || errno == ENOENT)
                        continue;
                int r = bind_ro(dst, dst, /* recursive= */ true, MS_NOSUID | MS_NODEV | MS_NOEXEC, err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(empty); i++) {
                char dst[PATH_MAX];
                (void)snprintf(dst, sizeof(dst), NEWROOT "%s", empty[i]);
                const unsigned long fl = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
                if (mount("tmpfs", dst, "tmpfs", fl, "size=0") < 0 && errno != ENOENT)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot mask '%s' in the sandbox", empty[i]);
        }
        return 0;
}

static int setup_proc_sys(nook_error *err) {
        int r = mkdir_at_root("/proc", 0555, err);
        if (r < 0)
                return r;
        if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot mount /proc in the sandbox");
        r = mkdir_at_root("/sys", 0555, err);
        if (r < 0)
                return r;
        /* sysfs is mountable because we own the network namespace; read-only, and absent (an
         * empty directory) where the host refuses it. */
        if (mount("sysfs", NEWROOT "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) ==
                0) {
                char fw[PATH_MAX];
                (void)snprintf(fw, sizeof(fw), NEWROOT "/sys/firmware");
                if (access(fw, F_OK) == 0)
                        (void)mount("tmpfs", fw, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                "size=0");
        }
        return 0;
}

/* Binds the host's src at rel under the new root, read-only.  The remount goes through a second
 * open of rel: the fd opened before the bind names the mount point under it, and a remount
 * needs the new mount's root (mount(2): EINVAL otherwise). */
static int bind_ro_in_root(const char *src, const char *rel, bool dir, nook_error *err) {
        _cleanup_close_ int tfd = -1;
        char dst[64];
        int r = open_target(rel, dir, &tfd, err);
        if (r < 0)
                return r;
        if (clone_ro(src, tfd, NULL, 0) == 0)
                return 0;
        (void)snprintf(dst, sizeof(dst), "/proc/self/fd/%d", tfd);
        if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot bind '%s' into the sandbox", src);
        tfd = safe_close(tfd);
        r = open_target(rel, dir, &tfd, err);
        if (r < 0)
                return r;
        (void)snprintf(dst, sizeof(dst), "/proc/self/fd/%d", tfd);
        unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | iso_locked_flags(dst);
        if (mount(NULL, dst, NULL, fl, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make '%s' read-only in the sandbox", src);
        return 0;
}

static int setup_binds(const iso_rootfs *rf, nook_error *err) {
        STRV_FOREACH (p, rf->ro_binds) {
                struct stat st;
                if (stat(*p, &st) < 0)
                        continue; /* the host lacks it; the image does not need it then */
                int r = bind_ro_in_root(*p, *p, S_ISDIR(st.st_mode), err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int setup_workspace_tmp(const iso_rootfs *rf, nook_error *err) {
        int r = mkdir_at_root("/tmp", 01777, err);
        if (r < 0)
                return r;
        if (mount("tmpfs", NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot mount /tmp in the sandbox");
        if (rf->workspace_fd < 0)
                return 0;
        r = mkdir_at_root("/workspace", 0755, err);
        if (r < 0)
                return r;
        if (rf->workspace_detached)
                return attach_at(rf->workspace_fd, NEWROOT "/workspace", err);
        char src[64];
        (void)snprintf(src, sizeof(src), "/proc/self/fd/%d", rf->workspace_fd);
        if (mount(src, NEWROOT "/workspace", NULL, MS_BIND, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot bind the workspace at /workspace");
        if (mount(NULL, NEWROOT "/workspace", NULL,
                    MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | iso_locked_flags(NEWROOT "/workspace"),
                    NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set nosuid,nodev on /workspace");
        return 0;
}

/* User volumes: binds of fds the child opened before dropping host credentials, and tmpfs.
 * nosuid and nodev always; read-only where asked. */
static int setup_volumes(const iso_rootfs *rf, nook_error *err) {
        for (size_t i = 0; i < rf->n_mounts; i++) {
                const iso_mount *m = &rf->mounts[i];
                struct stat st = { .st_mode = S_IFDIR };
                if (m->source_fd >= 0 && fstat(m->source_fd, &st) < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot stat the source of volume '%s'", m->target);
                _cleanup_close_ int tfd = -1;
                int r = open_target(m->target, S_ISDIR(st.st_mode), &tfd, err);
                if (r < 0)
                        return r;
                char dst[64], src[64], opts[64];
                (void)snprintf(dst, sizeof(dst), "/proc/self/fd/%d", tfd);
                if (m->source_fd < 0) {
                        (void)snprintf(
                                opts, sizeof(opts), "mode=1777,size=%lum", m->size_mib ? m->size_mib : 64);
                        if (mount("tmpfs", dst, "tmpfs",
                                    MS_NOSUID | MS_NODEV | (m->readonly ? MS_RDONLY : 0), opts) < 0)
                                return nook_err_errno(
                                        err, NOOK_E_IO, "Cannot mount a tmpfs at '%s'", m->target);
                        continue;
                }
                if (m->detached) {
                        /* idmapped by the supervisor, nosuid,nodev and ro already set */
                        if (syscall(SYS_move_mount, m->source_fd, "", tfd, "",
                                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                                return nook_err_errno(
                                        err, NOOK_E_IO, "Cannot attach the volume at '%s'", m->target);
                        continue;
                }
                (void)snprintf(src, sizeof(src), "/proc/self/fd/%d", m->source_fd);
                if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot bind the volume at '%s'", m->target);
                /* the new mount sits on top of tfd's dentry: reopen the target to reach it */
                safe_close(tfd);
                tfd = -1;
                r = open_target(m->target, S_ISDIR(st.st_mode), &tfd, err);
                if (r < 0)
                        return r;
                (void)snprintf(dst, sizeof(dst), "/proc/self/fd/%d", tfd);
                unsigned long fl = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV |
                        (m->readonly ? MS_RDONLY : 0) | iso_locked_flags(dst);
                if (mount(NULL, dst, NULL, fl, NULL) < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot set the flags of the volume at '%s'", m->target);
        }
        return 0;
}

/* Everything mounted under the new root, in order (docs/design/runtime.md, step 7). */
static int setup_mounts(const iso_rootfs *rf, nook_error *err) {
        int r = setup_binds(rf, err);
        if (r < 0)
                return r;
        r = setup_proc_sys(err);
        if (r < 0)
                return r;
        r = setup_dev(err);
        if (r < 0)
                return r;
        r = mask_proc(err);
        if (r < 0)
                return r;
        r = setup_workspace_tmp(rf, err);
        if (r < 0)
                return r;
        return setup_volumes(rf, err);
}

static int pivot_into_new_root(nook_error *err) {
        return iso_pivot_root(NEWROOT, err);
}

int iso_pivot_root(const char *newroot, nook_error *err) {
        if (chdir(newroot) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot enter the new root");
        /* pivot_root(".", ".") stacks the old root under the new one; detaching "." then drops
         * it without needing a directory for it (pivot_root(2), NOTES). */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return nook_err_errno(err, NOOK_E_IO, "pivot_root into the sandbox root failed");
        if (umount2(".", MNT_DETACH) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot detach the host root");
        if (chdir("/") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot chdir to the new root");
        return 0;
}

/* Runs in the sandbox init after clone() and the id maps.  State:
 *   userns: new, maps written, we are uid 0 with a full capability set in it
 *   mntns:  new, still a copy of the host's      pidns: new, we are PID 1
 *   caps:   none on the host; fds of every host directory were opened by the supervisor. */
int iso_rootfs_setup(const iso_rootfs *rf, nook_error *err) {
        int r;

        if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make the sandbox's mounts private");
        if (mount("tmpfs", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot mount the scratch tmpfs");
        if (mkdir(NEWROOT, 0755) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the new root");
        r = mount_overlay(rf, err);
        if (r < 0)
                return r;
        r = setup_mounts(rf, err);
        new_root_fd = safe_close(new_root_fd);
        if (r < 0)
                return r;
        return pivot_into_new_root(err);
}

int iso_net_uts_setup(const char *hostname, nook_error *err) {
        if (hostname && sethostname(hostname, strlen(hostname)) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the hostname to '%s'", hostname);
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open a socket to bring up loopback");
        struct ifreq ifr = { 0 };
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the loopback interface");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot bring up the loopback interface");
        return 0;
}
