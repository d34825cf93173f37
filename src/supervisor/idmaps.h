/* SPDX-License-Identifier: Apache-2.0 */
/* The idmapped mounts of a rootful sandbox with its own id range (isolate/idmap.h), made by the
 * supervisor as host root before clone(): the init inherits the detached mounts and attaches
 * them in its own mount namespace (isolate/rootfs.c). */
#pragma once

#include <stdbool.h>

#include "isolate/rootfs.h"
#include "supervisor/config.h"

typedef struct sup_idmaps {
        bool on; /* false: today's plain binds (config id_base 0) */
        int lower_fds[ISO_MAX_LOWERS];
        size_t n_lowers;
        int workspace_fd;
        int mount_fds[ISO_MAX_MOUNTS]; /* -1: tmpfs, or a filesystem that refuses idmapping */
} sup_idmaps;

#define SUP_IDMAPS_INIT                                                                                     \
        { .workspace_fd = -1 }

/* Fills m for c; nothing to do when c->id_base is 0. */
int sup_idmaps_prepare(const sup_config *c, sup_idmaps *m, nook_error *err);
void sup_idmaps_done(sup_idmaps *m);
