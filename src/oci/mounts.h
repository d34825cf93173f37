/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "oci/spec.h"

/* Root, mounts, devices, pivot_root (or chroot with no_pivot).  In the container init; leaves cwd at the new "/". */
/* bind_trees: per mount, its bind source cloned by open_tree before the clone (or -1; NULL:
 * none). */
int oci_rootfs_setup(const oci_spec *s, iso_cgroup *cg, bool in_userns, bool no_pivot, const int *bind_trees,
        nook_error *err);
/* readonlyPaths, maskedPaths, root.readonly: after sysctl. */
int oci_rootfs_finalize(const oci_spec *s, nook_error *err);
/* linux.sysctl, after pivot_root (the container's /proc). */
int oci_sysctl_apply(char **sysctl, nook_error *err);
