/* SPDX-License-Identifier: Apache-2.0 */
/* The baseline of a sandbox, captured by the create path (src/sandbox/api_diff.c). */
#pragma once

#include <stdbool.h>

#include "nook.h"

/* Captures the baseline manifests into the state folder sdir: the workspace's when sdir holds
 * none yet (a re-create over a kept workspace keeps the first one; a branch's, taken when it is
 * created over its copied workspace, is its branch point), and the writable layer's whenever
 * the layer is new (fresh_upper) or has none.  A capture that fails (a tree over the bounds of
 * manifest_capture, an I/O error) does not fail the create: the reason is kept beside the
 * manifest's name (".error") and diff and merge of that sandbox say it.  Fails only when the
 * state folder cannot be opened.  upper_durable: the layer's baseline survives a power loss
 * (manifest_save's fsync); false for an ephemeral sandbox, whose layer does not (its overlay is
 * mounted 'volatile' and a crash discards it). */
int sb_baseline_capture(const char *sdir, const char *wsdir, const char *upper, bool fresh_upper,
        bool upper_durable, nook_error *err);

/* Removes the baselines (and a merge journal) from the state folder sdir, so the next create
 * takes new ones: for a branch whose state folder was copied from its source's, before its
 * create (its baseline must be its branch point, not the source's create). */
void sb_baseline_forget(const char *sdir);
