/* SPDX-License-Identifier: Apache-2.0 */
/* User namespace id maps.  Every sandbox runs in a user namespace, rootful too:
 *   rootful:  container ids 0..65535 map to the sandbox's own host range (isolate/idmap.h), or
 *             to ISO_ROOTFUL_ID_BASE.. where idmapped mounts are unavailable; never to host root;
 *   rootless: container 0 maps to the caller's uid (and 1..65535 to its /etc/subuid range when
 *             newuidmap and a range exist). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"

#define ISO_ROOTFUL_ID_BASE 100000000u
#define ISO_ID_RANGE 65536u

/* True for real host root (the identity uid map): then sandboxes get the rootful id range. */
bool iso_rootful(void);
/* The host uid/gid that is root inside a sandbox started by this process. */
void iso_sandbox_root_ids(uid_t *ret_uid, gid_t *ret_gid);
/* Writes uid_map/gid_map of pid (setgroups "deny" first where required).  Rootful: ids
 * 0..65535 go to [base, base + 65536), base 0 meaning ISO_ROOTFUL_ID_BASE; rootless ignores base.
 * Runs in the supervisor, outside the new user namespace. */
int iso_userns_write_maps(pid_t pid, uint32_t base, nook_error *err);

/* Who owns a sandbox's user namespace.  The kernel charges the per-user counts of /proc/sys/user
 * (inotify instances and watches, fanotify groups and marks, namespaces of every kind) made
 * inside a user namespace to its owner, the creator's effective uid, in the parent namespace.
 * Created by root, every rootful sandbox drew on host root's own allowance: one guest took all
 * 128 inotify instances of Debian's default from the host and every other sandbox.  So, rootful,
 * the supervisor clones the sandbox's namespaces as the sandbox's own host root uid (base, as
 * iso_userns_write_maps takes it): begin before the clone, end in the parent after it, child as
 * the child's first step.  Capabilities are kept across the uid change (SECBIT_NO_SETUID_FIXUP,
 * restored after); rootless, nothing changes (the caller owns its sandboxes' namespaces). */
typedef struct iso_userns_owner {
        bool changed;
        int securebits, dumpable;
} iso_userns_owner;
int iso_userns_owner_begin(uint32_t base, iso_userns_owner *o, nook_error *err);
int iso_userns_owner_end(const iso_userns_owner *o, nook_error *err);
void iso_userns_owner_child(const iso_userns_owner *o);
