/* SPDX-License-Identifier: Apache-2.0 */
/* Host-wide claims on the id-range pool's slots (docs/design/security.md, "The id-range pool").
 * Each state folder keeps its ranges in its own database; two root state folders on one host
 * would hand out the same slot without these claims.  The claims are one file, by default
 * /var/lib/nook-idclaims (NOOK_IDCLAIMS names another: the tests give each file its own), a
 * record per slot naming the state folder and the sandbox that holds it, read and written under
 * an exclusive flock on the file.  A claim whose state folder, or whose sandbox in it, is gone
 * is stale and may be taken over; the owner's database is never opened (no lock order between
 * state folders). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "nook.h"

typedef struct idclaims {
        int fd; /* the claims file, locked; -1: no claims here (not root, or it cannot be opened) */
        const char *home;
        const char *sandbox;
        int64_t taken_new; /* a slot this call claimed that was free or stale before, or -1 */
} idclaims;

/* Opens and locks the claims file for the pool (ISO_IDPOOL_*).  Never fails its caller: where
 * the file cannot be had, c->fd is -1 and every slot is usable (the state folder's own rule). */
void idclaims_open(idclaims *c, const char *home, const char *sandbox);
void idclaims_close(idclaims *c);
/* The store's callback (idrange_usable_fn): base is free of any live claim, and is now ours. */
bool idclaims_usable(uint32_t base, bool taken, void *userdata);
/* Gives back the slot claimed since idclaims_open (an acquire that failed after it). */
void idclaims_undo(idclaims *c);
/* Drops sandbox's claim on base (nook rm), if the claim is still that sandbox's. */
void idclaims_release(const char *home, const char *sandbox, uint32_t base);
