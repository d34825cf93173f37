/* SPDX-License-Identifier: Apache-2.0 */
/* The host side of a sandbox's volumes, scripts and setup files, made right before its
 * supervisor starts. */
#pragma once

#include "nook.h"
#include "sandbox/spec.h"
#include "supervisor/config.h"

/* Fills c->mounts (volumes, then the scripts folder) and puts /.nook/scripts first on PATH in
 * *env when there are scripts; writes the setup files into the workspace or the writable layer. */
int sb_provision(nook *n, const sb_spec *spec, const char *sdir, const char *wsdir, const char *upper,
        sup_config *c, char ***env, nook_error *err);
void sb_provision_done(sup_config *c);
/* <home>/volumes/<name>: named volumes, made on first use. */
int sb_volume_dir(nook *n, const char *name, bool create, char **ret, nook_error *err);
