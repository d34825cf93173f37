/* SPDX-License-Identifier: Apache-2.0 */
/* The pool of per-sandbox host id ranges: the id_ranges table of 004_id_ranges.sql.  Ranges are
 * slots of `size` ids from `first`: first, first + size, ... (count slots); a sandbox holds at
 * most one, from store_idrange_acquire until its record is deleted (the cascade frees it). */
#pragma once

#include <stdint.h>

#include "nook.h"
#include "store/store.h"

typedef struct idrange_pool {
        uint32_t first; /* host id of slot 0 */
        uint32_t size; /* ids per slot */
        uint32_t count; /* slots */
} idrange_pool;

/* Whether a slot no row of this store holds may be taken (the host-wide claims of other state
 * folders: sandbox/idclaim.h); taking it there is the callback's job.  Also called for the range
 * a sandbox already holds (taken: true), so that its claim is made where it is missing. */
typedef bool (*idrange_usable_fn)(uint32_t base, bool taken, void *userdata);

/* The range the sandbox holds, or the lowest free slot that usable (may be NULL) accepts,
 * recorded for it.  The sandbox record must exist.  NOOK_E_BUSY naming the pool when every slot
 * is taken. */
int store_idrange_acquire(store *st, const char *sandbox, const idrange_pool *pool, idrange_usable_fn usable,
        void *userdata, uint32_t *ret_base, nook_error *err);
/* The range the sandbox holds; NOOK_E_NOT_FOUND when it holds none. */
int store_idrange_get(store *st, const char *sandbox, uint32_t *ret_base, nook_error *err);
/* Ranges held, for `nook doctor` and tests. */
int store_idrange_count(store *st, int64_t *ret, nook_error *err);
