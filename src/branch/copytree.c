/* SPDX-License-Identifier: Apache-2.0 */
/* copytree.h.  The walk holds a directory fd per level and absolute paths beside them: the xattr
 * calls have no *at() form (lgetxattr on the path, which is ours: nobody renames inside a frozen
 * or locked tree).  Order per entry, because each step undoes a part of the one before:
 * data, then chown (clears setuid/setgid and security.capability), then chmod, then xattrs, then
 * times (a directory's after its children, whose creation moves its mtime). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "nook.h"
#include "branch/copytree.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

#define MAX_DEPTH 4096

typedef struct link_rec {
        dev_t dev;
        ino_t ino;
        char *rel; /* the first copy's path, relative to the destination root */
} link_rec;

typedef struct walk {
        const copytree_opts *o;
        copytree_stats *stats;
        int dst_root;
        dev_t dev;
        link_rec *links;
        size_t n_links, max_links;
        bool can_clone; /* FICLONE worked or was not yet tried */
        bool can_cfr; /* copy_file_range */
} walk;

static uid_t shift(const copytree_opts *o, uid_t id) {
        if (o->range && id - o->from < o->range)
                return id - o->from + o->to;
        return id;
}

static int copy_data(walk *w, int in, int out, const char *path, nook_error *err) {
        if (w->can_clone) {
                if (ioctl(out, FICLONE, in) == 0) {
                        w->stats->reflinked++;
                        return 0;
                }
                if (errno != EOPNOTSUPP && errno != EXDEV && errno != EINVAL && errno != ENOTTY)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot clone '%s'", path);
                w->can_clone = false; /* the filesystem does not reflink: not again for this tree */
        }
        /* holes stay holes: a guest's sparse file costs the copy what it holds (fd_copy_sparse) */
        int r = fd_copy_sparse(in, out, &w->can_cfr);
        return r < 0 ? nook_err_errnum(err, NOOK_E_IO, -r, "Cannot copy '%s'", path) : 0;
}

static int copy_xattrs(const char *src, const char *dst, const char *shown, nook_error *err) {
        char names[65536];
        ssize_t len = llistxattr(src, names, sizeof(names));
        if (len < 0)
                return errno == ENOTSUP
                        ? 0
                        : nook_err_errno(err, NOOK_E_IO, "Cannot list the xattrs of '%s'", shown);
        for (char *k = names; k < names + len; k += strlen(k) + 1) {
                char val[65536];
                ssize_t vl = lgetxattr(src, k, val, sizeof(val));
                if (vl < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read xattr '%s' of '%s'", k, shown);
                if (lsetxattr(dst, k, val, (size_t)vl, 0) < 0 &&
                        !(errno == EPERM && startswith(k, "trusted.")))
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot set xattr '%s' on the copy of '%s'", k, shown);
        }
        return 0;
}

/* Owner, mode, xattrs, times of a made entry (name in dfd; dst its absolute path). */
static int copy_meta(walk *w, int dfd, const char *name, const struct stat *st, const char *src,
        const char *dst, nook_error *err) {
        uid_t u = shift(w->o, st->st_uid);
        gid_t g = (gid_t)shift(w->o, st->st_gid);
        if (fchownat(dfd, name, u, g, AT_SYMLINK_NOFOLLOW) < 0 && errno != EPERM)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the owner of the copy of '%s'", src);
        if (!S_ISLNK(st->st_mode) && fchmodat(dfd, name, st->st_mode & 07777, 0) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the mode of the copy of '%s'", src);
        int r = copy_xattrs(src, dst, src, err);
        if (r < 0)
                return r;
        struct timespec t[2] = { st->st_atim, st->st_mtim };
        if (utimensat(dfd, name, t, AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the times of the copy of '%s'", src);
        return 0;
}

static int copy_root_meta(
        walk *w, int d, const struct stat *st, const char *src, const char *dst, nook_error *err) {
        if (fchown(d, shift(w->o, st->st_uid), (gid_t)shift(w->o, st->st_gid)) < 0 && errno != EPERM)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the owner of '%s'", dst);
        if (fchmod(d, st->st_mode & 07777) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the mode of '%s'", dst);
        int r = copy_xattrs(src, dst, src, err);
        if (r < 0)
                return r;
        struct timespec t[2] = { st->st_atim, st->st_mtim };
        if (futimens(d, t) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the times of '%s'", dst);
        return 0;
}

static const char *link_find(walk *w, const struct stat *st) {
        for (size_t i = 0; i < w->n_links; i++)
                if (w->links[i].dev == st->st_dev && w->links[i].ino == st->st_ino)
                        return w->links[i].rel;
        return NULL;
}

static int link_add(walk *w, const struct stat *st, const char *rel, nook_error *err) {
        if (w->n_links == w->max_links) {
                size_t m = w->max_links ? 2 * w->max_links : 64;
                link_rec *l = reallocarray(w->links, m, sizeof(*l));
                if (!l)
                        return nook_err_oom(err);
                w->links = l;
                w->max_links = m;
        }
        char *c = strdup(rel);
        if (!c)
                return nook_err_oom(err);
        w->links[w->n_links++] = (link_rec){ .dev = st->st_dev, .ino = st->st_ino, .rel = c };
        return 0;
}

static int copy_file(walk *w, int sdfd, int ddfd, const char *name, const struct stat *st, const char *src,
        nook_error *err) {
        _cleanup_close_ int in = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", src);
        _cleanup_close_ int out =
                openat(ddfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the copy of '%s'", src);
        w->stats->files++;
        w->stats->bytes += (uint64_t)st->st_size;
        return copy_data(w, in, out, src, err);
}

static int copy_dir(walk *w, int sdfd, int ddfd, const char *src, const char *dst, const char *rel,
        unsigned depth, nook_error *err);

/* One entry of a directory: made, then its metadata. */
static int copy_entry(walk *w, int sdfd, int ddfd, const char *name, const char *src, const char *dst,
        const char *rel, unsigned depth, nook_error *err) {
        struct stat st;
        int r = 0;
        if (fstatat(sdfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", src);
        if (st.st_dev != w->dev && S_ISDIR(st.st_mode))
                return 0; /* a mount point inside: never leave the filesystem */
        const char *first = !S_ISDIR(st.st_mode) && st.st_nlink > 1 ? link_find(w, &st) : NULL;
        if (first) {
                if (linkat(w->dst_root, first, ddfd, name, 0) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot hardlink the copy of '%s'", src);
                return 0; /* the link shares the first copy's metadata */
        }
        if (S_ISDIR(st.st_mode)) {
                if (mkdirat(ddfd, name, 0700) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create the copy of '%s'", src);
                _cleanup_close_ int s = openat(sdfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int d = openat(ddfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (s < 0 || d < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot open the folder '%s'", src);
                w->stats->dirs++;
                r = copy_dir(w, s, d, src, dst, rel, depth + 1, err);
        } else if (S_ISREG(st.st_mode))
                r = copy_file(w, sdfd, ddfd, name, &st, src, err);
        else if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t k = readlinkat(sdfd, name, target, sizeof(target) - 1);
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read the symlink '%s'", src);
                target[k] = 0;
                if (symlinkat(target, ddfd, name) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create the copy of '%s'", src);
        } else if (mknodat(ddfd, name, st.st_mode & (S_IFMT | 07777), st.st_rdev) < 0)
                return nook_err_errno(err, NOOK_E_IO,
                        S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)
                                ? "Cannot copy the whiteout '%s' (a file deleted in the source's root layer; making one needs CAP_MKNOD)"
                                : "Cannot copy the special file '%s'",
                        src);
        if (r >= 0)
                r = copy_meta(w, ddfd, name, &st, src, dst, err);
        if (r >= 0 && !S_ISDIR(st.st_mode) && st.st_nlink > 1)
                r = link_add(w, &st, rel, err);
        return r;
}

static int copy_dir(walk *w, int sdfd, int ddfd, const char *src, const char *dst, const char *rel,
        unsigned depth, nook_error *err) {
        if (depth > MAX_DEPTH)
                return nook_err_set(
                        err, NOOK_E_INVALID, "'%s' nests deeper than %d folders", src, MAX_DEPTH);
        int dup = fcntl(sdfd, F_DUPFD_CLOEXEC, 3);
        DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
        if (!d) {
                safe_close(dup);
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the folder '%s'", src);
        }
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *s = strprintf("%s/%s", src, de->d_name);
                _cleanup_free_ char *t = strprintf("%s/%s", dst, de->d_name);
                _cleanup_free_ char *l = *rel ? strprintf("%s/%s", rel, de->d_name) : strdup(de->d_name);
                if (!s || !t || !l)
                        r = nook_err_oom(err);
                else
                        r = copy_entry(w, sdfd, ddfd, de->d_name, s, t, l, depth, err);
        }
        closedir(d);
        return r;
}

int copytree(const char *src, const char *dst, const copytree_opts *o, copytree_stats *ret_stats,
        nook_error *err) {
        copytree_stats stats = { 0 };
        walk w = { .o = o, .stats = &stats, .dst_root = -1, .can_clone = true, .can_cfr = true };
        struct stat st;
        _cleanup_close_ int s = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s < 0 || fstat(s, &st) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the folder '%s'", src);
        w.dev = st.st_dev;
        if (mkdir(dst, 0700) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", dst);
        _cleanup_close_ int d = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", dst);
        w.dst_root = d;
        int r = copy_dir(&w, s, d, src, dst, "", 0, err);
        if (r >= 0)
                r = copy_root_meta(&w, d, &st, src, dst, err);
        for (size_t i = 0; i < w.n_links; i++)
                free(w.links[i].rel);
        free(w.links);
        if (r < 0)
                return r;
        if (ret_stats)
                *ret_stats = stats;
        return 0;
}
