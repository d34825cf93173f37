/* SPDX-License-Identifier: Apache-2.0 */
/* Image records: the images, image_refs, layers and image_layers tables of 001_init.sql.
 * Each call is one transaction on the store's connection (a SAVEPOINT inside a caller's
 * transaction); writers take the lock up front, so concurrent pulls from separate processes
 * wait for each other instead of failing. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "nook.h"
#include "store/store.h"

typedef struct image_layer_rec {
        char *digest; /* the blob as fetched */
        char *diff_id; /* the uncompressed tar: names the unpacked directory */
        char *media_type;
        uint64_t size;
} image_layer_rec;

typedef struct image_rec {
        char *digest; /* the manifest's digest */
        char *config_digest;
        char *config_json;
        char *platform; /* "linux/amd64" */
        uint64_t size; /* manifest + config + compressed layers */
        int64_t pulled_at;
        char **refs; /* names that point at it, sorted; may be empty, never NULL after a get */
        image_layer_rec *layers; /* bottom first */
        size_t n_layers;
} image_rec;

void image_rec_done(image_rec *r);
void image_rec_array_free(image_rec *a, size_t n);

/* Inserts or refreshes the image and its layers; ref (may be NULL) is pointed at it, moving it
 * from any other image (a tag that moved).  A layer whose diff_id is already recorded under
 * another blob digest is shared: the existing row stays and the image points at it, and the
 * image's own blob is kept beside it (image_layers.blob) for export and prune. */
int store_image_put(store *st, const image_rec *r, const char *ref, nook_error *err);
/* By name ("docker.io/library/alpine:3") or manifest digest; NOOK_E_NOT_FOUND when missing. */
int store_image_get(store *st, const char *ref_or_digest, image_rec *ret, nook_error *err);
/* All images, newest pull first. */
int store_image_list(store *st, image_rec **ret, size_t *ret_n, nook_error *err);
/* Removes a name; the image goes when no name is left (or at once when ref_or_digest is its
 * digest).  Refused with NOOK_E_BUSY naming the sandbox when a sandbox's image field is one of
 * the image's names or its digest, or its image_digest is the image's digest.  Returns 1 when
 * the image itself was deleted. */
int store_image_remove(store *st, const char *ref_or_digest, nook_error *err);
/* Deletes images without names that no sandbox uses (by image field or image_digest), then layers
 * no image or snapshot uses.
 * ret_keep: every blob digest still referenced (manifests, configs, layers), sorted;
 * ret_keep_diff_ids: every diff_id still referenced.  The caller removes files not listed. */
int store_image_prune(store *st, char ***ret_keep, char ***ret_keep_diff_ids, nook_error *err);
