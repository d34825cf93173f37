/* SPDX-License-Identifier: Apache-2.0 */
/* Packs a directory into a deterministic OCI-style layer tar: the inverse of image_unpack_fd,
 * used for snapshots.  The same tree always gives the same bytes (and so the same digest). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"
#include "image/digest.h"

typedef struct pack_opts {
        /* The directory is an overlay upper layer: a 0/0 character device is a whiteout (written
         * as ".wh.NAME") and a directory marked user.overlay.opaque=y (or trusted.) is opaque
         * (written with a ".wh..wh..opq" entry).  Otherwise device nodes are skipped. */
        bool overlay;
        /* host ids of the sandbox's uid/gid 0: ids in [base, base + 65536) are written as
         * sandbox ids, every other id as 65534 (nobody) */
        uid_t uid_base;
        gid_t gid_base;
} pack_opts;

/* Writes the tar of everything under dir_fd (not the directory itself) to out_fd, uncompressed.
 * ret_digest: sha256 of the bytes written; ret_size: their number.  Entries are sorted by name;
 * only user.* xattrs (not user.overlay.*) are kept, as the unpacker keeps them; a name the
 * unpacker would read as a whiteout (".wh.*") is refused rather than silently changed. */
int image_pack_dir(int dir_fd, const pack_opts *o, int out_fd, char ret_digest[IMAGE_DIGEST_LEN + 1],
        uint64_t *ret_size, nook_error *err);
