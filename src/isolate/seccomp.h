/* SPDX-License-Identifier: Apache-2.0 */
/* Seccomp profiles for the sandbox init and every exec'd payload.  Both profiles are deny lists
 * over SCMP_ACT_ALLOW: a denied call fails with EPERM (clone3 with ENOSYS in "restricted"), it
 * never kills.  docs/design/security.md argues every entry. */
#pragma once

#include <errno.h>

#include "nook.h"

typedef enum iso_profile {
        ISO_PROFILE_DEFAULT, /* docker's default, minus NET_RAW; user namespaces allowed */
        ISO_PROFILE_RESTRICTED, /* for adversarial workloads: no namespaces, mounts, tracing */
        _ISO_PROFILE_MAX,
        _ISO_PROFILE_INVALID = -EINVAL,
} iso_profile;

const char *iso_profile_to_string(iso_profile p); /* "default", "restricted"; NULL if invalid */
iso_profile iso_profile_from_string(const char *s); /* _ISO_PROFILE_INVALID on bad input */

/* Loads the filter for profile into the calling thread (and its future children).  Requires
 * no_new_privs already set (iso_set_no_new_privs()) or CAP_SYS_ADMIN: libseccomp is told not to
 * set no_new_privs itself, so the order stays visible in the caller.  Load it last: after it,
 * mount(), unshare() and friends may be gone. */
int iso_seccomp_load(iso_profile p, nook_error *err);

/* Builds the profile's BPF program and writes it to fd (seccomp_export_bpf(3)) without loading
 * it: for tests and for inspecting a profile with a BPF disassembler. */
int iso_seccomp_export_bpf(iso_profile p, int fd, nook_error *err);
