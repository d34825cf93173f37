/* SPDX-License-Identifier: Apache-2.0 */
/* The state store against a real SQLite file in a temporary folder. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "store/image_rec.h"
#include "store/store.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

static char home[64];

static void setup(void) {
        (void)snprintf(home, sizeof(home), "/tmp/nook-test-store-XXXXXX");
        cr_assert_not_null(mkdtemp(home));
}

static void teardown(void) {
        nook_error err = {};
        (void)path_rm_rf(home, &err);
}

TestSuite(store, .init = setup, .fini = teardown);

static store *open_ok(void) {
        nook_error err = {};
        store *st = NULL;
        int r = store_open(home, &st, &err);
        cr_assert_eq(r, 0, "store_open: %s", err.msg);
        return st;
}

/* Reads one integer or text with a separate plain SQLite connection, to check what is on disk. */
static long long raw_int(const char *sql) {
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);
        sqlite3 *db = NULL;
        sqlite3_stmt *s = NULL;
        cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
        cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
        cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
        long long v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        sqlite3_close(db);
        return v;
}

static void rec_init(sandbox_rec *r, const char *name, const char *state) {
        *r = (sandbox_rec){ .name = (char *)name,
                .state = (char *)state,
                .image = (char *)"alpine:3",
                .spec_json = (char *)"{\"memoryMib\":512}",
                .created_at = 1700000000 };
}

static void insert_ok(store *st, const char *name, const char *const *labels) {
        nook_error err = {};
        sandbox_rec r;
        rec_init(&r, name, "running");
        r.labels = (char **)labels;
        cr_assert_eq(store_sandbox_insert(st, &r, &err), 0, "insert '%s': %s", name, err.msg);
}

Test(store, open_creates_private_wal_db_at_latest_version) {
        store *st = open_ok();
        nook_error err = {};
        int v = -1;
        struct stat sb;
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);

        cr_assert_eq(stat(p, &sb), 0);
        cr_assert_eq(sb.st_mode & 0777, 0600, "mode %o", sb.st_mode & 0777);
        cr_assert_eq(store_schema_version(st, &v, &err), 0, "%s", err.msg);
        cr_assert_eq(v, store_schema_latest());
        cr_assert_str_eq(store_path(st), p);
        cr_assert_eq(store_integrity_check(st, &err), 0, "%s", err.msg);
        /* The -wal file SQLite made copies the main file's mode. */
        _cleanup_free_ char *wal = strprintf("%s-wal", p);
        cr_assert_eq(stat(wal, &sb), 0);
        cr_assert_eq(sb.st_mode & 0777, 0600, "wal mode %o", sb.st_mode & 0777);
        store_free(st);

        /* journal_mode is persistent in the file: a plain connection sees WAL too. */
        sqlite3 *db = NULL;
        sqlite3_stmt *s = NULL;
        cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
        cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
        cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
        cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "wal");
        sqlite3_finalize(s);
        sqlite3_close(db);
}

/* Every CLI call is a first connection, which reads the whole WAL since the last checkpoint to
 * rebuild its index: nook checkpoints every 128 pages (SQLite's default is 1000).  100 write
 * calls of a few pages each stay under 1000 frames, so without that setting the WAL would hold
 * them all. */
Test(store, wal_is_checkpointed_every_128_pages) {
        char name[32];
        for (int i = 0; i < 100; i++) {
                store *st = open_ok();
                (void)snprintf(name, sizeof(name), "wal-%03d", i);
                insert_ok(st, name, (const char *const[]){ "team=a", "tier=b", NULL });
                store_free(st);
        }
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);
        sqlite3 *db = NULL;
        sqlite3_stmt *s = NULL;
        cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
        /* PASSIVE with a busy result of 0: the second column is the WAL's frame count. */
        cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(PASSIVE)", -1, &s, NULL), SQLITE_OK);
        cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
        int frames = sqlite3_column_int(s, 1);
        sqlite3_finalize(s);
        sqlite3_close(db);
        cr_assert(frames > 0, "the WAL is in use (frames %d)", frames);
        cr_assert(frames <= 160,
                "the WAL holds %d frames, more than one checkpoint interval (128) and a commit", frames);
}

Test(store, migrations_applied_once_and_reopen_keeps_data) {
        store *st = open_ok();
        insert_ok(st, "keep", (const char *const[]){ "team=a", NULL });
        store_free(st);
        st = open_ok();
        store_free(st);
        st = open_ok();

        nook_error err = {};
        sandbox_rec got = {};
        cr_assert_eq(store_sandbox_get(st, "keep", &got, &err), 0, "%s", err.msg);
        cr_assert_str_eq(got.name, "keep");
        cr_assert_str_eq(got.state, "running");
        cr_assert_str_eq(got.image, "alpine:3");
        cr_assert_str_eq(got.spec_json, "{\"memoryMib\":512}");
        cr_assert_eq(got.created_at, 1700000000);
        cr_assert_null(got.stop_reason);
        cr_assert_not_null(got.labels);
        cr_assert_str_eq(got.labels[0], "team=a");
        cr_assert_null(got.labels[1]);
        sandbox_rec_done(&got);
        store_free(st);

        cr_assert_eq(raw_int("SELECT count(*) FROM schema_version"), store_schema_latest());
        cr_assert_eq(raw_int("SELECT max(version) FROM schema_version"), store_schema_latest());
}

Test(store, all_tables_exist) {
        store_free(open_ok());
        const char *tables[] = { "sandboxes", "sandbox_labels", "images", "image_refs", "layers",
                "image_layers", "snapshots", "volumes", "schema_version" };
        for (size_t i = 0; i < ELEMENTSOF(tables); i++) {
                _cleanup_free_ char *q = strprintf(
                        "SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='%s'", tables[i]);
                cr_assert_eq(raw_int(q), 1, "table %s", tables[i]);
        }
}

Test(store, every_field_round_trips) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec r = { .name = (char *)"full",
                .state = (char *)"stopped",
                .image = NULL,
                .spec_json = NULL,
                .sticky = true,
                .created_at = 1,
                .started_at = 2,
                .stopped_at = 3,
                .supervisor_pid = 4242,
                .supervisor_start = UINT64_MAX - 5,
                .stop_reason = (char *)"idle",
                .image_digest = (char *)"sha256:0123" };
        sandbox_rec got = {};

        cr_assert_eq(store_sandbox_insert(st, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(store_sandbox_get(st, "full", &got, &err), 0, "%s", err.msg);
        cr_assert_null(got.image);
        cr_assert_null(got.spec_json);
        cr_assert_null(got.labels);
        cr_assert(got.sticky);
        cr_assert_eq(got.created_at, 1);
        cr_assert_eq(got.started_at, 2);
        cr_assert_eq(got.stopped_at, 3);
        cr_assert_eq(got.supervisor_pid, 4242);
        cr_assert_eq(got.supervisor_start, UINT64_MAX - 5);
        cr_assert_str_eq(got.stop_reason, "idle");
        cr_assert_str_eq(got.image_digest, "sha256:0123");
        sandbox_rec_done(&got);
        sandbox_rec_done(&got); /* done twice is harmless */
        store_free(st);
}

/* A database at schema 1 (no image_digest column) with a sandbox in it: migration 2 adds the
 * column, keeps the row, and leaves its pin NULL. */
Test(store, migration_2_adds_image_digest_to_a_version_1_database) {
        store *st = open_ok();
        insert_ok(st, "old", NULL);
        store_free(st);
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);
        sqlite3 *db = NULL;
        cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
        cr_assert_eq(
                sqlite3_exec(db,
                        "DROP INDEX sandboxes_by_image_digest; ALTER TABLE sandboxes DROP COLUMN "
                        "image_digest; ALTER TABLE image_layers DROP COLUMN blob; DROP TABLE id_ranges; "
                        "ALTER TABLE sandboxes DROP COLUMN branch_of; ALTER TABLE sandboxes DROP COLUMN branch_point; "
                        "ALTER TABLE sandboxes DROP COLUMN empty_baselines; ALTER TABLE sandboxes DROP COLUMN one_shot; "
                        "DELETE FROM schema_version WHERE version >= 2",
                        NULL, NULL, NULL),
                SQLITE_OK, "%s", sqlite3_errmsg(db));
        sqlite3_close(db);
        cr_assert_eq(raw_int("SELECT max(version) FROM schema_version"), 1);

        st = open_ok();
        nook_error err = {};
        sandbox_rec got = {};
        cr_assert_eq(store_sandbox_get(st, "old", &got, &err), 0, "%s", err.msg);
        cr_assert_str_eq(got.image, "alpine:3");
        cr_assert_null(got.image_digest);
        sandbox_rec_done(&got);
        store_free(st);
        cr_assert_eq(raw_int("SELECT max(version) FROM schema_version"), store_schema_latest());
        cr_assert_geq(store_schema_latest(), 2);
}

/* Migration 5: a branch's source and branch point round-trip; NULL for any other sandbox. */
Test(store, branch_of_and_branch_point_round_trip) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec r, got = {};
        rec_init(&r, "br", "running");
        r.branch_of = (char *)"src";
        r.branch_point = (char *)"2026-12-03T07:15:02.123Z";
        cr_assert_eq(store_sandbox_insert(st, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(store_sandbox_get(st, "br", &got, &err), 0, "%s", err.msg);
        cr_assert_str_eq(got.branch_of, "src");
        cr_assert_str_eq(got.branch_point, "2026-12-03T07:15:02.123Z");
        sandbox_rec_done(&got);
        insert_ok(st, "plain", NULL);
        cr_assert_eq(store_sandbox_get(st, "plain", &got, &err), 0, "%s", err.msg);
        cr_assert_null(got.branch_of);
        cr_assert_null(got.branch_point);
        sandbox_rec_done(&got);
        store_free(st);
}

/* Migration 6: the empty baselines' bits round-trip through insert and update; 0 when unset; a
 * value outside them is refused by the column's CHECK, and the row keeps its bits. */
Test(store, empty_baselines_round_trip) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec r, got = {};
        rec_init(&r, "eb", "running");
        r.empty_baselines = SANDBOX_EMPTY_WS_BASELINE | SANDBOX_EMPTY_LAYER_BASELINE;
        cr_assert_eq(store_sandbox_insert(st, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(store_sandbox_get(st, "eb", &got, &err), 0, "%s", err.msg);
        cr_assert_eq(got.empty_baselines, 3u);
        sandbox_rec_done(&got);
        r.empty_baselines = SANDBOX_EMPTY_WS_BASELINE;
        cr_assert_eq(store_sandbox_update(st, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(store_sandbox_get(st, "eb", &got, &err), 0, "%s", err.msg);
        cr_assert_eq(got.empty_baselines, 1u);
        sandbox_rec_done(&got);
        r.empty_baselines = 4;
        cr_assert_lt(store_sandbox_update(st, &r, &err), 0, "a bit that does not exist is refused");
        cr_assert_eq(store_sandbox_get(st, "eb", &got, &err), 0, "%s", err.msg);
        cr_assert_eq(got.empty_baselines, 1u, "and changes nothing");
        sandbox_rec_done(&got);
        insert_ok(st, "plain", NULL);
        cr_assert_eq(store_sandbox_get(st, "plain", &got, &err), 0, "%s", err.msg);
        cr_assert_eq(got.empty_baselines, 0u);
        sandbox_rec_done(&got);
        store_free(st);
}

/* store_sandbox_update_state: every field but the labels, which stay; a missing record is
 * NOOK_E_NOT_FOUND. */
Test(store, update_state_keeps_the_labels) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec r, got = {};
        const char *labels[] = { "team=qa", NULL };
        insert_ok(st, "us", labels);
        rec_init(&r, "us", "stopped");
        r.supervisor_pid = 4242;
        r.stop_reason = (char *)"user";
        r.empty_baselines = SANDBOX_EMPTY_WS_BASELINE;
        cr_assert_eq(store_sandbox_update_state(st, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(store_sandbox_get(st, "us", &got, &err), 0, "%s", err.msg);
        cr_assert_str_eq(got.state, "stopped");
        cr_assert_eq(got.supervisor_pid, 4242);
        cr_assert_str_eq(got.stop_reason, "user");
        cr_assert_eq(got.empty_baselines, 1u);
        cr_assert(got.labels && got.labels[0] && streq(got.labels[0], "team=qa") && !got.labels[1],
                "the labels are the record's still");
        sandbox_rec_done(&got);
        rec_init(&r, "nosuch", "running");
        cr_assert_eq(store_sandbox_update_state(st, &r, &err), -NOOK_E_NOT_FOUND);
        store_free(st);
}

static bool strv_contains(char *const *l, const char *s) {
        for (size_t i = 0; l && l[i]; i++)
                if (streq(l[i], s))
                        return true;
        return false;
}

static void image_put_ok(store *st, const char *digest, const char *diff_id, const char *ref) {
        nook_error err = {};
        image_layer_rec l = { .digest = (char *)diff_id, .diff_id = (char *)diff_id, .size = 1 };
        image_rec rec = { .digest = (char *)digest,
                .config_digest = (char *)"sha256:c0",
                .config_json = (char *)"{}",
                .platform = (char *)"linux/amd64",
                .layers = &l,
                .n_layers = 1 };
        cr_assert_eq(store_image_put(st, &rec, ref, &err), 0, "%s", err.msg);
}

/* A tag that moved leaves the old image without a name; a sandbox whose image_digest pins it
 * keeps it from rm and prune until the sandbox record goes. */
Test(store, image_digest_pins_an_image_against_rm_and_prune) {
        store *st = open_ok();
        nook_error err = {};
        image_put_ok(st, "sha256:old", "sha256:l-old", "reg/x:latest");
        sandbox_rec r;
        rec_init(&r, "pinner", "stopped");
        r.image = (char *)"reg/x:latest";
        r.image_digest = (char *)"sha256:old";
        cr_assert_eq(store_sandbox_insert(st, &r, &err), 0, "%s", err.msg);
        image_put_ok(st, "sha256:new", "sha256:l-new", "reg/x:latest"); /* the tag moves */

        char **keep = NULL, **keep_diff = NULL;
        cr_assert_eq(store_image_prune(st, &keep, &keep_diff, &err), 0, "%s", err.msg);
        cr_assert(strv_contains(keep, "sha256:old"));
        cr_assert(strv_contains(keep_diff, "sha256:l-old"));
        strv_free(keep);
        strv_free(keep_diff);

        int ret = store_image_remove(st, "sha256:old", &err);
        cr_assert_eq(ret, -NOOK_E_BUSY);
        cr_assert(strstr(err.msg, "'pinner'"), "%s", err.msg);

        cr_assert_eq(store_sandbox_delete(st, "pinner", &err), 0, "%s", err.msg);
        cr_assert_eq(store_image_prune(st, &keep, &keep_diff, &err), 0, "%s", err.msg);
        cr_assert_not(strv_contains(keep, "sha256:old"));
        cr_assert_not(strv_contains(keep_diff, "sha256:l-old"));
        cr_assert(strv_contains(keep, "sha256:new"));
        strv_free(keep);
        strv_free(keep_diff);
        store_free(st);
}

Test(store, hostile_strings_are_data_not_sql) {
        store *st = open_ok();
        nook_error err = {};
        const char *name = "x'); DROP TABLE sandboxes; --";
        sandbox_rec got = {};

        insert_ok(st, name, (const char *const[]){ "k'=v\"", "a=b=c", NULL });
        cr_assert_eq(store_sandbox_get(st, name, &got, &err), 0, "%s", err.msg);
        cr_assert_str_eq(got.name, name);
        cr_assert_str_eq(got.labels[0], "a=b=c");
        cr_assert_str_eq(got.labels[1], "k'=v\"");
        sandbox_rec_done(&got);
        store_free(st);
        cr_assert_eq(raw_int("SELECT count(*) FROM sandboxes"), 1);
}

Test(store, duplicate_insert_is_exists_and_changes_nothing) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec r;

        insert_ok(st, "dup", (const char *const[]){ "a=1", NULL });
        rec_init(&r, "dup", "creating");
        r.labels = (char **)(const char *const[]){ "b=2", NULL };
        cr_assert_eq(store_sandbox_insert(st, &r, &err), -NOOK_E_EXISTS);
        cr_assert_eq(err.code, NOOK_E_EXISTS);
        cr_assert(strstr(err.msg, "'dup'"), "%s", err.msg);
        store_free(st);
        cr_assert_eq(raw_int("SELECT count(*) FROM sandbox_labels"), 1);
        cr_assert_eq(raw_int("SELECT count(*) FROM sandboxes WHERE state = 'running'"), 1);
}

Test(store, missing_is_not_found_and_delete_of_missing_succeeds) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec got = {};

        cr_assert_eq(store_sandbox_get(st, "nope", &got, &err), -NOOK_E_NOT_FOUND);
        cr_assert_eq(err.code, NOOK_E_NOT_FOUND);
        cr_assert(strstr(err.msg, "'nope'"), "%s", err.msg);
        cr_assert_null(got.name, "ret untouched on failure");
        cr_assert_eq(store_sandbox_delete(st, "nope", &err), 0);
        store_free(st);
}

Test(store, labels_cascade_on_delete) {
        store *st = open_ok();
        nook_error err = {};

        insert_ok(st, "a", (const char *const[]){ "x=1", "y=2", NULL });
        insert_ok(st, "b", (const char *const[]){ "x=1", NULL });
        cr_assert_eq(store_sandbox_delete(st, "a", &err), 0, "%s", err.msg);
        store_free(st);
        cr_assert_eq(raw_int("SELECT count(*) FROM sandbox_labels WHERE sandbox = 'a'"), 0);
        cr_assert_eq(raw_int("SELECT count(*) FROM sandbox_labels WHERE sandbox = 'b'"), 1);
}

Test(store, update_replaces_fields_and_labels) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec r, got = {};

        insert_ok(st, "u", (const char *const[]){ "old=1", "keep=1", NULL });
        rec_init(&r, "u", "stopped");
        r.stop_reason = (char *)"max_duration";
        r.labels = (char **)(const char *const[]){ "keep=2", "bare", "keep=3", NULL };
        cr_assert_eq(store_sandbox_update(st, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(store_sandbox_get(st, "u", &got, &err), 0, "%s", err.msg);
        cr_assert_str_eq(got.state, "stopped");
        cr_assert_str_eq(got.stop_reason, "max_duration");
        cr_assert_eq(strv_length(got.labels), 2);
        cr_assert_str_eq(got.labels[0], "bare=");
        cr_assert_str_eq(got.labels[1], "keep=3", "the last value of a key wins");
        sandbox_rec_done(&got);

        r.labels = (char **)(const char *const[]){ "=x", NULL };
        cr_assert_eq(store_sandbox_update(st, &r, &err), -NOOK_E_INVALID);
        cr_assert(strstr(err.msg, "'=x'"), "%s", err.msg);
        /* The failed update rolled back: labels as before. */
        cr_assert_eq(store_sandbox_get(st, "u", &got, &err), 0, "%s", err.msg);
        cr_assert_eq(strv_length(got.labels), 2);
        sandbox_rec_done(&got);
        store_free(st);
}

Test(store, list_orders_by_name_and_filters_by_labels) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec *a = NULL;
        size_t n = 0;

        insert_ok(st, "c", (const char *const[]){ "team=x", "tier=gold", NULL });
        insert_ok(st, "a", (const char *const[]){ "team=x", NULL });
        insert_ok(st, "b", (const char *const[]){ "team=y", "tier=", NULL });
        insert_ok(st, "d", NULL);

        cr_assert_eq(store_sandbox_list(st, NULL, &a, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(n, 4);
        cr_assert_str_eq(a[0].name, "a");
        cr_assert_str_eq(a[3].name, "d");
        cr_assert_str_eq(a[2].labels[1], "tier=gold");
        sandbox_rec_array_free(a, n);

        cr_assert_eq(store_sandbox_list(st, (const char *const[]){ "team=x", NULL }, &a, &n, &err), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(a[0].name, "a");
        cr_assert_str_eq(a[1].name, "c");
        sandbox_rec_array_free(a, n);

        cr_assert_eq(store_sandbox_list(st, (const char *const[]){ "tier", NULL }, &a, &n, &err), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(a[0].name, "b");
        sandbox_rec_array_free(a, n);

        cr_assert_eq(
                store_sandbox_list(st, (const char *const[]){ "team=x", "tier=gold", NULL }, &a, &n, &err),
                0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(a[0].name, "c");
        sandbox_rec_array_free(a, n);

        cr_assert_eq(store_sandbox_list(st, (const char *const[]){ "tier=", NULL }, &a, &n, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(a[0].name, "b");
        sandbox_rec_array_free(a, n);

        cr_assert_eq(store_sandbox_list(st, (const char *const[]){ "nobody=1", NULL }, &a, &n, &err), 0);
        cr_assert_eq(n, 0);
        sandbox_rec_array_free(a, n);

        cr_assert_eq(
                store_sandbox_list(st, (const char *const[]){ "=v", NULL }, &a, &n, &err), -NOOK_E_INVALID);
        cr_assert(strstr(err.msg, "'=v'"), "%s", err.msg);
        store_free(st);
}

Test(store, transactions_nest_and_roll_back) {
        store *st = open_ok();
        nook_error err = {};
        sandbox_rec *a = NULL;
        size_t n = 0;

        cr_assert_eq(store_begin(st, &err), 0, "%s", err.msg);
        insert_ok(st, "t1", NULL);
        store_rollback(st);

        cr_assert_eq(store_begin(st, &err), 0);
        insert_ok(st, "t2", NULL);
        cr_assert_eq(store_begin(st, &err), 0);
        insert_ok(st, "t3", NULL);
        store_rollback(st); /* inner only */
        cr_assert_eq(store_commit(st, &err), 0, "%s", err.msg);

        cr_assert_eq(store_commit(st, &err), -NOOK_E_INTERNAL);
        store_rollback(st); /* without a transaction: nothing */

        cr_assert_eq(store_sandbox_list(st, NULL, &a, &n, &err), 0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(a[0].name, "t2");
        sandbox_rec_array_free(a, n);
        store_free(st);
}

/* Children run after fork() and report through their exit status only. */
static int child_open_and_insert(const char *name, int start_fd) {
        nook_error err = {};
        store *st = NULL;
        char c;

        if (read(start_fd, &c, 1) < 0)
                return 10;
        if (store_open(home, &st, &err) < 0) {
                fprintf(stderr, "child %s: %s\n", name, err.msg);
                return 11;
        }
        sandbox_rec r;
        rec_init(&r, name, "running");
        if (store_sandbox_insert(st, &r, &err) < 0) {
                fprintf(stderr, "child %s: %s\n", name, err.msg);
                return 12;
        }
        store_free(st);
        return 0;
}

static void wait_all(pid_t *pids, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int status = 0;
                cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
                cr_assert(
                        WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %zu: status 0x%x", i, status);
        }
}

Test(store, fifty_processes_open_a_new_db_at_once, .timeout = 120) {
        pid_t pids[50];
        int start[2];

        cr_assert_eq(pipe(start), 0);
        for (size_t i = 0; i < ELEMENTSOF(pids); i++) {
                pids[i] = fork();
                cr_assert_geq(pids[i], 0);
                if (pids[i] == 0) {
                        char name[32];
                        close(start[1]);
                        (void)snprintf(name, sizeof(name), "p%zu", i);
                        _exit(child_open_and_insert(name, start[0]));
                }
        }
        close(start[0]);
        close(start[1]); /* EOF releases every child at the same moment */
        wait_all(pids, ELEMENTSOF(pids));

        cr_assert_eq(raw_int("SELECT count(*) FROM sandboxes"), 50);
        cr_assert_eq(raw_int("SELECT count(*) FROM schema_version"), store_schema_latest());
        store *st = open_ok();
        nook_error err = {};
        cr_assert_eq(store_integrity_check(st, &err), 0, "%s", err.msg);
        store_free(st);
}

#define WORKERS 20
#define PER_WORKER 40

/* Worker w inserts w-0..w-39 with labels, updates each to "stopped" with a new label set, and
 * deletes those with i % 4 == 0; some of it inside a caller transaction, to mix shapes. */
static int child_churn(int w) {
        nook_error err = {};
        store *st = NULL;
        char name[32], owner[32];

        if (store_open(home, &st, &err) < 0)
                goto fail;
        (void)snprintf(owner, sizeof(owner), "owner=w%d", w);
        for (int i = 0; i < PER_WORKER; i++) {
                sandbox_rec r;
                (void)snprintf(name, sizeof(name), "w%d-%d", w, i);
                rec_init(&r, name, "creating");
                r.labels = (char **)(const char *const[]){ owner, "phase=new", NULL };
                if (store_sandbox_insert(st, &r, &err) < 0)
                        goto fail;
                bool tx = i % 2 == 0;
                if (tx && store_begin(st, &err) < 0)
                        goto fail;
                r.state = (char *)"stopped";
                r.supervisor_pid = 1000 + i;
                r.labels = (char **)(const char *const[]){ owner, "phase=done", NULL };
                if (store_sandbox_update(st, &r, &err) < 0)
                        goto fail;
                if (i % 4 == 0 && store_sandbox_delete(st, name, &err) < 0)
                        goto fail;
                if (tx && store_commit(st, &err) < 0)
                        goto fail;
        }
        store_free(st);
        return 0;
fail:
        fprintf(stderr, "worker %d: %s\n", w, err.msg);
        return 1;
}

Test(store, twenty_processes_churn_one_db, .timeout = 300) {
        pid_t pids[WORKERS];

        store_free(open_ok());
        for (int w = 0; w < WORKERS; w++) {
                pids[w] = fork();
                cr_assert_geq(pids[w], 0);
                if (pids[w] == 0)
                        _exit(child_churn(w));
        }
        wait_all(pids, WORKERS);

        store *st = open_ok();
        nook_error err = {};
        cr_assert_eq(store_integrity_check(st, &err), 0, "%s", err.msg);
        int per = PER_WORKER - (PER_WORKER + 3) / 4;
        sandbox_rec *a = NULL;
        size_t n = 0;
        cr_assert_eq(store_sandbox_list(st, NULL, &a, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(n, (size_t)(WORKERS * per));
        for (size_t i = 0; i < n; i++) {
                cr_assert_str_eq(a[i].state, "stopped");
                cr_assert_eq(strv_length(a[i].labels), 2);
                cr_assert_str_eq(a[i].labels[1], "phase=done");
        }
        sandbox_rec_array_free(a, n);
        cr_assert_eq(store_sandbox_list(
                             st, (const char *const[]){ "owner=w7", "phase=done", NULL }, &a, &n, &err),
                0);
        cr_assert_eq(n, (size_t)per);
        sandbox_rec_array_free(a, n);
        store_free(st);
        cr_assert_eq(raw_int("SELECT count(*) FROM sandbox_labels"), 2 * WORKERS * per);
        cr_assert_eq(raw_int("SELECT count(*) FROM sandbox_labels WHERE value = 'new'"), 0);
}

Test(store, corrupted_file_names_the_file) {
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);
        char junk[8192];
        nook_error err = {};
        store *st = NULL;

        memset(junk, 'Z', sizeof(junk));
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
        close(fd);
        cr_assert_eq(store_open(home, &st, &err), -NOOK_E_IO);
        cr_assert_null(st);
        cr_assert(strstr(err.msg, p), "%s", err.msg);
        cr_assert(strstr(err.msg, "not a database"), "%s", err.msg);
        cr_assert(strstr(err.msg, "move it away"), "%s", err.msg);
}

Test(store, newer_schema_is_refused) {
        store_free(open_ok());
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);
        sqlite3 *db = NULL;
        cr_assert_eq(sqlite3_open(p, &db), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(db, "INSERT INTO schema_version VALUES (999, '999_future.sql', 0)", NULL,
                             NULL, NULL),
                SQLITE_OK);
        sqlite3_close(db);

        nook_error err = {};
        store *st = NULL;
        cr_assert_eq(store_open(home, &st, &err), -NOOK_E_STATE);
        cr_assert(strstr(err.msg, "999"), "%s", err.msg);
        cr_assert(strstr(err.msg, "upgrade nook"), "%s", err.msg);
}

Test(store, symlinked_db_is_refused) {
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);
        _cleanup_free_ char *target = strprintf("%s/elsewhere.db", home);
        nook_error err = {};
        store *st = NULL;

        cr_assert_eq(symlink(target, p), 0);
        cr_assert_eq(store_open(home, &st, &err), -NOOK_E_REFUSED);
        cr_assert(strstr(err.msg, "symlink"), "%s", err.msg);
        cr_assert_eq(access(target, F_OK), -1, "nothing created through the link");
}

Test(store, missing_home_is_an_error) {
        nook_error err = {};
        store *st = NULL;
        _cleanup_free_ char *missing = strprintf("%s/not-there", home);

        cr_assert_eq(store_open(missing, &st, &err), -NOOK_E_NOT_FOUND);
        cr_assert(strstr(err.msg, missing), "%s", err.msg);
        cr_assert_eq(store_open("", &st, &err), -NOOK_E_INVALID);
}

Test(store, wider_mode_is_tightened) {
        _cleanup_free_ char *p = strprintf("%s/nook.db", home);
        struct stat sb;
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        (void)fchmod(fd, 0644);
        close(fd);
        store_free(open_ok());
        cr_assert_eq(stat(p, &sb), 0);
        cr_assert_eq(sb.st_mode & 0777, 0600);
}
