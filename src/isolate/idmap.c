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
#include <sys/mman.h>
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

/* Made by clone(CLONE_NEWUSER) itself (the kernel creates the namespace in the parent's call), the
 * child has nothing to do but exit.  Its namespace outlives it: a zombie keeps its credentials,
 * which hold the namespace, until it is reaped (the kernel frees them with the task struct,
 * __put_task_struct -> exit_creds), so its /proc/PID/uid_map, gid_map and ns/user stay usable
 * until waitpid.  CLONE_VM: it runs on our memory, no page tables are copied (a fork of the
 * supervisor and its exit cost ~0.3-0.5 ms each on a small VM); so no sanitizer code either. */
__attribute__((no_sanitize("address"))) static int userns_child(void *arg) {
        (void)arg;
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

int iso_idmap_userns(const iso_idmap_spec *specs, size_t n, int *ret_fds, nook_error *err) {
        pid_t pids[ISO_IDMAP_MAX] = { 0 };
        int fds[ISO_IDMAP_MAX] = { -1, -1, -1, -1 };
        size_t started = 0;
        int r = 0;
        assert(n <= ISO_IDMAP_MAX);
        /* One page of stack each: a child only calls _exit.  Unmapped once every child is reaped. */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        char *stacks =
                mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stacks == MAP_FAILED)
                return nook_err_errno(err, NOOK_E_NOMEM, "Cannot map a stack for the id-mapping children");
        for (; started < n; started++) {
                pids[started] = clone(userns_child, stacks + (started + 1) * page,
                        CLONE_VM | CLONE_NEWUSER | SIGCHLD, NULL);
                if (pids[started] < 0) {
                        r = nook_err_errno(err,
                                errno == EPERM || errno == EINVAL || errno == ENOSPC ? NOOK_E_MISSING_FEATURE
                                                                                     : NOOK_E_IO,
                                "Cannot create a user namespace for idmapped mounts; run 'nook doctor'");
                        break;
                }
        }
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = map_one(pids[i], &specs[i], &fds[i], err);
        for (size_t i = 0; i < started; i++)
                while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
                        ;
        (void)munmap(stacks, n * page);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
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
