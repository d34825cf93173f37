/* SPDX-License-Identifier: Apache-2.0 */
/* The libnook side of the egress gateway (issue #14): what create prepares for the supervisor,
 * which starts nook-egress (supervisor/egress.c).  docs/design/network.md, "The egress gateway". */
#pragma once

#include <jansson.h>
#include <sys/types.h>

#include "nook.h"
#include "sandbox/image.h"
#include "sandbox/spec.h"
#include "store/store.h"

/* Where a libexec program lives: $env_var; for an installed libnook the install's libexec
 * folder; else beside libnook.so, as in a build tree (src/<dir>/) or a relocated install
 * (../libexec/).  NULL only without memory. */
char *sb_libexec_find(const char *program, const char *build_dir, const char *env_var);

/* For a spec that wants the gateway: a placeholder per secret ("nook-ph-" + 32 hex from
 * getrandom) set in *env with the four CA variables, the image's CA bundle copied into the
 * writable layer (the supervisor appends the gateway's CA to it before init starts), and the
 * supervisor's "egress" config (no value in it).  *ret_cfg stays NULL when no gateway is wanted. */
int sb_egress_prepare(const sb_spec *spec, const sb_image *img, const char *upper, uid_t uid, gid_t gid,
        char ***env, json_t **ret_cfg, nook_error *err);
/* {"NAME": "value", ...}: what travels to the supervisor over its secrets socket; NULL when the
 * spec has no secret with a value.  The caller wipes and frees it. */
char *sb_egress_values_json(const sb_spec *spec);
/* The gateway's state as its supervisor tells it (the "status" answer's "egress": {"state":
 * "running"|"restarting"|"failed", "restarts", "pid"?, "lastExit"?, "reason"?}), for inspect;
 * {"state": "unknown", "reason"} when the supervisor does not answer; NULL for a sandbox without a
 * gateway or not running. */
json_t *sb_egress_inspect(nook *n, const sandbox_rec *rec);
