/* SPDX-License-Identifier: Apache-2.0 */
/* From a spec's image field to what the supervisor mounts: overlay lower layers, read-only host
 * binds, and the image config (env, default command, user). */
#pragma once

#include "nook.h"

typedef struct sb_image {
        char **lowers; /* topmost first */
        char **ro_binds; /* host paths bound read-only (the built-in host image) */
        char **env; /* the image's Env, "NAME=value" */
        char **cmd; /* Entrypoint + Cmd: the default command, may be empty */
        char *workdir; /* the image's WorkingDir, NULL when none */
        char *user; /* the image's User, NULL when none */
        char *digest; /* a registry image's manifest digest, recorded in the sandbox; else NULL */
} sb_image;

void sb_image_done(sb_image *img);
/* image is what sb_spec_parse left: "host", an absolute rootfs directory, or a reference. */
/* pull_policy: "always", "if-missing" (NULL) or "never"; registry images only.  image may be a
 * manifest digest ("sha256:..."): the local image pinned by a sandbox's record. */
int sb_image_resolve(nook *n, const char *image, const char *pull_policy, sb_image *ret, nook_error *err);
