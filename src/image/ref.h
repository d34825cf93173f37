/* SPDX-License-Identifier: Apache-2.0 */
/* Image references as docker and podman read them: [registry[:port]/]repository[:tag][@digest].
 * Defaults: registry docker.io, "library/" for one-component docker.io names, tag "latest". */
#pragma once

#include "nook.h"

/* Docker Hub's name and the host its v2 API lives on. */
#define IMAGE_DEFAULT_REGISTRY "docker.io"
#define IMAGE_DOCKER_HUB_API_HOST "registry-1.docker.io"

typedef struct image_ref {
        char *registry; /* "docker.io", "ghcr.io", "localhost:5000" */
        char *repository; /* "library/alpine" */
        char *tag; /* "latest" when neither tag nor digest was given; NULL with a digest only */
        char *digest; /* "sha256:<64 hex>" or NULL */
} image_ref;

void image_ref_done(image_ref *r);
/* NOOK_E_INVALID quoting s and saying what is wrong.  Never touches the network. */
int image_ref_parse(const char *s, image_ref *ret, nook_error *err);
/* "registry/repository[:tag][@digest]", malloc'd; NULL on OOM. */
char *image_ref_to_string(const image_ref *r);
/* The host serving the registry's v2 API (docker.io -> registry-1.docker.io). */
const char *image_ref_api_host(const image_ref *r);
/* True when s looks like a reference rather than a path or "host". */
int image_ref_valid(const char *s, nook_error *err);
