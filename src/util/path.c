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

bool path_same(const char *a, const char *b) {
        struct stat sa, sb;
        if (streq(a, b))
                return true;
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
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

/* A walk with a stack of its own, not recursion, so a tree as deep as a guest cares to make (a
 * loop of mkdirat + openat reaches any depth; no PATH_MAX in the way) is removed with bounded
 * stack and descriptors: the RM_HOLD_FDS folders nearest the walk stay open, each with its
 * getdents buffer; a folder further up is closed, and opened again through ".." of its child on
 * the way back, checked to be the same (device, inode), its entries read again from the start
 * (what was handled is gone).  One call per entry where the folder says what it is (getdents'
 * d_type): a file or symlink is one unlinkat, a folder openat + statx + getdents + close +
 * rmdir; no fstatat before each name, no fdopendir (a dup and three more calls) (bench/README.md,
 * issue #17). */

#define RM_HOLD_FDS 64
#define RM_DIRENT_BUF 4096
#define RM_MAX_RETRIES 64 /* folders found not empty after their entries went (a writer beside us) */

typedef struct {
        int fd; /* -1 while closed (more than RM_HOLD_FDS folders further down) */
        dev_t dev;
        ino_t ino;
        char *name; /* in its parent; NULL for the top */
        char *buf; /* the entries read and not handled yet: buf[pos..len) */
        size_t pos, len;
} rm_level;

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

/* Opens name under dirfd as a folder into *ret_fd (1), or unlinks it when it is none, not or no
 * longer a folder (0; also when it is gone). */
static int rm_open_or_unlink(int dirfd, const char *name, int *ret_fd, nook_error *err) {
        int fd = rm_open_dir(dirfd, name);
        if (fd >= 0) {
                *ret_fd = fd;
                return 1;
        }
        if (errno == ENOENT)
                return 0;
        if (errno != ENOTDIR && errno != ELOOP)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the folder '%s' to remove it", name);
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                return nook_err_errno(err, NOOK_E_IO, "Cannot remove '%s'", name);
        return 0;
}

/* The folder open as fd, named name under dirfd (on parent_dev; (dev_t)-1 when unknown): its
 * device and inode.  Refuses a mount point: another filesystem, or a bind mount of this one
 * (only STATX_ATTR_MOUNT_ROOT tells those apart; the device compare covers kernels without).
 * Makes a read-only folder written by a sandbox writable, so that its entries can go. */
static int rm_check(int dirfd, int fd, const char *name, dev_t parent_dev, dev_t *ret_dev, ino_t *ret_ino,
        nook_error *err) {
        struct statx stx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_MODE | STATX_INO, &stx) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot inspect the folder '%s'", name);
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
        if ((stx.stx_mode & 0700) != 0700)
                (void)fchmod(fd, (stx.stx_mode & 07777) | 0700);
        *ret_dev = dev;
        *ret_ino = stx.stx_ino;
        return 0;
}

/* The next entry of l (NULL at its end), reading more when its buffer is spent. */
static struct dirent64 *rm_next(rm_level *l, nook_error *err, int *ret) {
        *ret = 0;
        for (;;) {
                if (l->pos < l->len) {
                        struct dirent64 *de = (struct dirent64 *)(void *)(l->buf + l->pos);
                        l->pos += de->d_reclen;
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        return de;
                }
                if (!l->buf && !(l->buf = malloc(RM_DIRENT_BUF))) {
                        *ret = nook_err_oom(err);
                        return NULL;
                }
                ssize_t n = getdents64(l->fd, l->buf, RM_DIRENT_BUF);
                if (n < 0) {
                        *ret = nook_err_errno(err, NOOK_E_IO, "Cannot read a folder to remove");
                        return NULL;
                }
                if (n == 0)
                        return NULL;
                l->pos = 0;
                l->len = (size_t)n;
        }
}

/* Closes l's folder and forgets what was read of it: the walk reads it again from its start. */
static void rm_level_close(rm_level *l) {
        l->fd = safe_close(l->fd);
        free(l->buf);
        l->buf = NULL;
        l->pos = l->len = 0;
}

static void rm_level_drop(rm_level *l) {
        rm_level_close(l);
        free(l->name);
        l->name = NULL;
}

/* Removes everything in the open folder top (on device dev, inode ino); top is taken. */
static int rm_content(int top, dev_t dev, ino_t ino, nook_error *err) {
        size_t n = 1, cap = 16;
        unsigned retries = 0;
        rm_level *lv = calloc(cap, sizeof(*lv));
        int r = 0;
        if (!lv) {
                safe_close(top);
                return nook_err_oom(err);
        }
        lv[0] = (rm_level){ .fd = top, .dev = dev, .ino = ino };
        while (n > 0 && r >= 0) {
                rm_level *l = &lv[n - 1];
                struct dirent64 *de = rm_next(l, err, &r);
                if (r < 0)
                        break;
                if (de) {
                        unsigned char type = de->d_type;
                        if (type != DT_DIR && type != DT_UNKNOWN) {
                                if (unlinkat(l->fd, de->d_name, 0) == 0 || errno == ENOENT)
                                        continue;
                                if (errno != EISDIR) { /* EISDIR: a folder took the name since */
                                        r = nook_err_errno(err, NOOK_E_IO, "Cannot remove '%s'", de->d_name);
                                        break;
                                }
                        }
                        int fd = -1;
                        if ((r = rm_open_or_unlink(l->fd, de->d_name, &fd, err)) <= 0) {
                                if (r < 0)
                                        break;
                                continue;
                        }
                        dev_t cdev;
                        ino_t cino;
                        char *name = strdup(de->d_name);
                        if (!name || (r = rm_check(l->fd, fd, de->d_name, l->dev, &cdev, &cino, err)) < 0) {
                                safe_close(fd);
                                free(name);
                                if (r >= 0)
                                        r = nook_err_oom(err);
                                break;
                        }
                        if (n == cap) {
                                rm_level *bigger = reallocarray(lv, cap * 2, sizeof(*lv));
                                if (!bigger) {
                                        safe_close(fd);
                                        free(name);
                                        r = nook_err_oom(err);
                                        break;
                                }
                                lv = bigger;
                                cap *= 2;
                        }
                        /* bound the descriptors: the folder RM_HOLD_FDS up is closed, and read
                         * again from its start when the walk comes back to it */
                        if (n > RM_HOLD_FDS)
                                rm_level_close(&lv[n - 1 - RM_HOLD_FDS]);
                        lv[n++] = (rm_level){ .fd = fd, .dev = cdev, .ino = cino, .name = name };
                        continue;
                }
                /* l is empty: back to its parent, which removes it */
                if (n == 1)
                        break;
                rm_level *p = &lv[n - 2];
                if (p->fd < 0) {
                        struct stat st;
                        p->fd = openat(l->fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (p->fd < 0 || fstat(p->fd, &st) < 0 || st.st_dev != p->dev ||
                                st.st_ino != p->ino) {
                                r = nook_err_set(err, NOOK_E_BUSY,
                                        "Cannot remove '%s': its folders were moved while it was being removed",
                                        l->name);
                                break;
                        }
                }
                if (unlinkat(p->fd, l->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
                        if (errno != ENOTEMPTY || ++retries > RM_MAX_RETRIES) {
                                r = nook_err_errno(err, NOOK_E_IO, "Cannot remove the folder '%s'", l->name);
                                break;
                        }
                        /* something appeared in it: read it again from its start */
                        if (lseek(l->fd, 0, SEEK_SET) < 0) {
                                r = nook_err_errno(
                                        err, NOOK_E_IO, "Cannot read the folder '%s' again", l->name);
                                break;
                        }
                        l->pos = l->len = 0;
                        continue;
                }
                rm_level_drop(l);
                n--;
        }
        for (size_t i = 0; i < n; i++)
                rm_level_drop(&lv[i]);
        free(lv);
        return r;
}

int path_rm_rf_at(int dirfd, const char *name, nook_error *err) {
        /* The top name's type is unknown: opened as a folder, anything else is unlinked.  Its
         * parent's device is asked for only where the mount-root attribute is missing. */
        for (unsigned pass = 0;; pass++) {
                int fd = -1;
                int r = rm_open_or_unlink(dirfd, name, &fd, err);
                if (r <= 0)
                        return r;
                dev_t dev;
                ino_t ino;
                r = rm_check(dirfd, fd, name, (dev_t)-1, &dev, &ino, err);
                if (r < 0) {
                        safe_close(fd);
                        return r;
                }
                r = rm_content(fd, dev, ino, err);
                if (r < 0)
                        return r;
                if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return 0;
                if (errno != ENOTEMPTY || pass == 2)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot remove the folder '%s'", name);
        }
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
