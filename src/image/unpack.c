/* SPDX-License-Identifier: Apache-2.0 */
/* Layer unpacking.  The archive is untrusted, so nothing here follows a symlink or trusts a name:
 *   - names are relative: an absolute name or a ".." component refuses the layer;
 *   - every parent directory is opened component by component with O_NOFOLLOW|O_DIRECTORY
 *     from the layer's root fd: an entry that would pass through a symlink (or a file) an
 *     earlier entry planted refuses the layer instead of writing through it;
 *   - an existing name is unlinked before it is created again (O_EXCL), never opened;
 *   - a hard link's target is resolved the same way, so it can only name a file of this layer;
 *   - only user.* xattrs are kept (security.capability from an image would grant capabilities
 *     on the host's view of the file; trusted.* belongs to overlayfs);
 *   - rootful: owner ids are shifted into the sandbox range (ids >= 65536 become 65534);
 *     rootless: the caller owns everything, setuid/setgid bits are dropped, devices skipped.
 * OCI whiteouts become what overlayfs reads as whiteouts in both modes: ".wh.NAME" a 0/0
 * character device (unprivileged users may create those since Linux 5.8, commit a3c751a50fe6),
 * ".wh..wh..opq" the xattr user.overlay.opaque=y on its directory (what overlayfs reads when
 * mounted with "userxattr" in a user namespace, as the supervisor does) plus
 * trusted.overlay.opaque=y when we are root (the no-userxattr fallback).
 * A file's data is written at the offsets the archive gives (a sparse entry keeps its holes), and
 * a block of zeros (UNPACK_ZERO_BLOCK, aligned in the file) is not written at all: it stays a
 * hole, so a layer or snapshot of a file full of zeros costs no disk either (as cp --sparse).
 * Directories are created 0700 and get their own mode, owner and times after the last entry,
 * deepest first, so a read-only directory in the image does not stop its own unpacking.
 * The uncompressed stream is hashed on the way through: the diff_id is checked by the caller. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/archive_util.h"
#include "nook.h"
#include "image/digest.h"
#include "image/unpack.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define BUF_SIZE (128 * 1024)
#define MAX_DEPTH 128
#define UNPACK_ZERO_BLOCK 4096

typedef struct dir_meta {
        char *path; /* normalised, relative; "" for the root */
        mode_t mode;
        uid_t uid;
        gid_t gid;
        struct timespec mtime;
} dir_meta;

typedef struct unpacker {
        const unpack_opts *o;
        int root_fd;
        /* the last parent opened, reused by the next entry in the same directory */
        char *cached_parent;
        int cached_fd;
        dir_meta *dirs;
        size_t n_dirs;
        /* the decompressed stream, hashed as the tar reader pulls it */
        struct archive *outer;
        image_hasher *hasher;
        char buf[BUF_SIZE];
} unpacker;

static void unpacker_done(unpacker *u) {
        free(u->cached_parent);
        u->cached_fd = safe_close(u->cached_fd);
        for (size_t i = 0; i < u->n_dirs; i++)
                free(u->dirs[i].path);
        free(u->dirs);
        image_hasher_free(u->hasher);
}

static int refuse(nook_error *err, const char *name, const char *why) {
        return nook_err_set(err, NOOK_E_REFUSED, "Refusing layer entry '%.300s': %s", name, why);
}

/* Normalises an entry name into out: strips "./" and trailing '/', refuses absolute names and
 * "..".  An empty result is the layer's root. */
static int name_normalize(const char *name, char *out, size_t outsz, nook_error *err) {
        size_t o = 0;
        unsigned depth = 0;
        if (outsz > 0)
                out[0] = 0; /* defined on every path, refusals included */
        if (!name)
                return refuse(err, "(none)", "it has no name");
        if (name[0] == '/')
                return refuse(err, name, "absolute names are not allowed in a layer");
        for (const char *p = name; *p;) {
                size_t len = strcspn(p, "/");
                if (len == 2 && p[0] == '.' && p[1] == '.')
                        return refuse(err, name, "'..' is not allowed in a layer");
                if (len > 0 && !(len == 1 && p[0] == '.')) {
                        if (o + len + 2 > outsz)
                                return refuse(err, name, "the name is too long");
                        if (++depth > MAX_DEPTH)
                                return refuse(err, name, "the name is nested too deep");
                        if (o)
                                out[o++] = '/';
                        memcpy(out + o, p, len);
                        o += len;
                }
                p += len;
                while (*p == '/')
                        p++;
        }
        out[o] = 0;
        return 0;
}

/* Opens dir (relative, normalised) under the root without following symlinks, creating missing
 * components 0700 when create.  Returns an O_PATH fd. */
static int open_dir(
        unpacker *u, const char *dir, bool create, const char *entry, int *ret, nook_error *err) {
        int fd = fcntl(u->root_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot duplicate the layer directory fd");
        for (const char *p = dir; *p;) {
                char comp[NAME_MAX + 1];
                size_t len = strcspn(p, "/");
                if (len > NAME_MAX) {
                        safe_close(fd);
                        return refuse(err, entry, "a name component is too long");
                }
                memcpy(comp, p, len);
                comp[len] = 0;
                int nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0 && errno == ENOENT && create) {
                        if (mkdirat(fd, comp, 0700) < 0 && errno != EEXIST) {
                                int e = errno;
                                safe_close(fd);
                                return nook_err_errnum(err, NOOK_E_IO, e,
                                        "Cannot create directory '%.300s' of the layer", dir);
                        }
                        nfd = openat(fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (nfd < 0) {
                        int e = errno;
                        safe_close(fd);
                        if (e == ELOOP || e == ENOTDIR)
                                return refuse(err, entry,
                                        "it goes through a symlink or a file that an earlier entry created");
                        return nook_err_errnum(
                                err, NOOK_E_IO, e, "Cannot open directory '%.300s' of the layer", dir);
                }
                safe_close(fd);
                fd = nfd;
                p += len;
                if (*p == '/')
                        p++;
        }
        *ret = fd;
        return 0;
}

/* The parent of an entry, through the one-entry cache (tar lists siblings together). */
static int parent_fd(unpacker *u, const char *parent, const char *entry, int *ret, nook_error *err) {
        if (u->cached_parent && streq(u->cached_parent, parent)) {
                *ret = u->cached_fd;
                return 0;
        }
        int fd;
        int r = open_dir(u, parent, /* create= */ true, entry, &fd, err);
        if (r < 0)
                return r;
        char *c = strdup(parent);
        if (!c) {
                safe_close(fd);
                return nook_err_oom(err);
        }
        free(u->cached_parent);
        safe_close(u->cached_fd);
        u->cached_parent = c;
        u->cached_fd = fd;
        *ret = fd;
        return 0;
}

static void cache_drop(unpacker *u) {
        free(u->cached_parent);
        u->cached_parent = NULL;
        u->cached_fd = safe_close(u->cached_fd);
}

static uid_t map_id(const unpacker *u, la_int64_t id) {
        if (id < 0 || (uint64_t)id >= IMAGE_ID_RANGE)
                id = IMAGE_OVERFLOW_ID;
        return u->o->id_base + (uid_t)id;
}

static mode_t entry_mode(const unpacker *u, struct archive_entry *e) {
        mode_t m = archive_entry_perm(e) & 07777;
        if (u->o->rootless)
                m &= ~(mode_t)(S_ISUID | S_ISGID);
        return m;
}

/* Removes whatever is at name in dfd: a later entry replaces an earlier one (never writes
 * through it).  A directory stays when keep_dir (tar re-lists directories). */
static int clear_name(unpacker *u, int dfd, const char *name, bool keep_dir, nook_error *err) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : nook_err_errno(err, NOOK_E_IO, "Cannot inspect '%.300s'", name);
        if (S_ISDIR(st.st_mode)) {
                if (keep_dir)
                        return 1;
                /* the cached parent may lie inside: forget its name (its fd stays open until the
                 * next lookup replaces it, as dfd may be that very fd) */
                free(u->cached_parent);
                u->cached_parent = NULL;
                return path_rm_rf_at(dfd, name, err);
        }
        if (unlinkat(dfd, name, 0) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot replace '%.300s'", name);
        return 0;
}

static int set_owner_times(
        unpacker *u, int dfd, const char *name, struct archive_entry *e, nook_error *err) {
        if (!u->o->rootless &&
                fchownat(dfd, name, map_id(u, archive_entry_uid(e)), map_id(u, archive_entry_gid(e)),
                        AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the owner of '%.300s'", name);
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
                { .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) } };
        (void)utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW);
        return 0;
}

static void set_xattrs(int fd, struct archive_entry *e) {
        const char *name;
        const void *value;
        size_t size;
        if (archive_entry_xattr_reset(e) == 0)
                return;
        while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
                if (name && startswith(name, "user.") && !startswith(name, "user.overlay."))
                        (void)fsetxattr(fd, name, value, size, 0);
}

static bool all_zero(const char *p, size_t n) {
        return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

static int pwrite_all(int fd, const char *p, size_t size, off_t off) {
        while (size > 0) {
                ssize_t n = pwrite(fd, p, size, off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                p += n;
                size -= (size_t)n;
                off += n;
        }
        return 0;
}

/* Copies the entry's data at its offsets, leaving holes for sparse entries and for zero blocks;
 * *ret_end: where the data ends (the caller sizes the file). */
static int write_data(struct archive *a, int fd, const char *name, off_t *ret_end, nook_error *err) {
        const void *buf;
        size_t size;
        la_int64_t off;
        int rc;
        *ret_end = 0;
        while ((rc = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK) {
                const char *p = buf;
                while (size > 0) {
                        /* up to the next block boundary in the file, so a zero block is a whole one */
                        size_t n = UNPACK_ZERO_BLOCK - (size_t)(off % UNPACK_ZERO_BLOCK);
                        if (n > size)
                                n = size;
                        if (!all_zero(p, n) && pwrite_all(fd, p, n, (off_t)off) < 0)
                                return nook_err_errno(
                                        err, NOOK_E_IO, "Cannot write '%.300s' of the layer", name);
                        p += n;
                        size -= n;
                        off += (la_int64_t)n;
                }
                if ((off_t)off > *ret_end)
                        *ret_end = (off_t)off;
        }
        if (rc != ARCHIVE_EOF)
                return nook_err_set(err, NOOK_E_INVALID, "Cannot read the data of layer entry '%.300s': %s",
                        name, archive_error_string(a) ? archive_error_string(a) : "damaged archive");
        return 0;
}

static int make_file(unpacker *u, struct archive *a, struct archive_entry *e, int dfd, const char *base,
        const char *path, nook_error *err) {
        _cleanup_close_ int fd =
                openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%.300s' in the layer", path);
        off_t end;
        int r = write_data(a, fd, path, &end, err);
        if (r < 0)
                return r;
        /* the size the entry says, else where its data ended (zero blocks at the end were skipped) */
        off_t size = archive_entry_size_is_set(e) ? (off_t)archive_entry_size(e) : end;
        if (ftruncate(fd, size) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot size '%.300s' in the layer", path);
        set_xattrs(fd, e);
        /* chown before chmod: chown clears setuid and setgid */
        if (!u->o->rootless &&
                fchown(fd, map_id(u, archive_entry_uid(e)), map_id(u, archive_entry_gid(e))) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the owner of '%.300s'", path);
        if (fchmod(fd, entry_mode(u, e)) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the mode of '%.300s'", path);
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
                { .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) } };
        (void)futimens(fd, ts);
        return 0;
}

static int remember_dir(unpacker *u, const char *path, struct archive_entry *e, nook_error *err) {
        for (size_t i = 0; i < u->n_dirs; i++)
                if (streq(u->dirs[i].path, path)) {
                        free(u->dirs[i].path);
                        u->dirs[i] = u->dirs[--u->n_dirs];
                        break;
                }
        dir_meta *d = realloc(u->dirs, (u->n_dirs + 1) * sizeof(*d));
        if (!d)
                return nook_err_oom(err);
        u->dirs = d;
        d = &u->dirs[u->n_dirs];
        *d = (dir_meta){ .path = strdup(path),
                .mode = entry_mode(u, e),
                .uid = map_id(u, archive_entry_uid(e)),
                .gid = map_id(u, archive_entry_gid(e)),
                .mtime = { .tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e) } };
        if (!d->path)
                return nook_err_oom(err);
        u->n_dirs++;
        return 0;
}

static int make_whiteout(
        unpacker *u, int dfd, const char *parent, const char *base, const char *name, nook_error *err) {
        if (streq(base, WH_OPAQUE)) {
                _cleanup_close_ int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || fsetxattr(fd, "user.overlay.opaque", "y", 1, 0) < 0)
                        return nook_err_errno(err, NOOK_E_MISSING_FEATURE,
                                "Cannot mark directory '%.300s' opaque (xattr user.overlay.opaque): the filesystem under the nook home must support user xattrs",
                                parent[0] ? parent : "/");
                if (!u->o->rootless)
                        (void)fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0);
                return 0;
        }
        const char *target = base + strlen(WH_PREFIX);
        if (startswith(base, WH_PREFIX WH_PREFIX))
                return 0; /* other AUFS metadata (.wh..wh.plnk, ...): nothing to do */
        if (isempty(target) || streq(target, ".") || streq(target, ".."))
                return refuse(err, name, "a whiteout must name a file");
        int r = clear_name(u, dfd, target, /* keep_dir= */ false, err);
        if (r < 0)
                return r;
        if (mknodat(dfd, target, S_IFCHR, makedev(0, 0)) < 0)
                return nook_err_errno(err, errno == EPERM ? NOOK_E_MISSING_FEATURE : NOOK_E_IO,
                        "Cannot create the overlay whiteout for '%.300s' (a 0/0 character device; unprivileged users need Linux >= 5.8)",
                        name);
        if (!u->o->rootless)
                (void)!fchownat(dfd, target, u->o->id_base, u->o->id_base, AT_SYMLINK_NOFOLLOW);
        return 0;
}

static int make_hardlink(
        unpacker *u, struct archive_entry *e, int dfd, const char *base, const char *path, nook_error *err) {
        char target[PATH_MAX];
        int r = name_normalize(archive_entry_hardlink(e), target, sizeof(target), err);
        if (r < 0)
                return r;
        if (!target[0])
                return refuse(err, path, "a hard link to the layer's root");
        char *slash = strrchr(target, '/');
        const char *tbase = slash ? slash + 1 : target;
        if (slash)
                *slash = 0;
        _cleanup_close_ int tfd = -1;
        r = open_dir(u, slash ? target : "", /* create= */ false, path, &tfd, err);
        if (r < 0)
                return r;
        struct stat st;
        if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
                return refuse(err, path,
                        "a hard link must name a file that an earlier entry of the layer created");
        if (linkat(tfd, tbase, dfd, base, 0) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create hard link '%.300s'", path);
        return 0;
}

static int make_entry(unpacker *u, struct archive *a, struct archive_entry *e, nook_error *err) {
        char path[PATH_MAX];
        const char *raw = archive_entry_pathname(e);
        int r = name_normalize(raw, path, sizeof(path), err);
        if (r < 0)
                return r;
        mode_t type = archive_entry_filetype(e);
        if (!path[0]) {
                /* "./": the layer's root directory itself */
                return type == AE_IFDIR ? remember_dir(u, "", e, err)
                                        : refuse(err, raw, "the root must be a directory");
        }
        char *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path;
        char parent[PATH_MAX];
        (void)snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - path) : 0, path);
        int dfd = -1;
        if ((r = parent_fd(u, parent, raw, &dfd, err)) < 0)
                return r;
        if (startswith(base, WH_PREFIX))
                return make_whiteout(u, dfd, parent, base, raw, err);
        r = clear_name(u, dfd, base, /* keep_dir= */ type == AE_IFDIR && !archive_entry_hardlink(e), err);
        if (r < 0)
                return r;
        if (archive_entry_hardlink(e))
                return make_hardlink(u, e, dfd, base, path, err);
        switch (type) {
        case AE_IFDIR:
                if (r == 0 && mkdirat(dfd, base, 0700) < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot create directory '%.300s' in the layer", path);
                if (archive_entry_xattr_count(e) > 0) {
                        _cleanup_close_ int fd =
                                openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0)
                                set_xattrs(fd, e);
                }
                return remember_dir(u, path, e, err);
        case AE_IFREG:
                return make_file(u, a, e, dfd, base, path, err);
        case AE_IFLNK: {
                const char *t = archive_entry_symlink(e);
                if (isempty(t))
                        return refuse(err, raw, "a symlink without a target");
                if (symlinkat(t, dfd, base) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create symlink '%.300s'", path);
                return set_owner_times(u, dfd, base, e, err);
        }
        case AE_IFCHR:
        case AE_IFBLK:
        case AE_IFIFO:
                if (u->o->rootless && type != AE_IFIFO)
                        return 0; /* devices are skipped: a rootless sandbox could not use them */
                if (mknodat(dfd, base, type | entry_mode(u, e), archive_entry_rdev(e)) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create device node '%.300s'", path);
                (void)!fchmodat(dfd, base, entry_mode(u, e), 0);
                return set_owner_times(u, dfd, base, e, err);
        default:
                return 0; /* sockets and unknown types carry nothing worth keeping */
        }
}

/* Directory metadata, deepest first, so a read-only parent is still writable while its children
 * get theirs. */
static int finish_dirs(unpacker *u, nook_error *err) {
        cache_drop(u);
        for (size_t i = u->n_dirs; i > 0; i--) {
                dir_meta *d = &u->dirs[i - 1];
                _cleanup_close_ int pfd = -1, fd = -1;
                if (d->path[0]) {
                        int r = open_dir(u, d->path, /* create= */ false, d->path, &pfd, err);
                        if (r < 0)
                                return r;
                        fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                } else
                        fd = openat(u->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot open directory '%.300s' of the layer", d->path);
                if (!u->o->rootless && fchown(fd, d->uid, d->gid) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot set the owner of '%.300s'", d->path);
                if (fchmod(fd, d->mode) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot set the mode of '%.300s'", d->path);
                struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, d->mtime };
                (void)futimens(fd, ts);
        }
        return 0;
}

/* Directories the archive never listed got 0700 on the way: give them the usual 0755 (and the
 * sandbox root as owner) before the listed ones get theirs. */
static int default_dirs(unpacker *u, int dfd, nook_error *err) {
        _cleanup_close_ int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the layer directory");
        DIR *dir = fdopendir(fd);
        if (!dir)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the layer directory");
        fd = -1;
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (de = readdir(dir))) {
                if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_close_ int sub =
                        openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        continue;
                r = default_dirs(u, sub, err);
                if (!u->o->rootless)
                        (void)!fchown(sub, u->o->id_base, u->o->id_base);
                (void)fchmod(sub, 0755);
        }
        closedir(dir);
        return r;
}

static la_ssize_t inner_read(struct archive *a, void *userdata, const void **buf) {
        unpacker *u = userdata;
        la_ssize_t n = archive_read_data(u->outer, u->buf, sizeof(u->buf));
        if (n < 0) {
                archive_set_error(a, archive_errno(u->outer), "%s", archive_error_string(u->outer));
                return -1;
        }
        image_hasher_update(u->hasher, u->buf, (size_t)n);
        *buf = u->buf;
        return n;
}

static int unpack_stream(unpacker *u, char ret_diff_id[IMAGE_DIGEST_LEN + 1], nook_error *err) {
        struct archive_entry *e;
        int rc, r;
        /* the decompressed stream is one "raw" entry of the outer reader */
        rc = archive_read_next_header(u->outer, &e);
        if (rc != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_INVALID, "Cannot read the layer: %s",
                        archive_error_string(u->outer) ? archive_error_string(u->outer)
                                                       : "empty or damaged");
        _cleanup_(archive_read_freep) struct archive *a = archive_read_new();
        if (!a)
                return nook_err_oom(err);
        (void)archive_read_support_format_tar(a);
        if (archive_read_open(a, u, NULL, inner_read, NULL) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_INVALID, "The layer is not a tar archive: %s",
                        archive_error_string(a) ? archive_error_string(a) : "unknown format");
        while ((rc = archive_read_next_header(a, &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
                r = make_entry(u, a, e, err);
                if (r < 0)
                        return r;
        }
        if (rc != ARCHIVE_EOF)
                return nook_err_set(err, NOOK_E_INVALID, "The layer is damaged or truncated: %s",
                        archive_error_string(a) ? archive_error_string(a) : "unexpected end");
        /* the tar reader stops at its end marker; the diff_id covers the padding after it too */
        la_ssize_t n;
        while ((n = archive_read_data(u->outer, u->buf, sizeof(u->buf))) > 0)
                image_hasher_update(u->hasher, u->buf, (size_t)n);
        if (n < 0)
                return nook_err_set(err, NOOK_E_INVALID, "The layer is damaged or truncated: %s",
                        archive_error_string(u->outer) ? archive_error_string(u->outer)
                                                       : "decompression failed");
        /* the layer's root is a fresh 0700 directory of ours: it gets what a "./" entry says,
         * else 0755 owned by the sandbox's root, which must traverse it */
        if (!u->o->rootless && fchown(u->root_fd, u->o->id_base, u->o->id_base) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the owner of the layer directory");
        if (fchmod(u->root_fd, 0755) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the mode of the layer directory");
        r = default_dirs(u, u->root_fd, err);
        if (r < 0)
                return r;
        r = finish_dirs(u, err);
        if (r < 0)
                return r;
        image_hasher_final(u->hasher, ret_diff_id);
        return 0;
}

static struct archive *outer_new(void) {
        struct archive *a = archive_read_new();
        if (!a)
                return NULL;
        (void)archive_read_support_filter_gzip(a);
        (void)archive_read_support_filter_zstd(a);
        (void)archive_read_support_format_raw(a);
        return a;
}

static int unpack_common(struct archive *outer, int dir_fd, const unpack_opts *o,
        char ret[IMAGE_DIGEST_LEN + 1], nook_error *err) {
        unpacker *up = calloc(1, sizeof(*up));
        if (!up)
                return nook_err_oom(err);
        *up = (unpacker){
                .o = o, .root_fd = dir_fd, .cached_fd = -1, .outer = outer, .hasher = image_hasher_new()
        };
        int r = up->hasher ? unpack_stream(up, ret, err) : nook_err_oom(err);
        unpacker_done(up);
        free(up);
        return r;
}

static const char *compression_of_media_type(const char *mt) {
        if (!mt)
                return NULL;
        if (endswith(mt, "+gzip") || endswith(mt, ".tar.gzip"))
                return "gzip";
        if (endswith(mt, "+zstd"))
                return "zstd";
        if (endswith(mt, ".tar"))
                return "none";
        return NULL;
}

int image_layer_compression_check(int fd, const char *media_type, nook_error *err) {
        static const unsigned char gzip_magic[] = { 0x1f, 0x8b }, zstd_magic[] = { 0x28, 0xb5, 0x2f, 0xfd };
        const char *want = compression_of_media_type(media_type);
        unsigned char head[4] = {};
        if (!want)
                return 0;
        ssize_t n = pread(fd, head, sizeof(head), 0);
        if (n < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the layer");
        const char *got =
                (size_t)n >= sizeof(gzip_magic) && memcmp(head, gzip_magic, sizeof(gzip_magic)) == 0 ? "gzip"
                : (size_t)n >= sizeof(zstd_magic) && memcmp(head, zstd_magic, sizeof(zstd_magic)) == 0
                ? "zstd"
                : "none";
        if (!streq(want, got))
                return nook_err_set(err, NOOK_E_INVALID,
                        "The layer's media type '%.200s' says %s, but its bytes are %s: refusing the image",
                        media_type, streq(want, "none") ? "an uncompressed tar" : want,
                        streq(got, "none") ? "neither gzip nor zstd" : got);
        return 0;
}

int image_unpack_fd(
        int fd, int dir_fd, const unpack_opts *o, char ret_diff_id[IMAGE_DIGEST_LEN + 1], nook_error *err) {
        _cleanup_(archive_read_freep) struct archive *outer = outer_new();
        if (!outer)
                return nook_err_oom(err);
        if (archive_read_open_fd(outer, fd, BUF_SIZE) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_INVALID, "Cannot read the layer: %s",
                        archive_error_string(outer) ? archive_error_string(outer) : "unknown compression");
        return unpack_common(outer, dir_fd, o, ret_diff_id, err);
}

int image_unpack_mem(const void *buf, size_t len, int dir_fd, const unpack_opts *o,
        char ret_diff_id[IMAGE_DIGEST_LEN + 1], nook_error *err) {
        _cleanup_(archive_read_freep) struct archive *outer = outer_new();
        if (!outer)
                return nook_err_oom(err);
        if (archive_read_open_memory(outer, buf, len) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_INVALID, "Cannot read the layer: %s",
                        archive_error_string(outer) ? archive_error_string(outer) : "unknown compression");
        return unpack_common(outer, dir_fd, o, ret_diff_id, err);
}
