/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots: create, list, inspect, remove, and booting a sandbox from one.  See snapshot.h for
 * the layout.  A snapshot is built in a private directory under <home>/snapshots/.tmp and moved
 * into place by rename(2) only when complete, then recorded: a failure at any step leaves
 * nothing behind, and a crash leaves at most a .tmp entry or an unrecorded directory, both
 * replaced by the next snapshot of the same content. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "image/digest.h"
#include "image/module.h"
#include "image/image.h"
#include "image/pack.h"
#include "image/unpack.h"
#include "isolate/userns.h"
#include "sandbox/state.h"
#include "sandbox/ctx.h"
#include "sandbox/image.h"
#include "sandbox/pause.h"
#include "sandbox/snapshot.h"
#include "sandbox/spec.h"
#include "store/snapshot_rec.h"
#include "store/store.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/path.h"
#include "util/proc.h"
#include "util/str.h"
#include "util/testhook.h"
#include "util/tmpdir.h"

#define MAX_CHAIN 16
#define META_MAX_BYTES (1024 * 1024)

#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- paths, digests, metadata ------------------------------------------------------------------ */

int sb_snapshot_root(nook *n, char **ret, nook_error *err) {
        return sb_home_dir(n, "snapshots", ret, err);
}

int sb_snapshot_tmpdir(nook *n, const char *what, char **ret, int *ret_lock, nook_error *err) {
        _cleanup_free_ char *root = NULL;
        int r = sb_snapshot_root(n, &root, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *tmp = strprintf("%s/.tmp", root);
        char *dir = strprintf("%s/.tmp/%s-XXXXXX", root, what);
        if (!tmp || !dir) {
                free(dir);
                return nook_err_oom(err);
        }
        if (mkdir(tmp, 0700) < 0 && errno != EEXIST) {
                free(dir);
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", tmp);
        }
        /* what a killed snapshot create or import left (gigabytes, it may be): each folder no
         * live owner holds goes now, not at the next prune */
        (void)tmp_sweep(tmp, path_rm_rf_at);
        r = tmpdir_owned_new(dir, ret_lock, err);
        if (r < 0) {
                free(dir);
                return r;
        }
        *ret = dir;
        return 0;
}

void sb_snapshot_tmpdir_remove(nook *n, const char *dir) {
        nook_error ignore;
        if (dir) {
                _cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                /* the unpacker may have left 0555 directories: its own remover copes */
                (void)path_rm_rf_at(fd, dir + 1, &ignore);
        }
        _cleanup_free_ char *tmp = strprintf("%s/snapshots/.tmp", n->home);
        if (tmp)
                (void)rmdir(tmp); /* only when empty: another snapshot may be in the making */
}

int sb_snapshot_digest(json_t *content, char **ret, nook_error *err) {
        _cleanup_free_ char *text = json_dumps(content, JSON_COMPACT | JSON_SORT_KEYS);
        char d[IMAGE_DIGEST_LEN + 1];
        if (!text)
                return nook_err_oom(err);
        int r = IMG(image_digest_buf)(text, strlen(text), d, err);
        if (r < 0)
                return r;
        *ret = strdup(d);
        return *ret ? 0 : nook_err_oom(err);
}

static char *snap_dir(const nook *n, const char *digest) {
        return strprintf("%s/snapshots/%s", n->home, image_digest_hex(digest));
}

int sb_snapshot_load(
        nook *n, const char *name_or_digest, char **ret_name, json_t **ret_meta, nook_error *err) {
        store *st;
        snapshot_rec rec = {};
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_snapshot_get(st, name_or_digest, &rec, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *p = image_digest_valid(rec.digest)
                ? strprintf("%s/snapshots/%s/snapshot.json", n->home, image_digest_hex(rec.digest))
                : NULL;
        json_error_t jerr;
        json_t *m = p ? json_load_file(p, JSON_REJECT_DUPLICATES, &jerr) : NULL;
        if (!m || !json_is_object(m)) {
                json_decref(m);
                r = nook_err_set(err, NOOK_E_IO,
                        "Snapshot '%s' is damaged: cannot read its snapshot.json; remove it with 'nook snapshot rm %s'",
                        rec.name, rec.name);
                snapshot_rec_done(&rec);
                return r;
        }
        if (ret_name)
                *ret_name = TAKE_PTR(rec.name);
        snapshot_rec_done(&rec);
        *ret_meta = m;
        return 0;
}

int sb_snapshot_unpack(
        nook *n, int fd, const char *dir, char ret_diff[IMAGE_DIGEST_LEN + 1], nook_error *err) {
        unpack_opts u = { .rootless = !iso_rootful(), .id_base = n->img_uid };
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", dir);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", dir);
        return IMG(image_unpack_fd)(fd, dfd, &u, ret_diff, err);
}

static const char *meta_str(json_t *meta, const char *a, const char *b) {
        json_t *o = json_object_get(meta, a);
        return json_string_value(b ? json_object_get(o, b) : o);
}

/* ---- who uses a snapshot ------------------------------------------------------------------------- */

/* Sandboxes whose spec boots from digest, and snapshots taken on top of it. */
static int used_by(nook *n, const char *digest, json_t **ret, nook_error *err) {
        sandbox_rec *recs = NULL;
        snapshot_rec *snaps = NULL;
        size_t nrec = 0, nsnap = 0;
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_sandbox_list(st, NULL, &recs, &nrec, err);
        if (r < 0)
                return r;
        json_t *a = json_array();
        for (size_t i = 0; i < nrec && a; i++) {
                json_t *spec = json_loads(recs[i].spec_json ? recs[i].spec_json : "{}", 0, NULL);
                const char *s = json_string_value(json_object_get(spec, "snapshot"));
                if (s && streq(s, digest))
                        json_array_append_new(a, json_pack("{s:s}", "sandbox", recs[i].name));
                json_decref(spec);
        }
        sandbox_rec_array_free(recs, nrec);
        if ((r = store_snapshot_list(st, &snaps, &nsnap, err)) < 0) {
                json_decref(a);
                return r;
        }
        for (size_t i = 0; i < nsnap && a; i++) {
                json_t *m = NULL;
                nook_error ignore;
                if (sb_snapshot_load(n, snaps[i].digest, NULL, &m, &ignore) < 0)
                        continue;
                const char *parent = meta_str(m, "content", "parent");
                if (parent && streq(parent, digest))
                        json_array_append_new(a, json_pack("{s:s}", "snapshot", snaps[i].name));
                json_decref(m);
        }
        snapshot_rec_array_free(snaps, nsnap);
        if (!a)
                return nook_err_oom(err);
        *ret = a;
        return 0;
}

static json_t *snap_to_json(nook *n, const char *name, json_t *meta, bool with_users) {
        json_t *content = json_object_get(meta, "content");
        const char *digest = meta_str(meta, "digest", NULL);
        bool ws = json_is_string(json_object_get(content, "workspace"));
        _cleanup_free_ char *dir = digest && image_digest_valid(digest) ? snap_dir(n, digest) : NULL;
        json_t *users = NULL;
        nook_error ignore;
        if (with_users && digest)
                (void)used_by(n, digest, &users, &ignore);
        /* usedBy: only where it was looked up (list and inspect), never a null that reads as "none" */
        return json_pack("{s:s, s:s?, s:O?, s:O?, s:O?, s:b, s:s, s:O?, s:O?, s:O?, s:O?, s:s?, s:o*, s:s}",
                "name", name, "digest", digest, "base", json_object_get(content, "base"), "baseDigest",
                json_object_get(meta, "baseDigest"), "parent", json_object_get(content, "parent"),
                "withWorkspace", ws, "holds", ws ? "root filesystem and workspace" : "root filesystem",
                "sourceSandbox", json_object_get(meta, "sourceSandbox"), "createdAt",
                json_object_get(meta, "createdAt"), "rootfsSize", json_object_get(meta, "rootfsSize"),
                "workspaceSize", json_object_get(meta, "workspaceSize"), "path", dir, "usedBy", users,
                "note", "disk state only: never memory, processes, sockets or devices");
}

/* ---- create ---------------------------------------------------------------------------------------- */

/* base: the host uid of the files' root (the sandbox's range for its layer, the workspace's
 * owner for the workspace); the tar holds ids relative to it, as image layers do. */
static int pack_to(const char *src, bool overlay, uid_t uid_base, gid_t gid_base, const char *tar,
        char ret_digest[IMAGE_DIGEST_LEN + 1], uint64_t *ret_size, nook_error *err) {
        _cleanup_close_ int dfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", src);
        _cleanup_close_ int out = open(tar, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", tar);
        pack_opts o = { .overlay = overlay, .uid_base = uid_base, .gid_base = gid_base };
        return IMG(image_pack_dir)(dfd, &o, out, ret_digest, ret_size, err);
}

/* The stored spec of a stopped sticky sandbox; anything else is refused saying what to do. */
static int source_spec(nook *n, const char *sandbox, sb_spec *ret, nook_error *err) {
        sandbox_rec rec = {};
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        if ((r = store_sandbox_get(st, sandbox, &rec, err)) < 0)
                return r == -NOOK_E_NOT_FOUND
                        ? nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", sandbox)
                        : r;
        r = sb_reconcile(n, &rec, err);
        if (r >= 0 && !streq(rec.state, "stopped"))
                r = nook_err_set(err, NOOK_E_STATE,
                        "Sandbox '%s' is %s; stop it first ('nook stop %s'): a snapshot holds disk state only, never memory or processes",
                        sandbox,
                        streq(rec.state, "running") && sb_is_paused(n, sandbox) ? "paused" : rec.state,
                        sandbox);
        else if (r >= 0 && !rec.sticky)
                r = nook_err_set(err, NOOK_E_STATE,
                        "Sandbox '%s' is ephemeral: its writable layer was discarded when it stopped; create it with --sticky to take snapshots",
                        sandbox);
        if (r >= 0)
                r = sb_spec_parse(rec.spec_json, ret, err);
        sandbox_rec_done(&rec);
        return r;
}

/* The content object and the descriptive fields of a new snapshot. */
static json_t *new_meta(nook *n, const char *sandbox, const sb_spec *spec, const char *rootfs,
        uint64_t rootfs_size, const char *ws, uint64_t ws_size) {
        json_t *content = json_pack("{s:s, s:s, s:s?, s:s, s:s?}", "format", SNAPSHOT_FORMAT, "base",
                spec->image, "parent", spec->snapshot, "rootfs", rootfs, "workspace", ws);
        json_t *meta = json_pack("{s:o, s:s, s:I, s:I}", "content", content, "sourceSandbox", sandbox,
                "createdAt", (json_int_t)now_epoch(), "rootfsSize", (json_int_t)rootfs_size);
        if (meta && ws)
                json_object_set_new(meta, "workspaceSize", json_integer((json_int_t)ws_size));
        /* a registry base is pinned in the description: which image the layer was made on */
        if (meta && !streq(spec->image, "host") && spec->image[0] != '/') {
                _cleanup_(image_store_done) image_store s = {};
                _cleanup_(image_rec_done) image_rec rec = {};
                nook_error ignore;
                if (sb_image_store(n, &s, &ignore) >= 0 &&
                        IMG(image_lookup)(&s, spec->image, &rec, &ignore) >= 0)
                        json_object_set_new(meta, "baseDigest", json_string(rec.digest));
        }
        return meta;
}

static int build(nook *n, const char *sandbox, bool with_ws, const sb_spec *spec, const char *tmp,
        json_t **ret_meta, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *wsdir = NULL, *upper = NULL,
                            *tar = strprintf("%s/rootfs.tar", tmp),
                            *wstar = strprintf("%s/workspace.tar", tmp),
                            *layer = strprintf("%s/rootfs", tmp);
        char rootfs[IMAGE_DIGEST_LEN + 1], ws[IMAGE_DIGEST_LEN + 1], check[IMAGE_DIGEST_LEN + 1];
        uint64_t rootfs_size = 0, ws_size = 0;
        int r;
        if (!tar || !wstar || !layer)
                return nook_err_oom(err);
        r = ctx_dirs(n, sandbox, &sdir, &wsdir, err);
        if (r < 0)
                return r;
        if (!(upper = strprintf("%s/upper", sdir)))
                return nook_err_oom(err);
        uid_t root = 0;
        gid_t root_gid = 0;
        if ((r = ctx_sandbox_root(n, sandbox, /* acquire= */ false, &root, &root_gid, err)) < 0)
                return r;
        if ((r = pack_to(upper, /* overlay= */ true, root, root_gid, tar, rootfs, &rootfs_size, err)) < 0)
                return nook_err_wrap(err, "packing the writable layer");
        if (with_ws) {
                r = pack_to(wsdir, /* overlay= */ false, n->ws_uid, n->ws_gid, wstar, ws, &ws_size, err);
                if (r < 0)
                        return nook_err_wrap(err, "packing the workspace");
        }
        /* the layer a sandbox boots from goes through the image unpacker, like any layer */
        _cleanup_close_ int fd = open(tar, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", tar);
        if ((r = sb_snapshot_unpack(n, fd, layer, check, err)) < 0)
                return r;
        if (!streq(check, rootfs))
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "The snapshot layer changed while it was unpacked");
        json_t *meta = new_meta(n, sandbox, spec, rootfs, rootfs_size, with_ws ? ws : NULL, ws_size);
        if (!meta)
                return nook_err_oom(err);
        *ret_meta = meta;
        return 0;
}

/* 1 when a snapshot with exactly meta's content is stored already (*ret_json: that snapshot, with
 * "alreadyPresent": true), 0 when none is. */
static int find_content(nook *n, json_t *meta, char **ret_json, nook_error *err) {
        _cleanup_free_ char *digest = NULL;
        snapshot_rec other = {};
        store *st;
        int r;
        r = sb_snapshot_digest(json_object_get(meta, "content"), &digest, err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        nook_error ignore;
        if (store_snapshot_get(st, digest, &other, &ignore) < 0)
                return 0;
        json_t *m = NULL;
        r = sb_snapshot_load(n, other.name, NULL, &m, err);
        json_t *o = r >= 0 ? snap_to_json(n, other.name, m, /* with_users= */ false) : NULL;
        snapshot_rec_done(&other);
        json_decref(m);
        if (r < 0)
                return r;
        if (o)
                (void)json_object_set_new(o, "alreadyPresent", json_true());
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!t)
                return nook_err_oom(err);
        if (ret_json)
                *ret_json = t;
        else
                free(t);
        return 1;
}

/* The snapshots' lock: flock(2) on <home>/snapshots itself, so no lock file; *ret_fd is that
 * directory, open.  Commit and remove hold it: between the look for a digest or a name and the
 * record, a commit removes an unrecorded directory of its digest (what a crash left) and renames
 * its own there; two commits of one content at once (two imports of a file, snapshots of two
 * sandboxes with the same layer) each took the other's for a crash's, and one record was left
 * without its files. */
static int snapshots_lock(nook *n, int *ret_fd, nook_error *err) {
        _cleanup_free_ char *root = NULL;
        int r = sb_snapshot_root(n, &root, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", root);
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot lock '%s'", root);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int sb_snapshot_commit(nook *n, const char *tmp, json_t *meta, const char *name, bool present_ok,
        char **ret_json, nook_error *err) {
        _cleanup_free_ char *digest = NULL, *final = NULL, *mp = strprintf("%s/snapshot.json", tmp);
        _cleanup_close_ int rootfd = -1;
        store *st;
        int r;
        if (!mp)
                return nook_err_oom(err);
        r = sb_snapshot_digest(json_object_get(meta, "content"), &digest, err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        if (!(final = snap_dir(n, digest)))
                return nook_err_oom(err);
        r = snapshots_lock(n, &rootfd, err);
        if (r < 0)
                return r;
        if (present_ok && (r = find_content(n, meta, ret_json, err)) != 0)
                return r;
        json_object_set_new(meta, "digest", json_string(digest));
        json_object_set_new(meta, "name", json_string(name));
        if (json_dump_file(meta, mp, JSON_COMPACT | JSON_SORT_KEYS) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", mp);
        snapshot_rec rec = { .name = (char *)name,
                .digest = digest,
                .source_sandbox = (char *)json_string_value(json_object_get(meta, "sourceSandbox")),
                .size = (uint64_t)(json_integer_value(json_object_get(meta, "rootfsSize")) +
                        json_integer_value(json_object_get(meta, "workspaceSize"))),
                .created_at = json_integer_value(json_object_get(meta, "createdAt")) };
        snapshot_rec other = {};
        if (store_snapshot_get(st, digest, &other, err) >= 0) {
                r = nook_err_set(err, NOOK_E_EXISTS,
                        "Snapshot '%s' holds exactly this content already (%s); it is stored once, under one name: use '%s'",
                        other.name, digest, other.name);
                snapshot_rec_done(&other);
                return r;
        }
        if (store_snapshot_get(st, name, &other, err) >= 0) {
                snapshot_rec_done(&other);
                return nook_err_set(err, NOOK_E_EXISTS, "A snapshot named '%s' exists already", name);
        }
        /* an unrecorded directory of this digest is what a crash left between rename and insert */
        nook_error ignore;
        (void)path_rm_rf_at(rootfd, image_digest_hex(digest), &ignore);
        if (rename(tmp, final) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot move the snapshot into '%s'", final);
        test_pause_at("NOOK_TEST_SNAPSHOT_PAUSE_AT", "renamed");
        if ((r = store_snapshot_insert(st, &rec, err)) < 0) {
                (void)path_rm_rf_at(rootfd, image_digest_hex(digest), &ignore);
                return r;
        }
        if (ret_json) {
                json_t *o = snap_to_json(n, name, meta, /* with_users= */ false);
                *ret_json = o ? json_dumps(o, JSON_COMPACT) : NULL;
                json_decref(o);
                if (!*ret_json)
                        return nook_err_oom(err);
        }
        return 0;
}

#define SNAPSHOT_DEFAULT_NAME_TRIES 100

/* No name given: "<sandbox>-<epoch seconds>", then "-2", "-3"... for more in the same second.
 * Chosen under the sandbox's lock, so two snapshots of one sandbox in the same second never pick
 * the same name. */
static int snapshot_default_name(nook *n, const char *sandbox, char **ret, nook_error *err) {
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        long long now = (long long)now_epoch();
        for (int i = 1; i <= SNAPSHOT_DEFAULT_NAME_TRIES; i++) {
                _cleanup_free_ char *name = i == 1 ? strprintf("%s-%lld", sandbox, now)
                                                   : strprintf("%s-%lld-%d", sandbox, now, i);
                if (!name)
                        return nook_err_oom(err);
                r = name_validate("snapshot", name, err);
                if (r < 0)
                        return r; /* a sandbox name near the length limit: the caller names it */
                snapshot_rec other = {};
                nook_error ignore;
                if (store_snapshot_get(st, name, &other, &ignore) < 0) {
                        *ret = TAKE_PTR(name);
                        return 0;
                }
                snapshot_rec_done(&other);
        }
        return nook_err_set(err, NOOK_E_EXISTS,
                "The default snapshot names '%s-%lld' to '%s-%lld-%d' are all taken: give the snapshot a name",
                sandbox, now, sandbox, now, SNAPSHOT_DEFAULT_NAME_TRIES);
}

/* Under the sandbox's lock (held in *lock until the caller has removed *tmp): the name (NULL:
 * snapshot_default_name's), the source's spec, a private folder, the packed layers, then the
 * record.  Content is stored once, under one name.  Without a name asked for, content that a
 * snapshot holds already is that snapshot (*ret_json has "alreadyPresent": true), as an import of
 * it is: a caller that snapshots whenever it likes, changed or not, gets an answer, never
 * "exists".  A name asked for stays an error when it is taken or when another name holds the
 * content: the caller cannot have that name. */
static int snapshot_make(nook *n, const char *sandbox, const char *name, unsigned flags, int *lock,
        char **tmp, int *tmp_lock, char **ret_json, nook_error *err) {
        _cleanup_(sb_spec_done) sb_spec spec = {};
        _cleanup_json_ json_t *meta = NULL;
        _cleanup_free_ char *defname = NULL;
        int r = sb_lock(n, sandbox, lock, err);
        if (r < 0)
                return r;
        if (!name) {
                r = snapshot_default_name(n, sandbox, &defname, err);
                if (r < 0)
                        return r;
                name = defname;
        }
        r = source_spec(n, sandbox, &spec, err);
        if (r < 0)
                return r;
        r = sb_snapshot_tmpdir(n, "create", tmp, tmp_lock, err);
        if (r < 0)
                return r;
        r = build(n, sandbox, flags & NOOK_SNAPSHOT_WITH_WORKSPACE, &spec, *tmp, &meta, err);
        if (r < 0)
                return r;
        r = sb_snapshot_commit(n, *tmp, meta, name, /* present_ok= */ defname != NULL, ret_json, err);
        return r < 0 ? r : 0;
}

int nook_snapshot_create(
        nook *n, const char *sandbox, const char *name, unsigned flags, char **ret_json, nook_error *err) {
        _cleanup_close_ int lock = -1, tmp_lock = -1;
        _cleanup_free_ char *tmp = NULL;
        int r = name_validate("sandbox", sandbox, err);
        if (r < 0)
                return r;
        if (name) {
                /* a name taken is refused before any work; the commit checks again */
                snapshot_rec other = {};
                store *st;
                r = name_validate("snapshot", name, err);
                if (r >= 0)
                        r = ctx_store(n, &st, err);
                if (r < 0)
                        return r;
                if (store_snapshot_get(st, name, &other, err) >= 0) {
                        snapshot_rec_done(&other);
                        return nook_err_set(
                                err, NOOK_E_EXISTS, "A snapshot named '%s' exists already", name);
                }
        }
        /* the sandbox's lock: it cannot start (and write its layer) while we read it */
        r = snapshot_make(n, sandbox, name, flags, &lock, &tmp, &tmp_lock, ret_json, err);
        sb_snapshot_tmpdir_remove(n, tmp);
        if (r < 0)
                return nook_err_wrap(err, "snapshot of sandbox '%s'", sandbox);
        return 0;
}

/* ---- list, inspect, remove -------------------------------------------------------------------------- */

int nook_snapshot_list(nook *n, char **ret_json, nook_error *err) {
        snapshot_rec *recs = NULL;
        size_t nrec = 0;
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_snapshot_list(st, &recs, &nrec, err);
        if (r < 0)
                return r;
        json_t *a = json_array();
        for (size_t i = 0; i < nrec && a; i++) {
                json_t *m = NULL;
                nook_error ignore;
                if (sb_snapshot_load(n, recs[i].digest, NULL, &m, &ignore) < 0)
                        m = json_pack("{s:s, s:{}}", "digest", recs[i].digest, "content");
                json_array_append_new(a, snap_to_json(n, recs[i].name, m, /* with_users= */ true));
                json_decref(m);
        }
        snapshot_rec_array_free(recs, nrec);
        char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
        json_decref(a);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}

int nook_snapshot_inspect(nook *n, const char *snap, char **ret_json, nook_error *err) {
        _cleanup_free_ char *name = NULL;
        _cleanup_json_ json_t *m = NULL;
        int r = sb_snapshot_load(n, snap, &name, &m, err);
        if (r < 0)
                return r;
        json_t *o = snap_to_json(n, name, m, /* with_users= */ true);
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}

int nook_snapshot_remove(nook *n, const char *snap, nook_error *err) {
        snapshot_rec rec = {};
        _cleanup_json_ json_t *users = NULL;
        _cleanup_close_ int rootfd = -1;
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        /* a commit of this content waits until the record and the files are gone */
        r = snapshots_lock(n, &rootfd, err);
        if (r < 0)
                return r;
        r = store_snapshot_get(st, snap, &rec, err);
        if (r < 0)
                return r;
        if ((r = used_by(n, rec.digest, &users, err)) >= 0 && json_array_size(users) > 0) {
                json_t *u = json_array_get(users, 0);
                const char *sb = json_string_value(json_object_get(u, "sandbox"));
                r = sb ? nook_err_set(err, NOOK_E_BUSY,
                                 "Snapshot '%s' is in use by sandbox '%s'; remove that sandbox first ('nook rm %s')",
                                 rec.name, sb, sb)
                       : nook_err_set(err, NOOK_E_BUSY,
                                 "Snapshot '%s' is the parent of snapshot '%s'; remove that one first",
                                 rec.name, json_string_value(json_object_get(u, "snapshot")));
        }
        /* the record goes first: a crash then leaves an unrecorded directory, never a record
         * without its files */
        if (r >= 0)
                r = store_snapshot_delete(st, rec.name, err);
        if (r >= 0 && image_digest_valid(rec.digest))
                r = path_rm_rf_at(rootfd, image_digest_hex(rec.digest), err);
        snapshot_rec_done(&rec);
        return r < 0 ? r : 0;
}

/* ---- booting from a snapshot ---------------------------------------------------------------------- */

/* The chain from digest down to the first snapshot, and its base image. */
static int chain(nook *n, const char *digest, json_t **ret_metas, nook_error *err) {
        json_t *metas = json_array();
        const char *d = digest;
        int r = metas ? 0 : nook_err_oom(err);
        for (unsigned i = 0; r >= 0 && d; i++) {
                json_t *m = NULL;
                if (i >= MAX_CHAIN) {
                        r = nook_err_set(err, NOOK_E_INVALID, "Snapshot '%s' has more than %d parents",
                                digest, MAX_CHAIN);
                        break;
                }
                if ((r = sb_snapshot_load(n, d, NULL, &m, err)) < 0)
                        break;
                json_array_append_new(metas, m);
                d = meta_str(m, "content", "parent");
        }
        if (r < 0) {
                json_decref(metas);
                return r;
        }
        *ret_metas = metas;
        return 0;
}

int sb_snapshot_fill_spec(nook *n, sb_spec *spec, nook_error *err) {
        _cleanup_json_ json_t *metas = NULL;
        if (!spec->snapshot)
                return 0;
        int r = chain(n, spec->snapshot, &metas, err);
        if (r < 0)
                return r;
        const char *digest = meta_str(json_array_get(metas, 0), "digest", NULL);
        const char *base = meta_str(json_array_get(metas, json_array_size(metas) - 1), "content", "base");
        if (!digest || !base)
                return nook_err_set(
                        err, NOOK_E_IO, "Snapshot '%s' is damaged: no digest or base image", spec->snapshot);
        if (!streq(spec->image, "host") && !streq(spec->image, base))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: snapshot '%s' was taken on image '%s'; leave out 'image' or give that one",
                        spec->snapshot, base);
        char *d = strdup(digest), *b = strdup(base);
        if (!d || !b) {
                free(d);
                free(b);
                return nook_err_oom(err);
        }
        free(spec->snapshot);
        spec->snapshot = d;
        free(spec->image);
        spec->image = b;
        return 0;
}

static int dir_is_empty(const char *dir) {
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 1 : -errno;
        struct dirent *de;
        int empty = 1;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                        empty = 0;
                        break;
                }
        closedir(d);
        return empty;
}

static int restore_workspace(nook *n, const char *digest, const char *wsdir, nook_error *err) {
        _cleanup_free_ char *dir = snap_dir(n, digest), *tar = NULL;
        if (!dir || !(tar = strprintf("%s/workspace.tar", dir)))
                return nook_err_oom(err);
        if (dir_is_empty(wsdir) != 1)
                return 0; /* the workspace is the user's: never overwritten */
        _cleanup_close_ int fd = open(tar, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", tar);
        char diff[IMAGE_DIGEST_LEN + 1];
        /* Unpacked in a folder of the trash (swept when its owner is gone) and renamed over the
         * empty workspace once whole: a create killed part way leaves the workspace empty, and
         * the next create or start of the name never boots a half-restored one. */
        struct stat ws_st;
        if (stat(wsdir, &ws_st) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot inspect '%s'", wsdir);
        _cleanup_free_ char *trash = NULL, *t = NULL, *stage = NULL;
        _cleanup_close_ int lock = -1;
        int r = sb_trash_dir(n, &trash, err);
        if (r < 0)
                return r;
        (void)tmp_sweep(trash, path_rm_rf_at); /* a killed restore's, a killed rm's */
        if ((r = sb_trash_new(n, "restore", &t, &lock, err)) < 0)
                return r;
        if (!(stage = strprintf("%s/ws", t)))
                return nook_err_oom(err);
        _cleanup_close_ int dfd = -1;
        if (mkdir(stage, 0700) < 0 ||
                (dfd = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                r = nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", stage);
        /* the workspace's files belong to its owner (n->ws_uid), as the guest's writes there do */
        unpack_opts u = { .rootless = !iso_rootful(), .id_base = n->ws_uid };
        if (r >= 0 && (r = IMG(image_unpack_fd)(fd, dfd, &u, diff, err)) < 0)
                (void)nook_err_wrap(err, "restoring the workspace of the snapshot");
        if (r >= 0 &&
                (fchown(dfd, ws_st.st_uid, ws_st.st_gid) < 0 || fchmod(dfd, ws_st.st_mode & 07777) < 0))
                r = nook_err_errno(err, NOOK_E_IO, "Cannot give '%s' the workspace's owner", stage);
        test_kill_at("NOOK_TEST_CREATE_KILL_AT", "restored");
        if (r >= 0 && rename(stage, wsdir) < 0)
                r = nook_err_errno(err, NOOK_E_IO, "Cannot move the restored workspace to '%s'", wsdir);
        nook_error ignore;
        (void)path_rm_rf(t, &ignore);
        return r;
}

int sb_snapshot_image(nook *n, const sb_spec *spec, const char *wsdir, sb_image *ret, nook_error *err) {
        _cleanup_json_ json_t *metas = NULL;
        _cleanup_strv_free_ char **lowers = calloc(1, sizeof(char *));
        sb_image img = {};
        size_t i;
        json_t *m;
        if (!lowers)
                return nook_err_oom(err);
        int r = chain(n, spec->snapshot, &metas, err);
        if (r < 0)
                return nook_err_wrap(err, "snapshot '%s'", spec->snapshot);
        json_array_foreach(metas, i, m) {
                const char *d = meta_str(m, "digest", NULL);
                _cleanup_free_ char *dir = d && image_digest_valid(d) ? snap_dir(n, d) : NULL;
                _cleanup_free_ char *layer = dir ? strprintf("%s/rootfs", dir) : NULL;
                if (!layer || strv_push(&lowers, layer) < 0)
                        return nook_err_oom(err);
        }
        const char *ws = meta_str(json_array_get(metas, 0), "content", "workspace");
        if (ws && (r = restore_workspace(n, spec->snapshot, wsdir, err)) < 0)
                return r;
        if ((r = sb_image_resolve(n, spec->image, spec->pull_policy, &img, err)) < 0)
                return r;
        STRV_FOREACH (l, img.lowers)
                if (strv_push(&lowers, *l) < 0) {
                        sb_image_done(&img);
                        return nook_err_oom(err);
                }
        strv_free(img.lowers);
        img.lowers = TAKE_PTR(lowers);
        *ret = img;
        return 0;
}
