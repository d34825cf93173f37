/* SPDX-License-Identifier: Apache-2.0 */
/* Names of sandboxes, snapshots and volumes: 1-63 chars of [a-z0-9][a-z0-9_.-]*, no "..". */
#pragma once

#include "nook.h"

/* what names the kind of thing in the message ("sandbox", "snapshot"). */
int name_validate(const char *what, const char *name, nook_error *err);
