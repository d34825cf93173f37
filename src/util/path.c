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

static int rm_at(int dirfd, const char *name, unsigned depth, nook_error *err);

static int rm_tree_fd(int dfd, unsigned depth, nook_error *err) {
        if (depth > 4096)
                return nook_err_set(err, NOOK_E_INVALID, "Directory tree too deep to remove");
        int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot duplicate directory fd");
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                safe_close(dup_fd);
                return nook_err_errno(err, NOOK_E_IO, "Cannot read directory");
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = rm_at(dfd, de->d_name, depth + 1, err);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

int path_rm_rf_at(int dirfd, const char *name, nook_error *err) {
        return rm_at(dirfd, name, 0, err);
}

static int rm_at(int dirfd, const char *name, unsigned depth, nook_error *err) {
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", name);
        }
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot remove '%s'", name);
                return 0;
        }
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == EACCES) {
                /* A directory we own with no permissions (overlayfs leaves work/work at mode 0):
                 * chmod exactly that inode through an O_PATH fd, never a path a sandbox could swap. */
                _cleanup_close_ int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                char proc[64];
                (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
                if (pfd >= 0 && chmod(proc, 0700) == 0)
                        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                else
                        errno = EACCES;
        }
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                return nook_err_errno(err, NOOK_E_IO, "Cannot open directory '%s'", name);
        }
        struct stat fst;
        if (fstat(fd, &fst) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", name);
        if (fst.st_dev != st.st_dev || fst.st_ino != st.st_ino)
                return nook_err_set(err, NOOK_E_BUSY, "'%s' changed while being removed", name);
        /* A mount point below us: never descend into another filesystem. */
        struct stat parent;
        if (fstat(dirfd, &parent) == 0 && parent.st_dev != fst.st_dev)
                return nook_err_set(err, NOOK_E_BUSY, "'%s' is a mount point; unmount it first", name);
        (void)fchmod(fd, 0700); /* a read-only directory written by a sandbox must still go */
        int r = rm_tree_fd(fd, depth, err);
        if (r < 0)
                return r;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return nook_err_errno(err, NOOK_E_IO, "Cannot remove directory '%s'", name);
        return 0;
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
