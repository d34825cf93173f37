/* SPDX-License-Identifier: Apache-2.0 */
/* A faithful tree copy for branches: every regular file copy-on-write where the filesystem
 * reflinks (FICLONE: XFS with reflink=1, btrfs), else copy_file_range (in-kernel, may share blocks
 * on NFS/CIFS servers), else read/write.  Kept: hardlinks (within the tree), symlinks, modes
 * (setuid/setgid too), owners (shifted between id ranges), times, extended attributes (overlay's
 * trusted./user.overlay.* opaque and redirect marks, file capabilities), and devices (an overlay
 * upper dir's whiteouts are 0/0 character devices), fifos and sockets.  Never follows a symlink,
 * never leaves the source's filesystem. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "nook.h"

typedef struct copytree_opts {
        uid_t from, to; /* ids in [from, from + range) become [to, to + range); others stay */
        uint32_t range; /* 0: no shift */
} copytree_opts;

typedef struct copytree_stats {
        uint64_t files, dirs, bytes;
        uint64_t reflinked; /* files shared by FICLONE */
} copytree_stats;

/* Copies the directory src (a path) to dst, which must not exist. */
int copytree(const char *src, const char *dst, const copytree_opts *o, copytree_stats *ret_stats,
        nook_error *err);
