/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/idmap.h"
#include "isolate/userns.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342
#endif

static bool kernel_at_least(unsigned major, unsigned minor) {
        struct utsname u;
        unsigned a = 0, b = 0;
        if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &a, &b) != 2)
                return false;
        return a > major || (a == major && b >= minor);
}

bool iso_idmap_supported(const char *home, const char **ret_why) {
        struct statfs sf;
        if (!iso_rootful()) {
                *ret_why =
                        "rootless: idmapping a host filesystem needs CAP_SYS_ADMIN in the initial user namespace";
                return false;
        }
        if (syscall(SYS_mount_setattr, -1, "", 0, NULL, 0) < 0 && errno == ENOSYS) {
                *ret_why = "the kernel has no mount_setattr(2) (Linux >= 5.12)";
                return false;
        }
        if (!kernel_at_least(5, 19)) {
                *ret_why = "overlayfs takes idmapped layers from Linux 5.19";
                return false;
        }
        if (statfs(home, &sf) < 0) {
                *ret_why = "cannot statfs the state folder";
                return false;
        }
        switch ((unsigned long)sf.f_type) {
        case EXT4_SUPER_MAGIC:
        case XFS_SUPER_MAGIC:
        case BTRFS_SUPER_MAGIC:
                return true;
        case TMPFS_MAGIC:
                if (kernel_at_least(6, 3))
                        return true;
                *ret_why = "tmpfs takes idmapped mounts from Linux 6.3";
                return false;
        default:
                *ret_why =
                        "the state folder's filesystem does not support idmapped mounts (ext4, xfs, btrfs or tmpfs do)";
                return false;
        }
}

static int write_map(pid_t pid, const char *file, const char *map, nook_error *err) {
        char path[64];
        (void)snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", path);
        int r = fd_write_all(fd, map, strlen(map));
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write '%s' to '%s'", map, path);
        return 0;
}

/* The child only unshares and waits for its pipe to close: raw syscalls, safe after fork. */
_Noreturn static void userns_child(int ready_w, int hold_r, int hold_w) {
        (void)close(hold_w); /* else our own copy keeps the pipe open */
        char c = unshare(CLONE_NEWUSER) < 0 ? 'e' : 'k';
        (void)!write(ready_w, &c, 1);
        (void)!read(hold_r, &c, 1);
        _exit(0);
}

static int map_one(pid_t pid, const iso_idmap_spec *sp, int *ret_fd, nook_error *err) {
        char map[64], gmap[64], path[64];
        (void)snprintf(map, sizeof(map), "%u %u %u\n", sp->inside_uid, sp->outside, sp->count);
        (void)snprintf(gmap, sizeof(gmap), "%u %u %u\n", sp->inside_gid, sp->outside, sp->count);
        int r = write_map(pid, "uid_map", map, err);
        if (r < 0)
                return r;
        r = write_map(pid, "gid_map", gmap, err);
        if (r < 0)
                return r;
        (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", path);
        *ret_fd = fd;
        return 0;
}

/* The children run at once (each unshare costs ~0.5 ms, mostly in the child), held by one pipe
 * that closes when every map is written. */
int iso_idmap_userns(const iso_idmap_spec *specs, size_t n, int *ret_fds, nook_error *err) {
        _cleanup_close_pair_ int ready[2] = { -1, -1 }, hold[2] = { -1, -1 };
        pid_t pids[ISO_IDMAP_MAX] = { 0 };
        int fds[ISO_IDMAP_MAX];
        size_t started = 0, mapped = 0;
        int r = 0;
        assert(n <= ISO_IDMAP_MAX);
        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a pipe");
        for (; started < n; started++) {
                pids[started] = fork();
                if (pids[started] < 0) {
                        r = nook_err_errno(
                                err, NOOK_E_IO, "Cannot fork to make an id-mapping user namespace");
                        break;
                }
                if (pids[started] == 0)
                        userns_child(ready[1], hold[0], hold[1]);
        }
        for (size_t i = 0; i < started && r >= 0; i++) {
                char c = 0;
                if (read(ready[0], &c, 1) != 1 || c != 'k')
                        r = nook_err_set(err, NOOK_E_MISSING_FEATURE,
                                "Cannot create a user namespace for idmapped mounts; run 'nook doctor'");
        }
        for (; r >= 0 && mapped < n; mapped++)
                r = map_one(pids[mapped], &specs[mapped], &fds[mapped], err);
        hold[1] = safe_close(hold[1]); /* the children exit */
        for (size_t i = 0; i < started; i++)
                while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
                        ;
        if (r < 0) {
                for (size_t i = 0; i < mapped; i++)
                        safe_close(fds[i]);
                return r;
        }
        memcpy(ret_fds, fds, n * sizeof(int));
        return 0;
}

int iso_idmap_clone(int fd, int userns_fd, bool readonly, bool recursive, int *ret_fd, nook_error *err) {
        unsigned rec = recursive ? AT_RECURSIVE : 0;
        _cleanup_close_ int tree = (int)syscall(
                SYS_open_tree, fd, "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | rec);
        if (tree < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot clone a mount with open_tree(2)");
        struct mount_attr a = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                        (readonly ? MOUNT_ATTR_RDONLY : 0),
                .userns_fd = (uint64_t)userns_fd,
        };
        if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | rec, &a, sizeof(a)) < 0) {
                if (errno == EINVAL || errno == EPERM || errno == ENOSYS)
                        return nook_err_errno(err, NOOK_E_MISSING_FEATURE,
                                "The filesystem refuses an idmapped mount (mount_setattr MOUNT_ATTR_IDMAP)");
                return nook_err_errno(err, NOOK_E_IO, "Cannot idmap a mount");
        }
        *ret_fd = TAKE_FD(tree);
        return 0;
}
