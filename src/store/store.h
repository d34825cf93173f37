/* SPDX-License-Identifier: Apache-2.0 */
/* The state database: SQLite in WAL mode under the state root (nook.db).  One writer at a time,
 * every multi-step change in a transaction, numbered migrations applied on open.
 *
 * Secrets: nothing here ever holds a secret value.  The store cannot tell a secret from any
 * other string, so callers must strip secret values (per-command env marked secret) before they
 * build a spec_json, a label or any other field that reaches this API.
 *
 * Input: names are validated by the caller (name_validate); every value reaches SQLite as a
 * bound parameter, never as SQL text.
 *
 * Processes and threads: a store handle belongs to one thread at a time and must not cross a
 * fork(); a child opens its own.  Any number of processes may open the same nook.db at once. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"

typedef struct store store;

/* Opens (creating if needed, mode 0600) <home>/nook.db: WAL, foreign keys, a 10 s busy timeout,
 * migrations.  home must exist (the caller creates it 0700).  A database that is not SQLite or
 * is damaged fails with NOOK_E_IO naming the file; one written by a newer nook with NOOK_E_STATE. */
int store_open(const char *home, store **ret, nook_error *err);
store *store_free(store *st);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK.  Rollback never fails the caller.  Calls nest: an inner
 * begin is a SAVEPOINT, so the record functions below can run inside a caller's transaction.
 * Waiting for another writer gives up with NOOK_E_BUSY after about 30 s. */
int store_begin(store *st, nook_error *err);
int store_commit(store *st, nook_error *err);
void store_rollback(store *st);
int store_schema_version(store *st, int *ret, nook_error *err);
/* The schema version this build brings a database to. */
int store_schema_latest(void);
/* <home>/nook.db, for messages. */
const char *store_path(const store *st);
/* PRAGMA integrity_check; NOOK_E_IO naming the file and the first problem when it fails. */
int store_integrity_check(store *st, nook_error *err);

typedef struct sandbox_rec {
        char *name;
        char *state; /* "creating", "running", "stopped" */
        char *image; /* the image reference as the user gave it */
        char *image_digest; /* the manifest digest it resolved to; NULL for "host" or a directory */
        char *spec_json; /* the validated spec, never holding a secret value */
        char **labels; /* "key=value", NULL-terminated; may be NULL */
        bool sticky;
        int64_t created_at, started_at, stopped_at; /* seconds since the epoch, 0 = never */
        pid_t supervisor_pid; /* 0 when none */
        uint64_t supervisor_start; /* start time of that pid (reuse check) */
        char *stop_reason; /* "user", "max_duration", "idle", ... or NULL */
        char *branch_of; /* the sandbox this one was branched from, or NULL (005_sandbox_branch.sql) */
        char *branch_point; /* when: RFC 3339 UTC with milliseconds, or NULL */
        unsigned empty_baselines; /* SANDBOX_EMPTY_*: baselines that are empty, and so no file */
        bool one_shot; /* NOOK_CREATE_ONE_SHOT: removed when its one command ends (007_sandbox_one_shot.sql) */
} sandbox_rec;

/* The bits of sandbox_rec.empty_baselines (006_sandbox_empty_baselines.sql). */
#define SANDBOX_EMPTY_WS_BASELINE 1u
#define SANDBOX_EMPTY_LAYER_BASELINE 2u

void sandbox_rec_done(sandbox_rec *r);

/* Labels are "key=value"; a bare "key" is stored as "key=" (an empty value).  A key given twice
 * keeps its last value.  An empty key is NOOK_E_INVALID. */

/* NOOK_E_EXISTS when the name is taken. */
int store_sandbox_insert(store *st, const sandbox_rec *r, nook_error *err);
/* NOOK_E_NOT_FOUND when missing. */
int store_sandbox_get(store *st, const char *name, sandbox_rec *ret, nook_error *err);
/* Replaces every field of the record named r->name (labels included). */
int store_sandbox_update(store *st, const sandbox_rec *r, nook_error *err);
/* The same but the labels, which stay as they are: one statement, for a change of state (the
 * end of a create, a reconcile), where the labels are the record's already. */
int store_sandbox_update_state(store *st, const sandbox_rec *r, nook_error *err);
/* Missing is success. */
int store_sandbox_delete(store *st, const char *name, nook_error *err);
/* All records ordered by name.  label_filters (NULL-terminated, may be NULL) keeps records that
 * match every filter: "k=v" needs label k with value v, "k" needs label k with any value. */
int store_sandbox_list(
        store *st, const char *const *label_filters, sandbox_rec **ret, size_t *ret_n, nook_error *err);
void sandbox_rec_array_free(sandbox_rec *a, size_t n);
