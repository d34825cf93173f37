/* SPDX-License-Identifier: Apache-2.0 */
/* Unpacks one layer (a tar, gzip- or zstd-compressed or not) into an empty directory, safely:
 * no entry may land outside it.  See unpack.c for the rules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "nook.h"
#include "image/digest.h"

typedef struct unpack_opts {
        /* rootless: files are owned by the caller (the sandbox's root), setuid/setgid bits are
         * dropped and device nodes skipped.  Otherwise (real root) ids are shifted by id_base. */
        bool rootless;
        uid_t id_base; /* rootful: host uid/gid of the sandbox's uid/gid 0 */
} unpack_opts;

/* Sandbox ids at or above this are clamped to IMAGE_OVERFLOW_ID (nobody): the rootful id range
 * is 65536 wide. */
#define IMAGE_ID_RANGE 65536u
#define IMAGE_OVERFLOW_ID 65534u

/* Unpacks the blob read from fd into the directory dir_fd.  ret_diff_id receives the digest of
 * the uncompressed tar stream (the image config's diff_id).  A hostile entry fails the whole
 * layer with NOOK_E_REFUSED naming it; the caller removes the half-written directory. */
int image_unpack_fd(
        int fd, int dir_fd, const unpack_opts *o, char ret_diff_id[IMAGE_DIGEST_LEN + 1], nook_error *err);
/* Refuses (NOOK_E_INVALID) a layer blob whose first bytes are not the compression its media type
 * names: gzip, zstd, or none for a plain tar.  libarchive would unpack any of them, but a blob
 * that is not what its manifest says was not made by a tool that followed the spec, and its
 * manifest cannot be trusted either.  A NULL or unknown media type is not checked. */
int image_layer_compression_check(int fd, const char *media_type, nook_error *err);
/* The same from memory (tests, fuzzing). */
int image_unpack_mem(const void *buf, size_t len, int dir_fd, const unpack_opts *o,
        char ret_diff_id[IMAGE_DIGEST_LEN + 1], nook_error *err);
