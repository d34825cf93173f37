/* SPDX-License-Identifier: Apache-2.0 */
/* linux.seccomp of config.json, compiled before clone (errors reach `create`) and loaded last,
 * right before execve. */
#pragma once

#include <jansson.h>

#include "nook.h"
#include "util/macro.h"

typedef struct oci_seccomp oci_seccomp;

int oci_seccomp_prepare(json_t *seccomp, oci_seccomp **ret, nook_error *err);
int oci_seccomp_load(oci_seccomp *f, nook_error *err);
oci_seccomp *oci_seccomp_free(oci_seccomp *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(oci_seccomp *, oci_seccomp_free);
