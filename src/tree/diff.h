/* SPDX-License-Identifier: Apache-2.0 */
/* A tree's changes since its baseline manifest: added, deleted, modified (content or symlink
 * target), type changed, mode changed.  Stat-first: a regular file whose size, mtime, ctime and
 * inode all equal the baseline's is unchanged without being read (a guest can forge mtime with
 * utimensat, never ctime: the kernel sets it to the current time on every change, and only
 * changing the host's clock moves it back); any other is hashed and compared. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "nook.h"
#include "tree/manifest.h"
#include "util/macro.h"

typedef enum diff_kind {
        DIFF_ADDED,
        DIFF_DELETED,
        DIFF_MODIFIED, /* a file's content or a symlink's target (the mode may have changed too) */
        DIFF_TYPE, /* a file became a directory, a symlink, ... */
        DIFF_MODE, /* only the permission bits */
        _DIFF_KIND_MAX,
        _DIFF_KIND_INVALID = -EINVAL,
} diff_kind;

const char *diff_kind_to_string(diff_kind k); /* "added", "deleted", "modified", "type", "mode" */

typedef struct diff_change {
        diff_kind kind;
        const mf_entry *old; /* in the baseline (NULL: added) */
        const mf_entry *cur; /* in the current tree (NULL: deleted) */
} diff_change;

typedef struct diff_result {
        manifest *base; /* owned */
        manifest *cur; /* owned: the tree now (files compared are hashed) */
        diff_change *c; /* sorted by path */
        size_t n;
} diff_result;

diff_result *diff_result_free(diff_result *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(diff_result *, diff_result_free);

/* Compares the tree dirfd with base (taken over, also on failure). */
int diff_compute(int dirfd, manifest *base, diff_result **ret, nook_error *err);
/* True when two entries have the same type, permission bits and content (hash or target);
 * a file without a hash on either side is never equal. */
bool mf_entry_same(const mf_entry *a, const mf_entry *b);
/* Hashes the regular file path below dirfd into e (if it is still a regular file). */
int mf_entry_hash(int dirfd, mf_entry *e, nook_error *err);

/* The diff as a JSON object {"changes": [...], "summary": {...}} (schema in
 * docs/design/diff-merge.md).  patch: add a unified diff ("patch") for each regular text file;
 * old content comes from old_dir (the tree the baseline was taken from, when its copy still
 * matches the baseline hash: a branch's source), -1 for none.  layer: the tree is an overlay
 * upper directory: a character device 0/0 is a whiteout ("whiteout": true, kind "deleted") and
 * a directory marked opaque says so ("opaque": true). */
int diff_to_json(
        const diff_result *d, int dirfd, int old_dir, bool patch, bool layer, json_t **ret, nook_error *err);
/* A JSON string for bytes that may not be UTF-8: as is when valid, else with every byte >= 0x80
 * and '%' as %XX, and *ret_escaped set. */
json_t *diff_json_bytes(const char *s, bool *ret_escaped);
/* Sets "path" (and "pathEscaped": true when it had to be escaped) on o; -1 on failure. */
int diff_json_set_path(json_t *o, const char *path);
/* A unified diff of two files (fd -1: empty, as /dev/null), labelled a/path and b/path, through
 * diffutils' `diff -u` (a Debian essential package); binary content gives "Binary files differ". */
int diff_unified(int old_fd, int new_fd, const char *path, char **ret, nook_error *err);
