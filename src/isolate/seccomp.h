/* SPDX-License-Identifier: Apache-2.0 */
/* Seccomp profiles for the sandbox init and every exec'd payload.  Both profiles are deny lists
 * over SCMP_ACT_ALLOW: a denied call fails with EPERM (clone3 with ENOSYS in "restricted"), it
 * never kills.  docs/design/security.md argues every entry. */
#pragma once

#include <errno.h>
#include <stdbool.h>

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

/* A profile's BPF program, ready for seccomp(SECCOMP_SET_MODE_FILTER). */
struct sock_filter;
typedef struct iso_seccomp_prog {
        struct sock_filter *insns;
        unsigned short len;
} iso_seccomp_prog;

/* The program for profile p.  With cache_dir, one an earlier run of this same binary compiled
 * with the same libseccomp is read from there (seccomp-PROFILE-BUILDID-LIBSECCOMPVERSION.bpf),
 * and a new one is left there: libseccomp's generation was ~2 ms of every sandbox create.  A
 * cached file must be a regular file of ours holding whole instructions, else it is compiled
 * again.  The caller frees it with iso_seccomp_prog_done(). */
int iso_seccomp_prepare(iso_profile p, const char *cache_dir, iso_seccomp_prog *ret, nook_error *err);
/* Loads prog (prepared for p, named in errors) into the calling thread; the order rules of
 * iso_seccomp_load() apply. */
int iso_seccomp_load_prog(iso_profile p, const iso_seccomp_prog *prog, nook_error *err);
void iso_seccomp_prog_done(iso_seccomp_prog *prog);

/* For a filter built elsewhere (the OCI runtime's linux.seccomp): export a libseccomp filter
 * context (scmp_filter_ctx) as a program, keep programs in a cache file (the same format and
 * checks as the profiles' cache), and load one; what names it in errors. */
int iso_seccomp_export_prog(void *filter, const char *what, iso_seccomp_prog *ret, nook_error *err);
bool iso_seccomp_cache_read(const char *path, iso_seccomp_prog *ret);
void iso_seccomp_cache_write(const char *dir, const char *path, const iso_seccomp_prog *prog);
int iso_seccomp_load_bpf(const iso_seccomp_prog *prog, const char *what, nook_error *err);

/* Builds the profile's BPF program and writes it to fd (seccomp_export_bpf(3)) without loading
 * it: for tests and for inspecting a profile with a BPF disassembler. */
int iso_seccomp_export_bpf(iso_profile p, int fd, nook_error *err);
