/* SPDX-License-Identifier: Apache-2.0 */
/* Memory checkpoints (CRIU): whether this host can take them, and if not, exactly why
 * (docs/design/checkpoint.md holds the investigation behind each cause). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The CRIU binary nook would drive: $NOOK_CRIU, else `criu` in /usr/local/sbin, /usr/sbin,
 * /sbin or PATH.  Returns false (out untouched) when there is none. */
bool iso_criu_find(char *out, size_t len);

/* True when nook can checkpoint and restore a sandbox's memory on this host; otherwise why
 * holds one sentence naming the cause, and ret_fix (may be NULL) what would remove it.  Today it is always false: the
 * last cause is nook's own (its init cannot be dumped).  Cheap (one `criu --version` at most,
 * a few ms) so `nook doctor` can ask every time; safe in a threaded caller (posix_spawn);
 * nothing is cached. */
bool iso_checkpoint_supported(char *why, size_t len, const char **ret_fix);
