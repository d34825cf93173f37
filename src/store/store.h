/* SPDX-License-Identifier: Apache-2.0 */
/* The state database: SQLite in WAL mode under the state root (nook.db).  One writer at a time,
 * every multi-step change in a transaction, numbered migrations applied on open. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"

typedef struct store store;

/* Opens (creating if needed) <home>/nook.db: WAL, foreign keys, busy timeout, migrations. */
int store_open(const char *home, store **ret, nook_error *err);
store *store_free(store *st);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK.  Rollback never fails the caller. */
int store_begin(store *st, nook_error *err);
int store_commit(store *st, nook_error *err);
void store_rollback(store *st);
int store_schema_version(store *st, int *ret, nook_error *err);

typedef struct sandbox_rec {
        char *name;
        char *state;      /* "creating", "running", "stopped" */
        char *image;      /* the image reference as the user gave it */
        char *spec_json;  /* the validated spec, never holding a secret value */
        char **labels;    /* "key=value", NULL-terminated; may be NULL */
        bool sticky;
        int64_t created_at, started_at, stopped_at; /* seconds since the epoch, 0 = never */
        pid_t supervisor_pid;                        /* 0 when none */
        uint64_t supervisor_start;                   /* start time of that pid (reuse check) */
        char *stop_reason;                           /* "user", "max_duration", "idle", ... or NULL */
} sandbox_rec;

void sandbox_rec_done(sandbox_rec *r);

/* NOOK_E_EXISTS when the name is taken. */
int store_sandbox_insert(store *st, const sandbox_rec *r, nook_error *err);
/* NOOK_E_NOT_FOUND when missing. */
int store_sandbox_get(store *st, const char *name, sandbox_rec *ret, nook_error *err);
/* Replaces every field of the record named r->name (labels included). */
int store_sandbox_update(store *st, const sandbox_rec *r, nook_error *err);
/* Missing is success. */
int store_sandbox_delete(store *st, const char *name, nook_error *err);
/* All records ordered by name; label_filter ("k=v" or "k", may be NULL) keeps matching ones. */
int store_sandbox_list(store *st, const char *const *label_filters, sandbox_rec **ret, size_t *ret_n,
        nook_error *err);
void sandbox_rec_array_free(sandbox_rec *a, size_t n);
