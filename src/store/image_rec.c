/* SPDX-License-Identifier: Apache-2.0 */
/* See image_rec.h.  Every value is a bound parameter; every call is one transaction on the
 * store's connection (store_sql.h), nested as a SAVEPOINT when the caller has one open. */
#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "store/image_rec.h"
#include "store/store.h"
#include "store/store_sql.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

/* Runs a statement with text parameters (NULL binds NULL) to completion. */
static int run(store *st, const char *sql, nook_error *err, int n, ...) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        va_list ap;
        int r = store_prepare(st, sql, &s, err);
        if (r < 0)
                return r;
        va_start(ap, n);
        for (int i = 0; i < n; i++)
                (void)sqlite3_bind_text(s, i + 1, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
        va_end(ap);
        int rc = sqlite3_step(s);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot update image records");
        return store_changes(st);
}

void image_rec_done(image_rec *r) {
        if (!r)
                return;
        free(r->digest);
        free(r->config_digest);
        free(r->config_json);
        free(r->platform);
        strv_free(r->refs);
        for (size_t i = 0; i < r->n_layers; i++) {
                free(r->layers[i].digest);
                free(r->layers[i].diff_id);
                free(r->layers[i].media_type);
        }
        free(r->layers);
        *r = (image_rec){};
}

void image_rec_array_free(image_rec *a, size_t n) {
        for (size_t i = 0; a && i < n; i++)
                image_rec_done(&a[i]);
        free(a);
}

/* The layer digest recorded for diff_id, or NULL. */
static int layer_for_diff_id(store *st, const char *diff_id, char **ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st, "SELECT digest FROM layers WHERE diff_id = ?1", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, diff_id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *ret = store_column_dup(s, 0);
                return *ret ? 1 : nook_err_oom(err);
        }
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot read layer records");
        *ret = NULL;
        return 0;
}

static int put_layers(store *st, const image_rec *rec, nook_error *err) {
        int r = run(st, "DELETE FROM image_layers WHERE image = ?1", err, 1, rec->digest);
        if (r < 0)
                return r;
        for (size_t i = 0; i < rec->n_layers; i++) {
                const image_layer_rec *l = &rec->layers[i];
                _cleanup_free_ char *existing = NULL;
                char size[32], pos[32], now[32];
                r = layer_for_diff_id(st, l->diff_id, &existing, err);
                if (r < 0)
                        return r;
                (void)snprintf(size, sizeof(size), "%llu", (unsigned long long)l->size);
                (void)snprintf(pos, sizeof(pos), "%zu", i);
                (void)snprintf(now, sizeof(now), "%lld", (long long)now_epoch());
                if (!existing) {
                        r = run(st,
                                "INSERT INTO layers (digest, diff_id, media_type, size, unpacked, created_at) "
                                "VALUES (?1, ?2, ?3, CAST(?4 AS INTEGER), 1, CAST(?5 AS INTEGER))",
                                err, 5, l->digest, l->diff_id, l->media_type, size, now);
                        if (r < 0)
                                return r;
                }
                r = run(st,
                        "INSERT INTO image_layers (image, position, layer, blob) "
                        "VALUES (?1, CAST(?2 AS INTEGER), ?3, ?4)",
                        err, 4, rec->digest, pos, existing ? existing : l->digest, l->digest);
                if (r < 0)
                        return r;
        }
        return 0;
}

int store_image_put(store *st, const image_rec *rec, const char *ref, nook_error *err) {
        char size[32], now[32];
        int r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        (void)snprintf(size, sizeof(size), "%llu", (unsigned long long)rec->size);
        (void)snprintf(now, sizeof(now), "%lld", (long long)now_epoch());
        r = run(st,
                "INSERT INTO images (digest, config_digest, config_json, platform, size, pulled_at) "
                "VALUES (?1, ?2, ?3, ?4, CAST(?5 AS INTEGER), CAST(?6 AS INTEGER)) "
                "ON CONFLICT (digest) DO UPDATE SET pulled_at = excluded.pulled_at",
                err, 6, rec->digest, rec->config_digest, rec->config_json, rec->platform, size, now);
        if (r < 0)
                return r;
        if ((r = put_layers(st, rec, err)) < 0)
                return r;
        if (ref) {
                r = run(st,
                        "INSERT INTO image_refs (ref, image) VALUES (?1, ?2) "
                        "ON CONFLICT (ref) DO UPDATE SET image = excluded.image",
                        err, 2, ref, rec->digest);
                if (r < 0)
                        return r;
        }
        return store_commit(TAKE_PTR(tx), err);
}

/* The manifest digest for a name or digest, or NOOK_E_NOT_FOUND. */
static int lookup(store *st, const char *key, char **ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st,
                "SELECT image FROM image_refs WHERE ref = ?1 UNION ALL "
                "SELECT digest FROM images WHERE digest = ?1 LIMIT 1",
                &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
                return nook_err_set(
                        err, NOOK_E_NOT_FOUND, "No image '%s' in the local store: pull it first", key);
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot read image records");
        *ret = store_column_dup(s, 0);
        return *ret ? 0 : nook_err_oom(err);
}

static int read_refs(store *st, image_rec *rec, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st, "SELECT ref FROM image_refs WHERE image = ?1 ORDER BY ref", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, rec->digest, -1, SQLITE_STATIC);
        if (!(rec->refs = calloc(1, sizeof(char *))))
                return nook_err_oom(err);
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
                if (strv_push(&rec->refs, (const char *)sqlite3_column_text(s, 0)) < 0)
                        return nook_err_oom(err);
        return rc == SQLITE_DONE ? 0 : store_fail(st, rc, err, "Cannot read image names");
}

static int read_layers(store *st, image_rec *rec, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st,
                "SELECT l.digest, l.diff_id, l.media_type, l.size FROM image_layers il JOIN layers l ON "
                "l.digest = il.layer WHERE il.image = ?1 ORDER BY il.position",
                &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, rec->digest, -1, SQLITE_STATIC);
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                image_layer_rec *a = realloc(rec->layers, (rec->n_layers + 1) * sizeof(*a));
                if (!a)
                        return nook_err_oom(err);
                rec->layers = a;
                image_layer_rec *l = &a[rec->n_layers++];
                *l = (image_layer_rec){ .digest = store_column_dup(s, 0),
                        .diff_id = store_column_dup(s, 1),
                        .media_type = store_column_dup(s, 2),
                        .size = (uint64_t)sqlite3_column_int64(s, 3) };
                if (!l->digest || !l->diff_id)
                        return nook_err_oom(err);
        }
        return rc == SQLITE_DONE ? 0 : store_fail(st, rc, err, "Cannot read image layers");
}

static int read_image(store *st, const char *digest, image_rec *ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        _cleanup_(image_rec_done) image_rec rec = {};
        int r = store_prepare(st,
                "SELECT digest, config_digest, config_json, platform, size, pulled_at FROM images WHERE digest = ?1",
                &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, digest, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No image '%s' in the local store", digest);
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot read image records");
        rec.digest = store_column_dup(s, 0);
        rec.config_digest = store_column_dup(s, 1);
        rec.config_json = store_column_dup(s, 2);
        rec.platform = store_column_dup(s, 3);
        rec.size = (uint64_t)sqlite3_column_int64(s, 4);
        rec.pulled_at = sqlite3_column_int64(s, 5);
        if (!rec.digest || !rec.config_digest)
                return nook_err_oom(err);
        r = read_refs(st, &rec, err);
        if (r < 0)
                return r;
        r = read_layers(st, &rec, err);
        if (r < 0)
                return r;
        *ret = rec;
        rec = (image_rec){};
        return 0;
}

int store_image_get(store *st, const char *key, image_rec *ret, nook_error *err) {
        _cleanup_free_ char *digest = NULL;
        int r = store_begin_read(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        if ((r = lookup(st, key, &digest, err)) < 0)
                return r;
        return read_image(st, digest, ret, err);
}

int store_image_list(store *st, image_rec **ret, size_t *ret_n, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        _cleanup_strv_free_ char **digests = NULL;
        int r = store_begin_read(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        if ((r = store_prepare(st, "SELECT digest FROM images ORDER BY pulled_at DESC, digest", &s, err)) <
                0)
                return r;
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
                if (strv_push(&digests, (const char *)sqlite3_column_text(s, 0)) < 0)
                        return nook_err_oom(err);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot list images");
        size_t n = digests ? strv_length(digests) : 0;
        image_rec *a = calloc(n ? n : 1, sizeof(image_rec));
        if (!a)
                return nook_err_oom(err);
        for (size_t i = 0; i < n; i++)
                if ((r = read_image(st, digests[i], &a[i], err)) < 0) {
                        image_rec_array_free(a, n);
                        return r;
                }
        *ret = a;
        *ret_n = n;
        return 0;
}

/* The first sandbox whose image field names this image (a name of it, or its digest), or whose
 * image_digest pins it (the tag it was created from may have moved since). */
static int in_use_by(store *st, const char *digest, char **ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st,
                "SELECT name FROM sandboxes WHERE image_digest = ?1 OR image = ?1 OR image IN (SELECT ref FROM "
                "image_refs WHERE image = ?1) OR image LIKE '%@' || ?1 ORDER BY name LIMIT 1",
                &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, digest, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *ret = store_column_dup(s, 0);
                return *ret ? 1 : nook_err_oom(err);
        }
        return rc == SQLITE_DONE ? 0 : store_fail(st, rc, err, "Cannot read sandbox records");
}

int store_image_remove(store *st, const char *key, nook_error *err) {
        _cleanup_free_ char *digest = NULL, *user = NULL;
        int r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        if ((r = lookup(st, key, &digest, err)) < 0)
                return r;
        assert(digest); /* set by lookup() on success; the analyzer cannot see into store_fail() */
        bool whole = streq(key, digest);
        if (!whole) {
                if ((r = run(st, "DELETE FROM image_refs WHERE ref = ?1", err, 1, key)) < 0)
                        return r;
                _cleanup_(image_rec_done) image_rec rec = {};
                if ((r = read_image(st, digest, &rec, err)) < 0)
                        return r;
                whole = strv_length(rec.refs) == 0;
        }
        if (whole || !streq(key, digest)) {
                /* the name alone is also refused while a sandbox was created from it */
                if ((r = in_use_by(st, digest, &user, err)) < 0)
                        return r;
                if (!user && !whole) {
                        _cleanup_stmt_ sqlite3_stmt *s = NULL;
                        if ((r = store_prepare(st, "SELECT name FROM sandboxes WHERE image = ?1 LIMIT 1", &s,
                                     err)) < 0)
                                return r;
                        (void)sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
                        if (sqlite3_step(s) == SQLITE_ROW && !(user = store_column_dup(s, 0)))
                                return nook_err_oom(err);
                }
                if (user)
                        return nook_err_set(err, NOOK_E_BUSY,
                                "Image '%s' is in use by sandbox '%s': remove the sandbox first", key, user);
        }
        if (whole && (r = run(st, "DELETE FROM images WHERE digest = ?1", err, 1, digest)) < 0)
                return r;
        if ((r = store_commit(TAKE_PTR(tx), err)) < 0)
                return r;
        return whole ? 1 : 0;
}

static int collect(store *st, const char *sql, char ***ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        if (!l)
                return nook_err_oom(err);
        int r = store_prepare(st, sql, &s, err);
        if (r < 0)
                return r;
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
                if (sqlite3_column_text(s, 0) && strv_push(&l, (const char *)sqlite3_column_text(s, 0)) < 0)
                        return nook_err_oom(err);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot read image records");
        *ret = TAKE_PTR(l);
        return 0;
}

int store_image_prune(store *st, char ***ret_keep, char ***ret_keep_diff_ids, nook_error *err) {
        _cleanup_strv_free_ char **keep = NULL, **keep_diff = NULL;
        int r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        if ((r = run(st,
                     "DELETE FROM images WHERE digest NOT IN (SELECT image FROM image_refs) AND digest NOT IN "
                     "(SELECT base_image FROM snapshots WHERE base_image IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM "
                     "sandboxes WHERE image_digest = images.digest OR image LIKE '%@' || images.digest)",
                     err, 0)) < 0)
                return r;
        if ((r = run(st,
                     "DELETE FROM layers WHERE digest NOT IN (SELECT layer FROM image_layers) AND digest NOT IN "
                     "(SELECT layer FROM snapshots WHERE layer IS NOT NULL)",
                     err, 0)) < 0)
                return r;
        r = collect(st,
                "SELECT digest FROM images UNION SELECT config_digest FROM images UNION SELECT digest FROM layers "
                "UNION SELECT blob FROM image_layers WHERE blob IS NOT NULL ORDER BY 1",
                &keep, err);
        if (r < 0)
                return r;
        r = collect(st, "SELECT diff_id FROM layers ORDER BY 1", &keep_diff, err);
        if (r < 0)
                return r;
        if ((r = store_commit(TAKE_PTR(tx), err)) < 0)
                return r;
        *ret_keep = TAKE_PTR(keep);
        *ret_keep_diff_ids = TAKE_PTR(keep_diff);
        return 0;
}
