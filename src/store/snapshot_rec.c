/* SPDX-License-Identifier: Apache-2.0 */
/* See snapshot_rec.h.  Every value is a bound parameter. */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "store/snapshot_rec.h"
#include "store/store.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

#define SNAP_BUSY_TIMEOUT_MS 30000
#define SNAP_COLUMNS "name, digest, source_sandbox, size, created_at"

typedef struct snap_db {
        sqlite3 *db;
        const char *path;
        bool in_tx;
} snap_db;

static void snap_db_close(snap_db *d) {
        if (d->in_tx)
                (void)sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
        (void)sqlite3_close_v2(d->db);
        d->db = NULL;
}

static void stmt_finalizep(sqlite3_stmt **s) {
        if (*s)
                (void)sqlite3_finalize(*s);
}

static int snap_fail(snap_db *d, int rc, nook_error *err, const char *what) {
        nook_errc code = (rc & 0xff) == SQLITE_BUSY ? NOOK_E_BUSY : NOOK_E_IO;
        return nook_err_set(err, code, "%s in '%s': %s", what, d->path,
                d->db ? sqlite3_errmsg(d->db) : sqlite3_errstr(rc));
}

static int snap_db_open(store *st, bool write, snap_db *ret, nook_error *err) {
        snap_db d = { .path = store_path(st) };
        int rc = sqlite3_open_v2(
                d.path, &d.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE, NULL);
        if (rc == SQLITE_OK) {
                (void)sqlite3_busy_timeout(d.db, SNAP_BUSY_TIMEOUT_MS);
                rc = sqlite3_exec(d.db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
        }
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(d.db, write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
                int r = snap_fail(&d, rc, err, "Cannot open the state database");
                snap_db_close(&d);
                return r;
        }
        d.in_tx = true;
        *ret = d;
        return 0;
}

static int snap_db_commit(snap_db *d, nook_error *err) {
        int rc = sqlite3_exec(d->db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return snap_fail(d, rc, err, "Cannot commit snapshot records");
        d->in_tx = false;
        return 0;
}

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

static char *col(sqlite3_stmt *s, int i) {
        const char *t = (const char *)sqlite3_column_text(s, i);
        return t ? strdup(t) : NULL;
}

static int from_row(sqlite3_stmt *s, snapshot_rec *ret, nook_error *err) {
        snapshot_rec r = { .name = col(s, 0),
                .digest = col(s, 1),
                .source_sandbox = col(s, 2),
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
static int find(snap_db *d, const char *name_or_digest, snapshot_rec *ret, nook_error *err) {
        _cleanup_(stmt_finalizep) sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(d->db,
                "SELECT " SNAP_COLUMNS " FROM snapshots WHERE name = ?1 OR digest = ?1", -1, &s, NULL);
        if (rc != SQLITE_OK)
                return snap_fail(d, rc, err, "Cannot prepare a query");
        (void)sqlite3_bind_text(s, 1, name_or_digest, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
                return 0;
        if (rc != SQLITE_ROW)
                return snap_fail(d, rc, err, "Cannot read snapshot records");
        int r = from_row(s, ret, err);
        return r < 0 ? r : 1;
}

int store_snapshot_insert(store *st, const snapshot_rec *rec, nook_error *err) {
        _cleanup_(snap_db_close) snap_db d = {};
        _cleanup_(stmt_finalizep) sqlite3_stmt *s = NULL;
        snapshot_rec other = {};
        int r = snap_db_open(st, /* write= */ true, &d, err);
        if (r < 0)
                return r;
        if ((r = find(&d, rec->name, &other, err)) == 0)
                r = find(&d, rec->digest, &other, err);
        if (r > 0) {
                r = streq(other.name, rec->name)
                        ? nook_err_set(err, NOOK_E_EXISTS, "A snapshot named '%s' exists already", rec->name)
                        : nook_err_set(err, NOOK_E_EXISTS,
                                  "Snapshot '%s' holds exactly this content already (%s); it is stored once",
                                  other.name, rec->digest);
                snapshot_rec_done(&other);
                return r;
        }
        if (r < 0)
                return r;
        int rc = sqlite3_prepare_v2(
                d.db, "INSERT INTO snapshots (" SNAP_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5)", -1, &s, NULL);
        if (rc != SQLITE_OK)
                return snap_fail(&d, rc, err, "Cannot prepare a query");
        (void)sqlite3_bind_text(s, 1, rec->name, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 2, rec->digest, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 3, rec->source_sandbox, -1, SQLITE_STATIC);
        (void)sqlite3_bind_int64(s, 4, (sqlite3_int64)rec->size);
        (void)sqlite3_bind_int64(s, 5, rec->created_at);
        rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return snap_fail(&d, rc, err, "Cannot record the snapshot");
        return snap_db_commit(&d, err);
}

int store_snapshot_get(store *st, const char *name_or_digest, snapshot_rec *ret, nook_error *err) {
        _cleanup_(snap_db_close) snap_db d = {};
        int r = snap_db_open(st, /* write= */ false, &d, err);
        if (r < 0)
                return r;
        r = find(&d, name_or_digest, ret, err);
        if (r == 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No snapshot '%s'", name_or_digest);
        return r < 0 ? r : 0;
}

int store_snapshot_list(store *st, snapshot_rec **ret, size_t *ret_n, nook_error *err) {
        _cleanup_(snap_db_close) snap_db d = {};
        _cleanup_(stmt_finalizep) sqlite3_stmt *s = NULL;
        snapshot_rec *a = NULL;
        size_t n = 0;
        int r = snap_db_open(st, /* write= */ false, &d, err);
        if (r < 0)
                return r;
        int rc = sqlite3_prepare_v2(
                d.db, "SELECT " SNAP_COLUMNS " FROM snapshots ORDER BY created_at DESC, name", -1, &s, NULL);
        if (rc != SQLITE_OK)
                return snap_fail(&d, rc, err, "Cannot prepare a query");
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
                return snap_fail(&d, rc, err, "Cannot read snapshot records");
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

int store_snapshot_delete(store *st, const char *name, nook_error *err) {
        _cleanup_(snap_db_close) snap_db d = {};
        _cleanup_(stmt_finalizep) sqlite3_stmt *s = NULL;
        int r = snap_db_open(st, /* write= */ true, &d, err);
        if (r < 0)
                return r;
        int rc = sqlite3_prepare_v2(d.db, "DELETE FROM snapshots WHERE name = ?1", -1, &s, NULL);
        if (rc != SQLITE_OK)
                return snap_fail(&d, rc, err, "Cannot prepare a query");
        (void)sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        if ((rc = sqlite3_step(s)) != SQLITE_DONE)
                return snap_fail(&d, rc, err, "Cannot delete the snapshot record");
        return snap_db_commit(&d, err);
}
