/* SPDX-License-Identifier: Apache-2.0 */
/* Applies a branch tree's changes since its baseline onto a target tree.  A path the branch
 * changed is a conflict when the target's version is neither the baseline's (the target left it
 * alone) nor already the branch's; refuse changes nothing and lists every conflict, ours keeps
 * the target's version, theirs takes the branch's.  Nothing is half-applied: new content is
 * staged next to its target (same directory, so the same filesystem) and renamed into place;
 * deletions come last (renamed aside, removed at commit); a failure undoes every step taken, in
 * reverse.  Every lookup opens one component at a time with O_NOFOLLOW from the tree's root fd,
 * and every change is an *at() call on the directory fd so found: a symlink, in either tree,
 * is data, never followed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nook.h"
#include "tree/manifest.h"

typedef enum merge_strategy {
        MERGE_REFUSE,
        MERGE_OURS,
        MERGE_THEIRS,
        _MERGE_STRATEGY_MAX,
        _MERGE_STRATEGY_INVALID = -EINVAL,
} merge_strategy;

const char *merge_strategy_to_string(merge_strategy s);
merge_strategy merge_strategy_from_string(const char *s);

/* branch_fd, target_fd: the two trees' roots (O_RDONLY|O_DIRECTORY).  base: the branch's
 * baseline (taken over).  journal_fd: an empty file the steps are journalled to before they are
 * taken (-1: no journal), for merge_recover after a kill.  ret_json: the report (schema in
 * docs/design/diff-merge.md), set on success and on NOOK_E_CONFLICT (refuse with conflicts:
 * nothing changed). */
int merge_trees(int branch_fd, manifest *base, int target_fd, int journal_fd, merge_strategy s, bool dry_run,
        char **ret_json, nook_error *err);
/* After a merge was killed: its journal's steps undone in reverse, or, when it reached "commit",
 * finished (what was set aside removed).  Returns 1 when it finished a committed merge, 0 when it
 * undid one; a damaged journal is NOOK_E_INVALID and changes nothing. */
int merge_recover(int target_fd, const char *text, size_t len, nook_error *err);
