/* SPDX-License-Identifier: Apache-2.0 */
/* Layer packing for snapshots.  Determinism: children are written sorted by name (strcmp),
 * entries carry only type, mode, sandbox ids, mtime, size, link target and sorted user.*
 * xattrs (no user/group names, no atime/ctime), in the restricted pax format (an extended
 * header only when a field needs one).  Hard links are detected by (dev, ino): the first name
 * in sort order is the file, later names link to it, so the order is stable too.
 * The tree is read through fds from dir_fd without following symlinks.  A file or directory
 * that its owner cannot read (mode 0000 inside a rootless sandbox, where we own everything but
 * have no CAP_DAC_OVERRIDE) is opened by adding the owner's read bit for the moment of the open
 * and restoring the mode at once.
 *
 * Names and link targets are the bytes the file system holds: a Linux name is any bytes but '/'
 * and NUL, and a guest may make one that is not UTF-8 (0xff) or that holds a newline.  The pax
 * writer converts a name from the process's locale to UTF-8 for its "path" record; one it cannot
 * convert (in the C locale of the CLI and of Node: any byte above 0x7f) it writes as it is, under
 * hdrcharset=BINARY, and answers ARCHIVE_WARN.  That is success here, and the unpacker reads the
 * name back byte for byte.  The option hdrcharset=BINARY for the whole archive would give every
 * entry an extended header (1 KiB, and a warning from GNU tar, which does not know the keyword);
 * this way an all-ASCII tree packs as it always did.
 *
 * A sparse file (fewer blocks than its size needs) is written as a GNU sparse 1.0 pax entry
 * holding its data extents only, as SEEK_DATA/SEEK_HOLE find them: a guest's `truncate -s 8G`
 * costs a snapshot what the file holds, and the unpacker writes the data back at its offsets,
 * holes and all.  Its bytes then follow the filesystem's hole layout, so the same content copied
 * onto another filesystem may pack differently.  A file of more than PACK_MAX_EXTENTS extents
 * has its smallest holes packed as zeros (the smallest hole kept doubles until the map fits),
 * which bounds the map's memory, not the zeros read for a file fragmented on purpose. */
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
#define PACK_MAX_EXTENTS 65536
#define PACK_MIN_HOLE_STEP (64 * 1024)
#define PACK_ZEROS (1024 * 1024)

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
        char *zeros; /* PACK_ZEROS zero bytes, for the holes of sparse files */
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

/* ARCHIVE_WARN is a written entry: a name that went in as bytes (see the file comment). */
static int write_header(packer *p, struct archive_entry *e, const char *path, nook_error *err) {
        int rc = archive_write_header(p->a, e);
        return rc == ARCHIVE_OK || rc == ARCHIVE_WARN ? 0 : archive_fail(p, path, err);
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
        (void)!fchmodat(dfd, name, st->st_mode & 07777, 0);
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
        int r = write_header(p, e, path, err);
        archive_entry_free(e);
        return r;
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

typedef struct extent {
        off_t start, end;
} extent;

typedef struct extent_map {
        extent *v;
        size_t n, max;
        off_t min_hole; /* holes shorter than this are packed as data (0: every hole is kept) */
} extent_map;

static void extent_map_done(extent_map *m) {
        free(m->v);
}

/* Merges the extents whose hole between them is shorter than m->min_hole. */
static void extent_map_compact(extent_map *m) {
        size_t k = 0;
        for (size_t i = 1; i < m->n; i++)
                if (m->v[i].start - m->v[k].end < m->min_hole)
                        m->v[k].end = m->v[i].end;
                else
                        m->v[++k] = m->v[i];
        m->n = m->n ? k + 1 : 0;
}

static void extent_map_add(extent_map *m, off_t start, off_t end) {
        if (m->n > 0 && start - m->v[m->n - 1].end < m->min_hole) {
                m->v[m->n - 1].end = end;
                return;
        }
        while (m->n == m->max) {
                /* never past INT64_MAX: two holes of 2^62 or more do not fit in one file */
                m->min_hole = !m->min_hole            ? PACK_MIN_HOLE_STEP
                        : m->min_hole > INT64_MAX / 2 ? INT64_MAX
                                                      : m->min_hole * 2;
                extent_map_compact(m);
                if (start - m->v[m->n - 1].end < m->min_hole) {
                        m->v[m->n - 1].end = end;
                        return;
                }
        }
        m->v[m->n++] = (extent){ start, end };
}

/* The data extents of a sparse regular file's first size bytes; m->n == 0 for a file that is
 * one hole.  1: sparse, 0: pack it densely (no hole found, or no SEEK_DATA here). */
static int extent_map_read(int fd, const struct stat *st, extent_map *m, const char *path, nook_error *err) {
        if (st->st_size == 0 || (uint64_t)st->st_blocks * 512 >= (uint64_t)st->st_size)
                return 0; /* as many blocks as bytes: no hole worth a map (the common case, no lseek) */
        m->max = PACK_MAX_EXTENTS;
#ifdef NOOK_TEST_HOOKS
        /* NOOK_TEST_PACK_MAX_EXTENTS=N (2..): a smaller map, so tests reach the compaction */
        const char *t = secure_getenv("NOOK_TEST_PACK_MAX_EXTENTS");
        if (t && strtoul(t, NULL, 10) >= 2 && strtoul(t, NULL, 10) < PACK_MAX_EXTENTS)
                m->max = strtoul(t, NULL, 10);
#endif
        if (!(m->v = malloc(m->max * sizeof(*m->v))))
                return nook_err_oom(err);
        off_t pos = 0, data = 0, end = 0;
        int r;
        while ((r = fd_next_data(fd, pos, st->st_size, &data, &end)) > 0) {
                extent_map_add(m, data, end);
                pos = end;
        }
        if (r < 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, r, "Cannot find the data of sparse file '%.300s'", path);
        return !(m->n == 1 && m->v[0].start == 0 && m->v[0].end == st->st_size);
}

/* Feeds len bytes of a hole: the pax writer counts them and writes none. */
static int write_hole(packer *p, off_t len, const char *path, nook_error *err) {
        if (len > 0 && !p->zeros && !(p->zeros = calloc(1, PACK_ZEROS)))
                return nook_err_oom(err); /* calloc maps it: untouched, it costs no memory */
        while (len > 0) {
                size_t n = len > PACK_ZEROS ? PACK_ZEROS : (size_t)len;
                if (archive_write_data(p->a, p->zeros, n) < 0)
                        return archive_fail(p, path, err);
                len -= (off_t)n;
        }
        return 0;
}

/* The data of a sparse entry: each extent's bytes, the holes between as zeros the writer skips.
 * A file that shrank meanwhile reads as zeros past its end, so the entry keeps its map. */
static int write_sparse_data(
        packer *p, int fd, const extent_map *m, off_t size, const char *path, nook_error *err) {
        off_t pos = 0;
        int r;
        for (size_t i = 0; i < m->n; i++) {
                if ((r = write_hole(p, m->v[i].start - pos, path, err)) < 0)
                        return r;
                for (pos = m->v[i].start; pos < m->v[i].end;) {
                        off_t left = m->v[i].end - pos;
                        size_t want = left < (off_t)sizeof(p->buf) ? (size_t)left : sizeof(p->buf);
                        ssize_t n = pread(fd, p->buf, want, pos);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return nook_err_errno(err, NOOK_E_IO, "Cannot read '%.300s'", path);
                        if (n == 0)
                                break;
                        if (archive_write_data(p->a, p->buf, (size_t)n) < 0)
                                return archive_fail(p, path, err);
                        pos += n;
                }
                if (pos < m->v[i].end && (r = write_hole(p, m->v[i].end - pos, path, err)) < 0)
                        return r;
                pos = m->v[i].end;
        }
        return write_hole(p, size - pos, path, err);
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
                return write_header(p, e, path, err);
        }
        _cleanup_close_ int fd = open_readable(dfd, name, st, 0);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%.300s'", path);
        archive_entry_set_size(e, st->st_size);
        if ((r = add_xattrs(p, e, fd, path, err)) < 0)
                return r;
        _cleanup_(extent_map_done) extent_map m = {};
        int sparse = extent_map_read(fd, st, &m, path, err);
        if (sparse < 0)
                return sparse;
        for (size_t i = 0; sparse && i < m.n; i++)
                archive_entry_sparse_add_entry(e, m.v[i].start, m.v[i].end - m.v[i].start);
        if (sparse && m.n == 0)
                archive_entry_sparse_add_entry(e, st->st_size, 0); /* one hole: a map of nothing */
        if ((r = write_header(p, e, path, err)) < 0)
                return r;
        return sparse ? write_sparse_data(p, fd, &m, st->st_size, path, err)
                      : write_file_data(p, fd, path, err);
}

static int pack_dir(packer *p, struct archive_entry *e, int dfd, const char *name, const char *path,
        const struct stat *st, unsigned depth, nook_error *err) {
        _cleanup_close_ int fd = open_readable(dfd, name, st, O_DIRECTORY);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open directory '%.300s'", path);
        int r = add_xattrs(p, e, fd, path, err);
        if (r < 0)
                return r;
        if ((r = write_header(p, e, path, err)) < 0)
                return r;
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
                        r = write_header(p, e, path, err);
                }
        } else {
                archive_entry_set_rdev(e, st.st_rdev);
                r = write_header(p, e, path, err);
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
        free(p->zeros);
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
