/* SPDX-License-Identifier: Apache-2.0 */
/* SQL-level helpers of store.c for the record files of src/store (image_rec.c, snapshot_rec.c),
 * so that every record runs on the store's one connection with one transaction model: the
 * busy timeout, foreign keys and begin retries of store_open, transactions that nest as
 * SAVEPOINTs (a record function can run inside a caller's transaction), and one rendering of a
 * failed SQLite call.  Nothing outside src/store includes this header. */
#pragma once

#include <sqlite3.h>

#include "nook.h"
#include "store/store.h"
#include "util/macro.h"

static inline void store_stmt_finalizep(sqlite3_stmt **s) {
        if (*s)
                (void)sqlite3_finalize(*s);
}
#define _cleanup_stmt_ _cleanup_(store_stmt_finalizep)

static inline void store_rollbackp(store **st) {
        if (*st)
                store_rollback(*st);
}
/* Rolls back on scope exit unless the variable was emptied with TAKE_PTR() for the commit:
 *         r = store_begin(st, err); ...; _cleanup_tx_ store *tx = st; ...
 *         return store_commit(TAKE_PTR(tx), err);
 * A read-only transaction just goes out of scope: rolling it back ends it. */
/* unused: a read-only one is never named again (clang warns, gcc does not) */
#define _cleanup_tx_ _cleanup_(store_rollbackp) __attribute__((unused))

/* BEGIN DEFERRED (a SAVEPOINT when nested): one consistent snapshot for several reads. */
int store_begin_read(store *st, nook_error *err);
int store_prepare(store *st, const char *sql, sqlite3_stmt **ret, nook_error *err);
/* Renders a failed SQLite call as "<what> in '<db path>': <sqlite message><hint>", with the
 * nook_errc SQLite's code maps to.  Call it right after the failing call: the message belongs
 * to the connection. */
int store_fail(store *st, int rc, nook_error *err, const char *fmt, ...) _printf_(4, 5);
/* Rows changed by the last INSERT, UPDATE or DELETE on the connection. */
int store_changes(store *st);
/* A text column as a malloc'd copy; NULL for SQL NULL or when out of memory (the caller tells
 * them apart with sqlite3_column_type when it matters). */
char *store_column_dup(sqlite3_stmt *s, int col);
