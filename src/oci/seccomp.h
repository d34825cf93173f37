/* SPDX-License-Identifier: Apache-2.0 */
/* linux.seccomp of config.json, compiled before clone (errors reach `create`) and loaded last,
 * right before execve. */
#pragma once

#include <jansson.h>

#include "nook.h"
#include "util/macro.h"

typedef struct oci_seccomp oci_seccomp;

/* cache_dir (may be NULL): where compiled programs are kept, keyed by the spec's canonical JSON. */
int oci_seccomp_prepare(json_t *seccomp, const char *cache_dir, oci_seccomp **ret, nook_error *err);
int oci_seccomp_load(oci_seccomp *f, nook_error *err);
oci_seccomp *oci_seccomp_free(oci_seccomp *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(oci_seccomp *, oci_seccomp_free);

/* For `features`: the SCMP_ARCH_* names of linux.seccomp.architectures this libseccomp knows
 * (others are skipped), as a JSON array; NULL on OOM. */
json_t *oci_seccomp_arch_names(void);
/* "2.5.4": the libseccomp linked at run time. */
void oci_seccomp_version(char *buf, size_t len);
