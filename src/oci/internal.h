/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between the operation files of src/oci/. */
#pragma once

#include <jansson.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "oci/spec.h"

/* The nftables ruleset io.nook.network/io.nook.allow ask for, or NULL without them. */
int oci_network_rules(const oci_spec *s, char **ret, nook_error *err);
/* linux.resources.devices as v1 device cgroup rules (a no-op on cgroup v2). */
int oci_devices_apply(iso_cgroup *cg, const oci_spec *s, nook_error *err);
