/* SPDX-License-Identifier: Apache-2.0 */
/* The two documents that say what an image archive holds, parsed from untrusted bytes (fuzzed
 * by tests/fuzz/fuzz_image_archive.c):
 *   index.json of an OCI image layout (image-layout.md): descriptors of manifests or indexes,
 *     named by the org.opencontainers.image.ref.name annotation (docker save adds
 *     io.containerd.image.name with the full reference);
 *   manifest.json of `docker save`: [{"Config": PATH, "RepoTags": [...], "Layers": [PATH...]}],
 *     paths inside the archive, which must stay inside it. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "nook.h"
#include "image/manifest.h"

#define ANNOTATION_REF_NAME "org.opencontainers.image.ref.name"
#define ANNOTATION_IMAGE_NAME "io.containerd.image.name"

typedef enum image_archive_format {
        IMAGE_FORMAT_OCI, /* an OCI image layout directory */
        IMAGE_FORMAT_OCI_ARCHIVE, /* a tar of one */
        IMAGE_FORMAT_DOCKER_ARCHIVE, /* a `docker save` tar */
        _IMAGE_FORMAT_MAX,
        _IMAGE_FORMAT_INVALID = -EINVAL,
} image_archive_format;

const char *image_archive_format_to_string(image_archive_format f);
image_archive_format image_archive_format_from_string(const char *s);

typedef struct layout_entry {
        image_desc desc; /* media type: an image manifest or an index, never anything else */
        char *ref_name; /* ANNOTATION_REF_NAME, or NULL */
        char *image_name; /* ANNOTATION_IMAGE_NAME, or NULL */
} layout_entry;

typedef struct layout_index {
        layout_entry *entries;
        size_t n;
} layout_index;

typedef struct docker_entry {
        char *config; /* path of the config inside the archive */
        char **repo_tags; /* NULL-terminated, never NULL */
        char **layers; /* paths, bottom first, NULL-terminated */
        size_t n_layers;
} docker_entry;

typedef struct docker_manifest {
        docker_entry *entries;
        size_t n;
} docker_manifest;

void layout_index_done(layout_index *x);
void docker_manifest_done(docker_manifest *m);

/* NOOK_E_INVALID naming the entry and field that is wrong: not JSON, an entry without a valid
 * digest or size, a media type that is neither a manifest nor an index (named). */
int layout_index_parse(const char *body, size_t len, layout_index *ret, nook_error *err);
/* NOOK_E_INVALID for a malformed document; NOOK_E_REFUSED naming a path that is absolute, has a
 * ".." component or is empty. */
int docker_manifest_parse(const char *body, size_t len, docker_manifest *ret, nook_error *err);
/* A relative path that stays inside the archive: not empty, not absolute, no ".." component,
 * at most 4096 bytes.  A leading "./" is allowed. */
bool archive_path_valid(const char *p);
