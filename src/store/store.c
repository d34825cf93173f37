/* SPDX-License-Identifier: Apache-2.0 */
/* The state database (see store.h).  Rules every function here keeps:
 *   - every value is a bound parameter; the only SQL built at run time is the shape of the
 *     label filter in store_sandbox_list, from constant pieces;
 *   - every multi-statement change runs in a transaction (store_begin nests as SAVEPOINTs);
 *   - writers take the lock up front (BEGIN IMMEDIATE): a deferred transaction that upgrades
 *     from read to write in WAL mode fails with SQLITE_BUSY_SNAPSHOT without waiting, while
 *     IMMEDIATE waits in the busy handler. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "store/store.h"
#include "store/store_sql.h"
#include "store_migrations.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

/* How long one statement waits for another process's lock inside SQLite's busy handler. */
#define STORE_BUSY_TIMEOUT_MS 10000
/* WAL frames after which the closing writer checkpoints (store_wal_hook). */
#define STORE_WAL_CHECKPOINT_FRAMES 128
/* How long store_begin keeps retrying when SQLite gives up anyway (see begin_immediate). */
#define STORE_BEGIN_DEADLINE_MS 30000

struct store {
        sqlite3 *db;
        char *path;
        unsigned tx_depth; /* 0: autocommit; 1: BEGIN; n > 1: SAVEPOINT nook_<n-1> */
        int wal_frames; /* frames in the WAL after this connection's last commit; 0: none */
};

static uint64_t now_ms(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static nook_errc errc_from_sqlite(int rc) {
        switch (rc) {
        case SQLITE_CONSTRAINT_PRIMARYKEY:
        case SQLITE_CONSTRAINT_UNIQUE:
                return NOOK_E_EXISTS;
        case SQLITE_CONSTRAINT_FOREIGNKEY:
                return NOOK_E_STATE;
        default:
                break;
        }
        switch (rc & 0xff) {
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return NOOK_E_BUSY;
        case SQLITE_NOMEM:
                return NOOK_E_NOMEM;
        case SQLITE_CONSTRAINT:
        case SQLITE_MISMATCH:
        case SQLITE_TOOBIG:
        case SQLITE_RANGE:
                return NOOK_E_INVALID;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
        case SQLITE_IOERR:
        case SQLITE_FULL:
        case SQLITE_CANTOPEN:
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_PROTOCOL:
                return NOOK_E_IO;
        default:
                return NOOK_E_INTERNAL;
        }
}

static const char *hint_from_sqlite(int rc) {
        switch (rc & 0xff) {
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return "; the file is damaged or is not a nook database: move it away to start with an "
                       "empty state";
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return "; another nook process is holding the database, try again";
        case SQLITE_FULL:
                return "; the disk is full";
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_CANTOPEN:
                return "; check that the file and its folder are writable by this user";
        default:
                return "";
        }
}

int store_fail(store *st, int rc, nook_error *err, const char *fmt, ...) {
        char what[256];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        const char *msg = st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
        int sys = st->db ? sqlite3_system_errno(st->db) : 0;
        nook_errc code = errc_from_sqlite(rc);
        if (sys > 0 && code == NOOK_E_IO)
                return nook_err_errnum(
                        err, code, sys, "%s in '%s': %s%s", what, st->path, msg, hint_from_sqlite(rc));
        return nook_err_set(err, code, "%s in '%s': %s%s", what, st->path, msg, hint_from_sqlite(rc));
}

int store_prepare(store *st, const char *sql, sqlite3_stmt **ret, nook_error *err) {
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
        if (rc != SQLITE_OK)
                return store_fail(st, rc, err, "Cannot prepare a query");
        *ret = s;
        return 0;
}

/* Runs constant SQL (never text built from input). */
static int store_exec(store *st, const char *sql, const char *what, nook_error *err) {
        int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return store_fail(st, rc, err, "%s", what);
        return 0;
}

static int first_column_cb(void *userdata, int ncol, char **values, char **names) {
        char *buf = userdata; /* 32 bytes, see exec_busy_retry */
        if (ncol > 0 && values[0] && !buf[0])
                (void)snprintf(buf, 32, "%s", values[0]);
        return 0;
}

/* The busy timeout already waits for another process's lock, but SQLite still returns
 * SQLITE_BUSY at once in a few cases: a lock it knows cannot be granted without a deadlock,
 * another connection running WAL recovery (SQLITE_BUSY_RECOVERY), or a journal mode change racing
 * a first open.  So retry with a short, pid-varied back-off up to a deadline. */
static int exec_busy_retry(
        store *st, const char *sql, char ret_first[32], const char *what, nook_error *err) {
        uint64_t deadline = now_ms() + STORE_BEGIN_DEADLINE_MS;
        char first[32];

        for (unsigned i = 0;; i++) {
                first[0] = 0;
                int rc = sqlite3_exec(st->db, sql, first_column_cb, first, NULL);
                if (rc == SQLITE_OK) {
                        if (ret_first)
                                memcpy(ret_first, first, sizeof(first));
                        return 0;
                }
                if ((rc & 0xff) != SQLITE_BUSY || now_ms() >= deadline)
                        return store_fail(st, rc, err, "%s", what);
                (void)usleep((useconds_t)(1000 * (1 + (unsigned)(getpid() + (pid_t)i) % 20)));
        }
}

static int tx_begin(store *st, bool write, nook_error *err) {
        int r;

        if (st->tx_depth == 0)
                r = exec_busy_retry(st, write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED", NULL,
                        "Cannot start a transaction", err);
        else {
                char sql[64];
                (void)snprintf(sql, sizeof(sql), "SAVEPOINT nook_%u", st->tx_depth);
                r = store_exec(st, sql, "Cannot start a nested transaction", err);
        }
        if (r < 0)
                return r;
        st->tx_depth++;
        return 0;
}

int store_begin(store *st, nook_error *err) {
        return tx_begin(st, /* write= */ true, err);
}

int store_begin_read(store *st, nook_error *err) {
        return tx_begin(st, /* write= */ false, err);
}

int store_changes(store *st) {
        return sqlite3_changes(st->db);
}

char *store_column_dup(sqlite3_stmt *s, int col) {
        const char *t = (const char *)sqlite3_column_text(s, col);
        return t ? strdup(t) : NULL;
}

int store_commit(store *st, nook_error *err) {
        char sql[64];
        int rc;

        if (st->tx_depth == 0)
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "store_commit() without a transaction in '%s'", st->path);
        if (st->tx_depth == 1)
                (void)snprintf(sql, sizeof(sql), "COMMIT");
        else
                (void)snprintf(sql, sizeof(sql), "RELEASE nook_%u", st->tx_depth - 1);
        rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
                /* Keep the contract simple: a commit that fails has rolled back. */
                int r = store_fail(st, rc, err, "Cannot commit a transaction");
                store_rollback(st);
                return r;
        }
        st->tx_depth--;
        return 0;
}

void store_rollback(store *st) {
        char sql[96];

        if (!st || st->tx_depth == 0)
                return;
        if (st->tx_depth == 1)
                (void)snprintf(sql, sizeof(sql), "ROLLBACK");
        else
                (void)snprintf(sql, sizeof(sql), "ROLLBACK TO nook_%u; RELEASE nook_%u", st->tx_depth - 1,
                        st->tx_depth - 1);
        /* SQLite may have rolled back on its own already (SQLITE_FULL, SQLITE_IOERR), and then
         * ROLLBACK fails with "no transaction is active": that is the state we want. */
        (void)sqlite3_exec(st->db, sql, NULL, NULL, NULL);
        st->tx_depth--;
}

int store_schema_latest(void) {
        return store_migrations[ELEMENTSOF(store_migrations) - 1].version;
}

const char *store_path(const store *st) {
        return st->path;
}

static int schema_version_read(store *st, int *ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r, rc;

        /* A new database has no schema_version table yet: that is version 0. */
        r = store_prepare(st,
                "SELECT CASE WHEN EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND "
                "name = 'schema_version') THEN 1 ELSE 0 END",
                &s, err);
        if (r < 0)
                return r;
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot read the schema version");
        bool exists = sqlite3_column_int(s, 0) != 0;
        if (!exists) {
                *ret = 0;
                return 0;
        }
        store_stmt_finalizep(&s);
        s = NULL;
        r = store_prepare(st, "SELECT coalesce(max(version), 0) FROM schema_version", &s, err);
        if (r < 0)
                return r;
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot read the schema version");
        *ret = sqlite3_column_int(s, 0);
        return 0;
}

int store_schema_version(store *st, int *ret, nook_error *err) {
        return schema_version_read(st, ret, err);
}

static int schema_too_new(store *st, int v, nook_error *err) {
        return nook_err_set(err, NOOK_E_STATE,
                "The state database '%s' has schema version %d, newer than this nook understands (%d): "
                "upgrade nook or use another NOOK_HOME",
                st->path, v, store_schema_latest());
}

static int migration_apply(store *st, const store_migration *m, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r, rc;

        rc = sqlite3_exec(st->db, m->sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return store_fail(st, rc, err, "Cannot apply migration %s", m->name);
        r = store_prepare(
                st, "INSERT INTO schema_version (version, name, applied_at) VALUES (?1, ?2, ?3)", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_int(s, 1, m->version);
        (void)sqlite3_bind_text(s, 2, m->name, -1, SQLITE_STATIC);
        (void)sqlite3_bind_int64(s, 3, (sqlite3_int64)time(NULL));
        rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot record migration %s", m->name);
        return 0;
}

/* Brings the schema to store_schema_latest().  Many processes may open a new database at the
 * same moment, so the version read before taking the write lock is only a fast path; the one
 * that counts is read again under BEGIN IMMEDIATE, and all pending migrations plus their
 * schema_version rows commit together or not at all. */
static int store_migrate(store *st, nook_error *err) {
        int v = 0, r; /* initialised for the analyzer: it cannot see that store_fail() is negative */

        r = schema_version_read(st, &v, err);
        if (r < 0)
                return r;
        if (v == store_schema_latest())
                return 0;
        if (v > store_schema_latest())
                return schema_too_new(st, v, err);

        r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        r = schema_version_read(st, &v, err);
        if (r < 0)
                return r;
        if (v > store_schema_latest())
                return schema_too_new(st, v, err);
        r = store_exec(st,
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY NOT NULL, "
                "name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT",
                "Cannot create the schema_version table", err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(store_migrations); i++) {
                if (store_migrations[i].version <= v)
                        continue;
                r = migration_apply(st, &store_migrations[i], err);
                if (r < 0)
                        return r;
        }
        return store_commit(TAKE_PTR(tx), err);
}

/* SQLite creates a new database with 0644 less the umask, and gives its -wal and -shm files the
 * main file's mode; creating the file first with 0600 keeps all three private.  O_NOFOLLOW: a
 * symlink planted at <home>/nook.db must not redirect our writes. */
/* Whether folder p holds an entry other than those named in skip (NULL-terminated). */
static bool dir_holds(const char *p, const char *const *skip) {
        DIR *d = opendir(p);
        struct dirent *de;
        bool found = false;
        if (!d)
                return false;
        while (!found && (de = readdir(d))) {
                found = !streq(de->d_name, ".") && !streq(de->d_name, "..");
                for (const char *const *k = skip; found && *k; k++)
                        if (streq(de->d_name, *k))
                                found = false;
        }
        closedir(d);
        return found;
}

/* A zero-length database is what a new state folder starts with (open creates it).  In a folder
 * that already holds sandboxes, workspaces, snapshots, volumes or image blobs it is a lost
 * database (truncated, or a failed copy): taken as new, every record would be gone and the next
 * create of a name would adopt that name's orphaned workspace.  Bare folders (made by a first
 * command before it opened the database) and temporaries do not count. */
static int db_empty_check(const char *home, const char *path, nook_error *err) {
        static const char *const kept[] = { "sandboxes", "workspaces", "snapshots", "volumes",
                "images/blobs/sha256" };
        static const char *const skip[] = { ".tmp", NULL };
        for (size_t i = 0; i < ELEMENTSOF(kept); i++) {
                _cleanup_free_ char *p = strprintf("%s/%s", home, kept[i]);
                if (!p)
                        return nook_err_oom(err);
                if (dir_holds(p, skip))
                        return nook_err_set(err, NOOK_E_STATE,
                                "The state database '%s' is empty, but the state folder already holds '%s/': "
                                "its records are lost.  Restore nook.db from a backup, or move the state folder "
                                "away to start afresh",
                                path, kept[i]);
        }
        return 0;
}

static int db_file_create(const char *home, const char *path, nook_error *err) {
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        struct stat sb;

        if (fd < 0) {
                if (errno == ELOOP)
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "The state database '%s' is a symlink: refusing to follow it; move it away",
                                path);
                return nook_err_errno(
                        err, nook_errc_from_errno(errno), "Cannot open the state database '%s'", path);
        }
        if (fstat(fd, &sb) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat the state database '%s'", path);
        if (!S_ISREG(sb.st_mode))
                return nook_err_set(
                        err, NOOK_E_INVALID, "The state database '%s' is not a regular file", path);
        /* An older file with wider permissions is tightened; failing that (not our file) is left
         * to SQLite to report if it matters. */
        if ((sb.st_mode & 077) != 0)
                (void)fchmod(fd, 0600);
        if (sb.st_size == 0)
                return db_empty_check(home, path, err);
        return 0;
}

/* The first connection of a process (every CLI call: nothing keeps one open) rebuilds the WAL
 * index by reading every frame the WAL holds, and a checkpoint by such a connection does not
 * shorten the WAL for the next one (SQLite's automatic PASSIVE checkpoint leaves the frames; the
 * next process's recovery reads them again).  With SQLite's default of 1000 pages every call
 * read and checksummed up to 4 MiB (nook ls: 2.9 vs 2.0 ms CPU, 4.9 vs 2.4 ms wall against an
 * empty WAL).  So the connection that commits past STORE_WAL_CHECKPOINT_FRAMES checkpoints with
 * TRUNCATE when it closes: three fdatasync every ~10 create + remove (~15 pages each). */
static int store_wal_hook(void *userdata, sqlite3 *db, const char *name, int frames) {
        store *st = userdata;
        st->wal_frames = frames;
        /* What SQLite's own hook does, for a connection that lives long (a Node process). */
        if (frames >= 1000)
                (void)sqlite3_wal_checkpoint(db, name);
        return SQLITE_OK;
}

static int store_configure(store *st, nook_error *err) {
        char mode[32];
        int r;

        (void)sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
        /* Refuse writes to sqlite_schema and other footguns that can corrupt the file. */
        (void)sqlite3_db_config(st->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
        /* Most connections are one CLI call.  By default the last one to close checkpoints and
         * deletes the WAL, and the next write re-creates it: three fdatasync per command that
         * writes (~4 ms here).  Keep the WAL; store_free checkpoints it once it is long. */
        (void)sqlite3_db_config(st->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
        int persist_wal = 1;
        (void)sqlite3_file_control(st->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist_wal);
        /* The journal mode is stored in the file, so only the first open really switches it;
         * that switch needs an exclusive lock and can race other first opens. */
        r = exec_busy_retry(st, "PRAGMA journal_mode = WAL", mode, "Cannot switch to WAL mode", err);
        if (r < 0)
                return r;
        if (strcasecmp(mode, "wal") != 0)
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "SQLite cannot use WAL mode for the state database '%s' (journal mode stays '%s'): "
                        "put NOOK_HOME on a local filesystem",
                        st->path, mode);
        /* Per connection, and a no-op inside a transaction: set before anything else runs. */
        r = store_exec(st, "PRAGMA foreign_keys = ON", "Cannot enable foreign keys", err);
        if (r < 0)
                return r;
        /* Instead of SQLite's automatic checkpoint: store_free's (store_wal_hook says why). */
        (void)sqlite3_wal_hook(st->db, store_wal_hook, st);
        /* NORMAL is safe in WAL mode: a power cut may lose the last commits, never consistency. */
        return store_exec(st, "PRAGMA synchronous = NORMAL", "Cannot set synchronous mode", err);
}

store *store_free(store *st) {
        if (!st)
                return NULL;
        if (st->wal_frames >= STORE_WAL_CHECKPOINT_FRAMES) {
                /* No waiting here: a busy database is checkpointed by a later close. */
                (void)sqlite3_busy_timeout(st->db, 0);
                (void)sqlite3_wal_checkpoint_v2(st->db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        }
        /* close_v2: a statement leaked by a bug must not keep the handle half-open. */
        (void)sqlite3_close_v2(st->db);
        free(st->path);
        free(st);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(store *, store_free);

int store_open(const char *home, store **ret, nook_error *err) {
        _cleanup_(store_freep) store *st = NULL;
        int r, rc;

        if (isempty(home))
                return nook_err_set(err, NOOK_E_INVALID, "No state folder given for the state database");
        st = calloc(1, sizeof(*st));
        if (!st)
                return nook_err_oom(err);
        /* cppcheck does not see the cleanup attribute on st: the two reports below are false. */
        st->path = strprintf("%s/nook.db", home);
        if (!st->path)
                return nook_err_oom(err); /* cppcheck-suppress memleak */
        r = db_file_create(home, st->path, err);
        if (r < 0)
                return r; /* cppcheck-suppress memleak */
        rc = sqlite3_open_v2(st->path, &st->db,
                SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_FULLMUTEX,
                NULL);
        if (rc != SQLITE_OK)
                return store_fail(st, rc, err, "Cannot open the state database");
        r = store_configure(st, err);
        if (r < 0)
                return r;
        r = store_migrate(st, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(st);
        return 0;
}

int store_integrity_check(store *st, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r, rc;

        r = store_prepare(st, "PRAGMA integrity_check", &s, err);
        if (r < 0)
                return r;
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot check the state database");
        const char *res = (const char *)sqlite3_column_text(s, 0);
        if (!res || !streq(res, "ok"))
                return nook_err_set(err, NOOK_E_IO,
                        "The state database '%s' is damaged (%s): move it away to start with an empty state",
                        st->path, res ? res : "no result");
        store_stmt_finalizep(&s);
        s = NULL;
        r = store_prepare(st, "PRAGMA foreign_key_check", &s, err);
        if (r < 0)
                return r;
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
                return nook_err_set(err, NOOK_E_IO,
                        "The state database '%s' has a dangling reference in table '%s'", st->path,
                        (const char *)sqlite3_column_text(s, 0));
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot check the state database");
        return 0;
}

/* ---- sandboxes --------------------------------------------------------------------------- */

#define SANDBOX_COLUMNS                                                                                     \
        "name, state, image, spec_json, sticky, created_at, started_at, stopped_at, supervisor_pid, "       \
        "supervisor_start, stop_reason, image_digest, branch_of, branch_point, empty_baselines, one_shot"

void sandbox_rec_done(sandbox_rec *r) {
        if (!r)
                return;
        free(r->name);
        free(r->state);
        free(r->image);
        free(r->image_digest);
        free(r->spec_json);
        strv_free(r->labels);
        free(r->stop_reason);
        free(r->branch_of);
        free(r->branch_point);
        *r = (sandbox_rec){};
}

void sandbox_rec_array_free(sandbox_rec *a, size_t n) {
        for (size_t i = 0; a && i < n; i++)
                sandbox_rec_done(&a[i]);
        free(a);
}

/* Binds every column but name to ?2..?16, in SANDBOX_COLUMNS order; ?1 is the name. */
static void sandbox_bind(sqlite3_stmt *s, const sandbox_rec *r) {
        (void)sqlite3_bind_text(s, 1, r->name, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 2, r->state, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 3, r->image, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 4, r->spec_json, -1, SQLITE_STATIC);
        (void)sqlite3_bind_int(s, 5, r->sticky ? 1 : 0);
        (void)sqlite3_bind_int64(s, 6, r->created_at);
        (void)sqlite3_bind_int64(s, 7, r->started_at);
        (void)sqlite3_bind_int64(s, 8, r->stopped_at);
        (void)sqlite3_bind_int64(s, 9, r->supervisor_pid);
        /* Stored as the same 64 bits: SQLite integers are signed. */
        (void)sqlite3_bind_int64(s, 10, (sqlite3_int64)r->supervisor_start);
        (void)sqlite3_bind_text(s, 11, r->stop_reason, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 12, r->image_digest, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 13, r->branch_of, -1, SQLITE_STATIC);
        (void)sqlite3_bind_text(s, 14, r->branch_point, -1, SQLITE_STATIC);
        (void)sqlite3_bind_int(s, 15, (int)r->empty_baselines);
        (void)sqlite3_bind_int(s, 16, r->one_shot ? 1 : 0);
}

static int column_strdup(sqlite3_stmt *s, int col, char **ret) {
        if (sqlite3_column_type(s, col) == SQLITE_NULL) {
                *ret = NULL;
                return 0;
        }
        const char *t = (const char *)sqlite3_column_text(s, col);
        if (!t)
                return -ENOMEM;
        *ret = strdup(t);
        return *ret ? 0 : -ENOMEM;
}

static int sandbox_from_row(sqlite3_stmt *s, sandbox_rec *ret, nook_error *err) {
        _cleanup_(sandbox_rec_done) sandbox_rec r = {};
        const struct {
                int col;
                char **field;
        } text[] = {
                { 0, &r.name },
                { 1, &r.state },
                { 2, &r.image },
                { 3, &r.spec_json },
                { 10, &r.stop_reason },
                { 11, &r.image_digest },
                { 12, &r.branch_of },
                { 13, &r.branch_point },
        };

        for (size_t i = 0; i < ELEMENTSOF(text); i++)
                if (column_strdup(s, text[i].col, text[i].field) < 0)
                        return nook_err_oom(err);
        r.sticky = sqlite3_column_int(s, 4) != 0;
        r.created_at = sqlite3_column_int64(s, 5);
        r.started_at = sqlite3_column_int64(s, 6);
        r.stopped_at = sqlite3_column_int64(s, 7);
        r.supervisor_pid = (pid_t)sqlite3_column_int64(s, 8);
        r.supervisor_start = (uint64_t)sqlite3_column_int64(s, 9);
        r.empty_baselines = (unsigned)sqlite3_column_int(s, 14);
        r.one_shot = sqlite3_column_int(s, 15) != 0;
        *ret = r;
        r = (sandbox_rec){};
        return 0;
}

static int labels_read(store *st, const char *name, char ***ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        _cleanup_strv_free_ char **l = NULL;
        int r, rc;

        r = store_prepare(
                st, "SELECT key, value FROM sandbox_labels WHERE sandbox = ?1 ORDER BY key", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                _cleanup_free_ char *kv = strprintf("%s=%s", (const char *)sqlite3_column_text(s, 0),
                        (const char *)sqlite3_column_text(s, 1));
                if (!kv || strv_push(&l, kv) < 0)
                        return nook_err_oom(err);
        }
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot read the labels of sandbox '%s'", name);
        *ret = TAKE_PTR(l);
        return 0;
}

static int labels_write(store *st, const char *name, char *const *labels, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r;

        if (!labels || !labels[0])
                return 0;
        r = store_prepare(st,
                "INSERT OR REPLACE INTO sandbox_labels (sandbox, key, value) VALUES (?1, ?2, ?3)", &s, err);
        if (r < 0)
                return r;
        for (char *const *l = labels; *l; l++) {
                const char *eq = strchr(*l, '=');
                size_t klen = eq ? (size_t)(eq - *l) : strlen(*l);
                if (klen == 0)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid label '%s' on sandbox '%s': the key is empty; a label is key=value",
                                *l, name);
                (void)sqlite3_reset(s);
                (void)sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
                (void)sqlite3_bind_text(s, 2, *l, (int)klen, SQLITE_STATIC);
                (void)sqlite3_bind_text(s, 3, eq ? eq + 1 : "", -1, SQLITE_STATIC);
                int rc = sqlite3_step(s);
                if (rc != SQLITE_DONE)
                        return store_fail(st, rc, err, "Cannot store label '%s' of sandbox '%s'", *l, name);
        }
        return 0;
}

static int rec_check(const sandbox_rec *r, nook_error *err) {
        if (!r || isempty(r->name))
                return nook_err_set(err, NOOK_E_INVALID, "A sandbox record needs a name");
        if (isempty(r->state))
                return nook_err_set(
                        err, NOOK_E_INVALID, "The record of sandbox '%s' needs a state", r->name);
        return 0;
}

int store_sandbox_insert(store *st, const sandbox_rec *rec, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r, rc;

        r = rec_check(rec, err);
        if (r < 0)
                return r;
        r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        r = store_prepare(st,
                "INSERT INTO sandboxes (" SANDBOX_COLUMNS
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                &s, err);
        if (r < 0)
                return r;
        sandbox_bind(s, rec);
        rc = sqlite3_step(s);
        if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
                return nook_err_set(err, NOOK_E_EXISTS, "A sandbox named '%s' already exists", rec->name);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot insert sandbox '%s'", rec->name);
        r = labels_write(st, rec->name, rec->labels, err);
        if (r < 0)
                return r;
        return store_commit(TAKE_PTR(tx), err);
}

static int sandbox_get_locked(store *st, const char *name, sandbox_rec *ret, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        sandbox_rec rec;
        int r, rc;

        r = store_prepare(st, "SELECT " SANDBOX_COLUMNS " FROM sandboxes WHERE name = ?1", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox named '%s'", name);
        if (rc != SQLITE_ROW)
                return store_fail(st, rc, err, "Cannot read sandbox '%s'", name);
        r = sandbox_from_row(s, &rec, err);
        if (r < 0)
                return r;
        r = labels_read(st, name, &rec.labels, err);
        if (r < 0) {
                sandbox_rec_done(&rec);
                return r;
        }
        *ret = rec;
        return 0;
}

int store_sandbox_get(store *st, const char *name, sandbox_rec *ret, nook_error *err) {
        int r;

        if (isempty(name))
                return nook_err_set(err, NOOK_E_INVALID, "No sandbox name given");
        /* One read transaction: the row and its labels come from the same snapshot. */
        r = store_begin_read(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        r = sandbox_get_locked(st, name, ret, err);
        if (r < 0)
                return r;
        store_rollback(TAKE_PTR(tx)); /* read only: nothing to commit */
        return 0;
}

#define SANDBOX_UPDATE_SQL                                                                                  \
        "UPDATE sandboxes SET state = ?2, image = ?3, spec_json = ?4, sticky = ?5, created_at = ?6, "       \
        "started_at = ?7, stopped_at = ?8, supervisor_pid = ?9, supervisor_start = ?10, "                   \
        "stop_reason = ?11, image_digest = ?12, branch_of = ?13, branch_point = ?14, "                      \
        "empty_baselines = ?15, one_shot = ?16 WHERE name = ?1"

int store_sandbox_update_state(store *st, const sandbox_rec *rec, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r = rec_check(rec, err);
        if (r < 0)
                return r;
        /* one statement is its own transaction: no BEGIN, no COMMIT to run (issue #17) */
        if ((r = store_prepare(st, SANDBOX_UPDATE_SQL, &s, err)) < 0)
                return r;
        sandbox_bind(s, rec);
        int rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot update sandbox '%s'", rec->name);
        if (sqlite3_changes(st->db) == 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox named '%s'", rec->name);
        return 0;
}

int store_sandbox_update(store *st, const sandbox_rec *rec, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r, rc;

        r = rec_check(rec, err);
        if (r < 0)
                return r;
        r = store_begin(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        r = store_prepare(st, SANDBOX_UPDATE_SQL, &s, err);
        if (r < 0)
                return r;
        sandbox_bind(s, rec);
        rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot update sandbox '%s'", rec->name);
        if (sqlite3_changes(st->db) == 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox named '%s'", rec->name);
        store_stmt_finalizep(&s);
        s = NULL;
        r = store_prepare(st, "DELETE FROM sandbox_labels WHERE sandbox = ?1", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, rec->name, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot replace the labels of sandbox '%s'", rec->name);
        r = labels_write(st, rec->name, rec->labels, err);
        if (r < 0)
                return r;
        return store_commit(TAKE_PTR(tx), err);
}

int store_sandbox_delete(store *st, const char *name, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        int r, rc;

        if (isempty(name))
                return nook_err_set(err, NOOK_E_INVALID, "No sandbox name given");
        /* One statement: the labels go with it through ON DELETE CASCADE. */
        r = store_prepare(st, "DELETE FROM sandboxes WHERE name = ?1", &s, err);
        if (r < 0)
                return r;
        (void)sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
        if (rc != SQLITE_DONE)
                return store_fail(st, rc, err, "Cannot delete sandbox '%s'", name);
        return 0;
}

/* "SELECT ... WHERE EXISTS (label k [= v]) AND ..." with one EXISTS per filter.  Only the
 * number of filters and whether each has a value shape the text; keys and values are bound. */
static char *list_query(const char *const *filters) {
        size_t n = 0;
        while (filters && filters[n])
                n++;
        size_t cap = 256 + n * 128;
        _cleanup_free_ char *q = malloc(cap);
        if (!q)
                return NULL;
        size_t len = (size_t)snprintf(q, cap, "SELECT " SANDBOX_COLUMNS " FROM sandboxes AS s");
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(q + len, cap - len,
                        "%s EXISTS (SELECT 1 FROM sandbox_labels AS l WHERE l.sandbox = s.name AND l.key = "
                        "?%s)",
                        i == 0 ? " WHERE" : " AND", strchr(filters[i], '=') ? " AND l.value = ?" : "");
        (void)snprintf(q + len, cap - len, " ORDER BY s.name");
        return TAKE_PTR(q);
}

static int list_bind(sqlite3_stmt *s, const char *const *filters) {
        int p = 1;
        for (size_t i = 0; filters && filters[i]; i++) {
                const char *eq = strchr(filters[i], '=');
                if (sqlite3_bind_text(s, p++, filters[i], eq ? (int)(eq - filters[i]) : -1, SQLITE_STATIC) !=
                        SQLITE_OK)
                        return -EINVAL;
                if (eq && sqlite3_bind_text(s, p++, eq + 1, -1, SQLITE_STATIC) != SQLITE_OK)
                        return -EINVAL;
        }
        return 0;
}

static int sandbox_list_locked(
        store *st, const char *const *filters, sandbox_rec **ret, size_t *ret_n, nook_error *err) {
        _cleanup_stmt_ sqlite3_stmt *s = NULL;
        _cleanup_free_ char *q = list_query(filters);
        sandbox_rec *a = NULL;
        size_t n = 0, cap = 0;
        int r = 0, rc;

        if (!q)
                return nook_err_oom(err);
        r = store_prepare(st, q, &s, err);
        if (r < 0)
                return r;
        if (list_bind(s, filters) < 0)
                return nook_err_set(err, NOOK_E_INVALID, "Too many label filters");
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 8;
                        sandbox_rec *na = realloc(a, ncap * sizeof(*a));
                        if (!na) {
                                r = nook_err_oom(err);
                                break;
                        }
                        a = na;
                        cap = ncap;
                }
                r = sandbox_from_row(s, &a[n], err);
                if (r < 0)
                        break;
                n++;
                r = labels_read(st, a[n - 1].name, &a[n - 1].labels, err);
                if (r < 0)
                        break;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = store_fail(st, rc, err, "Cannot list sandboxes");
        if (r < 0) {
                sandbox_rec_array_free(a, n);
                return r;
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

int store_sandbox_list(
        store *st, const char *const *label_filters, sandbox_rec **ret, size_t *ret_n, nook_error *err) {
        int r;

        for (size_t i = 0; label_filters && label_filters[i]; i++)
                if (label_filters[i][0] == '=' || label_filters[i][0] == 0)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid label filter '%s': expected key=value or key", label_filters[i]);
        r = store_begin_read(st, err);
        if (r < 0)
                return r;
        _cleanup_tx_ store *tx = st;
        r = sandbox_list_locked(st, label_filters, ret, ret_n, err);
        if (r < 0)
                return r;
        store_rollback(TAKE_PTR(tx)); /* read only: nothing to commit */
        return 0;
}
