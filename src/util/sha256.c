/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 as FIPS 180-4 specifies it (section 6.2), written for clarity: ~100 MB/s against
 * libcrypto's ~2 GB/s with SHA-NI, so it only hashes small amounts (see sha256.h). */
#include <string.h>

#include "util/sha256.h"

static const uint32_t K[64] = {
        0x428a2f98,
        0x71374491,
        0xb5c0fbcf,
        0xe9b5dba5,
        0x3956c25b,
        0x59f111f1,
        0x923f82a4,
        0xab1c5ed5,
        0xd807aa98,
        0x12835b01,
        0x243185be,
        0x550c7dc3,
        0x72be5d74,
        0x80deb1fe,
        0x9bdc06a7,
        0xc19bf174,
        0xe49b69c1,
        0xefbe4786,
        0x0fc19dc6,
        0x240ca1cc,
        0x2de92c6f,
        0x4a7484aa,
        0x5cb0a9dc,
        0x76f988da,
        0x983e5152,
        0xa831c66d,
        0xb00327c8,
        0xbf597fc7,
        0xc6e00bf3,
        0xd5a79147,
        0x06ca6351,
        0x14292967,
        0x27b70a85,
        0x2e1b2138,
        0x4d2c6dfc,
        0x53380d13,
        0x650a7354,
        0x766a0abb,
        0x81c2c92e,
        0x92722c85,
        0xa2bfe8a1,
        0xa81a664b,
        0xc24b8b70,
        0xc76c51a3,
        0xd192e819,
        0xd6990624,
        0xf40e3585,
        0x106aa070,
        0x19a4c116,
        0x1e376c08,
        0x2748774c,
        0x34b0bcb5,
        0x391c0cb3,
        0x4ed8aa4a,
        0x5b9cca4f,
        0x682e6ff3,
        0x748f82ee,
        0x78a5636f,
        0x84c87814,
        0x8cc70208,
        0x90befffa,
        0xa4506ceb,
        0xbef9a3f7,
        0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n) {
        return (x >> n) | (x << (32 - n));
}

static uint32_t load_be32(const uint8_t *b) {
        return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* One 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void sha256_block(uint32_t h[8], const uint8_t b[64]) {
        uint32_t w[64];

        for (size_t t = 0; t < 16; t++)
                w[t] = load_be32(b + 4 * t);
        for (int t = 16; t < 64; t++) {
                uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >> 3);
                uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >> 10);
                w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int t = 0; t < 64; t++) {
                uint32_t t1 =
                        hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
                uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
                hh = g;
                g = f;
                f = e;
                e = d + t1;
                d = c;
                c = bb;
                bb = a;
                a = t1 + t2;
        }
        h[0] += a;
        h[1] += bb;
        h[2] += c;
        h[3] += d;
        h[4] += e;
        h[5] += f;
        h[6] += g;
        h[7] += hh;
}

void sha256_init(sha256_ctx *c) {
        static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f,
                0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
        memcpy(c->h, h0, sizeof(h0));
        c->bytes = 0;
        c->fill = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t len) {
        const uint8_t *p = data;

        c->bytes += len;
        while (len > 0) {
                size_t n = sizeof(c->block) - c->fill;
                if (n > len)
                        n = len;
                memcpy(c->block + c->fill, p, n);
                c->fill += n;
                p += n;
                len -= n;
                if (c->fill == sizeof(c->block)) {
                        sha256_block(c->h, c->block);
                        c->fill = 0;
                }
        }
}

/* Padding (FIPS 180-4, 5.1.1): a 1 bit, zeros to 56 bytes mod 64, then the length in bits,
 * big-endian. */
void sha256_final(sha256_ctx *c, uint8_t ret[SHA256_LEN]) {
        uint64_t bits = c->bytes * 8;
        uint8_t pad[72] = { 0x80 };
        size_t n = c->fill < 56 ? 56 - c->fill : 120 - c->fill;

        for (int i = 0; i < 8; i++)
                pad[n + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
        sha256_update(c, pad, n + 8);
        for (size_t i = 0; i < 8; i++) {
                ret[4 * i] = (uint8_t)(c->h[i] >> 24);
                ret[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
                ret[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
                ret[4 * i + 3] = (uint8_t)c->h[i];
        }
}
