/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "error.h"
#include "macro.h"
#include "path.h"
#include "str.h"

int path_home_default(char **ret, nook_error *err) {
        const char *e = secure_getenv("NOOK_HOME");
        char *p;

        if (!isempty(e)) {
                if (e[0] != '/')
                        return nook_err_set(
                                err, NOOK_E_INVALID, "NOOK_HOME must be an absolute path, got '%s'", e);
                p = strdup(e);
        } else if (geteuid() == 0)
                p = strdup("/var/lib/nook");
        else if (!isempty(e = secure_getenv("XDG_DATA_HOME")) && e[0] == '/')
                p = strprintf("%s/nook", e);
        else if (!isempty(e = secure_getenv("HOME")) && e[0] == '/')
                p = strprintf("%s/.local/share/nook", e);
        else
                return nook_err_set(err, NOOK_E_INVALID,
                        "Cannot find a state folder: set NOOK_HOME, XDG_DATA_HOME or HOME");
        if (!p)
                return nook_err_oom(err);
        /* drop trailing slashes, keep "/" */
        for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
                p[n - 1] = 0;
        *ret = p;
        return 0;
}

/* mkdir of every component of path in turn (existing ones are fine). */
static int mkdir_parents(const char *path, mode_t mode, nook_error *err) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return nook_err_oom(err);
        for (char *s = p + 1;; s++) {
                if (*s != '/' && *s != 0)
                        continue;
                char saved = *s;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create directory '%s'", p);
                *s = saved;
                if (!saved)
                        return 0;
        }
}

int path_mkdir_p(const char *path, mode_t mode, nook_error *err) {
        /* The common case first: the parent exists (one mkdir, not one per component: a create
         * calls this for folders that exist since the first one). */
        if (mkdir(path, mode) < 0) {
                if (errno != ENOENT && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create directory '%s'", path);
                if (errno == ENOENT) {
                        int r = mkdir_parents(path, mode, err);
                        if (r < 0)
                                return r;
                }
        }
        struct stat st;
        if (stat(path, &st) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", path);
        if (!S_ISDIR(st.st_mode))
                return nook_err_set(err, NOOK_E_INVALID, "'%s' exists and is not a directory", path);
        return 0;
}

/* ---- removing trees ----------------------------------------------------------------------- */

/* One call per entry where the folder says what it is (getdents' d_type): a file or symlink is
 * one unlinkat, a folder openat + statx + getdents + close + rmdir; no fstatat before each name,
 * no fdopendir (a dup and three more calls).  bench/README.md, issue #17, measured it. */

#define RM_MAX_DEPTH 4096
#define RM_DIRENT_BUF 4096

static int rm_entry(
        int dirfd, const char *name, unsigned char type, dev_t parent_dev, unsigned depth, nook_error *err);

/* Opens the folder name under dirfd for reading.  A folder we own with no permissions
 * (overlayfs leaves work/work at mode 0) is made 0700 first, through an O_PATH fd of exactly
 * that inode, never a path a sandbox could swap. */
static int rm_open_dir(int dirfd, const char *name) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || errno != EACCES)
                return fd;
        _cleanup_close_ int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char proc[64];
        (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
        if (pfd < 0 || chmod(proc, 0700) < 0) {
                errno = EACCES;
                return -1;
        }
        return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Removes every entry of the open folder fd (on device dev).  ENOTEMPTY after a pass (an entry
 * the listing did not show while names were going) gets another pass from the start. */
static int rm_children(int fd, dev_t dev, unsigned depth, nook_error *err) {
        _cleanup_free_ char *buf = malloc(RM_DIRENT_BUF);
        if (!buf)
                return nook_err_oom(err);
        for (;;) {
                ssize_t n = getdents64(fd, buf, RM_DIRENT_BUF);
                if (n < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read a folder to remove");
                if (n == 0)
                        return 0;
                for (ssize_t off = 0; off < n;) {
                        struct dirent64 *de = (struct dirent64 *)(void *)(buf + off);
                        off += de->d_reclen;
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        int r = rm_entry(fd, de->d_name, de->d_type, dev, depth + 1, err);
                        if (r < 0)
                                return r;
                }
        }
}

static int rm_dir(int dirfd, const char *name, dev_t parent_dev, unsigned depth, nook_error *err) {
        if (depth > RM_MAX_DEPTH)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Cannot remove '%s': the tree is deeper than %d folders", name, RM_MAX_DEPTH);
        _cleanup_close_ int fd = rm_open_dir(dirfd, name);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                if (errno == ENOTDIR || errno == ELOOP) /* not (or no longer) a folder */
                        return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT
                                ? nook_err_errno(err, NOOK_E_IO, "Cannot remove '%s'", name)
                                : 0;
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the folder '%s' to remove it", name);
        }
        struct statx stx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_MODE, &stx) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot inspect the folder '%s'", name);
        /* Never descend into a mount: another filesystem, or a bind mount of this one (only
         * STATX_ATTR_MOUNT_ROOT tells those apart; the device compare covers kernels without). */
        dev_t dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
        struct stat pst;
        if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && parent_dev == (dev_t)-1 &&
                fstat(dirfd, &pst) == 0)
                parent_dev = pst.st_dev; /* a kernel before 5.8: the top's parent, by device */
        if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT &&
                    stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ||
                (parent_dev != (dev_t)-1 && dev != parent_dev))
                return nook_err_set(
                        err, NOOK_E_BUSY, "Cannot remove '%s': it is a mount point; unmount it first", name);
        if ((stx.stx_mode & 0700) != 0700) /* a read-only folder written by a sandbox must still go */
                (void)fchmod(fd, (stx.stx_mode & 07777) | 0700);
        for (int pass = 0;; pass++) {
                int r = rm_children(fd, dev, depth, err);
                if (r < 0)
                        return r;
                if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return 0;
                if (errno != ENOTEMPTY || pass == 2 || lseek(fd, 0, SEEK_SET) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot remove the folder '%s'", name);
        }
}

static int rm_entry(
        int dirfd, const char *name, unsigned char type, dev_t parent_dev, unsigned depth, nook_error *err) {
        if (type != DT_DIR && type != DT_UNKNOWN) {
                if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EISDIR) /* EISDIR: a folder took the name since it was listed */
                        return nook_err_errno(err, NOOK_E_IO, "Cannot remove '%s'", name);
        }
        return rm_dir(dirfd, name, parent_dev, depth, err);
}

int path_rm_rf_at(int dirfd, const char *name, nook_error *err) {
        /* The top name's type is unknown: rm_dir opens it as a folder and unlinks anything else.
         * Its parent's device is asked for only where the mount-root attribute is missing. */
        return rm_entry(dirfd, name, DT_UNKNOWN, (dev_t)-1, 0, err);
}

int path_rm_rf(const char *path, nook_error *err) {
        if (!path || path[0] != '/' || streq(path, "/"))
                return nook_err_set(err, NOOK_E_INVALID, "Refusing to remove '%s'", path ? path : "(null)");
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return nook_err_oom(err);
        char *slash = strrchr(dir, '/');
        const char *base = slash + 1;
        if (slash == dir)
                dir[1] = 0;
        else
                *slash = 0;
        base = path + (base - dir);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                if (errno == ENOENT)
                        return 0;
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", dir);
        }
        return path_rm_rf_at(dfd, base, err);
}

/* EAGAIN: a ".." was resolved while a mount or rename happened anywhere on the host, and the
 * kernel cannot tell whether it escaped; openat2(2) says to retry.  On a host busy mounting
 * (other sandboxes starting) that is no rare event. */
static int open_in(int root_fd, const char *rel) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        int fd = -1;
        for (int tries = 0; tries < 128; tries++) {
                fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
                if (fd >= 0 || errno != EAGAIN)
                        break;
        }
        return fd;
}

/* One component: opened by its whole prefix from the root (so a symlink anywhere resolves in
 * the root), made in its parent's fd when missing. */
static int open_component(int root_fd, int parent_fd, const char *prefix, const char *name, bool dir,
        const char *path, nook_error *err) {
        int fd = open_in(root_fd, prefix);
        if (fd < 0 && errno == ENOENT && !streq(name, "..")) {
                int k = dir ? mkdirat(parent_fd, name, 0755) : mknodat(parent_fd, name, S_IFREG | 0644, 0);
                if (k < 0 && errno != EEXIST)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot create '%s' of '%s' inside the root", prefix, path);
                fd = open_in(root_fd, prefix);
        }
        if (fd < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot resolve '%s' of '%s' inside the root", prefix, path);
        return fd;
}

int path_open_in_root(int root_fd, const char *path, bool last_dir, int *ret_fd, nook_error *err) {
        char buf[PATH_MAX], prefix[PATH_MAX] = "";
        size_t plen = 0;
        if (strlen(path) >= sizeof(buf))
                return nook_err_set(err, NOOK_E_INVALID, "Path too long (%zu bytes, at most %d): '%.64s...'",
                        strlen(path), PATH_MAX - 1, path);
        strcpy(buf, path);
        /* The common case, every component there already (a host image's mount points, made
         * when its skeleton was): one lookup of the whole path, the same one the walk below ends
         * with, instead of one per prefix (issue #17).  Anything else takes the walk. */
        int whole = open_in(root_fd, path);
        if (whole >= 0) {
                *ret_fd = whole;
                return 0;
        }
        _cleanup_close_ int cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        if (cur < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the root for '%s'", path);
        char *save = NULL;
        for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (streq(c, "."))
                        continue;
                bool last = !save || save[strspn(save, "/")] == 0;
                /* the prefix is never longer than path, which fits */
                plen += (size_t)snprintf(prefix + plen, sizeof(prefix) - plen, "%s%s", plen ? "/" : "", c);
                int fd = open_component(root_fd, cur, prefix, c, !last || last_dir, path, err);
                if (fd < 0)
                        return fd;
                safe_close(cur);
                cur = fd;
        }
        *ret_fd = TAKE_FD(cur);
        return 0;
}
