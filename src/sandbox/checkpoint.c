/* SPDX-License-Identifier: Apache-2.0 */
/* nook checkpoint: a running sandbox's memory, with CRIU.  No host serves it today: the
 * request is checked (name, flags, a running sandbox) and refused with NOOK_E_MISSING_FEATURE
 * naming the cause isolate/checkpoint.c finds on this host (docs/design/checkpoint.md). */
#include <stdio.h>

#include "nook.h"
#include "isolate/checkpoint.h"
#include "sandbox/ctx.h"
#include "sandbox/state.h"
#include "store/store.h"
#include "util/error.h"

int nook_checkpoint(nook *n, const char *name, unsigned flags, nook_error *err) {
        sandbox_rec rec = { 0 };
        char why[400];
        const char *fix = NULL;

        if (flags & ~NOOK_CHECKPOINT_LEAVE_RUNNING)
                return nook_err_set(err, NOOK_E_INVALID, "Unknown checkpoint flags 0x%x", flags);
        int r = sb_running_rec(n, name, &rec, err);
        sandbox_rec_done(&rec);
        if (r < 0)
                return nook_err_wrap(err, "checkpointing sandbox '%s'", name);
        if (!iso_checkpoint_supported(why, sizeof(why), &fix))
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "Cannot checkpoint sandbox '%s': memory checkpoints are unavailable on this host: %s; "
                        "fix: %s",
                        name, why, fix);
        return nook_err_set(err, NOOK_E_INTERNAL, "Cannot checkpoint sandbox '%s': not implemented", name);
}
