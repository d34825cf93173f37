/* SPDX-License-Identifier: Apache-2.0 */
/* Images from and to files: an OCI image layout directory, an oci-archive (a tar of one) and a
 * `docker save` tar (the old <id>/layer.tar shape and the newer one with an OCI layout inside).
 * Imports go through the same store, checks, unpacking and records as a registry pull
 * (image_store_add); exports write the blobs the store kept. */
#pragma once

#include <stdbool.h>

#include "nook.h"
#include "image/image.h"
#include "image/layout.h"

typedef struct image_import_opts {
        const char *name; /* the image's name; NULL: from the archive's annotation or RepoTags */
        image_archive_format format; /* _IMAGE_FORMAT_INVALID: detect */
        image_pull_opts pull; /* progress and jobs (the registry options are unused) */
} image_import_opts;

/* source: a path, or "oci:DIR[:REF]", "oci-archive:FILE[:REF]", "docker-archive:FILE[:REF]" (as
 * skopeo names them; REF chooses among several images by name).  Input is untrusted: a member
 * or path leaving the archive, a symlink or special file, a digest or size that does not match,
 * an unknown media type or a malformed document refuses the import, which then leaves no record,
 * blob, layer or temporary directory behind.  *ret is the stored record. */
int image_import(
        image_store *s, const char *source, const image_import_opts *o, image_rec *ret, nook_error *err);

typedef struct image_export_opts {
        image_archive_format format; /* _IMAGE_FORMAT_INVALID: oci-archive */
        bool force; /* replace an existing path (never following a symlink there) */
} image_export_opts;

/* Writes the image (by name or digest) to path: built beside it under a temporary name, then
 * renamed into place.  An existing path is NOOK_E_EXISTS unless o->force. */
int image_export(
        image_store *s, const char *ref, const char *path, const image_export_opts *o, nook_error *err);
