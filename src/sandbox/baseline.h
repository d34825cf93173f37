/* SPDX-License-Identifier: Apache-2.0 */
/* The baseline of a sandbox, captured by the create path (src/sandbox/api_diff.c). */
#pragma once

#include <stdbool.h>

#include "nook.h"

/* An empty baseline is a bit of the sandbox's record (sandbox_rec.empty_baselines,
 * SANDBOX_EMPTY_*), not a file: a create with a new workspace and a fresh writable layer then
 * writes nothing to its state folder, and makes none (docs/design/diff-merge.md, "Where").  The
 * order diff reads them in: the baseline's file, else the reason its capture failed (".error"),
 * else its bit, else there is none. */

/* The bits for the record a create saves before it makes anything, so that a create killed
 * after its capture and adopted by reconcile keeps them: kept, those of an earlier create of the
 * record, plus the trees the create will make empty (fresh_upper: a new writable layer and no
 * setup file to write into it; new_workspace: the create makes the workspace, with nothing to
 * put in it).  A guess, made exact by sb_baseline_capture: a tree guessed empty that is not gets
 * its file, which outweighs the bit. */
unsigned sb_baseline_guess_empty(unsigned kept, bool fresh_upper, bool new_workspace);

/* Takes the baselines a create needs (after the workspace and the layer are complete, before
 * the supervisor starts): the workspace's unless it has one (a file in the state folder sdir, or
 * kept's bit: a re-create over a kept workspace keeps the first; a branch's, taken when it is
 * created over its copied workspace, is its branch point), the layer's when it is new
 * (fresh_upper) or has none.  An empty tree's baseline is its bit in *ret_empty, the others are
 * files, in sdir, made for them.  A capture that fails (a tree over the bounds of
 * manifest_capture, an I/O error) does not fail the create: the reason is kept beside the
 * manifest's name (".error") and diff and merge of that sandbox say it.  Fails only when the
 * state folder cannot be made or opened.  upper_durable: the layer's baseline survives a power
 * loss (manifest_save's fsync); false for an ephemeral sandbox, whose layer does not (its overlay
 * is mounted 'volatile' and a crash discards it). */
int sb_baseline_capture(const char *sdir, const char *wsdir, const char *upper, unsigned kept,
        bool fresh_upper, bool upper_durable, unsigned *ret_empty, nook_error *err);
