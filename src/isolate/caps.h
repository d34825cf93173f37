/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities of the sandbox init and its payloads.  The sets are namespaced: every sandbox runs
 * in a user namespace (isolate/userns.h), so CAP_CHOWN here is CAP_CHOWN over the sandbox's ids
 * only.  Called after pivot_root, in this order: iso_caps_drop(), iso_set_no_new_privs(),
 * iso_seccomp_load(). */
#pragma once

#include <stdint.h>

#include "nook.h"
#include "isolate/seccomp.h"

/* The profile's capability set as a mask of (1 << CAP_*); 0 for an invalid profile.
 *   default:    docker's default minus NET_RAW: CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID
 *               SETPCAP NET_BIND_SERVICE SYS_CHROOT MKNOD AUDIT_WRITE SETFCAP
 *   restricted: CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID NET_BIND_SERVICE */
uint64_t iso_caps_mask(iso_profile p);

/* Reduces the bounding set to the profile's set, sets permitted and effective to it, clears the
 * inheritable and ambient sets.  Needs CAP_SETPCAP (in the current user namespace) for the
 * bounding set; the caller is the sandbox init, which holds every capability of its userns.
 * Capabilities survive a later setuid() only if the caller uses PR_SET_KEEPCAPS. */
int iso_caps_drop(iso_profile p, nook_error *err);

/* prctl(PR_SET_NO_NEW_PRIVS): execve() can no longer grant privileges (setuid bits and file
 * capabilities are ignored), which also lets an unprivileged process load a seccomp filter. */
int iso_set_no_new_privs(nook_error *err);

/* Every set of a process as masks of (1 << CAP_*), for the OCI runtime (runtime-spec
 * process.capabilities).  Permitted and inheritable are intersected with what the caller holds. */
typedef struct iso_capsets {
        uint64_t bounding, effective, inheritable, permitted, ambient;
} iso_capsets;
int iso_caps_set(const iso_capsets *s, nook_error *err);
