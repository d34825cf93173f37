/* SPDX-License-Identifier: Apache-2.0 */
#include <openssl/evp.h>
#include <string.h>

#include "nook.h"
#include "image/digest.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

struct image_hasher {
        EVP_MD_CTX *ctx;
};

image_hasher *image_hasher_new(void) {
        image_hasher *h = calloc(1, sizeof(*h));
        if (!h)
                return NULL;
        h->ctx = EVP_MD_CTX_new();
        if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
                return image_hasher_free(h);
        return h;
}

image_hasher *image_hasher_free(image_hasher *h) {
        if (!h)
                return NULL;
        EVP_MD_CTX_free(h->ctx);
        free(h);
        return NULL;
}

void image_hasher_update(image_hasher *h, const void *buf, size_t len) {
        (void)EVP_DigestUpdate(h->ctx, buf, len);
}

void image_hasher_final(image_hasher *h, char out[IMAGE_DIGEST_LEN + 1]) {
        static const char hex[] = "0123456789abcdef";
        unsigned char md[32];
        unsigned int n = 0;
        (void)EVP_DigestFinal_ex(h->ctx, md, &n);
        memcpy(out, "sha256:", 7);
        for (unsigned i = 0; i < 32; i++) {
                out[7 + 2 * i] = hex[md[i] >> 4];
                out[7 + 2 * i + 1] = hex[md[i] & 15];
        }
        out[IMAGE_DIGEST_LEN] = 0;
}

int image_digest_buf(const void *buf, size_t len, char out[IMAGE_DIGEST_LEN + 1], nook_error *err) {
        _cleanup_(image_hasher_freep) image_hasher *h = image_hasher_new();
        if (!h)
                return nook_err_oom(err);
        image_hasher_update(h, buf, len);
        image_hasher_final(h, out);
        return 0;
}
