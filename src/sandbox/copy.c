/* SPDX-License-Identifier: Apache-2.0 */
/* nook cp's engine (copy.h).  A copy is a stream of entries (path, type, mode, mtime, data) from
 * a source (a tree walked with O_NOFOLLOW at every name, or a tar read with libarchive) into a
 * sink (a tree built inside a fresh staging directory, or a tar written with libarchive).
 *
 * A tree sink builds everything inside ".nook-cp-<pid>-<n>", a directory it makes in the
 * destination side's stage_dir when that is on the destination's filesystem (a workspace's is
 * <home>/trash), else next to the destination, opening each name of an entry's path with O_NOFOLLOW from the staging directory's
 * fd: a tar entry that goes through a symlink it created earlier is refused, and nothing is
 * written through a link.  Only when the whole stream was copied is the result renamed into place
 * (merging into directories that are already there, after a dry run that finds every conflict
 * first); any failure removes the staging directory, so a refused copy leaves nothing behind.
 *
 * On a sandbox's root filesystem (ws_is_root) the host process acts with its own credentials, so
 * kernel filesystems mounted there (/proc, /sys, /dev/pts, cgroupfs...) are never read or written:
 * a directory on one is refused. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "nook.h"
#include "image/module.h"
#include "sandbox/copy.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"
#include "util/tmpdir.h"
#include "workspace/ws.h"

#define CP_BUF ((size_t)128 * 1024)
#define CP_STAGE_PREFIX ".nook-cp-"

typedef struct cp_entry {
        const char *path; /* relative, '/'-separated, validated */
        mode_t type; /* S_IFREG, S_IFDIR or S_IFLNK */
        mode_t perm;
        struct timespec mtime;
        int64_t size;
        const char *link; /* a symlink's target, or a hard link's path in the same copy */
        bool hardlink;
        int fd; /* a regular file's data from a tree; -1: read it from ar */
        struct archive *ar;
} cp_entry;

typedef struct cp_dir_fix {
        char *path;
        mode_t perm;
        struct timespec mtime;
} cp_dir_fix;

typedef struct cp_sink {
        struct archive *ar; /* a tar sink; NULL for a tree */
        bool as_owner; /* create as uid/gid (setfsuid), not as ourselves + chown */
        int stage_fd; /* a tree sink: the staging directory */
        bool chown;
        uid_t uid;
        gid_t gid;
        cp_dir_fix *dirs; /* directories get their mode and mtime last (children change mtime) */
        size_t n_dirs, cap_dirs;
        char *buf;
} cp_sink;

static void cp_sink_done(cp_sink *k) {
        for (size_t i = 0; i < k->n_dirs; i++)
                free(k->dirs[i].path);
        free(k->dirs);
        free(k->buf);
        k->stage_fd = safe_close(k->stage_fd);
}

/* ---- shared checks ------------------------------------------------------------------------- */

static bool cp_fs_is_kernel(long type) {
        switch (type) {
        case PROC_SUPER_MAGIC:
        case SYSFS_MAGIC:
        case DEVPTS_SUPER_MAGIC:
        case CGROUP_SUPER_MAGIC:
        case CGROUP2_SUPER_MAGIC:
        case SECURITYFS_MAGIC:
        case DEBUGFS_MAGIC:
        case TRACEFS_MAGIC:
        case BPF_FS_MAGIC:
        case NSFS_MAGIC:
        case SELINUX_MAGIC:
        case SMACK_MAGIC:
        case EFIVARFS_MAGIC:
        case PSTOREFS_MAGIC:
        case BINFMTFS_MAGIC:
                return true;
        default:
                return false;
        }
}

/* On a sandbox's root: refuses a directory on a kernel filesystem (see the top of the file). */
static int cp_fs_check(const ws *w, int fd, const char *shown, nook_error *err) {
        struct statfs sf;
        if (!w || !ws_is_root(w))
                return 0;
        if (fstatfs(fd, &sf) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot inspect the filesystem of '%s'", shown);
        if (cp_fs_is_kernel((long)sf.f_type))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing '%s': it is on a kernel filesystem (such as /proc, /sys or /dev/pts), which "
                        "nook cp does not read or write; copy through /workspace or a volume instead",
                        shown);
        return 0;
}

static const char *cp_kind(mode_t m) {
        if (S_ISFIFO(m))
                return "a FIFO";
        if (S_ISCHR(m))
                return "a character device";
        if (S_ISBLK(m))
                return "a block device";
        if (S_ISSOCK(m))
                return "a socket";
        return "a special file";
}

static int cp_refuse_special(const char *shown, mode_t m, nook_error *err) {
        return nook_err_set(err, NOOK_E_REFUSED,
                "Refusing to copy '%s': it is %s; nook cp copies regular files, directories and symlinks only",
                shown, cp_kind(m));
}

/* A path inside a tar or a copy: no "..", not absolute, each name at most NAME_MAX.  Leading
 * "./" and trailing "/" are dropped; "" (the archive's own "./") is returned as such. */
static int cp_entry_path_check(const char *raw, char **ret, nook_error *err) {
        const char *p = raw;
        while (p[0] == '.' && p[1] == '/')
                for (p += 2; *p == '/';)
                        p++;
        if (p[0] == '/')
                return nook_err_set(
                        err, NOOK_E_REFUSED, "Refusing the archive entry '%.200s': an absolute path", raw);
        if (strlen(p) >= PATH_MAX)
                return nook_err_set(err, NOOK_E_INVALID, "The archive entry '%.60s...' is too long", raw);
        _cleanup_free_ char *s = strdup(streq(p, ".") ? "" : p);
        if (!s)
                return nook_err_oom(err);
        for (size_t n = strlen(s); n > 0 && s[n - 1] == '/'; n--)
                s[n - 1] = 0;
        for (const char *c = s; *c;) {
                size_t n = strcspn(c, "/");
                if ((n == 2 && c[0] == '.' && c[1] == '.'))
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "Refusing the archive entry '%.200s': it contains '..'", raw);
                if (n > NAME_MAX)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "A name in the archive entry '%.60s...' is longer than %d bytes", raw,
                                NAME_MAX);
                c += n;
                while (*c == '/')
                        c++;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

/* ---- tree sink ----------------------------------------------------------------------------- */

static int cp_chown_at(const cp_sink *k, int dfd, const char *name) {
        if (!k->chown)
                return 0;
        return fchownat(dfd, name, k->uid, k->gid, AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) < 0
                ? -errno
                : 0;
}

/* Opens the directory that holds the last name of path, beneath the staging directory, one name
 * at a time with O_NOFOLLOW; create: make missing directories (a tar may omit them).  *ret_base
 * points into path.  Returns the fd or -errno (ELOOP/ENOTDIR: a symlink or a file on the way). */
static int cp_stage_parent(cp_sink *k, char *path, bool create, const char **ret_base) {
        _cleanup_close_ int cur = -1;
        char *p = path;
        *ret_base = path;
        for (char *slash; (slash = strchr(p, '/'));) {
                *slash = 0;
                int dfd = cur >= 0 ? cur : k->stage_fd;
                int fd = openat(dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT && create) {
                        if (mkdirat(dfd, p, 0755) < 0 && errno != EEXIST) {
                                *slash = '/';
                                return -errno;
                        }
                        int r = cp_chown_at(k, dfd, p);
                        if (r < 0) {
                                *slash = '/';
                                return r;
                        }
                        fd = openat(dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                *slash = '/';
                if (fd < 0)
                        return -errno;
                safe_close(cur);
                cur = fd;
                p = slash + 1;
        }
        *ret_base = p;
        if (cur >= 0)
                return TAKE_FD(cur);
        int fd = fcntl(k->stage_fd, F_DUPFD_CLOEXEC, 3);
        return fd < 0 ? -errno : fd;
}

static int cp_data_to_fd(cp_sink *k, const cp_entry *e, int out) {
        for (;;) {
                ssize_t n = e->fd >= 0 ? read(e->fd, k->buf, CP_BUF)
                                       : IMG(archive_read_data)(e->ar, k->buf, CP_BUF);
                if (n < 0 && e->fd >= 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return e->fd >= 0 ? -errno : -EIO;
                if (n == 0)
                        return 0;
                int r = fd_write_all(out, k->buf, (size_t)n);
                if (r < 0)
                        return r;
        }
}

static int cp_tree_file(cp_sink *k, const cp_entry *e, int dfd, const char *base) {
        int fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST) { /* a tar may hold a name twice: the last one wins */
                if (unlinkat(dfd, base, 0) < 0)
                        return -errno;
                fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        }
        if (fd < 0)
                return -errno;
        _cleanup_close_ int out = fd;
        int r = cp_data_to_fd(k, e, out);
        if (r < 0)
                return r;
        if (k->chown && fchown(out, k->uid, k->gid) < 0)
                return -errno;
        if (fchmod(out, e->perm) < 0)
                return -errno;
        struct timespec ts[2] = { e->mtime, e->mtime };
        return futimens(out, ts) < 0 ? -errno : 0;
}

static int cp_tree_link(cp_sink *k, const cp_entry *e, int dfd, const char *base) {
        if (e->hardlink) {
                _cleanup_free_ char *target = strdup(e->link);
                const char *tbase;
                if (!target)
                        return -ENOMEM;
                _cleanup_close_ int tdfd = cp_stage_parent(k, target, /* create= */ false, &tbase);
                if (tdfd < 0)
                        return tdfd;
                (void)unlinkat(dfd, base, 0);
                return linkat(tdfd, tbase, dfd, base, 0) < 0 ? -errno : 0;
        }
        if (symlinkat(e->link, dfd, base) < 0) {
                if (errno != EEXIST || unlinkat(dfd, base, 0) < 0) /* a tar may hold a name twice */
                        return -errno;
                if (symlinkat(e->link, dfd, base) < 0)
                        return -errno;
        }
        int r = cp_chown_at(k, dfd, base);
        if (r < 0)
                return r;
        struct timespec ts[2] = { e->mtime, e->mtime };
        return utimensat(dfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int cp_tree_dir(cp_sink *k, const cp_entry *e, int dfd, const char *base) {
        struct stat st;
        /* 0700 while we fill it; its own mode comes last (it may be read-only) */
        if (mkdirat(dfd, base, 0700) < 0) {
                if (errno != EEXIST)
                        return -errno;
                if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (!S_ISDIR(st.st_mode))
                        return -ENOTDIR;
        } else {
                int r = cp_chown_at(k, dfd, base);
                if (r < 0)
                        return r;
        }
        if (k->n_dirs == k->cap_dirs) {
                size_t ncap = k->cap_dirs ? k->cap_dirs * 2 : 16;
                cp_dir_fix *nd = realloc(k->dirs, ncap * sizeof(*nd));
                if (!nd)
                        return -ENOMEM;
                k->dirs = nd;
                k->cap_dirs = ncap;
        }
        char *p = strdup(e->path);
        if (!p)
                return -ENOMEM;
        k->dirs[k->n_dirs++] = (cp_dir_fix){ .path = p, .perm = e->perm, .mtime = e->mtime };
        return 0;
}

/* A sandbox's root filesystem is mounted in its user namespace, where our own uid may have no
 * mapping (mkdir fails with EOVERFLOW): what we create there is created as its root, on this
 * thread only.  Sources are opened as ourselves, between these calls. */
static void cp_become(const cp_sink *k, bool owner) {
        if (!k->as_owner)
                return;
        if (owner) {
                (void)setfsgid(k->gid);
                (void)setfsuid(k->uid);
        } else {
                (void)setfsuid(geteuid());
                (void)setfsgid(getegid());
        }
}

static int cp_tree_entry_as(cp_sink *k, const cp_entry *e, nook_error *err);

static int cp_tree_entry(cp_sink *k, const cp_entry *e, nook_error *err) {
        cp_become(k, true);
        int r = cp_tree_entry_as(k, e, err);
        cp_become(k, false);
        return r;
}

static int cp_tree_entry_as(cp_sink *k, const cp_entry *e, nook_error *err) {
        _cleanup_free_ char *path = strdup(e->path);
        const char *base;
        if (!path)
                return nook_err_oom(err);
        int dfd = cp_stage_parent(k, path, /* create= */ true, &base);
        int r = dfd;
        if (dfd >= 0) {
                r = e->type == S_IFDIR                      ? cp_tree_dir(k, e, dfd, base)
                        : e->type == S_IFLNK || e->hardlink ? cp_tree_link(k, e, dfd, base)
                                                            : cp_tree_file(k, e, dfd, base);
                safe_close(dfd);
        }
        if (r == -ELOOP || r == -ENOTDIR)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing '%s': a name on its path is a symlink or a file, and nook cp never writes through one",
                        e->path);
        if (r == -ENOENT && e->hardlink)
                return nook_err_set(err, NOOK_E_INVALID,
                        "The hard link '%s' points to '%s', which is not earlier in the archive", e->path,
                        e->link);
        if (r == -ENOMEM)
                return nook_err_oom(err);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot create '%s'", e->path);
        return 0;
}

/* Directories last, deepest first: their mode may forbid writing into them, and creating
 * children changed their mtime. */
static int cp_tree_fix_dirs(cp_sink *k, nook_error *err) {
        for (size_t i = k->n_dirs; i-- > 0;) {
                cp_dir_fix *d = &k->dirs[i];
                const char *base = NULL;
                struct timespec ts[2] = { d->mtime, d->mtime };
                _cleanup_close_ int pfd = cp_stage_parent(k, d->path, /* create= */ false, &base);
                if (pfd < 0)
                        return nook_err_errnum(
                                err, NOOK_E_IO, -pfd, "Cannot open the directory '%s'", d->path);
                _cleanup_close_ int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fchmod(fd, d->perm) < 0 || futimens(fd, ts) < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot set the mode of the directory '%s'", d->path);
        }
        return 0;
}

/* ---- tar sink ------------------------------------------------------------------------------ */

static int cp_tar_entry(cp_sink *k, const cp_entry *e, nook_error *err) {
        struct archive_entry *ae = IMG(archive_entry_new)();
        if (!ae)
                return nook_err_oom(err);
        _cleanup_free_ char *name = e->type == S_IFDIR ? strprintf("%s/", e->path) : strdup(e->path);
        if (!name) {
                IMG(archive_entry_free)(ae);
                return nook_err_oom(err);
        }
        IMG(archive_entry_set_pathname)(ae, name);
        unsigned type = e->type == S_IFDIR ? AE_IFDIR : e->type == S_IFLNK ? AE_IFLNK : AE_IFREG;
        IMG(archive_entry_set_filetype)(ae, type);
        IMG(archive_entry_set_perm)(ae, e->perm);
        IMG(archive_entry_set_uid)(ae, 0);
        IMG(archive_entry_set_gid)(ae, 0);
        IMG(archive_entry_set_mtime)(ae, e->mtime.tv_sec, e->mtime.tv_nsec);
        IMG(archive_entry_set_size)(ae, e->type == S_IFREG ? e->size : 0);
        if (e->type == S_IFLNK)
                IMG(archive_entry_set_symlink)(ae, e->link);
        /* ARCHIVE_WARN: written, with a name that is no UTF-8 in this locale as its bytes
         * (hdrcharset=BINARY; image/pack.c says why not for the whole archive) */
        int rc = IMG(archive_write_header)(k->ar, ae);
        IMG(archive_entry_free)(ae);
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
                return nook_err_set(err, NOOK_E_IO, "Cannot write the archive entry '%s': %s", e->path,
                        img_archive_error_or(k->ar, "write error"));
        for (int64_t left = e->type == S_IFREG ? e->size : 0; left > 0;) {
                ssize_t n = read(e->fd, k->buf, (uint64_t)left < CP_BUF ? (size_t)left : CP_BUF);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read '%s'", e->path);
                if (n == 0)
                        break; /* it shrank while we copied: libarchive pads the entry */
                if (IMG(archive_write_data)(k->ar, k->buf, (size_t)n) != n)
                        return nook_err_set(err, NOOK_E_IO, "Cannot write the archive: %s",
                                img_archive_error_or(k->ar, "write error"));
                left -= n;
        }
        return 0;
}

static int cp_sink_entry(cp_sink *k, const cp_entry *e, nook_error *err) {
        return k->ar ? cp_tar_entry(k, e, err) : cp_tree_entry(k, e, err);
}

/* ---- tree source --------------------------------------------------------------------------- */

typedef struct cp_walk {
        const ws *w; /* the source side's handle (kernel filesystem check); NULL: the host */
        const char *label; /* "w:" or "" */
        cp_sink *k;
        bool top_dir; /* the first node must be a directory ("dir/.": its contents are copied) */
} cp_walk;

static int cp_walk_node(
        cp_walk *c, int pfd, const char *name, const char *shown, const char *out, nook_error *err);

static int cp_walk_dir(cp_walk *c, int fd, const char *shown, const char *out, nook_error *err) {
        DIR *d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return nook_err_errno(err, NOOK_E_IO, "Cannot list '%s%s'", c->label, shown);
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *s2 = strprintf("%s/%s", streq(shown, "/") ? "" : shown, de->d_name);
                _cleanup_free_ char *o2 = out[0] ? strprintf("%s/%s", out, de->d_name) : strdup(de->d_name);
                if (!s2 || !o2)
                        r = nook_err_oom(err);
                else if (strlen(o2) >= PATH_MAX)
                        r = nook_err_set(
                                err, NOOK_E_INVALID, "The path '%s%.60s...' is too long", c->label, s2);
                else
                        r = cp_walk_node(c, dirfd(d), de->d_name, s2, o2, err);
        }
        if (r >= 0 && errno != 0)
                r = nook_err_errno(err, NOOK_E_IO, "Cannot list '%s%s'", c->label, shown);
        (void)closedir(d);
        return r;
}

/* One name in pfd: out is its path in the copy ("" for the contents of a "dir/." source, whose
 * own entry is not copied). */
static int cp_walk_node(
        cp_walk *c, int pfd, const char *name, const char *shown, const char *out, nook_error *err) {
        struct stat st;
        cp_entry e = { .path = out, .fd = -1 };
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_errno(err, errno == ENOENT ? NOOK_E_NOT_FOUND : NOOK_E_IO,
                        "Cannot read '%s%s'", c->label, shown);
        e.perm = st.st_mode & 01777;
        e.mtime = st.st_mtim;
        /* a "dir/." source: the check before the walk found a directory, and a guest that swapped
         * in a symlink or a file since must not make the destination one (a host path pointing
         * where the guest chose) */
        if (c->top_dir && !S_ISDIR(st.st_mode))
                return nook_err_set(err, NOOK_E_BUSY,
                        "'%s%s' is no longer a directory (it changed while it was copied); try again",
                        c->label, shown);
        c->top_dir = false;
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(pfd, name, target, sizeof(target) - 1);
                if (n < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot read the symlink '%s%s'", c->label, shown);
                target[n] = 0;
                e.type = S_IFLNK;
                e.link = target;
                return cp_sink_entry(c->k, &e, err);
        }
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
                _cleanup_free_ char *full = strprintf("%s%s", c->label, shown);
                return cp_refuse_special(full ? full : shown, st.st_mode, err);
        }
        int fd = openat(pfd, name,
                (S_ISDIR(st.st_mode) ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK | O_NOCTTY) |
                        O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s%s'", c->label, shown);
        struct stat st2;
        if (fstat(fd, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
                safe_close(fd);
                return nook_err_set(
                        err, NOOK_E_BUSY, "'%s%s' changed while it was copied; try again", c->label, shown);
        }
        if (S_ISREG(st.st_mode)) {
                e.type = S_IFREG;
                e.size = st.st_size;
                e.fd = fd;
                int r = cp_sink_entry(c->k, &e, err);
                safe_close(fd);
                return r;
        }
        int r = cp_fs_check(c->w, fd, shown, err);
        if (r >= 0 && out[0]) {
                e.type = S_IFDIR;
                r = cp_sink_entry(c->k, &e, err);
        }
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        return cp_walk_dir(c, fd, shown, out, err);
}

/* ---- tar source ---------------------------------------------------------------------------- */

static int cp_tar_read_entry(cp_sink *k, struct archive *a, struct archive_entry *ae, nook_error *err) {
        _cleanup_free_ char *path = NULL, *hl = NULL;
        const char *raw = IMG(archive_entry_pathname)(ae);
        int r = cp_entry_path_check(raw ? raw : "", &path, err);
        if (r < 0)
                return r;
        mode_t t = IMG(archive_entry_filetype)(ae);
        cp_entry e = { .path = path, .fd = -1, .ar = a, .perm = IMG(archive_entry_perm)(ae) & 01777 };
        e.mtime = (struct timespec){ .tv_sec = IMG(archive_entry_mtime)(ae),
                .tv_nsec = IMG(archive_entry_mtime_nsec)(ae) };
        if (IMG(archive_entry_hardlink)(ae)) {
                r = cp_entry_path_check(IMG(archive_entry_hardlink)(ae), &hl, err);
                if (r < 0)
                        return r;
                if (!hl[0] || !path[0])
                        return nook_err_set(err, NOOK_E_INVALID, "The hard link '%s' has no target", raw);
                e.hardlink = true;
                e.link = hl;
                return cp_sink_entry(k, &e, err);
        }
        if (!path[0] && t == AE_IFDIR)
                return 0; /* "./": the destination directory itself, which exists */
        if (!path[0])
                return nook_err_set(err, NOOK_E_INVALID, "The archive holds an entry with an empty name");
        if (t == AE_IFDIR)
                e.type = S_IFDIR;
        else if (t == AE_IFREG)
                e.type = S_IFREG;
        else if (t == AE_IFLNK) {
                e.type = S_IFLNK;
                e.link = IMG(archive_entry_symlink)(ae);
                if (isempty(e.link))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "The symlink '%s' in the archive has no target", raw);
        } else
                return cp_refuse_special(path, t, err);
        return cp_sink_entry(k, &e, err);
}

static int cp_from_tar(int fd, cp_sink *k, nook_error *err) {
        _cleanup_(img_archive_read_freep) struct archive *a = IMG(archive_read_new)();
        struct archive_entry *ae;
        if (!a)
                return nook_err_oom(err);
        (void)IMG(archive_read_support_filter_all)(a);
        (void)IMG(archive_read_support_format_tar)(a);
        if (IMG(archive_read_open_fd)(a, fd, CP_BUF) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_INVALID, "Cannot read a tar archive from the input: %s",
                        img_archive_error_or(a, "not a tar archive"));
        for (;;) {
                int rc = IMG(archive_read_next_header)(a, &ae);
                if (rc == ARCHIVE_EOF)
                        return 0;
                if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
                        return nook_err_set(err, NOOK_E_INVALID, "Cannot read the tar archive: %s",
                                img_archive_error_or(a, "not a tar archive"));
                int r = cp_tar_read_entry(k, a, ae, err);
                if (r < 0)
                        return r;
        }
}

/* ---- placing the staged result ------------------------------------------------------------- */

static void cp_names_free(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

/* The names in directory fd (not consumed), read in full before any of them is moved: renaming
 * entries out of a directory being read may make readdir skip others. */
static int cp_names(int fd, char ***ret) {
        _cleanup_close_ int dup = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup < 0)
                return -errno;
        DIR *d = fdopendir(dup);
        if (!d)
                return -errno;
        dup = -1; /* the DIR owns it now */
        char **v = calloc(1, sizeof(char *));
        size_t n = 0;
        struct dirent *de;
        int r = v ? 0 : -ENOMEM;
        while (r == 0 && (errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                char **nv = realloc(v, (n + 2) * sizeof(char *));
                if (!nv) {
                        r = -ENOMEM;
                        break;
                }
                v = nv;
                v[n] = strdup(de->d_name);
                v[n + 1] = NULL;
                r = v[n++] ? 0 : -ENOMEM;
        }
        if (r == 0 && errno != 0)
                r = -errno;
        (void)closedir(d);
        if (r < 0) {
                cp_names_free(v);
                return r;
        }
        *ret = v;
        return 0;
}

static int cp_place(
        const ws *w, int sfd, int dfd, const char *name, const char *shown, bool dry, nook_error *err);

/* Places every entry of staged directory sfd into dfd. */
static int cp_place_dir(const ws *w, int sfd, int dfd, const char *shown, bool dry, nook_error *err) {
        char **names = NULL;
        int r = cp_names(sfd, &names);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot list the staged '%s'", shown);
        for (char **p = names; r >= 0 && p && *p; p++) {
                _cleanup_free_ char *sub = strprintf("%s/%s", streq(shown, "/") ? "" : shown, *p);
                r = sub ? cp_place(w, sfd, dfd, *p, sub, dry, err) : nook_err_oom(err);
        }
        cp_names_free(names);
        return r;
}

/* Moves stage/name to dst/name; merges a directory into an existing one.  dry: only looks for
 * conflicts, so the real pass (which cannot be undone) meets none that were there before it. */
static int cp_place(
        const ws *w, int sfd, int dfd, const char *name, const char *shown, bool dry, nook_error *err) {
        struct stat in, there;
        if (fstatat(sfd, name, &in, AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the staged '%s'", shown);
        if (fstatat(dfd, name, &there, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read '%s'", shown);
                if (dry || renameat(sfd, name, dfd, name) == 0)
                        return 0;
                return nook_err_errno(err, NOOK_E_IO, "Cannot move '%s' into place", shown);
        }
        if (S_ISDIR(there.st_mode) != S_ISDIR(in.st_mode))
                return nook_err_set(err, NOOK_E_INVALID, "Cannot overwrite %s '%s' with %s",
                        S_ISDIR(there.st_mode) ? "the directory" : "the non-directory", shown,
                        S_ISDIR(in.st_mode) ? "a directory" : "a non-directory");
        if (!S_ISDIR(in.st_mode)) {
                if (dry || renameat(sfd, name, dfd, name) == 0)
                        return 0;
                return nook_err_errno(err, NOOK_E_IO, "Cannot replace '%s'", shown);
        }
        /* both directories: merge, never through a symlink (O_NOFOLLOW; lstat said directory) */
        _cleanup_close_ int s2 = openat(sfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int d2 = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s2 < 0 || d2 < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the directory '%s'", shown);
        int r = cp_fs_check(w, d2, shown, err);
        if (r < 0)
                return r;
        return cp_place_dir(w, s2, d2, shown, dry, err);
}

/* ---- sides --------------------------------------------------------------------------------- */

/* A resolved source or destination: the directory that holds the name, and the name. */
typedef struct cp_loc {
        int dfd; /* O_PATH directory */
        char *name; /* the last name; "." when the path is the side's root itself */
        char *shown; /* the path for messages, with its label */
        bool contents; /* the path ended in "/." (copy what is inside the directory) */
        bool trailing_slash;
} cp_loc;

static void cp_loc_done(cp_loc *l) {
        l->dfd = safe_close(l->dfd);
        free(l->name);
        free(l->shown);
}

/* Splits path into parent and last name (after dropping "/." and "/" at the end), and opens the
 * parent: under the rule on a ws side, as given on the host. */
static int cp_resolve(const cp_side *s, cp_loc *ret, nook_error *err) {
        const char *path = s->path;
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return nook_err_oom(err);
        size_t n = strlen(p);
        ret->trailing_slash = n > 1 && p[n - 1] == '/';
        for (;;) {
                while (n > 1 && p[n - 1] == '/')
                        p[--n] = 0;
                if (n >= 2 && p[n - 1] == '.' && p[n - 2] == '/') {
                        ret->contents = true;
                        p[--n] = 0;
                } else if (streq(p, ".")) {
                        ret->contents = true;
                        break;
                } else
                        break;
        }
        ret->shown = strprintf("%s%s", s->label, path);
        char *slash = strrchr(p, '/');
        const char *parent = !slash ? (s->w ? "/" : ".") : slash == p ? "/" : p;
        ret->name = strdup(streq(p, "/") || streq(p, ".") || (s->w && streq(p, "/workspace")) ? "."
                        : slash                                                               ? slash + 1
                                                                                              : p);
        if (!ret->shown || !ret->name)
                return nook_err_oom(err);
        if (slash && slash != p)
                *slash = 0;
        if (streq(ret->name, ".")) /* the root itself: open it, and name it "." inside */
                parent = streq(p, "/workspace") ? "/" : p;
        int r = 0;
        if (s->w)
                r = ws_open_path(s->w, parent, O_PATH | O_DIRECTORY, &ret->dfd, err);
        else if ((ret->dfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                r = nook_err_errno(err, errno == ENOENT ? NOOK_E_NOT_FOUND : NOOK_E_IO,
                        "Cannot open the directory of '%s'", ret->shown);
        if (r < 0)
                return r;
        return cp_fs_check(s->w, ret->dfd, ret->shown, err);
}

/* The name a source gets in the copy: its own (the root of a side has none: "workspace" for the
 * workspace, its contents for "/"). */
static const char *cp_src_name(const cp_side *s, const cp_loc *l) {
        if (!streq(l->name, "."))
                return l->name;
        return s->w && !ws_is_root(s->w) ? "workspace" : "";
}

/* out: the source's name in the copy, or "" to put a directory's entries at the top (a "dir/."
 * source copied into an existing directory, or into a tar). */
static int cp_tree_source(const cp_side *s, const cp_loc *l, const char *out, cp_sink *k, nook_error *err) {
        cp_walk c = { .w = s->w, .label = s->label, .k = k, .top_dir = l->contents };
        struct stat st;
        if (l->contents) {
                if (fstatat(l->dfd, l->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot read '%s'", l->shown);
                if (!S_ISDIR(st.st_mode))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "'%s' ends in '/.' but is not a directory", l->shown);
        }
        return cp_walk_node(&c, l->dfd, l->name, l->shown + strlen(s->label), out, err);
}

static int cp_to_tar(const cp_side *src, const cp_side *dst, nook_error *err) {
        _cleanup_(cp_loc_done) cp_loc l = { .dfd = -1 };
        _cleanup_(img_archive_write_freep) struct archive *a = IMG(archive_write_new)();
        _cleanup_(cp_sink_done) cp_sink k = { .stage_fd = -1 };
        if (!a || !(k.buf = malloc(CP_BUF)))
                return nook_err_oom(err);
        int r = cp_resolve(src, &l, err);
        if (r < 0)
                return r;
        if (IMG(archive_write_set_format_pax_restricted)(a) != ARCHIVE_OK ||
                IMG(archive_write_open_fd)(a, dst->fd) != ARCHIVE_OK)
                return nook_err_set(
                        err, NOOK_E_IO, "Cannot start the tar output: %s", img_archive_error_or(a, "error"));
        k.ar = a;
        r = cp_tree_source(src, &l, l.contents ? "" : cp_src_name(src, &l), &k, err);
        if (r < 0)
                return r;
        if (IMG(archive_write_close)(a) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_IO, "Cannot finish the tar output: %s",
                        img_archive_error_or(a, "write error"));
        return 0;
}

/* Where a tree destination puts the copy: the directory to place into, and the copy's top name
 * ("" when the source's entries go straight into that directory). */
typedef struct cp_target {
        int dfd;
        char *top;
        char *shown;
} cp_target;

static void cp_target_done(cp_target *t) {
        t->dfd = safe_close(t->dfd);
        free(t->top);
        free(t->shown);
}

static int cp_open_dst(const cp_side *d, int flags, int *ret_fd, nook_error *err) {
        if (d->w)
                return ws_open_path(d->w, d->path, flags, ret_fd, err);
        int fd = open(d->path, flags | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(
                        err, errno == ENOENT ? NOOK_E_NOT_FOUND : NOOK_E_IO, "Cannot open '%s'", d->path);
        *ret_fd = fd;
        return 0;
}

/* docker cp's rules (copy.h), given what the source is: src_dir, or a tar (is_tar). */
static int cp_pick_target(const cp_side *d, const char *src_name, bool src_dir, bool contents, bool is_tar,
        cp_target *ret, nook_error *err) {
        nook_error e2 = { 0 };
        int fd = -1;
        struct stat st;
        int r = cp_open_dst(d, O_PATH, &fd, &e2);
        ret->shown = strprintf("%s%s", d->label, d->path);
        if (!ret->shown)
                return nook_err_oom(err);
        if (r >= 0 && (fstat(fd, &st) < 0 || S_ISDIR(st.st_mode))) {
                ret->dfd = fd;
                ret->top = strdup(contents || is_tar ? "" : src_name);
                if (!ret->top)
                        return nook_err_oom(err);
                return cp_fs_check(d->w, fd, ret->shown, err);
        }
        safe_close(fd);
        if (r < 0 && e2.code != NOOK_E_NOT_FOUND) {
                *err = e2;
                return r;
        }
        if (is_tar)
                return nook_err_set(err, r < 0 ? NOOK_E_NOT_FOUND : NOOK_E_INVALID,
                        "The destination '%s' must be an existing directory to extract a tar stream into",
                        ret->shown);
        if (src_dir && r >= 0)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Cannot copy a directory onto the file '%s'", ret->shown);
        /* a new name, or a file to replace: in its parent, which must exist */
        _cleanup_(cp_loc_done) cp_loc l = { .dfd = -1 };
        r = cp_resolve(d, &l, err);
        if (r == -NOOK_E_NOT_FOUND || (r >= 0 && l.trailing_slash && !src_dir))
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "The destination directory of '%s' does not exist", ret->shown);
        if (r < 0)
                return r;
        if (streq(l.name, "."))
                return nook_err_set(err, NOOK_E_INVALID, "Cannot copy onto '%s'", ret->shown);
        ret->dfd = TAKE_FD(l.dfd);
        ret->top = TAKE_PTR(l.name);
        char *slash = strrchr(ret->shown, '/'); /* messages name the parent, where top is placed */
        if (slash && slash > ret->shown + strlen(d->label))
                *slash = 0;
        else if (slash)
                slash[1] = 0;
        return 0;
}

/* The folder the staging directory goes in: d->stage_dir when it is on dfd's filesystem (a
 * rename from it into the target is then possible), else dfd itself (*ret_parent -1). */
static int cp_stage_parent_dir(const cp_side *d, int dfd, int *ret_parent) {
        struct stat a, b;
        *ret_parent = -1;
        if (!d->stage_dir)
                return dfd;
        int fd = open(d->stage_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &a) < 0 || fstat(dfd, &b) < 0 || a.st_dev != b.st_dev) {
                safe_close(fd);
                return dfd;
        }
        *ret_parent = fd;
        return fd;
}

/* The staging directory (its name in ret_name, its fd locked in *ret_fd), in the folder
 * cp_stage_parent_dir picks; *ret_parent: that folder's fd when it is not dfd, else -1. */
static int cp_make_stage(const cp_side *d, int dfd, char *ret_name, size_t size, int *ret_parent,
        int *ret_fd, nook_error *err) {
        static uint64_t counter;
        int pfd = cp_stage_parent_dir(d, dfd, ret_parent);
        /* A killed cp's stage in this folder: its owner lock died with it (ours is taken below and
         * held until the stage is placed or removed). */
        (void)tmp_sweep_at(pfd, CP_STAGE_PREFIX, path_rm_rf_at);
        for (int i = 0; i < 64; i++) {
                uint64_t c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
                (void)snprintf(ret_name, size, CP_STAGE_PREFIX "%d-%" PRIu64, (int)getpid(), c);
                if (mkdirat(pfd, ret_name, 0700) < 0) {
                        if (errno == EEXIST)
                                continue;
                        return nook_err_errno(err, NOOK_E_IO,
                                "Cannot create a staging directory next to '%s%s'", d->label, d->path);
                }
                int fd = openat(pfd, ret_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot open the staging directory");
                /* A concurrent cp's sweep may have taken it between mkdirat and flock, and removed
                 * it: then it is unlinked (or locked), and we make another. */
                struct stat st;
                if (flock(fd, LOCK_EX | LOCK_NB) < 0 || fstat(fd, &st) < 0 || st.st_nlink == 0) {
                        safe_close(fd);
                        continue;
                }
                *ret_fd = fd;
                return 0;
        }
        return nook_err_set(
                err, NOOK_E_BUSY, "Cannot find a free staging name next to '%s%s'", d->label, d->path);
}

/* Fills the staging directory, then places it. */
static int cp_stage_and_place(const cp_side *src, const cp_loc *sl, const cp_side *dst, const cp_target *t,
        cp_sink *k, nook_error *err) {
        cp_become(k, false);
        int r = src->path ? cp_tree_source(src, sl, t->top[0] ? t->top : "", k, err)
                          : cp_from_tar(src->fd, k, err);
        cp_become(k, true);
        if (r >= 0)
                r = cp_tree_fix_dirs(k, err);
        if (r >= 0)
                r = cp_place_dir(dst->w, k->stage_fd, t->dfd, t->shown, /* dry= */ true, err);
        if (r >= 0)
                r = cp_place_dir(dst->w, k->stage_fd, t->dfd, t->shown, /* dry= */ false, err);
        return r;
}

static int cp_to_tree(const cp_side *src, const cp_side *dst, nook_error *err) {
        _cleanup_(cp_loc_done) cp_loc sl = { .dfd = -1 };
        _cleanup_(cp_target_done) cp_target t = { .dfd = -1 };
        _cleanup_(cp_sink_done) cp_sink k = { .stage_fd = -1 };
        bool src_dir = false;
        int r;
        if (!(k.buf = malloc(CP_BUF)))
                return nook_err_oom(err);
        if (src->path) {
                struct stat st;
                if ((r = cp_resolve(src, &sl, err)) < 0)
                        return r;
                if (fstatat(sl.dfd, sl.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return nook_err_errno(err, errno == ENOENT ? NOOK_E_NOT_FOUND : NOOK_E_IO,
                                "Cannot read '%s'", sl.shown);
                src_dir = S_ISDIR(st.st_mode);
                if (sl.contents && !src_dir)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "'%s' ends in '/.' but is not a directory", sl.shown);
        }
        const char *name = src->path ? cp_src_name(src, &sl) : "";
        r = cp_pick_target(dst, name, src_dir, sl.contents || (src->path && !name[0]), !src->path, &t, err);
        if (r < 0)
                return r;
        if (dst->w)
                k.chown = ws_owner(dst->w, &k.uid, &k.gid);
        k.as_owner = k.chown && ws_is_root(dst->w); /* see cp_become */
        if (k.as_owner)
                k.chown = false;
        cp_become(&k, true);
        char stage[64];
        _cleanup_close_ int stage_parent = -1;
        r = cp_make_stage(dst, t.dfd, stage, sizeof(stage), &stage_parent, &k.stage_fd, err);
        if (r >= 0) {
                r = cp_stage_and_place(src, &sl, dst, &t, &k, err);
                nook_error e2 = { 0 };
                (void)path_rm_rf_at(stage_parent >= 0 ? stage_parent : t.dfd, stage, &e2);
        }
        cp_become(&k, false);
        return r;
}

int cp_copy(const cp_side *src, const cp_side *dst, nook_error *err) {
        if (!src->path && !dst->path)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Only one side of a copy can be a tar stream ('-')");
        if (!dst->path)
                return cp_to_tar(src, dst, err);
        return cp_to_tree(src, dst, err);
}
