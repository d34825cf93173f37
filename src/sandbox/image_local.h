/* SPDX-License-Identifier: Apache-2.0 */
/* Images that need no download: the built-in "host" image and root filesystem directories. */
#pragma once

#include <sys/types.h>

#include "nook.h"

/* Fills the overlay lower layers and the read-only host binds for image ("host" or an absolute
 * directory).  The host image's skeleton is generated once under <home>/images/host/. */
int sb_image_local(const char *home, const char *image, uid_t owner_uid, gid_t owner_gid, char ***ret_lowers,
        char ***ret_ro_binds, nook_error *err);
