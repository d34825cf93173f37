/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot export and import.  The file is one tar compressed with zstd (libarchive) holding,
 * in this order: snapshot.json (its description and digest), rootfs.tar, and workspace.tar when
 * it has one.  Import trusts nothing in it: every member is hashed on the way in and must match
 * the digests in snapshot.json, whose content must hash to the snapshot digest; each layer goes
 * through the image unpacker (no entry escapes its directory, whiteouts become overlay
 * whiteouts); an unknown, repeated or missing member, a truncated stream or a damaged
 * compression refuses the file.  Everything is built in a private directory and moved into place
 * only when complete: a refused file leaves nothing behind.  Export writes a temporary file
 * beside the target and renames it when complete. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/module.h"
#include "nook.h"
#include "image/digest.h"
#include "image/unpack.h"
#include "sandbox/ctx.h"
#include "sandbox/snapshot.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/name.h"
#include "util/proc.h"
#include "util/str.h"

#define IO_BUF (256 * 1024)
#define META_MAX (1024 * 1024)
#define PROGRESS_EVERY_MS 100

typedef struct progress {
        nook_progress_fn fn;
        void *userdata;
        uint64_t done, total, last_ms;
} progress;

static void progress_step(progress *p, uint64_t add, bool final) {
        p->done += add;
        if (!p->fn)
                return;
        uint64_t now = now_ms();
        if (final || now - p->last_ms >= PROGRESS_EVERY_MS) {
                p->last_ms = now;
                p->fn(p->userdata, p->done, p->total);
        }
}

/* ---- export ---------------------------------------------------------------------------------------- */

static int add_member(struct archive *a, const char *name, int fd, uint64_t size, int64_t mtime, progress *p,
        nook_error *err) {
        struct archive_entry *e = IMG(archive_entry_new)();
        if (!e)
                return nook_err_oom(err);
        IMG(archive_entry_set_pathname)(e, name);
        IMG(archive_entry_set_filetype)(e, AE_IFREG);
        IMG(archive_entry_set_perm)(e, 0644);
        IMG(archive_entry_set_size)(e, (la_int64_t)size);
        IMG(archive_entry_set_mtime)(e, mtime, 0);
        int rc = IMG(archive_write_header)(a, e);
        IMG(archive_entry_free)(e);
        if (rc != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_IO, "Cannot write '%s' into the export: %s", name,
                        img_archive_error_or(a, "libarchive error"));
        _cleanup_free_ char *buf = malloc(IO_BUF);
        if (!buf)
                return nook_err_oom(err);
        for (uint64_t left = size; left > 0;) {
                ssize_t k = read(fd, buf, left < IO_BUF ? (size_t)left : IO_BUF);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read the snapshot's '%s'", name);
                if (IMG(archive_write_data)(a, buf, (size_t)k) != k)
                        return nook_err_set(err, NOOK_E_IO, "Cannot write '%s' into the export: %s", name,
                                img_archive_error_or(a, "libarchive error"));
                left -= (uint64_t)k;
                progress_step(p, (uint64_t)k, false);
        }
        return 0;
}

static int add_file_member(
        struct archive *a, const char *dir, const char *name, int64_t mtime, progress *p, nook_error *err) {
        _cleanup_free_ char *path = strprintf("%s/%s", dir, name);
        if (!path)
                return nook_err_oom(err);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", path);
        return add_member(a, name, fd, (uint64_t)st.st_size, mtime, p, err);
}

static int write_export(int fd, const char *dir, json_t *meta, progress *p, nook_error *err) {
        _cleanup_(img_archive_write_freep) struct archive *a = IMG(archive_write_new)();
        _cleanup_free_ char *text = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
        int64_t mtime = json_integer_value(json_object_get(meta, "createdAt"));
        bool ws = json_is_string(json_object_get(json_object_get(meta, "content"), "workspace"));
        int r;
        if (!a || !text)
                return nook_err_oom(err);
        if (IMG(archive_write_add_filter_zstd)(a) != ARCHIVE_OK ||
                IMG(archive_write_set_format_pax_restricted)(a) != ARCHIVE_OK ||
                IMG(archive_write_open_fd)(a, fd) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_MISSING_FEATURE, "Cannot write a zstd-compressed tar: %s",
                        img_archive_error_or(a, "libarchive lacks zstd"));
        /* snapshot.json from memory: a pipe-free way is a memory fd */
        _cleanup_close_ int mfd = memfd_create("snapshot.json", MFD_CLOEXEC);
        if (mfd < 0 || fd_write_all(mfd, text, strlen(text)) < 0 || lseek(mfd, 0, SEEK_SET) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stage snapshot.json");
        r = add_member(a, "snapshot.json", mfd, strlen(text), mtime, p, err);
        if (r < 0)
                return r;
        r = add_file_member(a, dir, "rootfs.tar", mtime, p, err);
        if (r < 0)
                return r;
        if (ws) {
                r = add_file_member(a, dir, "workspace.tar", mtime, p, err);
                if (r < 0)
                        return r;
        }
        if (IMG(archive_write_close)(a) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_IO, "Cannot finish the export: %s",
                        img_archive_error_or(a, "write error"));
        return 0;
}

/* The portable description: what the snapshot holds, not where it came from on this host. */
static json_t *portable_meta(json_t *meta) {
        json_t *o = json_pack("{s:O, s:O, s:O, s:O?, s:O?, s:O?, s:O?}", "content",
                json_object_get(meta, "content"), "digest", json_object_get(meta, "digest"), "name",
                json_object_get(meta, "name"), "createdAt", json_object_get(meta, "createdAt"), "rootfsSize",
                json_object_get(meta, "rootfsSize"), "workspaceSize", json_object_get(meta, "workspaceSize"),
                "baseDigest", json_object_get(meta, "baseDigest"));
        return o;
}

/* Where the export goes: a new name, or with force a file or symlink there (never a directory). */
static int export_target_check(const char *path, bool force, nook_error *err) {
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : nook_err_errno(err, NOOK_E_IO, "Cannot look at '%s'", path);
        if (S_ISDIR(st.st_mode))
                return nook_err_set(err, NOOK_E_EXISTS,
                        "'%s' is a directory; a snapshot export is one file: give a file name", path);
        if (!force)
                return nook_err_set(err, NOOK_E_EXISTS,
                        "'%s' exists: use --force to replace it (NOOK_SNAPSHOT_EXPORT_FORCE in the API)",
                        path);
        return 0;
}

/* The finished temporary into place: never over an existing name unless force; rename replaces
 * a symlink there, never writes through it. */
static int export_place(const char *tmp, const char *path, bool force, nook_error *err) {
        if (force ? rename(tmp, path) == 0 : renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
                return 0;
        int e = errno, r;
        if ((e == EEXIST || e == EISDIR) && (r = export_target_check(path, force, err)) < 0)
                return r; /* a name that appeared while the export was written */
        return nook_err_errnum(err, NOOK_E_IO, e, "Cannot rename '%s' to '%s'", tmp, path);
}

int nook_snapshot_export(nook *n, const char *snap, const char *path, unsigned flags, nook_progress_fn fn,
        void *userdata, nook_error *err) {
        _cleanup_free_ char *name = NULL, *dir = NULL, *tmp = NULL;
        json_t *meta = NULL, *pm = NULL;
        progress p = { .fn = fn, .userdata = userdata };
        bool force = flags & NOOK_SNAPSHOT_EXPORT_FORCE;
        int r;
        if (isempty(path))
                return nook_err_set(err, NOOK_E_INVALID, "Export needs a file name");
        if (flags & ~NOOK_SNAPSHOT_EXPORT_FORCE)
                return nook_err_set(err, NOOK_E_INVALID, "Unknown snapshot export flags %#x", flags);
        if ((r = sb_snapshot_load(n, snap, &name, &meta, err)) < 0)
                return r;
        if ((r = export_target_check(path, force, err)) < 0) {
                json_decref(meta);
                return r;
        }
        const char *digest = json_string_value(json_object_get(meta, "digest"));
        if (!digest || !image_digest_valid(digest) ||
                !(dir = strprintf("%s/snapshots/%s", n->home, image_digest_hex(digest))) ||
                !(tmp = strprintf("%s.nook-tmp-XXXXXX", path)) || !(pm = portable_meta(meta))) {
                json_decref(meta);
                return digest ? nook_err_oom(err)
                              : nook_err_set(err, NOOK_E_IO, "Snapshot '%s' is damaged", name);
        }
        p.total = (uint64_t)(json_integer_value(json_object_get(meta, "rootfsSize")) +
                json_integer_value(json_object_get(meta, "workspaceSize")));
        json_decref(meta);
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                json_decref(pm);
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", tmp);
        }
        r = write_export(fd, dir, pm, &p, err);
        json_decref(pm);
        if (r >= 0 && fsync(fd) < 0)
                r = nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", tmp);
        safe_close(fd);
        if (r >= 0)
                r = export_place(tmp, path, force, err);
        if (r < 0) {
                (void)unlink(tmp);
                return nook_err_wrap(err, "exporting snapshot '%s'", name);
        }
        progress_step(&p, 0, true);
        return 0;
}

/* ---- import ---------------------------------------------------------------------------------------- */

typedef struct reader {
        int fd;
        progress *p;
        char buf[IO_BUF];
} reader;

static la_ssize_t read_cb(struct archive *a, void *userdata, const void **buf) {
        reader *rd = userdata;
        for (;;) {
                ssize_t k = read(rd->fd, rd->buf, sizeof(rd->buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        IMG(archive_set_error)(a, errno, "read error");
                        return -1;
                }
                progress_step(rd->p, (uint64_t)k, false);
                *buf = rd->buf;
                return k;
        }
}

static int refuse_file(nook_error *err, const char *why) {
        return nook_err_set(err, NOOK_E_REFUSED, "Refusing the snapshot file: %s", why);
}

static int read_meta(struct archive *a, struct archive_entry *e, json_t **ret, nook_error *err) {
        if (!streq(IMG(archive_entry_pathname)(e), "snapshot.json") ||
                IMG(archive_entry_filetype)(e) != AE_IFREG)
                return refuse_file(err, "its first member must be snapshot.json");
        if (IMG(archive_entry_size)(e) <= 0 || IMG(archive_entry_size)(e) > META_MAX)
                return refuse_file(err, "snapshot.json is empty or too large");
        size_t len = (size_t)IMG(archive_entry_size)(e);
        _cleanup_free_ char *text = malloc(len + 1);
        if (!text)
                return nook_err_oom(err);
        if (IMG(archive_read_data)(a, text, len) != (la_ssize_t)len)
                return refuse_file(err, "snapshot.json is truncated");
        text[len] = 0;
        json_t *m = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(m) || !json_is_object(json_object_get(m, "content"))) {
                json_decref(m);
                return refuse_file(err, "snapshot.json is not a snapshot description");
        }
        *ret = m;
        return 0;
}

/* The content must be exactly what this version writes, with valid digests. */
static int check_content(json_t *m, nook_error *err) {
        json_t *c = json_object_get(m, "content"), *v;
        const char *k, *digest = json_string_value(json_object_get(m, "digest"));
        json_object_foreach(c, k, v) {
                if (!streq(k, "format") && !streq(k, "base") && !streq(k, "parent") && !streq(k, "rootfs") &&
                        !streq(k, "workspace"))
                        return refuse_file(err, "snapshot.json has an unknown content field");
                if ((streq(k, "parent") || streq(k, "workspace")) && json_is_null(v))
                        continue; /* none */
                if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
                        json_string_length(v) > PATH_MAX)
                        return refuse_file(
                                err, "snapshot.json has a content field that is not a plain string");
        }
        const char *fmt = json_string_value(json_object_get(c, "format"));
        if (!fmt || !streq(fmt, SNAPSHOT_FORMAT))
                return refuse_file(err, "it is not a " SNAPSHOT_FORMAT " snapshot");
        if (!json_object_get(c, "base") ||
                !image_digest_valid(json_string_value(json_object_get(c, "rootfs"))) ||
                (json_is_string(json_object_get(c, "workspace")) &&
                        !image_digest_valid(json_string_value(json_object_get(c, "workspace")))) ||
                (json_is_string(json_object_get(c, "parent")) &&
                        !image_digest_valid(json_string_value(json_object_get(c, "parent")))))
                return refuse_file(err, "snapshot.json lacks a base image or has a malformed digest");
        if (!image_digest_valid(digest))
                return refuse_file(err, "snapshot.json has no valid digest");
        _cleanup_free_ char *mine = NULL;
        int r = sb_snapshot_digest(c, &mine, err);
        if (r < 0)
                return r;
        if (!streq(mine, digest))
                return refuse_file(
                        err, "the snapshot digest does not match its content (damaged or altered)");
        return 0;
}

/* Copies a member into dir/name, hashing the bytes, then unpacks it into dir/unpack (when set)
 * with the image unpacker's rules; both digests must be want. */
static int take_layer(nook *n, struct archive *a, const char *dir, const char *name, const char *unpack,
        const char *want, nook_error *err) {
        _cleanup_free_ char *path = strprintf("%s/%s", dir, name), *udir = NULL;
        _cleanup_free_ char *buf = malloc(IO_BUF);
        _cleanup_(img_image_hasher_freep) image_hasher *h = IMG(image_hasher_new)();
        char got[IMAGE_DIGEST_LEN + 1], diff[IMAGE_DIGEST_LEN + 1];
        la_ssize_t k;
        if (!path || !buf || !h)
                return nook_err_oom(err);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", path);
        while ((k = IMG(archive_read_data)(a, buf, IO_BUF)) > 0) {
                IMG(image_hasher_update)(h, buf, (size_t)k);
                if (fd_write_all(fd, buf, (size_t)k) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", path);
        }
        if (k < 0)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing the snapshot file: '%s' is damaged or truncated: %s", name,
                        img_archive_error_or(a, "read error"));
        IMG(image_hasher_final)(h, got);
        if (!streq(got, want))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing the snapshot file: '%s' does not match its digest (damaged or altered)",
                        name);
        if (!unpack)
                unpack = "check";
        if (!(udir = strprintf("%s/%s", dir, unpack)))
                return nook_err_oom(err);
        if (lseek(fd, 0, SEEK_SET) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot rewind '%s'", path);
        int r = sb_snapshot_unpack(n, fd, udir, diff, err);
        if (r < 0)
                return nook_err_wrap(err, "Refusing the snapshot file: '%s'", name);
        if (!streq(diff, want))
                return refuse_file(err, "a layer does not unpack to its digest");
        return 0;
}

static int read_import(nook *n, int fd, const char *tmp, progress *p, json_t **ret_meta, nook_error *err) {
        _cleanup_(img_archive_read_freep) struct archive *a = IMG(archive_read_new)();
        _cleanup_free_ reader *rd = calloc(1, sizeof(*rd));
        struct archive_entry *e;
        _cleanup_(json_decrefp) json_t *m = NULL;
        int rc, r;
        if (!a || !rd)
                return nook_err_oom(err);
        *rd = (reader){ .fd = fd, .p = p };
        (void)IMG(archive_read_support_filter_zstd)(a);
        (void)IMG(archive_read_support_format_tar)(a);
        if (IMG(archive_read_open)(a, rd, NULL, read_cb, NULL) != ARCHIVE_OK)
                return refuse_file(err,
                        "it is not a complete zstd-compressed tar (truncated, damaged or another format)");
        if ((rc = IMG(archive_read_next_header)(a, &e)) != ARCHIVE_OK)
                return refuse_file(err, "it is empty, truncated or not a snapshot export");
        if (IMG(archive_filter_code)(a, 0) != ARCHIVE_FILTER_ZSTD)
                return refuse_file(err, "it is not zstd-compressed");
        r = read_meta(a, e, &m, err);
        if (r < 0)
                return r;
        r = check_content(m, err);
        if (r < 0)
                return r;
        json_t *c = json_object_get(m, "content");
        const char *ws = json_string_value(json_object_get(c, "workspace"));
        const char *members[] = { "rootfs.tar", ws ? "workspace.tar" : NULL };
        for (size_t i = 0; i < ELEMENTSOF(members) && members[i]; i++) {
                rc = IMG(archive_read_next_header)(a, &e);
                if (rc != ARCHIVE_OK || !streq(IMG(archive_entry_pathname)(e), members[i]) ||
                        IMG(archive_entry_filetype)(e) != AE_IFREG) {
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "Refusing the snapshot file: member %zu must be '%s' (missing, truncated or out of order)",
                                i + 2, members[i]);
                }
                r = take_layer(n, a, tmp, members[i], i == 0 ? "rootfs" : NULL,
                        json_string_value(json_object_get(c, i == 0 ? "rootfs" : "workspace")), err);
                if (r < 0)
                        return r;
        }
        if ((rc = IMG(archive_read_next_header)(a, &e)) != ARCHIVE_EOF)
                return refuse_file(err,
                        rc == ARCHIVE_OK ? "it has an unexpected extra member"
                                         : "it is truncated or damaged");
        *ret_meta = TAKE_PTR(m);
        return 0;
}

/* The unpacked workspace was only a check of its safety: restoring unpacks the tar again. */
static void drop_check(const char *tmp) {
        _cleanup_close_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        nook_error ignore;
        if (fd >= 0)
                (void)path_rm_rf_at(fd, "check", &ignore);
}

static json_t *int_or_null(json_t *v) {
        return json_is_integer(v) && json_integer_value(v) >= 0 ? json_incref(v) : NULL;
}

static json_t *file_size(const char *dir, const char *name) {
        _cleanup_free_ char *p = strprintf("%s/%s", dir, name);
        struct stat st;
        return p && stat(p, &st) >= 0 ? json_integer((json_int_t)st.st_size) : NULL;
}

/* Only the verified content is taken as is; the descriptive fields are checked or recomputed. */
static json_t *local_meta(const char *tmp, json_t *meta) {
        const char *bd = json_string_value(json_object_get(meta, "baseDigest"));
        bool ws = json_is_string(json_object_get(json_object_get(meta, "content"), "workspace"));
        return json_pack("{s:O, s:o?, s:o?, s:o?, s:s?}", "content", json_object_get(meta, "content"),
                "createdAt", int_or_null(json_object_get(meta, "createdAt")), "rootfsSize",
                file_size(tmp, "rootfs.tar"), "workspaceSize", ws ? file_size(tmp, "workspace.tar") : NULL,
                "baseDigest", image_digest_valid(bd) ? bd : NULL);
}

/* A snapshot taken on another one needs that one here first. */
static int check_parent(nook *n, json_t *meta, nook_error *err) {
        const char *parent = json_string_value(json_object_get(json_object_get(meta, "content"), "parent"));
        json_t *m = NULL;
        if (!parent)
                return 0;
        if (sb_snapshot_load(n, parent, NULL, &m, err) < 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "The snapshot was taken on snapshot %s, which is not here; import that one first",
                        parent);
        json_decref(m);
        return 0;
}

int nook_snapshot_import(nook *n, const char *path, const char *name, nook_progress_fn fn, void *userdata,
        char **ret_json, nook_error *err) {
        _cleanup_free_ char *tmp = NULL, *rname = NULL;
        _cleanup_close_ int fd = -1;
        json_t *meta = NULL;
        progress p = { .fn = fn, .userdata = userdata };
        struct stat st;
        int r;
        if (name && (r = name_validate("snapshot", name, err)) < 0)
                return r;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot open '%s'", path);
        if (!S_ISREG(st.st_mode))
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not a regular file", path);
        p.total = (uint64_t)st.st_size;
        _cleanup_close_ int tmp_lock = -1; /* held until tmp is committed or removed */
        if ((r = sb_snapshot_tmpdir(n, "import", &tmp, &tmp_lock, err)) < 0)
                return r;
        r = read_import(n, fd, tmp, &p, &meta, err);
        if (r >= 0)
                r = check_parent(n, meta, err);
        if (r >= 0) {
                drop_check(tmp);
                const char *given = json_string_value(json_object_get(meta, "name"));
                if (!name && (!given || name_validate("snapshot", given, err) < 0))
                        r = nook_err_set(err, NOOK_E_INVALID,
                                "The snapshot file names no valid snapshot; give a name: 'nook snapshot import FILE NAME'");
                else if (!(rname = strdup(name ? name : given)))
                        r = nook_err_oom(err);
        }
        if (r >= 0) {
                json_t *local = local_meta(tmp, meta);
                /* the same content again (the README's export then import on one host): success,
                 * and the answer says which snapshot holds it */
                r = local ? sb_snapshot_commit(n, tmp, local, rname, /* present_ok= */ true, ret_json, err)
                          : nook_err_oom(err);
                json_decref(local);
        }
        json_decref(meta);
        sb_snapshot_tmpdir_remove(n, tmp);
        if (r < 0)
                return nook_err_wrap(err, "importing '%s'", path);
        progress_step(&p, 0, true);
        return 0;
}
