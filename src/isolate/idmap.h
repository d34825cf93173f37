/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox identities and idmapped mounts (rootful; docs/design/security.md, "Identity").
 *
 * A rootful sandbox's ids 0..65535 map to its own host range [base, base + 65536), allocated from
 * the pool in the store.  What it shares is shown to it through idmapped mounts
 * (mount_setattr(2) MOUNT_ATTR_IDMAP), made by the supervisor (host root) before clone():
 *   - image layers and snapshots are stored at the canonical base ISO_ROOTFUL_ID_BASE; each layer
 *     is an idmapped clone of the layer directory that shows canonical id c + x as base + x;
 *   - the workspace and host volumes show host id x as base + x: what the guest's root writes is
 *     the host's root's (or, with a NOOK_HOME owned by someone else, the owner's), and host-owned
 *     files are the guest root's, as with docker's bind mounts.
 * The clones are detached mounts; the sandbox init attaches them with move_mount(2). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"

/* First slot of the per-sandbox pool: right above the canonical range of image layers. */
#define ISO_IDPOOL_FIRST (ISO_ROOTFUL_ID_BASE + ISO_ID_RANGE)
#define ISO_IDPOOL_COUNT 30000u

/* Whether this process can give each sandbox of the state root `home` its own range: host root,
 * mount_setattr(2), Linux >= 5.19 (idmapped overlayfs layers) and a filesystem that supports
 * idmapped mounts under home (ext4, xfs, btrfs; tmpfs from Linux 6.3).  When false, *ret_why
 * says which is missing (a static string) and sandboxes share ISO_ROOTFUL_ID_BASE as before. */
bool iso_idmap_supported(const char *home, const char **ret_why);

/* A user namespace used only as the idmap of mounts (no process stays in it): its maps send uids
 * [inside_uid, +count) and gids [inside_gid, +count) to host ids [outside, +count).  An idmapped
 * mount shows a file of on-disk id inside_uid + x as owned by outside + x. */
typedef struct iso_idmap_spec {
        uint32_t inside_uid, inside_gid, outside, count;
} iso_idmap_spec;

#define ISO_IDMAP_MAX 4

/* Makes n (<= ISO_IDMAP_MAX) such namespaces at once; ret_fds gets their /proc/PID/ns/user fds. */
int iso_idmap_userns(const iso_idmap_spec *specs, size_t n, int *ret_fds, nook_error *err);

/* A detached, idmapped clone of the tree at fd (an O_PATH fd of a directory or file), with
 * nosuid,nodev (and rdonly when asked), recursive when asked.  NOOK_E_MISSING_FEATURE when the
 * filesystem refuses idmapping (EINVAL): the caller decides whether a plain bind will do. */
int iso_idmap_clone(int fd, int userns_fd, bool readonly, bool recursive, int *ret_fd, nook_error *err);
