/* SPDX-License-Identifier: Apache-2.0 */
#include <sqlite3.h>
#include <time.h>

#include "store/idrange.h"
#include "store/store_sql.h"
#include "util/error.h"

static int get_locked(store *st, const char *sandbox, uint32_t *ret_base, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st, "SELECT base FROM id_ranges WHERE sandbox = ?1", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, sandbox, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
                return 0;
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot read the id range of sandbox '%s'", sandbox);
        *ret_base = (uint32_t)sqlite3_column_int64(s, 0);
        return 1;
}

/* The lowest slot no row holds that usable accepts: the ranges come back in order, so each gap
 * is a candidate. */
static int find_free(store *st, const idrange_pool *pool, idrange_usable_fn usable, void *userdata,
        uint32_t *ret_base, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st, "SELECT base FROM id_ranges WHERE base >= ?1 ORDER BY base", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_int64(s, 1, pool->first);
        uint64_t want = pool->first;
        uint64_t end = (uint64_t)pool->first + (uint64_t)pool->size * pool->count;
        int rc = sqlite3_step(s);
        uint64_t row = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : UINT64_MAX;
        for (; want + pool->size <= end; want += pool->size) {
                while (rc == SQLITE_ROW && row < want) {
                        rc = sqlite3_step(s);
                        row = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(s, 0) : UINT64_MAX;
                }
                if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                        return store_fail(st, rc, err, "Cannot read the id range pool");
                if (row == want)
                        continue; /* this store's */
                if (!usable || usable((uint32_t)want, false, userdata))
                        break;
        }
        if (want + pool->size > end)
                return nook_err_set(err, NOOK_E_BUSY,
                        "Every host id range of the pool (%u ranges of %u ids from %u) is held by a sandbox; remove sandboxes you no longer need ('nook rm')",
                        pool->count, pool->size, pool->first);
        *ret_base = (uint32_t)want;
        return 0;
}

int store_idrange_acquire(store *st, const char *sandbox, const idrange_pool *pool, idrange_usable_fn usable,
        void *userdata, uint32_t *ret_base, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        uint32_t base = 0;
        int r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        r = get_locked(st, sandbox, &base, err);
        if (r < 0)
                return r;
        if (r > 0 && usable)
                (void)usable(base, true, userdata);
        if (r == 0) {
                if ((r = find_free(st, pool, usable, userdata, &base, err)) < 0)
                        return r;
                r = store_prepare(st,
                        "INSERT INTO id_ranges (base, size, sandbox, created_at) VALUES (?1, ?2, ?3, ?4)",
                        &s, err);
                if (r < 0)
                        return r;
                (void)sqlite3_bind_int64(s, 1, base);
                (void)sqlite3_bind_int64(s, 2, pool->size);
                (void)sqlite3_bind_text(s, 3, sandbox, -1, SQLITE_STATIC);
                (void)sqlite3_bind_int64(s, 4, (sqlite3_int64)time(NULL));
                int rc = sqlite3_step(s);
                if (rc != SQLITE_DONE)
                        return store_fail(
                                st, rc, err, "Cannot record the id range of sandbox '%s'", sandbox);
        }
        r = store_commit(TAKE_PTR(tx), err);
        if (r < 0)
                return r;
        *ret_base = base;
        return 0;
}

int store_idrange_get(store *st, const char *sandbox, uint32_t *ret_base, nook_error *err) {
        int r = store_begin_read(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        uint32_t base = 0;
        r = get_locked(st, sandbox, &base, err);
        if (r < 0)
                return r;
        if (r == 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "Sandbox '%s' holds no host id range", sandbox);
        *ret_base = base;
        return 0;
}

int store_idrange_count(store *st, int64_t *ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = store_prepare(st, "SELECT count(*) FROM id_ranges", &s, err);
        if (r < 0)
                return r;
        int rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot count the id ranges");
        *ret = sqlite3_column_int64(s, 0);
        return 0;
}
