/* SPDX-License-Identifier: Apache-2.0 */
/* OCI and Docker schema 2 documents: indexes (manifest lists), image manifests and image
 * configs.  Parsed from untrusted bytes (fuzzed); every digest is checked to be a valid sha256
 * digest and every media type to be one nook knows before anything uses them. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_OCI_LAYER "application/vnd.oci.image.layer.v1.tar"
#define MT_OCI_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define MT_OCI_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"
#define MT_DOCKER_LAYER "application/vnd.docker.image.rootfs.diff.tar.gzip"
#define MT_DOCKER_FOREIGN_LAYER "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"

/* Upper bound for a manifest, index or config document. */
#define IMAGE_DOC_MAX (4u * 1024u * 1024u)
/* Far above real images (docker caps at 127 layers); keeps the overlay option string sane. */
#define IMAGE_MAX_LAYERS 128u

typedef enum image_doc_kind {
        IMAGE_DOC_INDEX,
        IMAGE_DOC_MANIFEST,
        _IMAGE_DOC_KIND_MAX,
        _IMAGE_DOC_KIND_INVALID = -EINVAL,
} image_doc_kind;

typedef struct image_desc {
        char *media_type;
        char *digest;
        uint64_t size;
        char *os, *arch, *variant; /* index entries only */
} image_desc;

typedef struct image_index {
        image_desc *manifests;
        size_t n;
} image_index;

typedef struct image_manifest {
        image_desc config;
        image_desc *layers; /* bottom first */
        size_t n_layers;
} image_manifest;

typedef struct image_config {
        char *os, *arch, *variant;
        char **env, **entrypoint, **cmd; /* NULL-terminated, never NULL */
        char *workdir, *user; /* NULL when unset or empty */
        char **diff_ids; /* bottom first */
        size_t n_diff_ids;
} image_config;

typedef struct image_platform {
        const char *os, *arch, *variant; /* variant may be NULL */
} image_platform;

void image_desc_done(image_desc *d);
void image_index_done(image_index *x);
void image_manifest_done(image_manifest *m);
void image_config_done(image_config *c);

/* Which document this is: from the Content-Type (may be NULL), else the "mediaType" field, else
 * its shape.  A media type nook does not know is NOOK_E_INVALID naming it. */
int image_doc_kind_detect(
        const char *content_type, const char *body, size_t len, image_doc_kind *ret, nook_error *err);
int image_index_parse(const char *body, size_t len, image_index *ret, nook_error *err);
int image_manifest_parse(const char *body, size_t len, image_manifest *ret, nook_error *err);
int image_config_parse(const char *body, size_t len, image_config *ret, nook_error *err);
/* The entry for platform (variant matched when both name one; an amd64 entry without a variant
 * matches any), NOOK_E_NOT_FOUND listing what the index offers when none fits. */
int image_index_select(
        const image_index *x, const image_platform *p, const image_desc **ret, nook_error *err);
/* linux/<this machine's architecture> in OCI terms (amd64, arm64/v8, ...). */
void image_platform_host(image_platform *ret);
/* True for a layer media type nook can unpack (tar, gzip, zstd; OCI and docker). */
bool image_layer_media_type_known(const char *mt);
