/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 content digests ("sha256:<64 hex>"), computed with OpenSSL's libcrypto, which libcurl
 * already loads: a well-kept implementation instead of a hand-written one (DESIGN.md). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nook.h"

#define IMAGE_DIGEST_LEN (7 + 64) /* "sha256:" + hex, without the NUL */

typedef struct image_hasher image_hasher;

image_hasher *image_hasher_new(void);
image_hasher *image_hasher_free(image_hasher *h);
void image_hasher_update(image_hasher *h, const void *buf, size_t len);
/* Writes "sha256:<hex>" into out (IMAGE_DIGEST_LEN + 1 bytes).  The hasher is spent. */
void image_hasher_final(image_hasher *h, char out[IMAGE_DIGEST_LEN + 1]);
/* One-shot digest of a buffer. */
int image_digest_buf(const void *buf, size_t len, char out[IMAGE_DIGEST_LEN + 1], nook_error *err);
/* True for "sha256:" + 64 lowercase hex: the only form nook accepts from a registry, so a digest
 * can become a file name. */
bool image_digest_valid(const char *d);
/* The hex part of a valid digest. */
const char *image_digest_hex(const char *d);

static inline void image_hasher_freep(image_hasher **h) {
        if (*h)
                *h = image_hasher_free(*h);
}
