/* SPDX-License-Identifier: Apache-2.0 */
/* Layer packing for snapshots.  Determinism: children are written sorted by name (strcmp),
 * entries carry only type, mode, sandbox ids, mtime, size, link target and sorted user.*
 * xattrs (no user/group names, no atime/ctime), in the restricted pax format (an extended
 * header only when a field needs one).  Hard links are detected by (dev, ino): the first name
 * in sort order is the file, later names link to it, so the order is stable too.
 * The tree is read through fds from dir_fd without following symlinks.  A file or directory
 * that its owner cannot read (mode 0000 inside a rootless sandbox, where we own everything but
 * have no CAP_DAC_OVERRIDE) is opened by adding the owner's read bit for the moment of the open
 * and restoring the mode at once. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "nook.h"
#include "image/digest.h"
#include "image/pack.h"
#include "image/unpack.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

#define PACK_BUF (128 * 1024)
#define PACK_MAX_DEPTH 128
#define XATTR_LIST_MAX_LEN 65536

typedef struct hardlink {
        dev_t dev;
        ino_t ino;
        char *path;
} hardlink;

typedef struct packer {
        const pack_opts *o;
        struct archive *a;
        image_hasher *h;
        int out_fd;
        int write_errno;
        uint64_t size;
        hardlink *links;
        size_t n_links;
        char buf[PACK_BUF];
} packer;

static la_ssize_t write_cb(struct archive *a, void *userdata, const void *buf, size_t len) {
        packer *p = userdata;
        int r = fd_write_all(p->out_fd, buf, len);
        if (r < 0) {
                p->write_errno = -r;
                archive_set_error(a, -r, "cannot write the layer");
                return -1;
        }
        image_hasher_update(p->h, buf, len);
        p->size += len;
        return (la_ssize_t)len;
}

static int64_t unmap_id(uint32_t id, uint32_t base) {
        if (id >= base && id - base < IMAGE_ID_RANGE)
                return id - base;
        return IMAGE_OVERFLOW_ID;
}

static int archive_fail(packer *p, const char *path, nook_error *err) {
        if (p->write_errno)
                return nook_err_errnum(err, NOOK_E_IO, p->write_errno, "Cannot write the layer tar");
        return nook_err_set(err, NOOK_E_IO, "Cannot add '%.300s' to the layer: %s", path,
                archive_error_string(p->a) ? archive_error_string(p->a) : "libarchive error");
}

/* Opens name for reading; see the file comment for the owner-read fallback. */
static int open_readable(int dfd, const char *name, const struct stat *st, int flags) {
        int fd = openat(dfd, name, flags | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || errno != EACCES)
                return fd;
        mode_t add = S_ISDIR(st->st_mode) ? 0500 : 0400;
        if (fchmodat(dfd, name, (st->st_mode & 07777) | add, 0) < 0) {
                errno = EACCES;
                return -1;
        }
        fd = openat(dfd, name, flags | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        (void)fchmodat(dfd, name, st->st_mode & 07777, 0);
        errno = e;
        return fd;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted user.* xattrs (user.overlay.* is overlayfs's bookkeeping, not content). */
static int add_xattrs(packer *p, struct archive_entry *e, int fd, const char *path, nook_error *err) {
        _cleanup_free_ char *list = malloc(XATTR_LIST_MAX_LEN);
        if (!list)
                return nook_err_oom(err);
        ssize_t n = flistxattr(fd, list, XATTR_LIST_MAX_LEN);
        if (n < 0)
                return (errno == ENOTSUP || errno == EPERM)
                        ? 0
                        : nook_err_errno(err, NOOK_E_IO, "Cannot list the xattrs of '%.300s'", path);
        _cleanup_strv_free_ char **names = calloc(1, sizeof(char *));
        if (!names)
                return nook_err_oom(err);
        for (char *k = list; k < list + n; k += strlen(k) + 1)
                if (startswith(k, "user.") && !startswith(k, "user.overlay.") && strv_push(&names, k) < 0)
                        return nook_err_oom(err);
        qsort(names, strv_length(names), sizeof(char *), cmp_str);
        STRV_FOREACH (k, names) {
                ssize_t vl = fgetxattr(fd, *k, p->buf, sizeof(p->buf));
                if (vl < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot read xattr '%s' of '%.300s'", *k, path);
                archive_entry_xattr_add_entry(e, *k, p->buf, (size_t)vl);
        }
        return 0;
}

static bool is_opaque(int fd) {
        char v[4];
        ssize_t n = fgetxattr(fd, "user.overlay.opaque", v, sizeof(v));
        if (n < 0)
                n = fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v));
        return n == 1 && v[0] == 'y';
}

static void entry_fill(const packer *p, struct archive_entry *e, const char *path, const struct stat *st) {
        archive_entry_set_pathname(e, path);
        archive_entry_set_mode(e, st->st_mode);
        archive_entry_set_uid(e, unmap_id(st->st_uid, p->o->uid_base));
        archive_entry_set_gid(e, unmap_id(st->st_gid, p->o->gid_base));
        archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

/* A marker entry (whiteout or opaque): empty, mode 0, owner 0, time 0 — content-free, so it
 * never makes two equal trees differ. */
static int write_marker(packer *p, const char *path, nook_error *err) {
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return nook_err_oom(err);
        archive_entry_set_pathname(e, path);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0);
        archive_entry_set_size(e, 0);
        int rc = archive_write_header(p->a, e);
        archive_entry_free(e);
        return rc == ARCHIVE_OK ? 0 : archive_fail(p, path, err);
}

static int write_file_data(packer *p, int fd, const char *path, nook_error *err) {
        for (;;) {
                ssize_t n = read(fd, p->buf, sizeof(p->buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read '%.300s'", path);
                if (n == 0)
                        return 0;
                if (archive_write_data(p->a, p->buf, (size_t)n) < 0)
                        return archive_fail(p, path, err);
        }
}

static int link_lookup(
        packer *p, const struct stat *st, const char *path, const char **ret, nook_error *err) {
        *ret = NULL;
        for (size_t i = 0; i < p->n_links; i++)
                if (p->links[i].dev == st->st_dev && p->links[i].ino == st->st_ino) {
                        *ret = p->links[i].path;
                        return 0;
                }
        hardlink *l = realloc(p->links, (p->n_links + 1) * sizeof(*l));
        if (!l)
                return nook_err_oom(err);
        p->links = l;
        l[p->n_links] = (hardlink){ .dev = st->st_dev, .ino = st->st_ino, .path = strdup(path) };
        if (!l[p->n_links].path)
                return nook_err_oom(err);
        p->n_links++;
        return 0;
}

static int pack_tree(packer *p, int dfd, const char *rel, unsigned depth, nook_error *err);

static int pack_regular(packer *p, struct archive_entry *e, int dfd, const char *name, const char *path,
        const struct stat *st, nook_error *err) {
        const char *target = NULL;
        int r;
        if (st->st_nlink > 1 && (r = link_lookup(p, st, path, &target, err)) < 0)
                return r;
        if (target) {
                archive_entry_set_hardlink(e, target);
                archive_entry_set_size(e, 0);
                return archive_write_header(p->a, e) == ARCHIVE_OK ? 0 : archive_fail(p, path, err);
        }
        _cleanup_close_ int fd = open_readable(dfd, name, st, 0);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%.300s'", path);
        archive_entry_set_size(e, st->st_size);
        if ((r = add_xattrs(p, e, fd, path, err)) < 0)
                return r;
        if (archive_write_header(p->a, e) != ARCHIVE_OK)
                return archive_fail(p, path, err);
        return write_file_data(p, fd, path, err);
}

static int pack_dir(packer *p, struct archive_entry *e, int dfd, const char *name, const char *path,
        const struct stat *st, unsigned depth, nook_error *err) {
        _cleanup_close_ int fd = open_readable(dfd, name, st, O_DIRECTORY);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open directory '%.300s'", path);
        int r = add_xattrs(p, e, fd, path, err);
        if (r < 0)
                return r;
        if (archive_write_header(p->a, e) != ARCHIVE_OK)
                return archive_fail(p, path, err);
        if (p->o->overlay && is_opaque(fd)) {
                _cleanup_free_ char *m = strprintf("%s/.wh..wh..opq", path);
                if (!m)
                        return nook_err_oom(err);
                if ((r = write_marker(p, m, err)) < 0)
                        return r;
        }
        return pack_tree(p, fd, path, depth + 1, err);
}

static int pack_one(
        packer *p, int dfd, const char *name, const char *path, unsigned depth, nook_error *err) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot inspect '%.300s'", path);
        if (startswith(name, ".wh."))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Cannot snapshot '%.300s': a name starting with '.wh.' would read back as a whiteout",
                        path);
        if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0) && p->o->overlay) {
                _cleanup_free_ char *m =
                        strprintf("%.*s.wh.%s", (int)(strlen(path) - strlen(name)), path, name);
                return m ? write_marker(p, m, err) : nook_err_oom(err);
        }
        if (S_ISSOCK(st.st_mode) || ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && !p->o->overlay))
                return 0; /* a socket is no disk state; devices belong to a root filesystem only */
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return nook_err_oom(err);
        entry_fill(p, e, path, &st);
        int r = 0;
        if (S_ISREG(st.st_mode))
                r = pack_regular(p, e, dfd, name, path, &st, err);
        else if (S_ISDIR(st.st_mode))
                r = pack_dir(p, e, dfd, name, path, &st, depth, err);
        else if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
                if (n < 0)
                        r = nook_err_errno(err, NOOK_E_IO, "Cannot read symlink '%.300s'", path);
                else {
                        target[n] = 0;
                        archive_entry_set_symlink(e, target);
                        if (archive_write_header(p->a, e) != ARCHIVE_OK)
                                r = archive_fail(p, path, err);
                }
        } else {
                archive_entry_set_rdev(e, st.st_rdev);
                if (archive_write_header(p->a, e) != ARCHIVE_OK)
                        r = archive_fail(p, path, err);
        }
        archive_entry_free(e);
        return r;
}

static int pack_tree(packer *p, int dfd, const char *rel, unsigned depth, nook_error *err) {
        if (depth > PACK_MAX_DEPTH)
                return nook_err_set(err, NOOK_E_REFUSED, "Cannot snapshot '%.300s': nested too deep", rel);
        int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot duplicate a directory fd");
        DIR *dir = fdopendir(fd);
        if (!dir) {
                safe_close(fd);
                return nook_err_errno(err, NOOK_E_IO, "Cannot read directory '%.300s'", rel[0] ? rel : "/");
        }
        rewinddir(dir);
        _cleanup_strv_free_ char **names = calloc(1, sizeof(char *));
        struct dirent *de;
        int r = names ? 0 : nook_err_oom(err);
        while (r >= 0 && (de = readdir(dir)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && strv_push(&names, de->d_name) < 0)
                        r = nook_err_oom(err);
        closedir(dir);
        if (r < 0)
                return r;
        qsort(names, strv_length(names), sizeof(char *), cmp_str);
        STRV_FOREACH (nm, names) {
                _cleanup_free_ char *path = rel[0] ? strprintf("%s/%s", rel, *nm) : strdup(*nm);
                if (!path)
                        return nook_err_oom(err);
                if ((r = pack_one(p, dfd, *nm, path, depth, err)) < 0)
                        return r;
        }
        return 0;
}

static void packer_free(packer *p) {
        if (!p)
                return;
        if (p->a)
                (void)archive_write_free(p->a);
        image_hasher_free(p->h);
        for (size_t i = 0; i < p->n_links; i++)
                free(p->links[i].path);
        free(p->links);
        free(p);
}

int image_pack_dir(int dir_fd, const pack_opts *o, int out_fd, char ret_digest[IMAGE_DIGEST_LEN + 1],
        uint64_t *ret_size, nook_error *err) {
        packer *p = calloc(1, sizeof(*p));
        if (!p)
                return nook_err_oom(err);
        p->o = o;
        p->out_fd = out_fd;
        p->h = image_hasher_new();
        p->a = archive_write_new();
        int r = 0;
        if (!p->h || !p->a)
                r = nook_err_oom(err);
        else if (archive_write_set_format_pax_restricted(p->a) != ARCHIVE_OK ||
                archive_write_open2(p->a, p, NULL, write_cb, NULL, NULL) != ARCHIVE_OK)
                r = archive_fail(p, "(start)", err);
        if (r >= 0)
                r = pack_tree(p, dir_fd, "", 0, err);
        if (r >= 0 && archive_write_close(p->a) != ARCHIVE_OK)
                r = archive_fail(p, "(end)", err);
        if (r >= 0) {
                image_hasher_final(p->h, ret_digest);
                *ret_size = p->size;
        }
        packer_free(p);
        return r;
}
