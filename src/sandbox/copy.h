/* SPDX-License-Identifier: Apache-2.0 */
/* nook cp's engine: docker cp semantics between the host, a workspace or a sandbox's root
 * filesystem (a ws handle, see workspace/ws.h) and tar streams.  The API on top (copy_api.c)
 * only picks the sides. */
#pragma once

#include <stdbool.h>

#include "nook.h"
#include "workspace/ws.h"

typedef struct cp_side {
        ws *w; /* the workspace or the sandbox's root; NULL: the host */
        const char *path; /* the path on that side; NULL: a tar stream on fd */
        int fd; /* the tar stream (read for a source, written for a destination) */
        const char *label; /* how messages name this side: "w:" or "" for the host */
        /* A destination's: a folder for the staging directory when it is on the destination's
         * filesystem (a workspace's: <home>/trash), so a killed copy's stage is never found in
         * the workspace (nor in its diff, nor carried by a merge); NULL: next to the target. */
        const char *stage_dir;
} cp_side;

/* Copies src to dst:
 *   - dst an existing directory: src is placed inside it under its own name ("dir" nests as
 *     dst/dir), or its contents are when src ends in "/." or is a tar stream (merged into what is
 *     there);
 *   - dst missing: src is created under that name (its parent must exist);
 *   - dst an existing file: a file or symlink replaces it; a directory is refused;
 *   - dst a tar stream: src (under its own name) is written as a tar.
 * Regular files, directories and symlinks (copied as links, never followed) are copied, with
 * their permission bits (less setuid/setgid) and mtimes; a FIFO, device or socket is refused,
 * naming it.  Everything is built in a temporary sibling and renamed into place at the end: a
 * refused or failed copy leaves nothing behind. */
int cp_copy(const cp_side *src, const cp_side *dst, nook_error *err);
