/* SPDX-License-Identifier: Apache-2.0 */
/* nook branch (docs/design/branch.md): new sandboxes from a sandbox's disk state.  The public
 * entry is nook_branch (include/nook.h); the rules are in branch.c. */
#pragma once

#include "nook.h"

/* The branch point as stored: RFC 3339 UTC with milliseconds, "2026-12-03T07:15:02.123Z". */
int branch_point_now(char *buf, size_t len);
