/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4) without libcrypto, for hashing a few small files in processes that should
 * not load the image module (src/image/module.h) and the ~40 libraries libcrypto and libcurl
 * bring: the baseline manifests a create takes (src/tree/manifest.c), which switch to libcrypto
 * (20x faster with SHA-NI) past 1 MiB.  Both give the same digest: tests/unit/test_util.c. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

typedef struct sha256_ctx {
        uint32_t h[8];
        uint64_t bytes; /* hashed so far */
        uint8_t block[64];
        size_t fill; /* bytes of block in use */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, uint8_t ret[SHA256_LEN]);
