/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot records: the snapshots table of 001_init.sql (name -> digest, one name per digest).
 * Each call is one transaction on the store's connection, as in image_rec.c.  The columns
 * base_image and layer (references into the image tables) stay NULL: a snapshot's base may be
 * "host" or a directory, and its layer is not an image layer; what the snapshot holds is
 * described by snapshot.json in its directory. */
#pragma once

#include <stdint.h>

#include "nook.h"
#include "store/store.h"

typedef struct snapshot_rec {
        char *name;
        char *digest; /* "sha256:<hex>" */
        char *source_sandbox; /* NULL when imported */
        uint64_t size; /* bytes of its layer tars */
        int64_t created_at;
} snapshot_rec;

void snapshot_rec_done(snapshot_rec *r);
void snapshot_rec_array_free(snapshot_rec *a, size_t n);

/* NOOK_E_EXISTS naming the snapshot that holds the name or the digest already. */
int store_snapshot_insert(store *st, const snapshot_rec *r, nook_error *err);
/* By name or digest; NOOK_E_NOT_FOUND when missing. */
int store_snapshot_get(store *st, const char *name_or_digest, snapshot_rec *ret, nook_error *err);
/* All records, newest first. */
int store_snapshot_list(store *st, snapshot_rec **ret, size_t *ret_n, nook_error *err);
/* Missing is success. */
int store_snapshot_delete(store *st, const char *name, nook_error *err);
