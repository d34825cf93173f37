/* SPDX-License-Identifier: Apache-2.0 */
/* See snapshot_rec.h.  Every value is a bound parameter; every call is one transaction on the
 * store's connection (store_sql.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "store/snapshot_rec.h"
#include "store/store.h"
#include "store/store_sql.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

#define SNAP_COLUMNS "name, digest, source_sandbox, size, created_at"

void snapshot_rec_done(snapshot_rec *r) {
        if (!r)
                return;
        free(r->name);
        free(r->digest);
        free(r->source_sandbox);
        *r = (snapshot_rec){};
}

void snapshot_rec_array_free(snapshot_rec *a, size_t n) {
        for (size_t i = 0; a && i < n; i++)
                snapshot_rec_done(&a[i]);
        free(a);
}

static int from_row(sqlite3_stmt *s, snapshot_rec *ret, nook_error *err) {
        snapshot_rec r = { .name = store_column_dup(s, 0),
                .digest = store_column_dup(s, 1),
                .source_sandbox = store_column_dup(s, 2),
                .size = (uint64_t)sqlite3_column_int64(s, 3),
                .created_at = sqlite3_column_int64(s, 4) };
        if (!r.name || !r.digest || (sqlite3_column_type(s, 2) != SQLITE_NULL && !r.source_sandbox)) {
                snapshot_rec_done(&r);
                return nook_err_oom(err);
        }
        *ret = r;
        return 0;
}

/* The name holding name_or_digest, as its name or its digest; 0 and NULL when none. */
static int find(store *st, const char *name_or_digest, snapshot_rec *ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(
                st, "SELECT " SNAP_COLUMNS " FROM snapshots WHERE name = ?1 OR digest = ?1", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, name_or_digest, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
                return 0;
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot read snapshot records");
        r = from_row(s, ret, err);
        return r < 0 ? r : 1;
}

int store_snapshot_insert(store *st, const snapshot_rec *rec, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        snapshot_rec other = {};
        int r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        if ((r = find(st, rec->name, &other, err)) == 0)
                r = find(st, rec->digest, &other, err);
        if (r > 0) {
                r = other.name && streq(other.name, rec->name)
                        ? nook_err_set(err, NOOK_E_EXISTS, "A snapshot named '%s' exists already", rec->name)
                        : nook_err_set(err, NOOK_E_EXISTS,
                                  "Snapshot '%s' holds exactly this content already (%s); it is stored once",
                                  other.name, rec->digest);
                snapshot_rec_done(&other);
                return r;
        }
        if (r < 0)
                return r;
        if ((r = store_prepare(st, "INSERT INTO snapshots (" SNAP_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5)",
                     &s, err)) < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, rec->name, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 2, rec->digest, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 3, rec->source_sandbox, -1, SQLITE_STATIC);
        (void)sqlite3_bind_int64(s, 4, (sqlite3_int64)rec->size);
        (void)sqlite3_bind_int64(s, 5, rec->created_at);
        int rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot record the snapshot");
        return store_commit(TAKE_PTR(tx), err);
}

int store_snapshot_get(store *st, const char *name_or_digest, snapshot_rec *ret, nook_error *err) {
        int r = store_begin_read(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        r = find(st, name_or_digest, ret, err);
        if (r == 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No snapshot '%s'", name_or_digest);
        return r < 0 ? r : 0;
}

int store_snapshot_list(store *st, snapshot_rec **ret, size_t *ret_n, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        snapshot_rec *a = NULL;
        size_t n = 0;
        int r = store_begin_read(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        if ((r = store_prepare(st, "SELECT " SNAP_COLUMNS " FROM snapshots ORDER BY created_at DESC, name",
                     &s, err)) < 0)
                return r;
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                snapshot_rec *b = realloc(a, (n + 1) * sizeof(*a));
                if (!b) {
                        snapshot_rec_array_free(a, n);
                        return nook_err_oom(err);
                }
                a = b;
                if ((r = from_row(s, &a[n], err)) < 0) {
                        snapshot_rec_array_free(a, n);
                        return r;
                }
                n++;
        }
        if (rc != SQLITE_DONE) {
                snapshot_rec_array_free(a, n);
                return store_fail(st, rc, err, "Cannot read snapshot records");
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

int store_snapshot_delete(store *st, const char *name, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        if ((r = store_prepare(st, "DELETE FROM snapshots WHERE name = ?1", &s, err)) < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot delete the snapshot record");
        return store_commit(TAKE_PTR(tx), err);
}
